/* clauseqa page: document library (KBs, uploads with progress, status), conversations kept by the server (listed,
 * reopened, renamed, deleted) and the chat (answers streamed with the server's stages, citations that open the
 * clause and its highlighted page, stop, copy, regenerate) and versions of a regulation (each document's status and
 * label, a person's correction, "as of" a day, comparisons with the character diff). One pane at a time on a phone.
 * Talks only to this server's /api/v1 (docs/API.md). */
'use strict';

const I18N = {
  zh: {
    kb: '知识库', newKb: '新建', deleteKb: '删除', apiKey: 'API 密钥', library: '文档库',
    dropTitle: '拖放文件到这里，或点击选择', documents: '文档', filter: '筛选',
    /* the formats' names in this language (which formats there are is the server's: health's "formats") */
    formatNames: { pdf: 'PDF', docx: 'Word', html: 'HTML 网页', md: 'Markdown', txt: '纯文本' }, listSep: '、',
    noDocs: '还没有文档。上传一份开始吧。', chat: '问答', welcomeTitle: '就文档提问，答案附带条款出处',
    welcomeText: '每个回答都引用原文条款与页码；点击引用查看条款全文和高亮的页面。',
    askPlaceholder: '输入问题，Enter 发送，Shift+Enter 换行', askPlaceholderShort: '输入问题', send: '发送', newChat: '新对话',
    newChatPlus: '＋ 新对话',
    keysHint: '快捷键：/ 聚焦输入框 · Esc 关闭条款', original: '原文件', openOriginal: '打开原文件',
    searchDoc: '在本文档中查找', find: '查找', noHits: '本文档中没有“{0}”', hits: '{0} 条含“{1}”',
    moreHits: '只列出前 {0} 条', backToClause: '回到本条', clauseOn: '本条在第 {0} 页', cancel: '取消', save: '保存',
    keyHelp: '也可以用 API 密钥：在服务器上运行 clauseqa keys create 获得。',
    signIn: '登录', signOut: '退出', userName: '用户名', password: '密码', useKey: '改用 API 密钥', useThisKey: '使用此密钥',
    signInHelp: '服务器要求登录。账户由管理员在服务器上创建（clauseqa user add）。',
    wrongLogin: '用户名或密码错误', tooManySignIns: '登录失败次数过多，请 {0} 秒后再试', keyInvalid: '这个 API 密钥无效或已吊销',
    roles: { admin: '管理员', editor: '编辑', reader: '读者' }, viaKey: 'API 密钥',
    audit: '审计', auditTitle: '审计记录', auditHelp: '谁在何时登录、上传、删除、修改了用户、授权或密钥（最新的在前）',
    auditWhen: '时间', auditWho: '操作者', auditAction: '操作', auditTarget: '对象', auditFrom: '来源', auditMore: '更早的记录',
    actors: { user: '用户', key: '密钥', open: '开放模式', cli: '命令行', anonymous: '未登录' },
    actions: { sign_in: '登录', sign_in_failed: '登录失败', upload: '上传', upload_replace: '上传（替换）',
      document_delete: '删除文档', job_cancel: '取消解析', kb_create: '新建知识库', kb_delete: '删除知识库',
      version_edit: '修改版本信息', version_reset: '恢复自动识别版本', user_add: '添加用户', user_set: '修改用户权限',
      user_passwd: '修改密码', user_remove: '删除用户', key_create: '创建密钥', key_revoke: '吊销密钥', open_mode: '开放模式' },
    pages: '页', clauses: '条', ready: '就绪', failed: '失败', processing: '处理中', queued: '排队中',
    running: '解析中', duplicate: '已存在', uploading: '上传中', delete: '删除', download: '下载',
    confirmDelete: '删除文档“{0}”？它的条款和索引会一并删除。',
    confirmDeleteKb: '删除知识库“{0}”及其全部文档？', kbName: '新知识库名称（字母、数字、中文、-、_、.）',
    noKb: '没有知识库，请先新建一个。', page: '第 {0} 页', of: '共 {0} 页', sources: '出处',
    abstained: '未找到依据', whichDocument: '请指明文件', choose: '指的是：', resolved: '理解为：', context: '原文：', failedAsk: '提问失败：',
    openMode: '开放模式：无需密钥', authOn: '已启用密钥', qualityWarn: '文字质量较低',
    examples: ['劳动法第四十四条规定了什么？', '试用期最长多长时间？', 'What does Section 5.2 say?'],
    timing: '检索 {0} ms · 生成 {1} ms', docs: '{0} 份文档', removed: '已删除',
    tooLarge: '文件太大', networkError: '网络错误', cancelled: '已取消', cancelJob: '取消解析',
    conversations: '对话', noConvs: '还没有对话。提一个问题开始吧。', pageTab: '原文', backToChat: '‹ 返回问答',
    rename: '重命名', renamePrompt: '对话的新名称', confirmDeleteConv: '删除对话“{0}”？', turns: '{0} 轮',
    stop: '停止', stopped: '已停止', copy: '复制', copied: '已复制', regenerate: '重新生成', dismiss: '关闭',
    notice: '说明', convGone: '这个对话已不存在。',
    stages: { resolving: '理解追问…', retrieving: '检索条款…', comparing: '比较版本…', generating: '生成回答…',
      answering: '整理答案…' },
    retrieved: '检索用时 {0} ms',
    asOf: '截至', asOfHint: '按该日有效的法规版本回答', in_force: '现行有效', superseded: '已被取代', repealed: '已废止',
    not_yet_in_force: '尚未施行', unknown: '未知', versionsN: '共 {0} 个版本', compare: '比较', compareWith: '与{0}比较',
    editVersion: '版本信息', compareTitle: '版本对比', changedOnly: '只看改动', wholeDoc: '全部条文', versionTitle: '版本信息',
    vGroup: '所属法规（版本组，留空则单独成组）', vLabel: '版本名称', vPromulgated: '公布日期', vEffective: '施行日期',
    vRepealed: '废止日期（空：未废止）', vAuto: '恢复自动识别',
    kinds: { same: '未变', changed: '修改', added: '新增', removed: '删除' },
    renumbered: '条号变化', moved: '位置移动', fullCompare: '查看完整对比',
    summary: '原 {0} 条，现 {1} 条：修改 {2}，新增 {3}，删除 {4}，未变 {5}（条号变化 {6}）',
    effectiveFrom: '{0} 起施行', previousVersion: '上一版本', nextVersion: '下一版本', noPairs: '没有符合条件的条文',
    saved: '已保存',
    errors: {
      bad_format: '文件格式不对或已损坏，无法读取', unsupported: '不支持这种文件类型（可上传 {0}）',
      empty: '文件是空的，或读不出文字', exists: '知识库里已有同名的另一份文档：先删除它，或改名后再上传',
      payload_too_large: '文件太大', forbidden: '没有权限这样做', unauthorized: '请先登录（或使用有效的 API 密钥）',
      too_many_sign_ins: '登录失败次数过多，请稍后再试', cross_site: '只能从本站页面操作',
      not_found: '找不到（可能已被删除）', invalid: '请求无效', bad_request: '上传的数据无法读取',
      invalid_json: '请求无效', io: '服务器无法保存文件', database: '服务器数据库出错', no_memory: '服务器内存不足',
      internal: '服务器内部错误', device: '服务器的计算设备出错', shutting_down: '服务器正在停止，请稍后再试',
      network: '网络错误，连接中断', failed: '处理失败',
      /* the readers' finer reasons (docs/API.md, jobs) */
      too_large: '文档太大（页数或所需内存超过服务器的上限，或解压后过大，可能是 zip 炸弹），拒绝读取', too_deep: '文件的元素嵌套过深，拒绝读取',
      cancelled: '已取消',
      ocr_off: '这是没有文字层的扫描件，而服务器关闭了 OCR 文字识别', ocr_unavailable: '这是扫描件，但服务器上的 OCR 文字识别不可用（缺少语言数据）',
      ocr_failed: '这是扫描件，OCR 文字识别失败',
    },
    pageWarn: '这一页的文字可能有误（质量 {0}）：请对照页面图像核对',
  },
  en: {
    kb: 'Knowledge base', newKb: 'New', deleteKb: 'Delete', apiKey: 'API key', library: 'Library',
    dropTitle: 'Drop files here, or click to choose', documents: 'Documents',
    formatNames: { pdf: 'PDF', docx: 'Word', html: 'HTML', md: 'Markdown', txt: 'plain text' }, listSep: ', ',
    filter: 'Filter', noDocs: 'No documents yet. Upload one to begin.', chat: 'Chat',
    welcomeTitle: 'Ask your documents; every answer cites its clause',
    welcomeText: 'Answers quote the clause and page they rest on; click a citation for the clause and its highlighted page.',
    askPlaceholder: 'Ask a question — Enter sends, Shift+Enter for a new line', askPlaceholderShort: 'Ask a question',
    send: 'Send', newChat: 'New chat', newChatPlus: '+ New chat',
    keysHint: 'Keys: / focuses the question · Esc closes the clause', original: 'Original',
    openOriginal: 'Open the original', searchDoc: 'Search this document', find: 'Find', noHits: 'No “{0}” in this document',
    hits: '{0} clauses hold “{1}”', moreHits: 'only the first {0} are listed', backToClause: 'Back to the clause',
    clauseOn: 'the clause is on p. {0}', cancel: 'Cancel',
    save: 'Save', keyHelp: 'Or use an API key: create one on the server with clauseqa keys create.',
    signIn: 'Sign in', signOut: 'Sign out', userName: 'User name', password: 'Password', useKey: 'Use an API key instead',
    useThisKey: 'Use this key', signInHelp: 'This server needs you to sign in. An admin creates accounts on the server (clauseqa user add).',
    wrongLogin: 'Wrong user name or password', tooManySignIns: 'Too many failed sign-ins: try again in {0} s',
    keyInvalid: 'This API key is not valid, or it was revoked',
    roles: { admin: 'admin', editor: 'editor', reader: 'reader' }, viaKey: 'API key',
    audit: 'Audit', auditTitle: 'Audit trail', auditHelp: 'Who signed in, uploaded, deleted, changed a user, a grant or a key, and when (newest first)',
    auditWhen: 'When', auditWho: 'Who', auditAction: 'Action', auditTarget: 'On', auditFrom: 'From', auditMore: 'Older entries',
    actors: { user: 'user', key: 'key', open: 'open mode', cli: 'command line', anonymous: 'not signed in' },
    actions: { sign_in: 'signed in', sign_in_failed: 'sign-in failed', upload: 'upload', upload_replace: 'upload (replace)',
      document_delete: 'document deleted', job_cancel: 'job cancelled', kb_create: 'KB created', kb_delete: 'KB deleted',
      version_edit: 'version corrected', version_reset: 'version back to automatic', user_add: 'user added',
      user_set: 'user\'s role or KBs changed', user_passwd: 'password changed', user_remove: 'user removed',
      key_create: 'key created', key_revoke: 'key revoked', open_mode: 'open mode' },
    pages: 'pages', clauses: 'clauses', ready: 'ready', failed: 'failed', processing: 'processing', queued: 'queued',
    running: 'parsing', duplicate: 'already there', uploading: 'uploading', delete: 'Delete', download: 'Download',
    confirmDelete: 'Delete document “{0}” with its clauses and index entries?',
    confirmDeleteKb: 'Delete knowledge base “{0}” and all its documents?',
    kbName: 'Name of the new knowledge base (letters, digits, Chinese, - _ .)',
    noKb: 'No knowledge base yet: create one first.', page: 'Page {0}', of: 'of {0}', sources: 'Sources',
    abstained: 'No support found', whichDocument: 'Which document?', choose: 'Did you mean: ', resolved: 'Read as: ', context: 'In context: ', failedAsk: 'The question failed: ',
    openMode: 'open mode: no key needed', authOn: 'keys required', qualityWarn: 'low text quality',
    examples: ['What does Section 5.2 say?', '劳动法第四十四条规定了什么？', 'How many days of notice are needed to terminate?'],
    timing: 'retrieve {0} ms · generate {1} ms', docs: '{0} documents', removed: 'deleted',
    tooLarge: 'file too large', networkError: 'network error', cancelled: 'cancelled', cancelJob: 'Cancel',
    conversations: 'Conversations', noConvs: 'No conversations yet. Ask a question to start one.', pageTab: 'Page',
    backToChat: '‹ Back to chat', rename: 'Rename', renamePrompt: 'New name of the conversation',
    confirmDeleteConv: 'Delete conversation “{0}”?', turns: '{0} turns', stop: 'Stop', stopped: 'stopped',
    copy: 'Copy', copied: 'copied', regenerate: 'Regenerate', dismiss: 'Dismiss', notice: 'Note',
    convGone: 'That conversation no longer exists.',
    stages: { resolving: 'Reading the follow-up…', retrieving: 'Searching the clauses…', comparing: 'Comparing the versions…',
      generating: 'Writing the answer…', answering: 'Composing the answer…' },
    retrieved: 'searched in {0} ms',
    asOf: 'As of', asOfHint: 'Answer from the versions of regulations in force that day', in_force: 'in force',
    superseded: 'superseded', repealed: 'repealed', not_yet_in_force: 'not yet in force', unknown: 'unknown',
    versionsN: '{0} versions', compare: 'Compare', compareWith: 'Compare with {0}', editVersion: 'Version',
    compareTitle: 'Versions compared', changedOnly: 'changes only', wholeDoc: 'All clauses', versionTitle: 'Version',
    vGroup: 'Regulation (version group; empty: on its own)', vLabel: 'Version name', vPromulgated: 'Promulgated',
    vEffective: 'In force from', vRepealed: 'Repealed on (empty: not repealed)', vAuto: 'Back to automatic',
    kinds: { same: 'same', changed: 'changed', added: 'added', removed: 'removed' },
    renumbered: 'renumbered', moved: 'moved', fullCompare: 'Whole comparison',
    summary: '{0} clauses before, {1} now: {2} changed, {3} added, {4} removed, {5} same ({6} renumbered)',
    effectiveFrom: 'in force from {0}', previousVersion: 'previous version', nextVersion: 'next version',
    noPairs: 'no clauses to show', saved: 'saved',
    errors: {
      bad_format: 'the file is not in a readable format, or it is damaged', unsupported: 'this file type is not supported (upload {0})',
      empty: 'the file is empty, or no text could be read from it',
      exists: 'another document of that name is in this knowledge base: delete it first, or rename the file',
      payload_too_large: 'file too large', forbidden: 'you are not allowed to do that', unauthorized: 'sign in first (or use a valid API key)',
      too_many_sign_ins: 'too many failed sign-ins: try again later', cross_site: 'only this site\'s own page may do that',
      not_found: 'not found (it may have been deleted)', invalid: 'invalid request', bad_request: 'the upload could not be read',
      invalid_json: 'invalid request', io: 'the server could not store the file', database: 'database error on the server',
      no_memory: 'the server is out of memory', internal: 'internal server error', device: 'the server\'s compute device failed',
      shutting_down: 'the server is stopping; try again shortly', network: 'network error: the connection broke',
      failed: 'processing failed',
      too_large: 'the document is too large (pages or memory over the server\'s limit, or it expands to too much: a zip bomb?): refused',
      too_deep: 'the file nests its elements too deep: refused', cancelled: 'cancelled',
      ocr_off: 'a scan without a text layer, and the server has OCR turned off',
      ocr_unavailable: 'a scan, but OCR is not available on the server (its language data is missing)',
      ocr_failed: 'a scan, and OCR failed on it',
    },
    pageWarn: 'the text of this page may be wrong (quality {0}): check it against the page image',
  },
};

const state = {
  lang: localStorage.getItem('cq.lang') || ((navigator.language || 'zh').toLowerCase().startsWith('zh') ? 'zh' : 'en'),
  key: localStorage.getItem('cq.key') || '',
  me: null, /* who the server says is asking (GET /api/v1/me): name, role, kbs ("*" or names), via */
  kb: localStorage.getItem('cq.kb') || '',
  kbs: [],
  docs: [],
  convs: [],
  conversationId: null, /* the conversation on screen (kept by the server); null: a new one */
  busy: false,
  controller: null,     /* aborts the answer being streamed (the stop button) */
  clause: null,
  page: 0,
  searchDoc: 0, /* the document the drawer's search results belong to */
  docSearch: null, /* their last answer */
  docQuality: null, /* {id, pages: a promise}: the quality of every page of the document the viewer shows */
  zoom: 1,
  side: localStorage.getItem('cq.side') === 'convs' ? 'convs' : 'library',
};

const $ = (id) => document.getElementById(id);
const PHONE = window.matchMedia('(max-width: 820px)'); /* as style.css: one pane at a time */
const welcomeNode = $('welcome');
const t = (k, ...args) => {
  let s = (I18N[state.lang] || I18N.zh)[k];
  if (s === undefined) s = k;
  args.forEach((a, i) => { s = s.replace('{' + i + '}', a); });
  return s;
};

/* A server error code ("bad_format", "exists", a reader's "too_large" …, docs/API.md) in the page's language. */
function errorText(code) {
  const errors = t('errors');
  const s = errors[code] || errors.failed;
  return s.replace('{0}', formatsText());
}

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

/* An Error with the server's code and message ({"error": {"code", "message"}}) and the HTTP status. */
function apiError(status, data, fallback) {
  const er = data && data.error;
  /* the message in the page's language by its code (messages.js), else the server's English */
  const e = new Error(er ? serverMessage(state.lang, er.message_code, er.message_args, er.message) : fallback);
  e.status = status;
  e.code = data && data.error ? data.error.code : (status === 413 ? 'payload_too_large' : status ? 'failed' : 'network');
  return e;
}

async function api(method, path, body) {
  const opts = { method, headers: headers(body !== undefined ? { 'Content-Type': 'application/json' } : {}) };
  if (body !== undefined) opts.body = JSON.stringify(body);
  const res = await fetch(path, opts);
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  if (res.status === 401) askToSignIn();
  if (!res.ok) throw apiError(res.status, data, res.status + ' ' + res.statusText);
  return data;
}

const kbPath = (kb) => '/api/v1/kbs/' + encodeURIComponent(kb);

/* ---- language ------------------------------------------------------------------------------------------------- */

function applyLanguage() {
  document.documentElement.lang = state.lang === 'zh' ? 'zh-CN' : 'en';
  document.querySelectorAll('[data-i18n]').forEach((e) => { e.textContent = t(e.dataset.i18n); });
  document.querySelectorAll('[data-i18n-placeholder]').forEach((e) => { e.placeholder = t(e.dataset.i18nPlaceholder); });
  document.querySelectorAll('[data-i18n-title]').forEach((e) => { e.title = t(e.dataset.i18nTitle); });
  if (PHONE.matches) $('question').placeholder = t('askPlaceholderShort'); /* the keys hint does not fit, nor apply */
  $('lang-toggle').textContent = state.lang === 'zh' ? 'EN' : '中文';
  renderAskButton();
  renderExamples();
  renderDocs();
  renderConvs();
  renderKbCount();
  renderAuth();
  renderFormats();
  renderMe();
  renderDocSearch();
  if (state.clause && state.page) renderPageLabel();
}

function renderExamples() {
  const box = welcomeNode.querySelector('.examples'); /* also while the welcome is not shown */
  box.replaceChildren(...t('examples').map((q) => el('button', {
    class: 'chip example', type: 'button', onclick: () => { $('question').value = q; ask(); },
  }, q)));
}

/* ---- panes: the side pane shows conversations or the library; on a phone one pane fills the screen ------------- */

function showSide(side) {
  state.side = side;
  localStorage.setItem('cq.side', side);
  document.body.dataset.side = side;
  renderTabs();
}

/* chat | convs | library | page (the clause drawer) */
function showPane(pane) {
  if (pane === 'page') {
    if (state.clause) openDrawer();
    return;
  }
  closeDrawer();
  if (pane === 'convs' || pane === 'library') {
    showSide(pane);
    document.body.dataset.pane = 'side';
  } else {
    document.body.dataset.pane = 'chat';
  }
  renderTabs();
}

const drawerOpen = () => $('drawer').classList.contains('open');

function renderTabs() {
  document.querySelectorAll('[data-side-tab]').forEach((b) => b.setAttribute('aria-selected', String(b.dataset.sideTab === state.side)));
  const pane = drawerOpen() ? 'page' : document.body.dataset.pane === 'side' ? state.side : 'chat';
  document.querySelectorAll('[data-pane-tab]').forEach((b) => b.setAttribute('aria-selected', String(b.dataset.paneTab === pane)));
  $('tab-page').disabled = !state.clause;
}

document.querySelectorAll('[data-side-tab]').forEach((b) => b.addEventListener('click', () => showSide(b.dataset.sideTab)));
document.querySelectorAll('[data-pane-tab]').forEach((b) => b.addEventListener('click', () => showPane(b.dataset.paneTab)));

/* ---- keys ----------------------------------------------------------------------------------------------------- */

/* ---- signing in: a user's name and password (a session cookie), or an API key ------------------------------- */

function askToSignIn() {
  const d = $('signin-dialog');
  if (d.open) return;
  $('signin-error').hidden = true;
  $('key-error').hidden = true;
  $('key-input').value = state.key;
  d.showModal();
  $('signin-user').focus();
}

function formError(id, text) {
  $(id).textContent = text;
  $(id).hidden = false;
}

/* The error of a failed sign-in in the page's language (the server's own words for anything unexpected). */
function signInError(e) {
  if (e.status === 401) return t('wrongLogin');
  if (e.status === 429) return t('tooManySignIns', e.retryAfter || '?');
  return e.message;
}

$('signin-form').addEventListener('submit', async (ev) => {
  ev.preventDefault(); /* the dialog stays open until the server says yes */
  $('signin-error').hidden = true;
  const user = $('signin-user').value.trim(), password = $('signin-password').value;
  $('signin-submit').disabled = true;
  try {
    const res = await fetch('/api/v1/login', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ user, password }) });
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    if (!res.ok) {
      const e = apiError(res.status, data, res.status + ' ' + res.statusText);
      e.retryAfter = res.headers.get('Retry-After');
      throw e;
    }
    state.key = ''; /* the session speaks for the user from now on */
    localStorage.removeItem('cq.key');
    $('signin-password').value = '';
    $('signin-dialog').close();
    newChat();
    await loadKbs();
  } catch (e) {
    formError('signin-error', signInError(e));
    $('signin-password').select();
  } finally {
    $('signin-submit').disabled = false;
  }
});

$('key-save').addEventListener('click', async () => {
  const key = $('key-input').value.trim();
  $('key-error').hidden = true;
  const res = await fetch('/api/v1/me', { headers: key ? { Authorization: 'Bearer ' + key } : {} });
  if (!res.ok) { formError('key-error', res.status === 401 ? t('keyInvalid') : res.status + ' ' + res.statusText); return; }
  state.key = key;
  localStorage.setItem('cq.key', key);
  $('signin-dialog').close();
  newChat();
  await loadKbs();
});

$('signin-cancel').addEventListener('click', () => $('signin-dialog').close());

/* ---- the audit trail (admins: GET /api/v1/audit) ---------------------------------------------------------------- */

const auditPage = { next: null };

function auditRow(e) {
  const when = new Date(e.at * 1000).toLocaleString(state.lang === 'zh' ? 'zh-CN' : 'en');
  const who = (t('actors')[e.actor.kind] || e.actor.kind) + (e.actor.name ? ' ' + e.actor.name : '');
  return el('tr', { class: 'audit-entry', 'data-action': e.action },
    el('td', {}, when), el('td', {}, who), el('td', { class: 'audit-action' }, t('actions')[e.action] || e.action),
    el('td', {}, e.kb || ''), el('td', {}, e.target || ''), el('td', {}, e.client || ''));
}

async function loadAudit(more) {
  try {
    const data = await api('GET', '/api/v1/audit?limit=50' + (more && auditPage.next ? '&before=' + auditPage.next : ''));
    const rows = data.entries.map(auditRow);
    if (more) $('audit-rows').append(...rows);
    else $('audit-rows').replaceChildren(...rows);
    auditPage.next = data.next_before;
    $('audit-more').hidden = !auditPage.next;
  } catch (e) { toast(e.message, true); }
}

$('audit-button').addEventListener('click', async () => {
  await loadAudit(false);
  $('audit-dialog').showModal();
});
$('audit-more').addEventListener('click', () => loadAudit(true));
$('audit-close').addEventListener('click', () => $('audit-dialog').close());

$('signout-button').addEventListener('click', async () => {
  try { await fetch('/api/v1/logout', { method: 'POST' }); } catch (e) { /* signed out here anyway */ }
  state.key = '';
  localStorage.removeItem('cq.key');
  state.me = null;
  newChat();
  await loadKbs();
});

/* Who is asking, and what the page offers them: a reader sees no upload and no delete; KBs are made and deleted by
 * admins; an editor changes only its own KBs. */
const isAdmin = () => !state.me || state.me.role === 'admin';
const canEdit = (kb) => isAdmin() || (state.me.role === 'editor' && !!kb &&
  (state.me.kbs === '*' || (Array.isArray(state.me.kbs) && state.me.kbs.includes(kb))));

function renderMe() {
  const me = state.me, signedIn = me && me.via !== 'open';
  $('me').hidden = !signedIn;
  if (signedIn) {
    $('me').textContent = me.name + ' · ' + (t('roles')[me.role] || me.role) + (me.via === 'key' ? ' · ' + t('viaKey') : '');
  }
  $('signout-button').hidden = !signedIn;
  $('key-button').hidden = !!signedIn || !(health && health.auth);
  $('kb-new').hidden = !isAdmin();
  $('kb-delete').hidden = !isAdmin();
  $('dropzone').hidden = !canEdit(state.kb);
  $('audit-button').hidden = !(state.me && state.me.role === 'admin');
  $('uploads').hidden = !canEdit(state.kb);
}

let health = null;
function renderAuth() {
  const pill = $('auth-state');
  if (!health) { pill.hidden = true; return; }
  pill.hidden = false;
  pill.textContent = health.auth ? t('authOn') : t('openMode');
  pill.className = 'pill ' + (health.auth ? 'ok' : 'warn');
}

/* The formats the server reads (health's "formats", from its format table) in the page's language. */
function formatsText() {
  const names = t('formatNames');
  return (health && health.formats || []).map((f) => names[f.name] || f.label).join(t('listSep'));
}

/* The file picker and the drop zone's hint offer them. */
function renderFormats() {
  $('drop-hint').textContent = formatsText();
  if (!health || !health.formats) return;
  $('file-input').accept = health.formats
    .flatMap((f) => [...f.extensions.map((e) => '.' + e), f.mime.split(';')[0]]).join(',');
}

/* ---- knowledge bases ------------------------------------------------------------------------------------------ */

async function loadKbs() {
  try {
    health = await api('GET', '/api/v1/health');
    renderAuth();
    renderFormats();
    state.me = await api('GET', '/api/v1/me');
    const data = await api('GET', '/api/v1/kbs');
    state.kbs = data.kbs;
  } catch (e) {
    if (e.status === 401) state.me = null;
    else toast(e.message, true);
    state.kbs = [];
  }
  const sel = $('kb-select');
  sel.replaceChildren(...state.kbs.map((k) => el('option', { value: k.name }, k.name)));
  const before = state.kb;
  if (!state.kbs.find((k) => k.name === state.kb)) state.kb = state.kbs.length ? state.kbs[0].name : '';
  sel.value = state.kb;
  sel.disabled = !state.kbs.length;
  renderKbCount();
  renderMe(); /* after the KB is known: what the page offers depends on it */
  await Promise.all([loadDocs(), loadConvs()]);
  /* reopen the conversation this KB showed last (after a reload, or another KB's) */
  if (state.kb && (state.kb !== before || state.conversationId === null)) restoreConversation();
}

function renderKbCount() {
  const k = state.kbs.find((x) => x.name === state.kb);
  $('kb-count').textContent = k ? t('docs', k.documents) : (state.kbs.length ? '' : t('noKb'));
}

$('kb-select').addEventListener('change', async (e) => {
  state.kb = e.target.value;
  localStorage.setItem('cq.kb', state.kb);
  newChat();
  renderKbCount();
  renderMe();
  await Promise.all([loadDocs(), loadConvs()]);
  restoreConversation();
});

$('kb-new').addEventListener('click', async () => {
  const name = (prompt(t('kbName')) || '').trim();
  if (!name) return;
  try {
    await api('POST', '/api/v1/kbs', { name });
    state.kb = name;
    localStorage.setItem('cq.kb', name);
    newChat();
    await loadKbs();
  } catch (e) { toast(e.message, true); }
});

$('kb-delete').addEventListener('click', async () => {
  if (!state.kb || !confirm(t('confirmDeleteKb', state.kb))) return;
  try {
    await api('DELETE', kbPath(state.kb));
    localStorage.removeItem(convKey());
    state.kb = '';
    newChat();
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

/* ---- versions of a regulation --------------------------------------------------------------------------------- */

/* Does a version object say something worth showing (several versions, or not in force)? */
const versionMatters = (v) => v && (v.versions > 1 || (v.status && v.status !== 'in_force'));

function versionBadge(v) {
  const title = [v.label, v.effective ? t('effectiveFrom', v.effective) : '', v.repealed ? t('repealed') + ' ' + v.repealed : '']
    .filter(Boolean).join(' · ');
  return el('span', { class: 'badge version ' + v.status, title, 'data-status': v.status }, t(v.status));
}

/* The version line of a document in the list: label, status, and the buttons to compare and correct. */
function docVersion(d) {
  const v = d.version;
  if (d.status !== 'ready') return null;
  const compare = v && (v.previous || v.next);
  return el('div', { class: 'doc-version small muted' },
    v && versionMatters(v) ? versionBadge(v) : null,
    v && v.label ? el('span', { class: 'doc-version-label' }, v.label) : null,
    v && v.versions > 1 ? el('span', {}, t('versionsN', v.versions)) : null,
    compare ? el('button', { class: 'link small compare-doc', type: 'button',
      onclick: () => (v.previous ? openCompare(v.previous.document_id, d.id, {}) : openCompare(d.id, v.next.document_id, {})) },
      t('compare')) : null,
    canEdit(state.kb) ? el('button', { class: 'link small edit-version', type: 'button', onclick: () => editVersion(d) },
      t('editVersion')) : null);
}

function diffNodes(diff) {
  return diff.map((x) => (x.op === 'added' ? el('ins', { class: 'diff' }, x.text)
    : x.op === 'removed' ? el('del', { class: 'diff' }, x.text) : document.createTextNode(x.text)));
}

const clauseLabels = (cl) => cl.map((c) => c.clause || '¶').join(' + ');

function renderPair(p) {
  const head = el('div', { class: 'pair-head' },
    el('span', { class: 'badge ' + p.kind }, t('kinds')[p.kind] || p.kind),
    p.a.length && p.b.length ? clauseLabels(p.a) + ' → ' + clauseLabels(p.b) : clauseLabels(p.a.length ? p.a : p.b),
    p.renumbered ? el('span', { class: 'muted small' }, t('renumbered')) : null,
    p.moved ? el('span', { class: 'muted small' }, t('moved')) : null,
    p.kind === 'changed' ? el('span', { class: 'muted small' }, '≈' + Math.round(p.similarity * 100) + '%') : null);
  let body;
  if (p.kind === 'changed') body = diffNodes(p.diff);
  else if (p.kind === 'added') body = [el('ins', { class: 'diff' }, p.b.map((c) => c.text).join('\n'))];
  else if (p.kind === 'removed') body = [el('del', { class: 'diff' }, p.a.map((c) => c.text).join('\n'))];
  else body = [p.b.map((c) => c.text).join('\n')];
  return el('div', { class: 'pair ' + p.kind, 'data-kind': p.kind }, head, el('div', { class: 'pair-text' }, body));
}

const compareState = { a: 0, b: 0, opts: {} };

/* The comparison of document a (older) with b, in the compare dialog; opts.clauseId / opts.clause narrow it. */
async function openCompare(a, b, opts) {
  compareState.a = a;
  compareState.b = b;
  compareState.opts = opts || {};
  await renderCompare();
  const d = $('compare-dialog');
  if (!d.open) d.showModal();
}

async function renderCompare() {
  const { a, b, opts } = compareState;
  const q = new URLSearchParams();
  if (opts.clauseId) q.set('clause_id', opts.clauseId);
  if (opts.clause) q.set('clause', opts.clause);
  if ($('compare-changed').checked) q.set('changed', '1');
  let c;
  try { c = await api('GET', '/api/v1/documents/' + a + '/compare/' + b + '?' + q); } catch (e) { toast(e.message, true); return; }
  const side = (x) => x.doc + (x.version && x.version.label ? ' (' + x.version.label + (x.version.effective ? ', ' + t('effectiveFrom', x.version.effective) : '') + ')' : '');
  $('compare-sides').textContent = side(c.a) + '  →  ' + side(c.b);
  const s = c.summary;
  $('compare-summary').textContent = t('summary', c.a.clauses, c.b.clauses, s.changed, s.added, s.removed, s.same, s.renumbered);
  $('compare-all').hidden = !(opts.clauseId || opts.clause);
  $('compare-pairs').replaceChildren(...(c.pairs.length ? c.pairs.map(renderPair) : [el('p', { class: 'muted' }, t('noPairs'))]));
}

$('compare-changed').addEventListener('change', renderCompare);
$('compare-all').addEventListener('click', () => { compareState.opts = {}; renderCompare(); });
$('compare-close').addEventListener('click', () => $('compare-dialog').close());

let versionDoc = null;
async function editVersion(d) {
  let r;
  try { r = await api('GET', '/api/v1/documents/' + d.id + '/version'); } catch (e) { toast(e.message, true); return; }
  versionDoc = d;
  const v = r.version || {};
  $('version-doc').textContent = d.name;
  $('v-group').value = v.group || '';
  $('v-label').value = v.label || '';
  $('v-promulgated').value = v.promulgated || '';
  $('v-effective').value = v.effective || '';
  $('v-repealed').value = v.repealed || '';
  $('version-dialog').showModal();
}

$('version-dialog').addEventListener('close', async () => {
  const how = $('version-dialog').returnValue;
  if (!versionDoc || (how !== 'save' && how !== 'auto')) return;
  const path = '/api/v1/documents/' + versionDoc.id + '/version';
  const edit = {
    group: $('v-group').value.trim(), label: $('v-label').value.trim(),
    promulgated: $('v-promulgated').value || null, effective: $('v-effective').value || null,
    repealed: $('v-repealed').value || null,
  };
  try {
    await (how === 'auto' ? api('DELETE', path) : api('PUT', path, edit));
    toast(versionDoc.name + ' — ' + t('saved'));
    await loadDocs();
  } catch (e) { toast(e.message, true); }
});

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
        docVersion(d),
        /* the reason is the server's (English) words: in Chinese it says "failed" and shows them on hover */
        d.error ? el('div', { class: 'doc-error small', title: d.error }, serverMessage(state.lang, d.error_message_code,
          d.error_message_args, state.lang === 'en' ? d.error : errorText('failed'))) : null,
        warn ? el('div', { class: 'doc-warn small', title: warnings },
          '⚠ ' + t('qualityWarn') + ' (' + d.quality.toFixed(2) + ')' + (d.quality_reason ? ': ' + d.quality_reason : '')) : null),
      el('div', { class: 'doc-actions' },
        statusBadge(d.status),
        el('a', { class: 'ghost icon', href: d.original_url, title: t('download'), 'aria-label': t('download') + ' ' + d.name, download: d.filename }, '↓'),
        canEdit(state.kb) ? el('button', { class: 'ghost icon danger-text doc-delete', type: 'button', title: t('delete'),
          'aria-label': t('delete') + ' ' + d.name, onclick: () => deleteDoc(d) }, '✕') : null));
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

/* The file name in two parts: the start, cut with "…" when the row is too narrow, and the end (with the extension),
 * always shown. */
function nameParts(name) {
  const chars = [...name];
  const tail = chars.length > 14 ? 10 : 0;
  return [chars.slice(0, chars.length - tail).join(''), chars.slice(chars.length - tail).join('')];
}

function uploadRow(file) {
  const bar = el('div', { class: 'bar-fill' });
  const status = el('span', { class: 'small upload-status' }, t('uploading'));
  const error = el('div', { class: 'small upload-error', hidden: true });
  /* shown while the job is queued or running: the server stops it between two pages and keeps nothing */
  const cancel = el('button', { class: 'link small upload-cancel', type: 'button', hidden: true }, t('cancelJob'));
  const [start, end] = nameParts(file.name);
  let timer = null;
  const row = el('li', { class: 'upload', title: file.name },
    el('div', { class: 'upload-head' },
      el('span', { class: 'upload-name', title: file.name }, el('span', { class: 'name-start' }, start), el('span', { class: 'name-end' }, end)),
      status, cancel,
      el('button', { class: 'upload-dismiss', type: 'button', title: t('dismiss'), 'aria-label': t('dismiss') + ' ' + file.name,
        onclick: () => { clearTimeout(timer); row.remove(); } }, '✕')),
    el('div', { class: 'bar', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-label': file.name }, bar),
    error);
  $('uploads').prepend(row);
  const ui = {
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
    done() { cancel.hidden = true; timer = setTimeout(() => row.remove(), 6000); },
    /* failed: the bar full and red, the reason in the page's language, the server's own words on hover */
    fail(code, detail, reason) {
      ui.cancellable(null);
      ui.progress(1);
      ui.status(t('failed'), 'failed');
      error.textContent = reason || errorText(code);
      error.hidden = false;
      error.title = detail || '';
      row.title = file.name + (detail ? '\n' + detail : '');
    },
  };
  return ui;
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
  xhr.onerror = () => ui.fail('network');
  xhr.onload = () => {
    let data = null;
    try { data = JSON.parse(xhr.responseText); } catch (e) { data = null; }
    if (xhr.status === 401) askToSignIn();
    if (xhr.status === 200 && data && data.duplicate) {
      ui.progress(1);
      ui.status(t('duplicate'), 'duplicate');
      ui.done();
      return;
    }
    if (xhr.status !== 202 || !data) {
      const e = apiError(xhr.status, data, xhr.statusText);
      ui.fail(e.code, e.message);
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
    try { job = await api('GET', '/api/v1/jobs/' + id); } catch (e) { ui.fail(e.code, e.message); return; }
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
      ui.fail(job.error_code || 'failed', job.error,
              serverMessage(state.lang, job.error_message_code, job.error_message_args, null));
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

/* ---- conversations (kept by the server, per key): listed, reopened, renamed, deleted ---------------------------- */

const convKey = () => 'cq.conv.' + state.kb;

function setConversation(id) {
  state.conversationId = id;
  if (id) localStorage.setItem(convKey(), String(id));
  else localStorage.removeItem(convKey());
  renderConvs();
}

async function loadConvs() {
  if (!state.kb) { state.convs = []; renderConvs(); return; }
  try {
    state.convs = (await api('GET', '/api/v1/conversations?kb=' + encodeURIComponent(state.kb))).conversations;
  } catch (e) {
    state.convs = [];
    if (e.status !== 401) toast(e.message, true);
  }
  renderConvs();
}

function formatTime(unix) {
  const d = new Date(unix * 1000);
  const sameDay = d.toDateString() === new Date().toDateString();
  return sameDay ? d.toLocaleTimeString(state.lang === 'zh' ? 'zh-CN' : 'en', { hour: '2-digit', minute: '2-digit' })
    : d.toLocaleDateString(state.lang === 'zh' ? 'zh-CN' : 'en');
}

function renderConvs() {
  $('conv-list').replaceChildren(...state.convs.map((c) => el('li', {
    class: 'conv' + (c.id === state.conversationId ? ' active' : ''), 'data-conv-id': c.id },
  el('button', { class: 'conv-open', type: 'button', title: c.title, onclick: () => openConversation(c.id) },
    el('span', { class: 'conv-title' }, c.title),
    el('span', { class: 'conv-meta' }, t('turns', c.turn_count) + ' · ' + formatTime(c.updated_at))),
  el('span', { class: 'conv-actions' },
    el('button', { class: 'conv-rename', type: 'button', title: t('rename'), 'aria-label': t('rename') + ' ' + c.title,
      onclick: () => renameConversation(c) }, t('rename')),
    el('button', { class: 'conv-delete', type: 'button', title: t('delete'), 'aria-label': t('delete') + ' ' + c.title,
      onclick: () => deleteConversation(c) }, '✕')))));
  $('convs-empty').hidden = state.convs.length > 0;
}

function restoreConversation() {
  const saved = Number(localStorage.getItem(convKey()));
  if (saved && state.convs.find((c) => c.id === saved)) openConversation(saved, true);
}

async function openConversation(id, quiet) {
  if (state.busy) return;
  let c;
  try { c = await api('GET', '/api/v1/conversations/' + id); } catch (e) {
    if (e.status === 404) {
      if (state.conversationId === id) newChat();
      if (!quiet) toast(t('convGone'), true);
      loadConvs();
    } else if (e.status !== 401) {
      toast(e.message, true);
    }
    return;
  }
  clearMessages();
  setConversation(c.id);
  for (const turn of c.turns) {
    addMessage('user', turn.question);
    const m = addMessage('assistant', '');
    if (turn.as_of) m.msg.dataset.asOf = turn.as_of; /* regenerate asks for the day it was answered for */
    renderAnswer(m, turn);
  }
  refreshActions();
  showPane('chat');
  const last = $('messages').lastElementChild;
  if (last && last !== welcomeNode) last.scrollIntoView({ block: 'end' });
}

async function renameConversation(c) {
  const title = (prompt(t('renamePrompt'), c.title) || '').trim();
  if (!title || title === c.title) return;
  try {
    await api('PATCH', '/api/v1/conversations/' + c.id, { title });
    await loadConvs();
  } catch (e) { toast(e.code ? errorText(e.code) + ': ' + e.message : e.message, true); }
}

async function deleteConversation(c) {
  if (!confirm(t('confirmDeleteConv', c.title))) return;
  try {
    await api('DELETE', '/api/v1/conversations/' + c.id);
    if (state.conversationId === c.id) newChat();
    await loadConvs();
  } catch (e) { toast(e.message, true); }
}

$('conv-new').addEventListener('click', () => { newChat(); showPane('chat'); $('question').focus(); });

/* ---- chat ----------------------------------------------------------------------------------------------------- */

function clearMessages() {
  if (state.controller) state.controller.abort();
  $('messages').replaceChildren(welcomeNode);
  closeDrawer();
}

function newChat() {
  clearMessages();
  setConversation(null);
}
$('new-chat').addEventListener('click', () => { newChat(); $('question').focus(); });

function citationLabel(c) {
  return c.doc + (c.clause ? ' ' + c.clause : '') + (c.page ? ' · p.' + c.page : '');
}

/* The version a citation rests on, in words, when it matters ("2018年修正, 已被取代"); '' when not. */
function citationVersion(c) {
  const v = c.version;
  return versionMatters(v) ? [v.label, t(v.status)].filter(Boolean).join(', ') : '';
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

/* An answer (the ask's final event, or a stored turn): text, abstention, how the question was read, the notice of a
 * generated answer that fell back to quoted text, the version it rests on, a comparison's diff, citations with their
 * versions, timings, and the copy / regenerate actions. */
function renderAnswer(m, a) {
  const { msg, body } = m;
  body.classList.remove('streaming');
  body.textContent = a.answer || '';
  msg.dataset.question = a.question || '';
  const choices = a.choices || [];
  if (a.abstained) {
    msg.classList.add('abstained');
    body.prepend(el('span', { class: 'badge warn' }, t(choices.length ? 'whichDocument' : 'abstained')), ' ');
  }
  /* a clause named without its document that several have: one button a document, asking the question of it */
  if (choices.length) {
    body.after(el('div', { class: 'choices' }, el('span', { class: 'muted small' }, t('choose')),
      choices.map((c) => el('button', { class: 'chip choice', type: 'button', title: c.question,
        onclick: () => { $('question').value = c.question; ask(); } }, c.document))));
  }
  if (a.resolved_question) msg.prepend(el('div', { class: 'resolved muted small' }, t('resolved') + a.resolved_question));
  if (a.notice) msg.insertBefore(el('div', { class: 'notice', role: 'note' }, '⚠ ' + a.notice), body);
  /* a short generated span: the sentence of its clause around it, muted under the answer */
  if (a.context && !a.abstained) body.after(el('div', { class: 'answer-context muted small' }, t('context') + a.context));
  /* the answer to a question about a day starts with the version it rests on: the notice is not said twice */
  if (a.version_notice && !(a.answer || '').startsWith(a.version_notice))
    body.after(el('div', { class: 'version-notice', role: 'note' }, a.version_notice));
  if (a.compare) {
    const cmp = a.compare;
    msg.append(el('div', { class: 'inline-compare' },
      (cmp.pairs || []).map(renderPair),
      el('button', { class: 'link small full-compare', type: 'button',
        onclick: () => openCompare(cmp.a.document_id, cmp.b.document_id, {}) }, t('fullCompare'))));
  }
  const citations = a.citations || [];
  if (citations.length) {
    msg.append(el('div', { class: 'cites' },
      el('span', { class: 'muted small' }, t('sources')),
      citations.map((c, i) => el('button', { class: 'chip cite', type: 'button', 'data-clause-id': c.clause_id,
        title: c.path || '', onclick: () => openClause(c.clause_id) }, '[' + (i + 1) + '] ' + citationLabel(c),
        versionMatters(c.version) ? versionBadge(c.version) : null))));
  }
  if (a.timings) {
    msg.append(el('div', { class: 'timing muted small' },
      t('timing', Math.round(a.timings.retrieve_ms), Math.round(a.timings.generate_ms))));
  }
  addActions(m, citations);
  if (window.cqOffice) window.cqOffice.onAnswer(m, a); /* feedback (office.js) */
}

function addActions(m, citations) {
  const copy = el('button', { class: 'copy', type: 'button' }, t('copy'));
  copy.addEventListener('click', () => copyAnswer(m, citations || [], copy));
  m.msg.append(el('div', { class: 'msg-actions' }, copy,
    el('button', { class: 'regen', type: 'button', onclick: () => regenerate(m) }, t('regenerate'))));
}

/* Regenerate belongs to the last answer only (the server replaces the conversation's last turn). */
function refreshActions() {
  const answers = [...document.querySelectorAll('.msg.assistant')];
  answers.forEach((a, i) => {
    const b = a.querySelector('.regen');
    if (b) b.hidden = i !== answers.length - 1 || state.busy;
  });
}

async function copyAnswer(m, citations, button) {
  const answer = m.body.textContent;
  const sources = citations.map((c, i) => '[' + (i + 1) + '] ' + citationLabel(c) + (c.path ? ' (' + c.path + ')' : '') +
    (citationVersion(c) ? ' — ' + citationVersion(c) : ''));
  const text = sources.length ? answer + '\n\n' + t('sources') + ':\n' + sources.join('\n') : answer;
  try {
    await navigator.clipboard.writeText(text);
  } catch (e) { /* no clipboard API (not a secure context): the old way */
    const area = el('textarea', { style: 'position:fixed;opacity:0' });
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand('copy');
    area.remove();
  }
  button.textContent = t('copied');
  setTimeout(() => { button.textContent = t('copy'); }, 2000);
}

function regenerate(m) {
  const question = m.msg.dataset.question;
  if (!question || state.busy) return;
  m.msg.remove();
  ask({ question, regenerate: true, asOf: m.msg.dataset.asOf || '' });
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

function renderAskButton() {
  const b = $('ask-button');
  b.textContent = t(state.busy ? 'stop' : 'send');
  b.classList.toggle('stop', state.busy);
  b.setAttribute('aria-label', t(state.busy ? 'stop' : 'send'));
}

function setBusy(busy) {
  state.busy = busy;
  renderAskButton();
  refreshActions();
}

/* What the server is doing while the answer is not written yet (its "stage" events). */
function showStage(body, ev) {
  const label = t('stages')[ev.stage] || '…';
  body.replaceChildren(el('span', { class: 'stage' }, label + (ev.retrieve_ms !== undefined ? ' (' + t('retrieved', Math.round(ev.retrieve_ms)) + ')' : '')));
}

/* Asks the question in the box (or opts.question again, in place of the last answer, with opts.regenerate, for the
 * day opts.asOf) in the conversation on screen, as of the day in the as-of box; the answer streams in, stop aborts
 * it. */
async function ask(opts) {
  const input = $('question');
  const again = !!(opts && opts.regenerate);
  const question = again ? opts.question : input.value.trim();
  const asOf = again ? opts.asOf : $('as-of').value;
  if (!question || state.busy) return;
  if (!state.kb) { toast(t('noKb'), true); return; }
  const controller = new AbortController();
  state.controller = controller;
  setBusy(true);
  if (!again) {
    input.value = '';
    autosize();
    addMessage('user', question);
  }
  const m = addMessage('assistant', '');
  const { msg, body } = m;
  msg.dataset.question = question;
  if (asOf) msg.dataset.asOf = asOf;
  body.classList.add('streaming');
  let text = '', started = false, citations = [], done = null;
  try {
    const req = { question };
    if (state.conversationId) req.conversation_id = state.conversationId;
    if (again && state.conversationId) req.regenerate = true;
    if (asOf) req.as_of = asOf;
    const res = await fetch(kbPath(state.kb) + '/ask', {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/json', Accept: 'text/event-stream' }),
      body: JSON.stringify(req),
      signal: controller.signal,
    });
    if (res.status === 401) askToSignIn();
    if (!res.ok) {
      let data = null;
      try { data = await res.json(); } catch (e) { data = null; }
      throw apiError(res.status, data, res.statusText);
    }
    await readEvents(res, (name, data) => {
      if (name === 'conversation') {
        setConversation(data.conversation_id);
      } else if (name === 'stage') {
        if (!started) showStage(body, data);
      } else if (name === 'token') {
        if (!started) { body.textContent = ''; started = true; }
        text += data.text;
        body.textContent = text;
        msg.scrollIntoView({ block: 'end' });
      } else if (name === 'citations') {
        citations = data.citations;
      } else if (name === 'done') {
        done = data;
      } else if (name === 'error') {
        throw apiError(data.error.status, data, data.error.message);
      }
    });
    if (!done) throw apiError(0, null, t('errors').network);
    done.citations = citations;
    renderAnswer(m, done);
    /* the answer is read from its sources: bring them (and the actions under them) into view */
    msg.querySelector('.msg-actions').scrollIntoView({ block: 'end', behavior: 'smooth' });
  } catch (e) {
    body.classList.remove('streaming');
    if (e.name === 'AbortError') {
      msg.classList.add('stopped');
      if (!started) body.textContent = '';
      body.append(' ', el('span', { class: 'badge warn' }, t('stopped')));
      addActions(m, []);
    } else {
      body.textContent = t('failedAsk') + (e.code && e.code !== 'failed' ? errorText(e.code) + ' — ' : '') + e.message;
      msg.classList.add('error');
    }
  } finally {
    if (state.controller === controller) state.controller = null;
    setBusy(false);
    loadConvs();
    if (document.activeElement === document.body || document.activeElement === $('ask-button')) input.focus();
  }
}

$('ask-form').addEventListener('submit', (e) => {
  e.preventDefault();
  if (state.busy) { if (state.controller) state.controller.abort(); } else ask();
});
function autosize() {
  const q = $('question');
  q.style.height = 'auto';
  q.style.height = Math.min(q.scrollHeight + 2, 180) + 'px';
  q.style.overflowY = q.scrollHeight > 178 ? 'auto' : 'hidden';
}
$('question').addEventListener('input', autosize);
$('question').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); if (!state.busy) ask(); }
});

/* ---- the clause drawer (on a phone: the page pane) ------------------------------------------------------------ */

async function openClause(id) {
  let c;
  try { c = await api('GET', '/api/v1/clauses/' + id); } catch (e) { toast(e.message, true); return; }
  state.clause = c;
  $('drawer-doc').textContent = c.doc + (c.title && c.title !== c.doc ? ' · ' + c.title : '');
  $('drawer-title').textContent = c.clause || c.path || c.doc;
  $('drawer-path').textContent = c.path || '';
  $('drawer-text').textContent = c.text;
  const v = c.version, line = $('drawer-version');
  line.hidden = !versionMatters(v);
  if (versionMatters(v)) {
    line.replaceChildren(...[versionBadge(v), v.label || '', v.effective ? ' · ' + t('effectiveFrom', v.effective) : '',
      v.previous ? el('button', { class: 'link small', type: 'button',
        onclick: () => openCompare(v.previous.document_id, c.document_id, { clauseId: c.clause_id }) },
        t('compareWith', t('previousVersion') + ' ' + v.previous.label)) : null,
      v.next ? el('button', { class: 'link small', type: 'button',
        onclick: () => openCompare(c.document_id, v.next.document_id, { clauseId: c.clause_id }) },
        t('compareWith', t('nextVersion') + ' ' + v.next.label)) : null].filter((x) => x !== null));
  }
  /* the original is offered for every document: for Word, HTML, Markdown and text it is the only "page" there is */
  $('drawer-original').href = '/api/v1/documents/' + c.document_id + '/original';
  /* a search inside another document is over: its results would open clauses of that one */
  if (state.searchDoc !== c.document_id) clearDocSearch();
  state.searchDoc = c.document_id;
  markSearchHit();
  const hasPage = !!c.page_image_url;
  $('page-view').hidden = !hasPage;
  openDrawer();
  if (hasPage) showPage(c.page);
}

/* ---- search inside the cited document (GET /api/v1/documents/{id}/search): a hit opens its clause ---- */

function clearDocSearch() {
  $('doc-search-q').value = '';
  state.docSearch = null;
  renderDocSearch();
}

function markSearchHit() {
  const id = state.clause && state.clause.clause_id;
  $('doc-search-results').querySelectorAll('li').forEach((li) => {
    li.classList.toggle('current', Number(li.dataset.clause) === id);
  });
}

async function searchDoc() {
  const c = state.clause, q = $('doc-search-q').value.trim();
  if (!c || !q) return clearDocSearch();
  let data;
  try {
    data = await api('GET', '/api/v1/documents/' + c.document_id + '/search?q=' + encodeURIComponent(q));
  } catch (e) { toast(e.message, true); return; }
  if (!state.clause || state.clause.document_id !== data.document_id) return; /* the drawer moved on meanwhile */
  state.docSearch = data;
  renderDocSearch();
}

/* the last search's hits (state.docSearch, the server's answer), in the page's language */
function renderDocSearch() {
  const data = state.docSearch, status = $('doc-search-status'), list = $('doc-search-results');
  status.hidden = !data;
  list.hidden = !data || !data.clauses.length;
  if (!data) { list.replaceChildren(); return; }
  status.textContent = data.clauses.length ? t('hits', data.clauses.length, data.q) + (data.more ? ' · ' +
    t('moreHits', data.clauses.length) : '') : t('noHits', data.q);
  list.replaceChildren(...data.clauses.map((h) => el('li', { 'data-clause': h.clause_id },
    el('button', { type: 'button', onclick: () => openClause(h.clause_id) },
      (h.clause || h.path || '#' + h.clause_id) + (h.clause && h.path && h.path !== h.clause ? ' · ' + h.path : '') +
      (h.page ? ' · p.' + h.page : '')))));
  markSearchHit();
}
$('doc-search').addEventListener('submit', (e) => { e.preventDefault(); searchDoc(); });

function openDrawer() {
  const d = $('drawer');
  d.classList.add('open');
  d.setAttribute('aria-hidden', 'false');
  renderTabs();
  $('drawer-close').focus();
}

const ZOOMS = [1, 1.5, 2, 3];

/* outside the clause's pages, where the clause is; true on them */
function renderPageLabel() {
  const c = state.clause, n = state.page, first = c.page, last = c.page_last || c.page;
  const onClause = n >= first && n <= last;
  $('page-label').textContent = onClause ? '' : t('clauseOn', last > first ? first + '–' + last : first);
  return onClause;
}

/* A page whose text is doubtful (a low-confidence OCR page) says so above its image, the server's words on hover:
 * the clause's pages from the clause, the others from the document's page_quality (fetched once per document, when
 * the viewer first leaves the clause's pages). */
const PAGE_QUALITY_WARN = 0.8; /* as the server's CQ_PAGE_QUALITY_WARN */
async function showPageWarning(c, n) {
  let warning = (c.page_warnings || []).find((w) => w.page === n);
  if (!warning && (n < c.page || n > (c.page_last || c.page))) {
    if (!state.docQuality || state.docQuality.id !== c.document_id) {
      state.docQuality = { id: c.document_id, pages: api('GET', '/api/v1/documents/' + c.document_id)
        .then((d) => d.page_quality || [], () => []) };
    }
    const pages = await state.docQuality.pages;
    const p = pages.find((x) => x.page === n);
    if (p && p.quality < PAGE_QUALITY_WARN) warning = { page: n, quality: p.quality, reason: p.reason };
  }
  if (state.clause !== c || state.page !== n) return; /* the viewer moved on meanwhile */
  $('page-warning').hidden = !warning;
  $('page-warning').textContent = warning ? '⚠ ' + t('pageWarn', warning.quality.toFixed(2)) : '';
  $('page-warning').title = warning ? warning.reason : '';
}

async function showPage(n) {
  const c = state.clause;
  /* every page of the document, not only the clause's; the clause stays highlighted on its own pages */
  const first = c.page, last = c.page_last || c.page, total = Math.max(c.doc_pages || 0, last);
  n = Math.min(Math.max(1, Math.round(n) || first), total);
  state.page = n;
  const onClause = renderPageLabel();
  $('page-input').value = n;
  $('page-input').max = total;
  $('page-count').textContent = '/ ' + total;
  $('page-clause').hidden = onClause;
  $('page-prev').disabled = n <= 1;
  $('page-next').disabled = n >= total;
  showPageWarning(c, n);
  $('zoom-label').textContent = Math.round(state.zoom * 100) + '%';
  $('zoom-out').disabled = state.zoom <= ZOOMS[0];
  $('zoom-in').disabled = state.zoom >= ZOOMS[ZOOMS.length - 1];
  const img = $('page-image');
  img.style.width = state.zoom * 100 + '%';
  const frame = $('page-frame').clientWidth || $('drawer').clientWidth || 700;
  const width = Math.min(2400, Math.max(100, Math.round(frame * state.zoom * (window.devicePixelRatio || 1))));
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
  const scale = size ? img.clientWidth / size.width : 0;
  frame.scrollTop = box && size ? Math.max(0, box.y0 * scale - 60) : 0;
  frame.scrollLeft = box && size ? Math.max(0, box.x0 * scale - 20) : 0;
});

$('page-prev').addEventListener('click', () => showPage(state.page - 1));
$('page-next').addEventListener('click', () => showPage(state.page + 1));
$('page-clause').addEventListener('click', () => showPage(state.clause.page));
/* the page number typed: shown on Enter or when the field is left (an emptied field waits for a number) */
function jumpToTypedPage() {
  const v = $('page-input').value.trim();
  if (v !== '' && Number(v) !== state.page) showPage(Number(v));
}
$('page-input').addEventListener('change', jumpToTypedPage);
$('page-input').addEventListener('keydown', (e) => {
  if (e.key === 'Enter') { e.preventDefault(); jumpToTypedPage(); }
});
function zoom(step) {
  const i = ZOOMS.indexOf(state.zoom) + step;
  if (i < 0 || i >= ZOOMS.length) return;
  state.zoom = ZOOMS[i];
  showPage(state.page);
}
$('zoom-in').addEventListener('click', () => zoom(1));
$('zoom-out').addEventListener('click', () => zoom(-1));

function closeDrawer() {
  const d = $('drawer');
  if (!d.classList.contains('open')) return;
  d.classList.remove('open');
  d.setAttribute('aria-hidden', 'true');
  renderTabs();
}
$('drawer-close').addEventListener('click', closeDrawer);
$('drawer-back').addEventListener('click', closeDrawer);

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
$('key-button').addEventListener('click', () => askToSignIn());

PHONE.addEventListener('change', applyLanguage);
showSide(state.side);
applyLanguage();
loadKbs();
