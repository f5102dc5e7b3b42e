#!/usr/bin/python3
"""Signing in on the page (issue 30), in headless Chromium: with authentication on and no session, the page asks to
sign in; a wrong password says so and the dialog stays; a reader signs in, sees its name and role, asks (a cookie
POST from the page itself passes the cross-site check) and sees no upload, no delete, no KB buttons; an editor sees
upload and delete for its KB; sign-out asks again; a wrong API key says so, a right one works; the session cookie is
out of the page's reach (HttpOnly); an admin reads the audit trail.
Skips (77) without Selenium or Chromium.

usage: test_browser_signin.py path/to/clauseqa"""
import json
import sys
import time

from chromium import By, Keys, session, waiter  # skips (77) without Chromium
from http_server import DEMO_MD, Checks, Server

T = Checks('test_browser_signin')
check = T.check
wait = waiter(check)


def dialog_open(d):
    return d.find_element(By.ID, 'signin-dialog').get_attribute('open') is not None


def sign_in(driver, user, password):
    wait(driver, dialog_open, f'the sign-in dialog is open for {user}')
    for field, value in (('signin-user', user), ('signin-password', password)):
        e = driver.find_element(By.ID, field)
        e.clear()
        e.send_keys(value)
    driver.find_element(By.ID, 'signin-submit').click()


def shown(driver, id_):
    return driver.find_element(By.ID, id_).is_displayed()


def main():
    s = Server(sys.argv[1])
    with session(s, check, 'signin') as driver:
        s.post('/api/v1/kbs', {'name': 'laws'}, key=None)
        s.post('/api/v1/kbs', {'name': 'other'}, key=None)
        s.wait_job(s.upload('laws', DEMO_MD, key=None).json()['job']['id'], key=None)
        for name, args in (('rd', ['--kb', 'laws']), ('ed', ['--role', 'editor', '--kb', 'laws'])):
            r = s.cli('user', 'add', name, *args, input_text=f'password of {name}\n')
            check(f'user add {name}', r.returncode == 0, r.stderr)
        admin_key = json.loads(s.cli('keys', 'create', '--role', 'admin', '--json').stdout)['key']
        time.sleep(1.2)  # the server re-reads whether authentication is on at most once a second

        base = f'http://127.0.0.1:{s.port}/'
        driver.get(base)
        driver.execute_script("localStorage.setItem('cq.lang', 'zh'); localStorage.removeItem('cq.key')")
        driver.get(base)
        wait(driver, dialog_open, 'no session: the page asks to sign in')
        check('the dialog has a user name and a password field', shown(driver, 'signin-user') and
              driver.find_element(By.ID, 'signin-password').get_attribute('type') == 'password')

        # a wrong password: said, and the dialog stays
        sign_in(driver, 'rd', 'not the password')
        err = wait(driver, lambda d: shown(d, 'signin-error') and d.find_element(By.ID, 'signin-error').text,
                   'a wrong password is shown')
        check('the error says what happened', err == '用户名或密码错误', err)
        check('the dialog stays open', dialog_open(driver))
        sign_in(driver, 'nobody', 'not the password')
        err2 = wait(driver, lambda d: shown(d, 'signin-error') and d.find_element(By.ID, 'signin-error').text,
                    'an unknown user is shown')
        check('an unknown user: the same words', err2 == err, err2)

        # the reader
        sign_in(driver, 'rd', 'password of rd')
        wait(driver, lambda d: not dialog_open(d), 'the reader signs in')
        me = wait(driver, lambda d: shown(d, 'me') and d.find_element(By.ID, 'me').text, "the user's name is shown")
        check('name and role', me == 'rd · 读者', me)
        check('sign-out offered', shown(driver, 'signout-button'))
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '.doc[data-status=ready]'), 'the reader sees the documents')
        check('a reader sees no upload', not shown(driver, 'dropzone'))
        check('...no delete', driver.find_elements(By.CSS_SELECTOR, '.doc-delete') == [])
        check('...no version correction', driver.find_elements(By.CSS_SELECTOR, '.edit-version') == [])
        check('...no KB buttons', not shown(driver, 'kb-new') and not shown(driver, 'kb-delete'))
        check('...no audit trail', not shown(driver, 'audit-button'))
        options = [o.text for o in driver.find_elements(By.CSS_SELECTOR, '#kb-select option')]
        check('only its KB', options == ['laws'], options)
        check('the session cookie is out of the page\'s reach (HttpOnly)',
              'cq_session' not in driver.execute_script('return document.cookie'))
        q = driver.find_element(By.ID, 'question')
        q.send_keys('How many days of notice are needed to terminate?')
        q.send_keys(Keys.ENTER)
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg.assistant .chip.cite'),
             'the reader asks from the page (a cookie POST of its own origin)')
        convs = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '#conv-list li'), 'the question is kept')
        check("the reader's conversation is listed", convs and len(convs) == 1, convs)

        # sign out: asked again
        driver.find_element(By.ID, 'signout-button').click()
        wait(driver, dialog_open, 'signing out asks to sign in again')
        check('no name shown', not shown(driver, 'me'))

        # the editor
        sign_in(driver, 'ed', 'password of ed')
        wait(driver, lambda d: not dialog_open(d), 'the editor signs in')
        wait(driver, lambda d: d.find_element(By.ID, 'me').text == 'ed · 编辑', "the editor's name")
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '.doc-delete'), 'an editor sees delete')
        check('an editor sees upload', shown(driver, 'dropzone'))
        check('...no KB buttons', not shown(driver, 'kb-new'))
        wait(driver, lambda d: d.find_element(By.ID, 'convs-empty').get_attribute('hidden') is None,
             "the reader's conversation is not the editor's (none listed)")
        driver.find_element(By.ID, 'signout-button').click()
        wait(driver, dialog_open, 'asked again')

        # an API key instead: a wrong one says so, a right one works
        driver.find_element(By.CSS_SELECTOR, '#key-section summary').click()
        driver.find_element(By.ID, 'key-input').send_keys('cq_' + '0' * 40)
        driver.find_element(By.ID, 'key-save').click()
        err = wait(driver, lambda d: shown(d, 'key-error') and d.find_element(By.ID, 'key-error').text,
                   'a wrong key is shown (it used to reopen the dialog silently)')
        check('the key error says so', err == '这个 API 密钥无效或已吊销', err)
        check('...and the dialog stays', dialog_open(driver))
        key_input = driver.find_element(By.ID, 'key-input')
        key_input.clear()
        key_input.send_keys(admin_key)
        driver.find_element(By.ID, 'key-save').click()
        wait(driver, lambda d: not dialog_open(d), 'the admin key is taken')
        me = wait(driver, lambda d: d.find_element(By.ID, 'me').text, 'the key is shown')
        check('an admin key: KB buttons, upload', shown(driver, 'kb-new') and shown(driver, 'dropzone'), me)
        options = [o.text for o in driver.find_elements(By.CSS_SELECTOR, '#kb-select option')]
        check('every KB', options == ['laws', 'other'], options)

        # the audit trail, for admins
        driver.find_element(By.ID, 'audit-button').click()
        wait(driver, lambda d: d.find_element(By.ID, 'audit-dialog').get_attribute('open') is not None,
             'the audit trail opens')
        rows = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '#audit-rows tr'), 'entries are listed')
        actions = [r.get_attribute('data-action') for r in rows or []]
        check('sign-ins, failures and the users made are there', {'sign_in', 'sign_in_failed', 'user_add', 'key_create',
                                                                  'upload'} <= set(actions), actions)
        texts = [r.text for r in rows or []]
        check('in the page\'s language, with who and from where',
              any('登录失败' in x and 'nobody' in x and '127.0.0.1' in x for x in texts) and
              any('添加用户' in x and '命令行' in x for x in texts), texts)
    T.finish()


if __name__ == '__main__':
    main()
