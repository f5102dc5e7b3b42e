/* clauseqa page, the admin page (issue 30): users (add with a password, role and KBs; disable, enable, reset the
 * password, remove), groups (add, remove, members), who reaches a KB (grant and take back, to a user or a group) and
 * API keys (create: the secret shown once; list; revoke). Only for admins: the button shows for an admin, and the
 * server refuses everyone else (docs/API.md "User management"). Loaded after app.js and office.js, whose helpers it
 * uses (state, api, el, t, toast, $ …). */
'use strict';

Object.assign(I18N.zh, {
  admin: '管理', adminTitle: '用户与权限', adminHelp: '用户、用户组、知识库授权与 API 密钥（所有修改都记入审计记录）',
  admUsers: '用户', admGroups: '用户组', admGrants: '知识库授权', admKeys: 'API 密钥',
  admName: '名称', admRole: '角色', admKbs: '知识库', admGroupsCol: '所在组', admStatus: '状态', admMembers: '成员',
  admLastUse: '最近使用', admLastSignIn: '最近登录', admSource: '来源', admPassword: '密码', admNewPassword: '新密码', admAdd: '添加', admCreate: '创建',
  admRemove: '删除', admDisable: '停用', admEnable: '启用', admRevoke: '吊销', admSetPassword: '重设密码',
  admActive: '正常', admDisabled: '已停用', admRevoked: '已吊销', admDirectory: '目录', admLocal: '本地',
  admKbsHint: '知识库名称，用逗号分隔；* 表示全部（管理员不填）', admUser: '用户', admGroup: '用户组',
  admMember: '成员（用户名）', admAddMember: '加入', admRemoveMember: '移出', admGrant: '授权', admTakeBack: '收回',
  admSubject: '对象', admKeyOnce: '新密钥（只显示这一次，请现在复制）：', admEveryKb: '全部知识库',
  admConfirmRemove: '删除 {0}？', admConfirmRevoke: '吊销密钥 {0}？', admDone: '已保存', never: '从未',
  admNone: '（无）',
});
Object.assign(I18N.en, {
  admin: 'Admin', adminTitle: 'Users and access', adminHelp: 'Users, groups, KB grants and API keys (every change goes to the audit trail)',
  admUsers: 'Users', admGroups: 'Groups', admGrants: 'KB grants', admKeys: 'API keys',
  admName: 'Name', admRole: 'Role', admKbs: 'KBs', admGroupsCol: 'Groups', admStatus: 'Status', admMembers: 'Members',
  admLastUse: 'Last used', admLastSignIn: 'Last sign-in', admSource: 'Source', admPassword: 'Password', admNewPassword: 'New password', admAdd: 'Add', admCreate: 'Create',
  admRemove: 'Remove', admDisable: 'Disable', admEnable: 'Enable', admRevoke: 'Revoke', admSetPassword: 'Reset password',
  admActive: 'active', admDisabled: 'disabled', admRevoked: 'revoked', admDirectory: 'directory', admLocal: 'local',
  admKbsHint: 'KB names, separated by commas; * for every KB (none for admins)', admUser: 'User', admGroup: 'Group',
  admMember: 'Member (user name)', admAddMember: 'Add', admRemoveMember: 'Take out', admGrant: 'Grant',
  admTakeBack: 'Take back', admSubject: 'To', admKeyOnce: 'The new key (shown this once: copy it now):',
  admEveryKb: 'every KB', admConfirmRemove: 'Remove {0}?', admConfirmRevoke: 'Revoke key {0}?', admDone: 'Saved',
  never: 'never', admNone: '(none)',
});

const ROLES = ['reader', 'editor', 'admin'];

function roleSelect(id) {
  return el('select', { id, class: 'adm-role' }, ROLES.map((r) => el('option', { value: r }, t('roles')[r] || r)));
}

function kbsText(kbs) {
  if (kbs === '*') return t('admEveryKb');
  return Array.isArray(kbs) && kbs.length ? kbs.join(', ') : t('admNone');
}

/* "laws, 合同" → ["laws", "合同"]; "*" → "*"; "" → undefined (none: an admin) */
function kbsValue(text) {
  const s = text.trim();
  if (!s) return undefined;
  if (s === '*') return '*';
  return s.split(/[,，、]/).map((x) => x.trim()).filter(Boolean);
}

const whenText = (s) => (s ? new Date(s * 1000).toLocaleString(state.lang === 'zh' ? 'zh-CN' : 'en') : t('never'));
const enc = encodeURIComponent;

function table(id, cols, rows) {
  return el('table', { id, class: 'audit-table adm-table small' },
    el('thead', {}, el('tr', {}, cols.map((k) => el('th', {}, k ? t(k) : '')))),
    el('tbody', {}, rows));
}

function field(labelKey, input) {
  return el('label', { class: 'adm-field small' }, el('span', {}, t(labelKey)), input);
}

/* Runs an admin request; on success reloads the tab, on failure shows the server's reason (in the page's language). */
async function adminDo(method, path, body, after) {
  try {
    const data = await api(method, path, body);
    if (after) after(data);
    await renderAdminTab();
    return data;
  } catch (e) {
    toast(e.message, true);
    $('admin-error').textContent = e.message;
    $('admin-error').hidden = false;
    return null;
  }
}

const adminState = { tab: 'users', grantKb: '' };

async function usersTab() {
  const { users } = await api('GET', '/api/v1/users');
  const rows = users.map((u) => el('tr', { class: 'adm-user', 'data-name': u.name },
    el('td', {}, u.name), el('td', {}, t('roles')[u.role] || u.role), el('td', {}, kbsText(u.kbs)),
    el('td', {}, u.groups.join(', ')), el('td', {}, u.source === 'ldap' ? t('admDirectory') : t('admLocal')),
    el('td', { class: 'adm-status' }, u.disabled ? t('admDisabled') : t('admActive')),
    el('td', {}, whenText(u.last_login_at)),
    el('td', { class: 'adm-actions' },
      el('button', { class: 'link adm-toggle', type: 'button',
        onclick: () => adminDo('PATCH', '/api/v1/users/' + enc(u.name), { disabled: !u.disabled }) },
      u.disabled ? t('admEnable') : t('admDisable')),
      el('button', { class: 'link danger-text adm-remove', type: 'button',
        onclick: () => window.confirm(t('admConfirmRemove', u.name)) &&
          adminDo('DELETE', '/api/v1/users/' + enc(u.name)) }, t('admRemove')))));
  const add = el('form', { id: 'adm-user-form', class: 'adm-form' },
    field('admName', el('input', { id: 'adm-user-name', required: true, autocomplete: 'off' })),
    field('admPassword', el('input', { id: 'adm-user-password', type: 'password', required: true,
      autocomplete: 'new-password' })),
    field('admRole', roleSelect('adm-user-role')),
    field('admKbs', el('input', { id: 'adm-user-kbs', placeholder: t('admKbsHint'), title: t('admKbsHint') })),
    el('button', { class: 'primary', type: 'submit', id: 'adm-user-add' }, t('admAdd')));
  add.addEventListener('submit', (ev) => {
    ev.preventDefault();
    adminDo('POST', '/api/v1/users', { name: $('adm-user-name').value.trim(), password: $('adm-user-password').value,
      role: $('adm-user-role').value, kbs: kbsValue($('adm-user-kbs').value) });
  });
  const reset = el('form', { id: 'adm-passwd-form', class: 'adm-form' },
    field('admUser', el('select', { id: 'adm-passwd-user' },
      users.filter((u) => u.source !== 'ldap').map((u) => el('option', { value: u.name }, u.name)))),
    field('admNewPassword', el('input', { id: 'adm-passwd-new', type: 'password', required: true,
      autocomplete: 'new-password' })),
    el('button', { class: 'ghost', type: 'submit' }, t('admSetPassword')));
  reset.addEventListener('submit', (ev) => {
    ev.preventDefault();
    adminDo('PUT', '/api/v1/users/' + enc($('adm-passwd-user').value) + '/password',
      { password: $('adm-passwd-new').value }, () => toast(t('admDone')));
  });
  return [table('adm-users', ['admName', 'admRole', 'admKbs', 'admGroupsCol', 'admSource', 'admStatus', 'admLastSignIn', ''], rows),
    add, reset];
}

async function groupsTab() {
  const { groups } = await api('GET', '/api/v1/groups');
  const details = await Promise.all(groups.map((g) => api('GET', '/api/v1/groups/' + enc(g.name))));
  const rows = details.map((g) => el('tr', { class: 'adm-group', 'data-name': g.name },
    el('td', {}, g.name), el('td', {}, t('roles')[g.role] || g.role), el('td', {}, kbsText(g.kbs)),
    el('td', { class: 'adm-members' }, g.member_list.map((m) => m.user + (m.source === 'ldap' ? ' (' + t('admDirectory') + ')' : '')).join(', ')),
    el('td', {}, el('button', { class: 'link danger-text adm-remove', type: 'button',
      onclick: () => window.confirm(t('admConfirmRemove', g.name)) &&
        adminDo('DELETE', '/api/v1/groups/' + enc(g.name)) }, t('admRemove')))));
  const add = el('form', { id: 'adm-group-form', class: 'adm-form' },
    field('admName', el('input', { id: 'adm-group-name', required: true, autocomplete: 'off' })),
    field('admRole', roleSelect('adm-group-role')),
    field('admKbs', el('input', { id: 'adm-group-kbs', placeholder: t('admKbsHint'), title: t('admKbsHint') })),
    el('button', { class: 'primary', type: 'submit' }, t('admAdd')));
  add.addEventListener('submit', (ev) => {
    ev.preventDefault();
    adminDo('POST', '/api/v1/groups', { name: $('adm-group-name').value.trim(), role: $('adm-group-role').value,
      kbs: kbsValue($('adm-group-kbs').value) });
  });
  const member = el('form', { id: 'adm-member-form', class: 'adm-form' },
    field('admGroup', el('select', { id: 'adm-member-group' }, groups.map((g) => el('option', { value: g.name }, g.name)))),
    field('admMember', el('input', { id: 'adm-member-user', required: true, autocomplete: 'off' })),
    el('button', { class: 'ghost', type: 'submit', id: 'adm-member-add' }, t('admAddMember')),
    el('button', { class: 'ghost', type: 'button', id: 'adm-member-remove', onclick: () =>
      adminDo('DELETE', '/api/v1/groups/' + enc($('adm-member-group').value) + '/members/' +
        enc($('adm-member-user').value.trim())) }, t('admRemoveMember')));
  member.addEventListener('submit', (ev) => {
    ev.preventDefault();
    adminDo('PUT', '/api/v1/groups/' + enc($('adm-member-group').value) + '/members/' +
      enc($('adm-member-user').value.trim()));
  });
  return [table('adm-groups', ['admName', 'admRole', 'admKbs', 'admMembers', ''], rows), add, member];
}

async function grantsTab() {
  const kbs = (await api('GET', '/api/v1/kbs')).kbs.map((k) => k.name);
  if (!kbs.includes(adminState.grantKb)) adminState.grantKb = kbs.includes(state.kb) ? state.kb : kbs[0] || '';
  const pick = el('select', { id: 'adm-grant-kb', onchange: (e) => { adminState.grantKb = e.target.value; renderAdminTab(); } },
    kbs.map((k) => el('option', { value: k, selected: k === adminState.grantKb }, k)));
  const parts = [el('div', { class: 'adm-form' }, field('kb', pick))];
  if (!adminState.grantKb) return parts;
  const g = await api('GET', '/api/v1/kbs/' + enc(adminState.grantKb) + '/grants');
  const rows = [];
  for (const [kind, list] of [['admUser', g.users], ['admGroup', g.groups], ['admKeys', g.keys]]) {
    for (const x of list) {
      rows.push(el('tr', { class: 'adm-grant', 'data-kind': kind, 'data-name': x.name },
        el('td', {}, t(kind)), el('td', {}, x.name), el('td', {}, t('roles')[x.role] || x.role),
        el('td', {}, x.every_kb ? t('admEveryKb') : adminState.grantKb)));
    }
  }
  const form = el('form', { id: 'adm-grant-form', class: 'adm-form' },
    field('admSubject', el('select', { id: 'adm-grant-kind' },
      el('option', { value: 'user' }, t('admUser')), el('option', { value: 'group' }, t('admGroup')))),
    field('admName', el('input', { id: 'adm-grant-name', required: true, autocomplete: 'off' })),
    el('button', { class: 'primary', type: 'submit', id: 'adm-grant-add' }, t('admGrant')),
    el('button', { class: 'ghost', type: 'button', id: 'adm-grant-remove', onclick: () =>
      adminDo('DELETE', grantPath()) }, t('admTakeBack')));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); adminDo('PUT', grantPath()); });
  parts.push(table('adm-grants', ['admSubject', 'admName', 'admRole', 'admKbs'], rows), form);
  return parts;
}

const grantPath = () => '/api/v1/kbs/' + enc(adminState.grantKb) + '/grants/' + $('adm-grant-kind').value + '/' +
  enc($('adm-grant-name').value.trim());

async function keysTab() {
  const { keys } = await api('GET', '/api/v1/keys');
  const rows = keys.map((k) => el('tr', { class: 'adm-key', 'data-id': k.id },
    el('td', {}, String(k.id)), el('td', {}, k.name), el('td', { class: 'mono' }, k.prefix + '…'),
    el('td', {}, t('roles')[k.role] || k.role), el('td', {}, kbsText(k.kbs)), el('td', {}, whenText(k.last_used_at)),
    el('td', { class: 'adm-status' }, k.revoked ? t('admRevoked') : t('admActive')),
    el('td', {}, k.revoked ? null : el('button', { class: 'link danger-text adm-revoke', type: 'button',
      onclick: () => window.confirm(t('admConfirmRevoke', k.name)) && adminDo('DELETE', '/api/v1/keys/' + k.id) },
    t('admRevoke')))));
  const form = el('form', { id: 'adm-key-form', class: 'adm-form' },
    field('admName', el('input', { id: 'adm-key-name', autocomplete: 'off' })),
    field('admRole', roleSelect('adm-key-role')),
    field('admKbs', el('input', { id: 'adm-key-kbs', placeholder: t('admKbsHint'), title: t('admKbsHint') })),
    el('button', { class: 'primary', type: 'submit', id: 'adm-key-create' }, t('admCreate')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    adminDo('POST', '/api/v1/keys', { name: $('adm-key-name').value.trim() || undefined, role: $('adm-key-role').value,
      kbs: kbsValue($('adm-key-kbs').value) }, (k) => { adminState.newKey = k.key; });
  });
  const parts = [];
  if (adminState.newKey) { /* shown once: gone when the tab is drawn again */
    parts.push(el('div', { id: 'adm-new-key', class: 'notice adm-new-key' }, t('admKeyOnce') + ' ',
      el('code', { class: 'mono' }, adminState.newKey)));
    adminState.newKey = null;
  }
  parts.push(table('adm-keys', ['', 'admName', '', 'admRole', 'admKbs', 'admLastUse', 'admStatus', ''], rows), form);
  return parts;
}

const ADMIN_TABS = { users: usersTab, groups: groupsTab, grants: grantsTab, keys: keysTab };

async function renderAdminTab() {
  document.querySelectorAll('.adm-tab').forEach((b) => b.setAttribute('aria-selected', String(b.dataset.tab === adminState.tab)));
  try {
    const parts = await ADMIN_TABS[adminState.tab]();
    $('admin-pane').replaceChildren(...parts);
  } catch (e) {
    $('admin-pane').replaceChildren(el('p', { class: 'form-error' }, e.message));
  }
}

document.body.append(el('dialog', { id: 'admin-dialog', class: 'compare-dialog admin-dialog', 'aria-labelledby': 'admin-title' },
  el('div', { class: 'compare-head' },
    el('div', {}, el('h3', { id: 'admin-title', 'data-i18n': 'adminTitle' }, t('adminTitle')),
      el('div', { class: 'small muted', 'data-i18n': 'adminHelp' }, t('adminHelp'))),
    el('button', { id: 'admin-close', class: 'ghost icon', type: 'button', 'aria-label': 'close' }, '✕')),
  el('div', { class: 'adm-tabs', role: 'tablist' },
    [['users', 'admUsers'], ['groups', 'admGroups'], ['grants', 'admGrants'], ['keys', 'admKeys']].map(([tab, k]) =>
      el('button', { class: 'adm-tab ghost', type: 'button', role: 'tab', 'data-tab': tab, 'data-i18n': k,
        id: 'adm-tab-' + tab }, t(k)))),
  el('p', { id: 'admin-error', class: 'form-error small', role: 'alert', hidden: true }),
  el('div', { id: 'admin-pane', class: 'audit-body adm-pane' })));

$('audit-button').before(el('button', { id: 'admin-button', class: 'ghost', type: 'button', 'data-i18n': 'admin',
  hidden: true }, t('admin')));

document.querySelectorAll('.adm-tab').forEach((b) => b.addEventListener('click', () => {
  adminState.tab = b.dataset.tab;
  $('admin-error').hidden = true;
  renderAdminTab();
}));
$('admin-button').addEventListener('click', async () => {
  $('admin-error').hidden = true;
  await renderAdminTab();
  $('admin-dialog').showModal();
});
$('admin-close').addEventListener('click', () => $('admin-dialog').close());

/* the button follows who is signed in: admins only (the server refuses the others anyway) */
const baseRenderMe = renderMe;
renderMe = function () { /* eslint-disable-line no-global-assign */
  baseRenderMe();
  $('admin-button').hidden = !(state.me && state.me.role === 'admin');
};
const adminBaseApplyLanguage = applyLanguage;
applyLanguage = function () { /* eslint-disable-line no-global-assign */
  adminBaseApplyLanguage();
  if ($('admin-dialog').open) renderAdminTab();
};
renderMe();
