/* clauseqa page, what an office expects beside the chat (issue 30 items 5 and 6): thumbs up / down with an optional
 * comment on each answer, exporting the conversation as Markdown or PDF, searching the conversations, dark mode
 * (the system's by default, a toggle remembered in localStorage) and, for admins, the quality of the answers per
 * day. Loaded after app.js, whose helpers it uses (state, api, el, t, toast, headers …); app.js calls
 * cqOffice.onAnswer after it renders an answer. Talks to docs/API.md's routes only. */
'use strict';

Object.assign(I18N.zh, {
  rateUp: '有帮助', rateDown: '没帮助', rateComment: '说说哪里不对（可选，最多 2000 字）', rateSend: '提交',
  rated: '谢谢反馈', rateUndo: '撤销评价', commentTooLong: '评论最多 2000 字',
  exportMd: '导出 Markdown', exportPdf: '导出 PDF', searchConvs: '搜索对话', noMatches: '没有匹配的对话。',
  themeDark: '深色', themeLight: '浅色', themeTitle: '切换深色 / 浅色模式',
  quality: '回答质量', qualityTitle: '回答质量（按知识库和日期）', qDay: '日期', qAnswers: '回答', qAbstentions: '拒答',
  qFallbacks: '退回引用', qLow: '低置信', qUp: '有帮助', qDown: '没帮助', qDeleted: '引用已删', close: '关闭',
  exportFeedback: '导出评价（JSONL）', qualityNone: '这段时间没有回答。',
});
Object.assign(I18N.en, {
  rateUp: 'Helpful', rateDown: 'Not helpful', rateComment: 'What was wrong? (optional, at most 2,000 characters)',
  rateSend: 'Send', rated: 'Thanks for the feedback', rateUndo: 'Take back', commentTooLong:
    'A comment has at most 2,000 characters',
  exportMd: 'Export Markdown', exportPdf: 'Export PDF', searchConvs: 'Search conversations',
  noMatches: 'No conversation matches.',
  themeDark: 'Dark', themeLight: 'Light', themeTitle: 'Switch between dark and light mode',
  quality: 'Quality', qualityTitle: 'Answer quality (per KB and day)', qDay: 'Day', qAnswers: 'Answers',
  qAbstentions: 'Abstained', qFallbacks: 'Fell back to quotes', qLow: 'Low confidence', qUp: 'Helpful', qDown: 'Not helpful',
  qDeleted: 'Cited doc deleted', close: 'Close', exportFeedback: 'Export ratings (JSONL)',
  qualityNone: 'No answers in this period.',
});

const COMMENT_MAX = 2000;

/* ---- the page's parts, added beside app's (index.html stays as it was but for the script tag) ------------------- */

$('lang-toggle').before(
  el('button', { id: 'quality-button', class: 'ghost', type: 'button', 'data-i18n': 'quality', hidden: true }, t('quality')),
  el('button', { id: 'theme-toggle', class: 'ghost', type: 'button', 'aria-pressed': 'false' }));
$('conv-list').before(el('input', { id: 'conv-search', class: 'conv-search', type: 'search',
  'data-i18n-placeholder': 'searchConvs', placeholder: t('searchConvs'), 'aria-label': t('searchConvs') }));
$('new-chat').after(el('span', { id: 'conv-export', class: 'conv-export', hidden: true },
  el('button', { id: 'export-md', class: 'link', type: 'button', 'data-i18n': 'exportMd' }, t('exportMd')),
  el('button', { id: 'export-pdf', class: 'link', type: 'button', 'data-i18n': 'exportPdf' }, t('exportPdf'))));
document.body.append(el('dialog', { id: 'quality-dialog', class: 'quality-dialog', 'aria-labelledby': 'quality-title' },
  el('form', { method: 'dialog' },
    el('h3', { id: 'quality-title', 'data-i18n': 'qualityTitle' }, t('qualityTitle')),
    el('div', { id: 'quality-kb', class: 'muted small' }),
    el('div', { class: 'quality-scroll' }, el('table', { id: 'quality-table', class: 'quality-table' })),
    el('div', { class: 'row' },
      el('button', { id: 'quality-export', class: 'ghost', type: 'button', 'data-i18n': 'exportFeedback' },
        t('exportFeedback')),
      el('button', { value: 'close', class: 'primary', 'data-i18n': 'close' }, t('close'))))));

/* ---- feedback on answers -------------------------------------------------------------------------------------- */

/* The turn number (1-based) of an answer on screen: rendered answers are the conversation's turns, in order. */
function turnOf(msg) {
  const answers = [...document.querySelectorAll('#messages .msg.assistant')].filter((m) => m.querySelector('.feedback'));
  return answers.indexOf(msg) + 1;
}

function showRating(bar, rating, comment) {
  bar.dataset.rating = rating || '';
  bar.querySelector('.rate-up').setAttribute('aria-pressed', rating === 'up' ? 'true' : 'false');
  bar.querySelector('.rate-down').setAttribute('aria-pressed', rating === 'down' ? 'true' : 'false');
  const note = bar.querySelector('.rate-note');
  note.textContent = rating ? t('rated') + (comment ? ': “' + comment + '”' : '') : '';
  note.hidden = !rating;
}

async function sendRating(msg, bar, rating, comment) {
  const turn = turnOf(msg);
  if (!state.conversationId || turn < 1) return;
  const path = '/api/v1/conversations/' + state.conversationId + '/turns/' + turn + '/feedback';
  try {
    const r = bar.dataset.rating === rating && comment === undefined
      ? await api('DELETE', path) /* the same thumb again: taken back */
      : await api('POST', path, { rating, comment: comment || '' });
    showRating(bar, r.rating, r.comment);
    bar.querySelector('.rate-form').hidden = true;
  } catch (e) { toast(e.message, true); }
}

function openComment(msg, bar) {
  const form = bar.querySelector('.rate-form');
  form.hidden = false;
  form.querySelector('textarea').focus();
}

const cqOffice = {
  /* After app.js rendered answer a (an ask's final event or a stored turn with its "feedback") into m. */
  onAnswer(m, a) {
    const actions = m.msg.querySelector('.msg-actions');
    if (!actions || m.msg.querySelector('.feedback')) return;
    const bar = el('span', { class: 'feedback' },
      el('button', { class: 'rate-up', type: 'button', 'data-i18n-title': 'rateUp', title: t('rateUp'),
        'aria-pressed': 'false', 'data-i18n': 'rateUp', onclick: () => sendRating(m.msg, bar, 'up') }, t('rateUp')),
      el('button', { class: 'rate-down', type: 'button', 'data-i18n-title': 'rateDown', title: t('rateDown'),
        'aria-pressed': 'false', 'data-i18n': 'rateDown', onclick: () => {
          if (bar.dataset.rating === 'down') sendRating(m.msg, bar, 'down');
          else openComment(m.msg, bar);
        } }, t('rateDown')),
      el('span', { class: 'rate-note muted small', hidden: true }));
    const area = el('textarea', { rows: 2, maxlength: COMMENT_MAX, 'data-i18n-placeholder': 'rateComment',
      placeholder: t('rateComment'), 'aria-label': t('rateComment') });
    const form = el('form', { class: 'rate-form', hidden: true, onsubmit: (e) => {
      e.preventDefault();
      if ([...area.value].length > COMMENT_MAX) { toast(t('commentTooLong'), true); return; }
      sendRating(m.msg, bar, 'down', area.value.trim());
    } }, area, el('button', { class: 'primary rate-send', type: 'submit', 'data-i18n': 'rateSend' }, t('rateSend')));
    bar.append(form);
    actions.append(bar);
    const f = a.feedback;
    showRating(bar, f ? f.rating : '', f ? f.comment : '');
  },
};
window.cqOffice = cqOffice;

/* ---- export --------------------------------------------------------------------------------------------------- */

async function exportConversation(format) {
  const id = state.conversationId;
  if (!id) return;
  try {
    const res = await fetch('/api/v1/conversations/' + id + '/export?format=' + format, { headers: headers() });
    if (!res.ok) {
      let data = null;
      try { data = await res.json(); } catch (e) { data = null; }
      throw apiError(res.status, data, res.statusText);
    }
    const blob = await res.blob();
    const a = el('a', { href: URL.createObjectURL(blob), download: 'conversation-' + id + '.' + format });
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  } catch (e) { toast(e.message, true); }
}

function renderExport() {
  const box = $('conv-export');
  if (box) box.hidden = !state.conversationId;
}

$('export-md').addEventListener('click', () => exportConversation('md'));
$('export-pdf').addEventListener('click', () => exportConversation('pdf'));

const baseSetConversation = setConversation;
setConversation = function (id) { /* eslint-disable-line no-global-assign */
  baseSetConversation(id);
  renderExport();
};

/* ---- search --------------------------------------------------------------------------------------------------- */

const baseLoadConvs = loadConvs;
/* With text in the search box the list is the conversations that hold it (title, a question or an answer). */
loadConvs = async function () { /* eslint-disable-line no-global-assign */
  const q = $('conv-search').value.trim();
  if (!q || !state.kb) { $('convs-empty').textContent = t('noConvs'); return baseLoadConvs(); }
  try {
    state.convs = (await api('GET', '/api/v1/conversations?kb=' + encodeURIComponent(state.kb) + '&q=' +
      encodeURIComponent(q))).conversations;
  } catch (e) {
    state.convs = [];
    if (e.status !== 401) toast(e.message, true);
  }
  renderConvs();
  $('convs-empty').textContent = t('noMatches');
};
const baseLoadConvsForQuality = loadConvs;
loadConvs = async function () { /* eslint-disable-line no-global-assign */
  await baseLoadConvsForQuality();
  showQualityButton(); /* once a key: an admin's? */
};

let searchTimer = null;
$('conv-search').addEventListener('input', () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => loadConvs(), 250);
});

/* ---- dark mode ------------------------------------------------------------------------------------------------ */

const darkQuery = window.matchMedia('(prefers-color-scheme: dark)');
const themeNow = () => localStorage.getItem('cq.theme') || (darkQuery.matches ? 'dark' : 'light');

function applyTheme() {
  const chosen = localStorage.getItem('cq.theme');
  if (chosen) document.documentElement.dataset.theme = chosen;
  else delete document.documentElement.dataset.theme; /* style.css follows prefers-color-scheme */
  const b = $('theme-toggle');
  const dark = themeNow() === 'dark';
  b.replaceChildren(el('span', { 'aria-hidden': 'true' }, dark ? '☀' : '☾'), ' ',
    el('span', { class: 'theme-label' }, dark ? t('themeLight') : t('themeDark')));
  b.setAttribute('aria-pressed', dark ? 'true' : 'false');
  b.title = t('themeTitle');
}

$('theme-toggle').addEventListener('click', () => {
  localStorage.setItem('cq.theme', themeNow() === 'dark' ? 'light' : 'dark');
  applyTheme();
});
darkQuery.addEventListener('change', applyTheme);

/* ---- quality (admins) ----------------------------------------------------------------------------------------- */

let qualityProbed = null; /* the key the quality button was last decided for */
async function showQualityButton() {
  if (qualityProbed === state.key) return;
  qualityProbed = state.key;
  try { /* not api(): a 401 here must not ask for a key */
    const res = await fetch('/api/v1/quality?days=1', { headers: headers() });
    $('quality-button').hidden = !res.ok;
  } catch (e) { $('quality-button').hidden = true; }
}

async function openQuality() {
  const dialog = $('quality-dialog');
  let data;
  try {
    data = await api('GET', '/api/v1/quality?days=30' + (state.kb ? '&kb=' + encodeURIComponent(state.kb) : ''));
  } catch (e) { toast(e.message, true); return; }
  const cols = [['day', 'qDay'], ['answers', 'qAnswers'], ['abstentions', 'qAbstentions'], ['fallbacks', 'qFallbacks'],
    ['low_confidence', 'qLow'], ['thumbs_up', 'qUp'], ['thumbs_down', 'qDown'], ['cited_deleted', 'qDeleted']];
  const rows = (data.rows || []).slice().reverse();
  $('quality-table').replaceChildren(
    el('thead', {}, el('tr', {}, cols.map(([, k]) => el('th', {}, t(k))))),
    el('tbody', {}, rows.map((r) => el('tr', {}, cols.map(([k]) => el('td', { 'data-col': k }, String(r[k]))))),
      rows.length ? null : el('tr', {}, el('td', { colspan: cols.length, class: 'muted' }, t('qualityNone')))));
  $('quality-kb').textContent = (state.kb || '') + ' · ' + data.since + ' – · ' + t('qLow') + ' < ' +
    data.low_confidence_below;
  dialog.showModal();
}

async function exportFeedback() {
  try {
    const res = await fetch('/api/v1/feedback/export?kb=' + encodeURIComponent(state.kb), { headers: headers() });
    if (!res.ok) throw apiError(res.status, null, res.statusText);
    const a = el('a', { href: URL.createObjectURL(await res.blob()), download: 'feedback-' + state.kb + '.jsonl' });
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  } catch (e) { toast(e.message, true); }
}

$('quality-button').addEventListener('click', openQuality);
$('quality-export').addEventListener('click', exportFeedback);

const baseApplyLanguage = applyLanguage;
applyLanguage = function () { /* eslint-disable-line no-global-assign */
  baseApplyLanguage();
  applyTheme();
  if ($('conv-search').value.trim() && !state.convs.length) $('convs-empty').textContent = t('noMatches');
};

applyLanguage();
renderExport();
showQualityButton();
