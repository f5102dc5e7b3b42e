/* clauseqa page: document library (KBs, uploads with progress, status) and chat (streamed answers, citations that
 * open the clause and its highlighted page). Talks only to this server's /api/v1 (docs/API.md). */
'use strict';

const I18N = {
  zh: {
    kb: '知识库', newKb: '新建', deleteKb: '删除', apiKey: 'API 密钥', library: '文档库',
    dropTitle: '拖放文件到这里，或点击选择', dropHint: 'PDF、Markdown、纯文本', documents: '文档', filter: '筛选',
    noDocs: '还没有文档。上传一份开始吧。', chat: '问答', welcomeTitle: '就文档提问，答案附带条款出处',
    welcomeText: '每个回答都引用原文条款与页码；点击引用查看条款全文和高亮的页面。',
    askPlaceholder: '输入问题，Enter 发送，Shift+Enter 换行', send: '发送', newChat: '新对话',
    keysHint: '快捷键：/ 聚焦输入框 · Esc 关闭条款', original: '原文件', cancel: '取消', save: '保存',
    keyHelp: '服务器要求 API 密钥。在服务器上运行 clauseqa keys create 获得。',
    pages: '页', clauses: '条', ready: '就绪', failed: '失败', processing: '处理中', queued: '排队中',
    running: '解析中', duplicate: '已存在', uploading: '上传中', delete: '删除', download: '下载',
    confirmDelete: '删除文档“{0}”？它的条款和索引会一并删除。',
    confirmDeleteKb: '删除知识库“{0}”及其全部文档？', kbName: '新知识库名称（字母、数字、中文、-、_、.）',
    noKb: '没有知识库，请先新建一个。', page: '第 {0} 页', of: '共 {0} 页', sources: '出处',
    abstained: '未找到依据', thinking: '检索中…', resolved: '理解为：', failedAsk: '提问失败：',
    openMode: '开放模式：无需密钥', authOn: '已启用密钥', qualityWarn: '文字质量较低',
    examples: ['劳动法第四十四条规定了什么？', '试用期最长多长时间？', 'What does Section 5.2 say?'],
    timing: '检索 {0} ms · 生成 {1} ms', docs: '{0} 份文档', removed: '已删除', copy: '复制',
    tooLarge: '文件太大', networkError: '网络错误', cancelled: '已取消', cancelJob: '取消解析',
  },
  en: {
    kb: 'Knowledge base', newKb: 'New', deleteKb: 'Delete', apiKey: 'API key', library: 'Library',
    dropTitle: 'Drop files here, or click to choose', dropHint: 'PDF, Markdown, plain text', documents: 'Documents',
    filter: 'Filter', noDocs: 'No documents yet. Upload one to begin.', chat: 'Chat',
    welcomeTitle: 'Ask your documents; every answer cites its clause',
    welcomeText: 'Answers quote the clause and page they rest on; click a citation for the clause and its highlighted page.',
    askPlaceholder: 'Ask a question — Enter sends, Shift+Enter for a new line', send: 'Send', newChat: 'New chat',
    keysHint: 'Keys: / focuses the question · Esc closes the clause', original: 'Original', cancel: 'Cancel',
    save: 'Save', keyHelp: 'This server needs an API key. Create one on the server with clauseqa keys create.',
    pages: 'pages', clauses: 'clauses', ready: 'ready', failed: 'failed', processing: 'processing', queued: 'queued',
    running: 'parsing', duplicate: 'already there', uploading: 'uploading', delete: 'Delete', download: 'Download',
    confirmDelete: 'Delete document “{0}” with its clauses and index entries?',
    confirmDeleteKb: 'Delete knowledge base “{0}” and all its documents?',
    kbName: 'Name of the new knowledge base (letters, digits, Chinese, - _ .)',
    noKb: 'No knowledge base yet: create one first.', page: 'Page {0}', of: 'of {0}', sources: 'Sources',
    abstained: 'No support found', thinking: 'Searching…', resolved: 'Read as: ', failedAsk: 'The question failed: ',
    openMode: 'open mode: no key needed', authOn: 'keys required', qualityWarn: 'low text quality',
    examples: ['What does Section 5.2 say?', '劳动法第四十四条规定了什么？', 'How many days of notice are needed to terminate?'],
    timing: 'retrieve {0} ms · generate {1} ms', docs: '{0} documents', removed: 'deleted', copy: 'Copy',
    tooLarge: 'file too large', networkError: 'network error', cancelled: 'cancelled', cancelJob: 'Cancel',
  },
};

const state = {
  lang: localStorage.getItem('cq.lang') || ((navigator.language || 'zh').toLowerCase().startsWith('zh') ? 'zh' : 'en'),
  key: localStorage.getItem('cq.key') || '',
  kb: localStorage.getItem('cq.kb') || '',
  kbs: [],
  docs: [],
  history: [],
  busy: false,
  clause: null,
  page: 0,
};

const $ = (id) => document.getElementById(id);
const welcomeNode = $('welcome');
const t = (k, ...args) => {
  let s = (I18N[state.lang] || I18N.zh)[k];
  if (s === undefined) s = k;
  args.forEach((a, i) => { s = s.replace('{' + i + '}', a); });
  return s;
};

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

function toast(msg, bad) {
  const box = $('toast');
  box.textContent = msg;
  box.className = 'toast' + (bad ? ' bad' : '');
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.hidden = true; }, 4000);
}

/* ---- API ------------------------------------------------------------------------------------------------------ */

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (state.key) h['Authorization'] = 'Bearer ' + state.key;
  return h;
}

async function api(method, path, body) {
  const opts = { method, headers: headers(body !== undefined ? { 'Content-Type': 'application/json' } : {}) };
  if (body !== undefined) opts.body = JSON.stringify(body);
  const res = await fetch(path, opts);
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  if (res.status === 401) askForKey();
  if (!res.ok) {
    const msg = data && data.error ? data.error.message : res.status + ' ' + res.statusText;
    const err = new Error(msg);
    err.status = res.status;
    throw err;
  }
  return data;
}

const kbPath = (kb) => '/api/v1/kbs/' + encodeURIComponent(kb);

/* ---- language ------------------------------------------------------------------------------------------------- */

function applyLanguage() {
  document.documentElement.lang = state.lang === 'zh' ? 'zh-CN' : 'en';
  document.querySelectorAll('[data-i18n]').forEach((e) => { e.textContent = t(e.dataset.i18n); });
  document.querySelectorAll('[data-i18n-placeholder]').forEach((e) => { e.placeholder = t(e.dataset.i18nPlaceholder); });
  $('lang-toggle').textContent = state.lang === 'zh' ? 'EN' : '中文';
  renderExamples();
  renderDocs();
  renderKbCount();
  renderAuth();
}

function renderExamples() {
  const box = welcomeNode.querySelector('.examples'); /* also while the welcome is not shown */
  box.replaceChildren(...t('examples').map((q) => el('button', {
    class: 'chip example', type: 'button', onclick: () => { $('question').value = q; ask(); },
  }, q)));
}

/* ---- keys ----------------------------------------------------------------------------------------------------- */

function askForKey() {
  const d = $('key-dialog');
  if (d.open) return;
  $('key-input').value = state.key;
  d.showModal();
}

$('key-dialog').addEventListener('close', () => {
  if ($('key-dialog').returnValue !== 'save') return;
  state.key = $('key-input').value.trim();
  localStorage.setItem('cq.key', state.key);
  loadKbs();
});

let health = null;
function renderAuth() {
  const pill = $('auth-state');
  if (!health) { pill.hidden = true; return; }
  pill.hidden = false;
  pill.textContent = health.auth ? t('authOn') : t('openMode');
  pill.className = 'pill ' + (health.auth ? 'ok' : 'warn');
}

/* The file picker offers the formats the server reads (health's "formats", from its format table). */
function renderAccept() {
  if (!health || !health.formats) return;
  $('file-input').accept = health.formats
    .flatMap((f) => [...f.extensions.map((e) => '.' + e), f.mime.split(';')[0]]).join(',');
}

/* ---- knowledge bases ------------------------------------------------------------------------------------------ */

async function loadKbs() {
  try {
    health = await api('GET', '/api/v1/health');
    renderAuth();
    renderAccept();
    const data = await api('GET', '/api/v1/kbs');
    state.kbs = data.kbs;
  } catch (e) {
    if (e.status !== 401) toast(e.message, true);
    state.kbs = [];
  }
  const sel = $('kb-select');
  sel.replaceChildren(...state.kbs.map((k) => el('option', { value: k.name }, k.name)));
  if (!state.kbs.find((k) => k.name === state.kb)) state.kb = state.kbs.length ? state.kbs[0].name : '';
  sel.value = state.kb;
  sel.disabled = !state.kbs.length;
  renderKbCount();
  await loadDocs();
}

function renderKbCount() {
  const k = state.kbs.find((x) => x.name === state.kb);
  $('kb-count').textContent = k ? t('docs', k.documents) : (state.kbs.length ? '' : t('noKb'));
}

$('kb-select').addEventListener('change', (e) => {
  state.kb = e.target.value;
  localStorage.setItem('cq.kb', state.kb);
  newChat();
  renderKbCount();
  loadDocs();
});

$('kb-new').addEventListener('click', async () => {
  const name = (prompt(t('kbName')) || '').trim();
  if (!name) return;
  try {
    await api('POST', '/api/v1/kbs', { name });
    state.kb = name;
    localStorage.setItem('cq.kb', name);
    await loadKbs();
  } catch (e) { toast(e.message, true); }
});

$('kb-delete').addEventListener('click', async () => {
  if (!state.kb || !confirm(t('confirmDeleteKb', state.kb))) return;
  try {
    await api('DELETE', kbPath(state.kb));
    state.kb = '';
    await loadKbs();
  } catch (e) { toast(e.message, true); }
});

/* ---- documents ------------------------------------------------------------------------------------------------ */

async function loadDocs() {
  if (!state.kb) { state.docs = []; renderDocs(); return; }
  try {
    const data = await api('GET', kbPath(state.kb) + '/documents');
    state.docs = data.documents;
  } catch (e) {
    state.docs = [];
    if (e.status !== 401) toast(e.message, true);
  }
  renderDocs();
}

function statusBadge(status) {
  return el('span', { class: 'badge ' + status }, t(status));
}

function renderDocs() {
  const list = $('docs');
  const f = ($('doc-filter').value || '').toLowerCase();
  const docs = state.docs.filter((d) => !f || (d.name + ' ' + (d.title || '')).toLowerCase().includes(f));
  list.replaceChildren(...docs.slice().reverse().map((d) => {
    const warn = d.status === 'ready' && d.quality < 0.8;
    const warnings = (d.warnings || []).join('\n') || d.quality_reason;
    return el('li', { class: 'doc', 'data-doc-id': d.id, 'data-status': d.status },
      el('div', { class: 'doc-main' },
        el('div', { class: 'doc-name', title: d.filename }, d.name),
        el('div', { class: 'doc-meta muted small' },
          d.title && d.title !== d.name ? el('span', { class: 'doc-title' }, d.title) : null,
          d.format.toUpperCase(),
          d.pages ? ' · ' + d.pages + ' ' + t('pages') : '',
          ' · ' + d.clauses + ' ' + t('clauses')),
        d.error ? el('div', { class: 'doc-error small' }, d.error) : null,
        warn ? el('div', { class: 'doc-warn small', title: warnings },
          '⚠ ' + t('qualityWarn') + ' (' + d.quality.toFixed(2) + ')' + (d.quality_reason ? ': ' + d.quality_reason : '')) : null),
      el('div', { class: 'doc-actions' },
        statusBadge(d.status),
        el('a', { class: 'ghost icon', href: d.original_url, title: t('download'), 'aria-label': t('download') + ' ' + d.name, download: d.filename }, '↓'),
        el('button', { class: 'ghost icon danger-text', type: 'button', title: t('delete'), 'aria-label': t('delete') + ' ' + d.name,
          onclick: () => deleteDoc(d) }, '✕')));
  }));
  $('docs-empty').hidden = state.docs.length > 0;
}

$('doc-filter').addEventListener('input', renderDocs);

async function deleteDoc(d) {
  if (!confirm(t('confirmDelete', d.name))) return;
  try {
    await api('DELETE', '/api/v1/documents/' + d.id);
    toast(d.name + ' — ' + t('removed'));
    await loadKbs();
  } catch (e) { toast(e.message, true); }
}

/* ---- uploads -------------------------------------------------------------------------------------------------- */

function uploadRow(file) {
  const bar = el('div', { class: 'bar-fill' });
  const status = el('span', { class: 'small upload-status' }, t('uploading'));
  /* shown while the job is queued or running: the server stops it between two pages and keeps nothing */
  const cancel = el('button', { class: 'link small upload-cancel', type: 'button', hidden: true }, t('cancelJob'));
  const row = el('li', { class: 'upload' },
    el('div', { class: 'upload-head' }, el('span', { class: 'upload-name' }, file.name), status, cancel),
    el('div', { class: 'bar', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-label': file.name }, bar));
  $('uploads').prepend(row);
  return {
    row,
    progress(p) { bar.style.width = (p * 100).toFixed(1) + '%'; row.querySelector('.bar').setAttribute('aria-valuenow', Math.round(p * 100)); },
    status(text, cls) { status.textContent = text; row.className = 'upload ' + (cls || ''); },
    cancellable(jobId) {
      cancel.hidden = !jobId;
      cancel.onclick = jobId ? async () => {
        cancel.disabled = true;
        try { await api('POST', '/api/v1/jobs/' + jobId + '/cancel'); } catch (e) { toast(e.message, true); }
      } : null;
    },
    done() { cancel.hidden = true; setTimeout(() => row.remove(), 6000); },
  };
}

function uploadFile(file) {
  if (!state.kb) { toast(t('noKb'), true); return; }
  const ui = uploadRow(file);
  const form = new FormData();
  form.append('file', file, file.name);
  const xhr = new XMLHttpRequest();
  xhr.open('POST', kbPath(state.kb) + '/documents');
  if (state.key) xhr.setRequestHeader('Authorization', 'Bearer ' + state.key);
  xhr.upload.onprogress = (e) => { if (e.lengthComputable) ui.progress(0.5 * e.loaded / e.total); };
  xhr.onerror = () => { ui.status(t('networkError'), 'failed'); ui.done(); };
  xhr.onload = () => {
    let data = null;
    try { data = JSON.parse(xhr.responseText); } catch (e) { data = null; }
    if (xhr.status === 401) askForKey();
    if (xhr.status === 200 && data && data.duplicate) {
      ui.progress(1);
      ui.status(t('duplicate'), 'duplicate');
      ui.done();
      return;
    }
    if (xhr.status !== 202 || !data) {
      ui.status((data && data.error ? data.error.message : xhr.status === 413 ? t('tooLarge') : xhr.statusText), 'failed');
      ui.row.title = data && data.error ? data.error.message : '';
      return;
    }
    ui.progress(0.5);
    ui.status(t('queued'));
    ui.cancellable(data.job.id);
    pollJob(data.job.id, ui);
  };
  xhr.send(form);
}

async function pollJob(id, ui) {
  for (let i = 0; i < 3600; i++) {
    let job;
    try { job = await api('GET', '/api/v1/jobs/' + id); } catch (e) { ui.status(e.message, 'failed'); return; }
    const p = job.total ? job.done / job.total : 0;
    ui.progress(0.5 + 0.5 * (job.state === 'queued' ? 0 : job.progress || p));
    if (job.state === 'ready' || job.state === 'duplicate') {
      ui.progress(1);
      const d = job.document;
      let text = t(job.state);
      if (d) text += ' · ' + (d.pages ? d.pages + ' ' + t('pages') + ' · ' : '') + d.clauses + ' ' + t('clauses');
      ui.status(text, job.state + (d && d.warnings && d.warnings.length ? ' warn' : ''));
      if (d && d.warnings && d.warnings.length) ui.row.title = d.warnings.join('\n');
      ui.done();
      loadKbs();
      return;
    }
    if (job.state === 'failed') {
      ui.cancellable(null);
      ui.status(t('failed') + ': ' + (job.error || ''), 'failed');
      ui.row.title = job.error || '';
      loadKbs();
      return;
    }
    if (job.state === 'cancelled') {
      ui.status(t('cancelled'), 'cancelled');
      ui.row.title = job.error || '';
      ui.done();
      return;
    }
    ui.status(t(job.state) + (job.total ? ' ' + job.done + '/' + job.total : ''));
    await new Promise((r) => setTimeout(r, i < 20 ? 250 : 1000));
  }
}

const drop = $('dropzone');
['dragenter', 'dragover'].forEach((ev) => drop.addEventListener(ev, (e) => { e.preventDefault(); drop.classList.add('over'); }));
['dragleave', 'drop'].forEach((ev) => drop.addEventListener(ev, (e) => { e.preventDefault(); drop.classList.remove('over'); }));
drop.addEventListener('drop', (e) => { [...e.dataTransfer.files].forEach(uploadFile); });
drop.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); $('file-input').click(); } });
$('file-input').addEventListener('change', (e) => { [...e.target.files].forEach(uploadFile); e.target.value = ''; });
document.addEventListener('dragover', (e) => e.preventDefault());
document.addEventListener('drop', (e) => { if (!drop.contains(e.target)) { e.preventDefault(); [...e.dataTransfer.files].forEach(uploadFile); } });

/* ---- chat ----------------------------------------------------------------------------------------------------- */

function newChat() {
  state.history = [];
  $('messages').replaceChildren(welcomeNode);
  closeDrawer();
}
$('new-chat').addEventListener('click', () => { newChat(); $('question').focus(); });

function citationLabel(c) {
  return c.doc + (c.clause ? ' ' + c.clause : '') + (c.page ? ' · p.' + c.page : '');
}

function addMessage(role, text) {
  const w = $('welcome');
  if (w) w.remove();
  const body = el('div', { class: 'bubble' }, text);
  const msg = el('div', { class: 'msg ' + role }, body);
  $('messages').append(msg);
  msg.scrollIntoView({ block: 'end' });
  return { msg, body };
}

/* Reads a text/event-stream response, calling onEvent(name, data) for each event. */
async function readEvents(res, onEvent) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let name = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) name = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
      }
      if (data.length) onEvent(name, JSON.parse(data.join('\n')));
    }
  }
}

async function ask() {
  const input = $('question');
  const question = input.value.trim();
  if (!question || state.busy) return;
  if (!state.kb) { toast(t('noKb'), true); return; }
  state.busy = true;
  $('ask-button').disabled = true;
  input.value = '';
  autosize();
  addMessage('user', question);
  const { msg, body } = addMessage('assistant', '');
  body.classList.add('streaming');
  body.textContent = t('thinking');
  let text = '', started = false, citations = [], done = null;
  try {
    const res = await fetch(kbPath(state.kb) + '/ask', {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/json', Accept: 'text/event-stream' }),
      body: JSON.stringify({ question, history: state.history }),
    });
    if (res.status === 401) askForKey();
    if (!res.ok) {
      let m = res.statusText;
      try { m = (await res.json()).error.message; } catch (e) { /* keep the status text */ }
      throw new Error(m);
    }
    await readEvents(res, (name, data) => {
      if (name === 'token') {
        if (!started) { body.textContent = ''; started = true; }
        text += data.text;
        body.textContent = text;
        msg.scrollIntoView({ block: 'end' });
      } else if (name === 'citations') {
        citations = data.citations;
      } else if (name === 'done') {
        done = data;
      } else if (name === 'error') {
        throw new Error(data.error.message);
      }
    });
    if (!started) body.textContent = done ? done.answer : '';
    body.classList.remove('streaming');
    if (done && done.abstained) { msg.classList.add('abstained'); body.prepend(el('span', { class: 'badge warn' }, t('abstained')), ' '); }
    if (done && done.resolved_question) msg.prepend(el('div', { class: 'resolved muted small' }, t('resolved') + done.resolved_question));
    if (citations.length) {
      msg.append(el('div', { class: 'cites' },
        el('span', { class: 'muted small' }, t('sources')),
        citations.map((c, i) => el('button', { class: 'chip cite', type: 'button', 'data-clause-id': c.clause_id,
          title: c.path || '', onclick: () => openClause(c.clause_id) }, '[' + (i + 1) + '] ' + citationLabel(c)))));
    }
    if (done && done.timings) {
      msg.append(el('div', { class: 'timing muted small' },
        t('timing', Math.round(done.timings.retrieve_ms), Math.round(done.timings.generate_ms))));
    }
    state.history.push({ role: 'user', content: question });
    state.history.push({ role: 'assistant', content: done ? done.answer : text, citations });
  } catch (e) {
    body.classList.remove('streaming');
    body.textContent = t('failedAsk') + e.message;
    msg.classList.add('error');
  } finally {
    state.busy = false;
    $('ask-button').disabled = false;
    input.focus();
  }
}

$('ask-form').addEventListener('submit', (e) => { e.preventDefault(); ask(); });
function autosize() {
  const q = $('question');
  q.style.height = 'auto';
  q.style.height = Math.min(q.scrollHeight + 2, 180) + 'px';
  q.style.overflowY = q.scrollHeight > 178 ? 'auto' : 'hidden';
}
$('question').addEventListener('input', autosize);
$('question').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); ask(); }
});

/* ---- the clause drawer ---------------------------------------------------------------------------------------- */

async function openClause(id) {
  let c;
  try { c = await api('GET', '/api/v1/clauses/' + id); } catch (e) { toast(e.message, true); return; }
  state.clause = c;
  $('drawer-doc').textContent = c.doc + (c.title && c.title !== c.doc ? ' · ' + c.title : '');
  $('drawer-title').textContent = c.clause || c.path || c.doc;
  $('drawer-path').textContent = c.path || '';
  $('drawer-text').textContent = c.text;
  $('drawer-original').href = '/api/v1/documents/' + c.document_id + '/original';
  const hasPage = !!c.page_image_url;
  $('page-view').hidden = !hasPage;
  if (hasPage) showPage(c.page);
  const d = $('drawer');
  d.classList.add('open');
  d.setAttribute('aria-hidden', 'false');
  $('drawer-close').focus();
}

async function showPage(n) {
  const c = state.clause;
  state.page = n;
  const first = c.page, last = c.page_last || c.page;
  $('page-label').textContent = t('page', n) + (last > first ? ' (' + first + '–' + last + ')' : '');
  $('page-prev').disabled = n <= first;
  $('page-next').disabled = n >= last;
  const img = $('page-image');
  const width = Math.min(1600, Math.round(($('drawer').clientWidth || 700) * (window.devicePixelRatio || 1)));
  const url = '/api/v1/documents/' + c.document_id + '/pages/' + n + '.png?clause=' + c.clause_id + '&width=' + width;
  img.alt = c.doc + ' ' + t('page', n);
  img.classList.add('loading');
  if (state.key) {
    /* an <img> cannot send the key: fetch it and show a blob */
    try {
      const res = await fetch(url, { headers: headers() });
      if (!res.ok) throw new Error(res.status);
      const blob = await res.blob();
      if (img.dataset.blob) URL.revokeObjectURL(img.dataset.blob);
      img.dataset.blob = URL.createObjectURL(blob);
      img.src = img.dataset.blob;
    } catch (e) { toast(e.message, true); }
  } else {
    img.src = url;
  }
}
$('page-image').addEventListener('load', () => {
  const img = $('page-image');
  img.classList.remove('loading');
  /* bring the highlight into view: the first box on this page (points → pixels by the page's width) */
  const c = state.clause;
  const box = (c.boxes || []).find((b) => b.page === state.page);
  const size = (c.page_sizes || []).find((p) => p.page === state.page);
  const frame = img.parentElement;
  frame.scrollTop = box && size ? Math.max(0, box.y0 * img.clientWidth / size.width - 60) : 0;
});

$('page-prev').addEventListener('click', () => showPage(state.page - 1));
$('page-next').addEventListener('click', () => showPage(state.page + 1));

function closeDrawer() {
  const d = $('drawer');
  if (!d.classList.contains('open')) return;
  d.classList.remove('open');
  d.setAttribute('aria-hidden', 'true');
}
$('drawer-close').addEventListener('click', closeDrawer);

document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape') closeDrawer();
  const typing = ['INPUT', 'TEXTAREA', 'SELECT'].includes(document.activeElement.tagName);
  if (e.key === '/' && !typing) { e.preventDefault(); $('question').focus(); }
});

$('lang-toggle').addEventListener('click', () => {
  state.lang = state.lang === 'zh' ? 'en' : 'zh';
  localStorage.setItem('cq.lang', state.lang);
  applyLanguage();
});
$('key-button').addEventListener('click', askForKey);

applyLanguage();
loadKbs();
