#!/usr/bin/python3
"""The admin page (issue 30), in headless Chromium: a reader sees no admin button (and the server refuses the admin
API to her); an admin opens it and, in Chinese then English: adds a user (a short password refused with the
reason in the page's language), disables them, adds a group and a member, grants a KB to the group, creates an API
key (shown once: it works, and is gone when the tab is drawn again) and revokes it (it stops working); the changes
are in the audit trail; dark mode reaches the admin page's fields.
Skips (77) without Selenium or Chromium.

usage: test_browser_admin.py path/to/clauseqa"""
import os
import sqlite3
import sys
import time

from chromium import OUT, By, session, waiter  # skips (77) without Chromium
from selenium.webdriver.support.expected_conditions import staleness_of
from http_server import Checks, Server

T = Checks('test_browser_admin')
check = T.check
wait = waiter(check)


def dialog_open(d, id_='signin-dialog'):
    return d.find_element(By.ID, id_).get_attribute('open') is not None


def shown(driver, id_):
    els = driver.find_elements(By.ID, id_)
    return bool(els) and els[0].is_displayed()


def sign_in(driver, user, password):
    wait(driver, dialog_open, f'the sign-in dialog is open for {user}')
    for field, value in (('signin-user', user), ('signin-password', password)):
        e = driver.find_element(By.ID, field)
        e.clear()
        e.send_keys(value)
    driver.find_element(By.ID, 'signin-submit').click()
    wait(driver, lambda d: not dialog_open(d), f'{user} signs in')


def fill(driver, values):
    for id_, value in values.items():
        e = driver.find_element(By.ID, id_)
        if e.tag_name == 'select':
            driver.execute_script('arguments[0].value = arguments[1]', e, value)
        else:
            e.clear()
            e.send_keys(value)


def rows(driver, css):
    return [r.text for r in driver.find_elements(By.CSS_SELECTOR, css)]


def tab(driver, name):
    driver.find_element(By.ID, 'adm-tab-' + name).click()


def main():
    s = Server(sys.argv[1])
    with session(s, check, 'admin') as driver:
        s.post('/api/v1/kbs', {'name': 'laws'}, key=None)
        s.post('/api/v1/kbs', {'name': 'other'}, key=None)
        for name, args in (('root', ['--role', 'admin']), ('rd', ['--kb', 'laws'])):
            r = s.cli('user', 'add', name, *args, input_text=f'password of {name}\n')
            check(f'user add {name}', r.returncode == 0, r.stderr)
        time.sleep(1.2)  # the server re-reads whether authentication is on at most once a second
        base = f'http://127.0.0.1:{s.port}/'
        driver.get(base)
        driver.execute_script("localStorage.setItem('cq.lang', 'zh'); localStorage.removeItem('cq.key');"
                              "localStorage.setItem('cq.theme', 'light')")
        driver.get(base)

        # a reader: no admin button, and the server refuses her the admin API
        sign_in(driver, 'rd', 'password of rd')
        wait(driver, lambda d: shown(d, 'me'), 'the reader is shown')
        check('a reader sees no admin button', not shown(driver, 'admin-button'))
        status = driver.execute_async_script(
            "const done = arguments[0]; fetch('/api/v1/users').then((r) => done(r.status))")
        check('...and the server refuses her the admin API (403)', status == 403, status)
        driver.find_element(By.ID, 'signout-button').click()

        # the admin
        sign_in(driver, 'root', 'password of root')
        wait(driver, lambda d: shown(d, 'admin-button'), 'an admin sees the admin button')
        check('in Chinese', driver.find_element(By.ID, 'admin-button').text == '管理')
        driver.find_element(By.ID, 'admin-button').click()
        wait(driver, lambda d: dialog_open(d, 'admin-dialog'), 'the admin page opens')
        users = wait(driver, lambda d: rows(d, '#adm-users .adm-user'), 'the users are listed')
        check('root and rd listed', users and [u.split()[0] for u in users] == ['root', 'rd'], users)

        # a short password: refused, the reason in Chinese
        fill(driver, {'adm-user-name': '王芳', 'adm-user-password': 'short', 'adm-user-role': 'editor',
                      'adm-user-kbs': 'laws'})
        driver.find_element(By.ID, 'adm-user-add').click()
        err = wait(driver, lambda d: shown(d, 'admin-error') and d.find_element(By.ID, 'admin-error').text,
                   'a short password is refused')
        check('the reason in Chinese', err == '密码太短：至少 8 个字符', err)
        check('nothing added', len(rows(driver, '#adm-users .adm-user')) == 2)
        fill(driver, {'adm-user-password': 'eight chars'})
        driver.find_element(By.ID, 'adm-user-add').click()
        wait(driver, lambda d: any(u.startswith('王芳') for u in rows(d, '#adm-users .adm-user')), 'the user is added')
        row = driver.find_element(By.CSS_SELECTOR, '#adm-users .adm-user[data-name="王芳"]')
        check('as an editor of laws', '编辑' in row.text and 'laws' in row.text, row.text)
        check('she signs in', s.post('/api/v1/login', {'user': '王芳', 'password': 'eight chars'}, key=None,
                                     headers={'Origin': base.rstrip('/')}).status == 200)
        row.find_element(By.CSS_SELECTOR, '.adm-toggle').click()
        wait(driver, lambda d: '已停用' in d.find_element(
            By.CSS_SELECTOR, '#adm-users .adm-user[data-name="王芳"] .adm-status').text, 'disabled')
        check('...and then cannot', s.post('/api/v1/login', {'user': '王芳', 'password': 'eight chars'}, key=None,
                                           headers={'Origin': base.rstrip('/')}).status == 401)

        # groups and a member
        tab(driver, 'groups')
        wait(driver, lambda d: shown(d, 'adm-group-form'), 'the groups tab')
        fill(driver, {'adm-group-name': 'staff', 'adm-group-role': 'editor', 'adm-group-kbs': 'other'})
        driver.find_element(By.CSS_SELECTOR, '#adm-group-form button[type=submit]').click()
        wait(driver, lambda d: rows(d, '#adm-groups .adm-group'), 'the group is added')
        fill(driver, {'adm-member-group': 'staff', 'adm-member-user': 'rd'})
        driver.find_element(By.ID, 'adm-member-add').click()
        wait(driver, lambda d: 'rd' in (rows(d, '#adm-groups .adm-members') or [''])[0] if
             d.find_elements(By.CSS_SELECTOR, '#adm-groups .adm-members') else False, 'rd is a member')

        # a KB granted to the group
        tab(driver, 'grants')
        wait(driver, lambda d: shown(d, 'adm-grant-form'), 'the grants tab')
        if driver.find_element(By.ID, 'adm-grant-kb').get_attribute('value') != 'laws':
            old = driver.find_element(By.ID, 'adm-grant-form')
            fill(driver, {'adm-grant-kb': 'laws'})
            driver.execute_script("arguments[0].dispatchEvent(new Event('change'))",
                                  driver.find_element(By.ID, 'adm-grant-kb'))
            wait(driver, staleness_of(old), 'the tab is drawn again for laws')
        wait(driver, lambda d: shown(d, 'adm-grant-form') and
             d.find_element(By.ID, 'adm-grant-kb').get_attribute('value') == 'laws', 'laws chosen')
        fill(driver, {'adm-grant-kind': 'group', 'adm-grant-name': 'staff'})
        driver.find_element(By.ID, 'adm-grant-add').click()
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '#adm-grants .adm-grant[data-name="staff"]'),
             'the group reaches laws')
        g = s.get('/api/v1/groups/staff', key=None, headers={}).status
        check('(the admin API needs a session or key)', g == 401, g)

        # a key: shown once, works, revoked
        tab(driver, 'keys')
        wait(driver, lambda d: shown(d, 'adm-key-form'), 'the keys tab')
        fill(driver, {'adm-key-name': 'scanner', 'adm-key-role': 'reader', 'adm-key-kbs': 'laws'})
        driver.find_element(By.ID, 'adm-key-create').click()
        secret = wait(driver, lambda d: shown(d, 'adm-new-key') and
                      d.find_element(By.CSS_SELECTOR, '#adm-new-key code').text, 'the new key is shown')
        check('a key', bool(secret) and secret.startswith('cq_'), secret)
        check('it works', s.get('/api/v1/kbs/laws', key=secret).status == 200)
        check('listed by its prefix only', secret not in driver.find_element(By.ID, 'adm-keys').text)
        driver.save_screenshot(os.path.join(OUT, 'admin-keys.png'))
        tab(driver, 'users')
        wait(driver, lambda d: shown(d, 'adm-user-form'), 'back to users')
        tab(driver, 'keys')
        wait(driver, lambda d: shown(d, 'adm-key-form'), 'keys again')
        check('shown once: gone when drawn again', not shown(driver, 'adm-new-key'))
        driver.execute_script('window.confirm = () => true')
        driver.find_element(By.CSS_SELECTOR, '#adm-keys .adm-revoke').click()
        wait(driver, lambda d: '已吊销' in d.find_element(By.CSS_SELECTOR, '#adm-keys .adm-status').text, 'revoked')
        check('it no longer works', s.get('/api/v1/kbs/laws', key=secret).status == 401)

        # English, and dark mode on the admin page's fields
        driver.find_element(By.ID, 'admin-close').click()
        driver.find_element(By.ID, 'lang-toggle').click()
        wait(driver, lambda d: d.find_element(By.ID, 'admin-button').text == 'Admin', 'the button in English')
        driver.find_element(By.ID, 'admin-button').click()
        tab(driver, 'users')
        wait(driver, lambda d: d.find_element(By.ID, 'adm-tab-users').text == 'Users', 'the tabs in English')
        wait(driver, lambda d: 'disabled' in d.find_element(
            By.CSS_SELECTOR, '#adm-users .adm-user[data-name="王芳"] .adm-status').text, 'the status in English')
        bg = "return getComputedStyle(document.getElementById('adm-user-name')).backgroundColor"
        light = driver.execute_script(bg)
        driver.execute_script("document.getElementById('admin-dialog').close()")
        driver.find_element(By.ID, 'theme-toggle').click()
        driver.find_element(By.ID, 'admin-button').click()
        wait(driver, lambda d: shown(d, 'adm-user-name'), 'the admin page again')
        dark = driver.execute_script(bg)
        check('dark mode reaches the fields', light == 'rgb(255, 255, 255)' and dark == 'rgb(27, 33, 41)',
              (light, dark))
        driver.save_screenshot(os.path.join(OUT, 'admin-dark.png'))

        con = sqlite3.connect(os.path.join(s.data, 'clauseqa.db'))
        actions = [r[0] for r in con.execute("SELECT action FROM audit WHERE actor_kind = 'user' AND "
                                             "actor_name = 'root' AND action NOT LIKE 'sign_in%' ORDER BY id")]
        con.close()
        check('the changes are in the audit trail, by root', actions == [
            'user_add', 'user_disable', 'group_add', 'group_member_add', 'grant_add', 'key_create', 'key_revoke'],
            actions)
    T.finish()


if __name__ == '__main__':
    main()
