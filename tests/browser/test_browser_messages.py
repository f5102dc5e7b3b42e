#!/usr/bin/python3
"""The server's messages on the page in the page's language (issue 30 item 5): on the Chinese page "no clause with
id 419" and "this needs an admin key" read in Chinese, and a damaged PDF's reason is the plain one in Chinese (no
MuPDF); on the English page the server's English. Skips (77) without Selenium or Chromium.

usage: test_browser_messages.py path/to/clauseqa"""
import json
import sys
import time

from chromium import By, session, waiter  # skips (77) without Chromium
from http_server import Checks, Server
from test_messages import damaged_pdf

T = Checks('test_browser_messages')
check = T.check
wait = waiter(check)

API_MESSAGE_JS = """
const done = arguments[arguments.length - 1];
api('GET', arguments[0]).then(() => done('(no error)'), (e) => done(e.message));
"""


def main():
    s = Server(sys.argv[1])
    with session(s, check, 'messages') as driver:
        base = f'http://127.0.0.1:{s.port}/'
        s.post('/api/v1/kbs', {'name': 'laws'})
        r = s.upload('laws', None, filename='cut.pdf', content=damaged_pdf())
        s.wait_job(r.json()['job']['id'])
        driver.get(base)
        driver.execute_script("localStorage.setItem('cq.lang', 'zh'); localStorage.setItem('cq.kb', 'laws')")
        driver.get(base)
        reason = wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, '.doc-error').text, 'the failed document')
        check('a damaged PDF\'s reason, plain and in Chinese', reason == 'PDF 文件已损坏，无法读取', reason)
        got = driver.execute_async_script(API_MESSAGE_JS, '/api/v1/clauses/419')
        check('no clause 419, in Chinese', got == '没有 id 为 419 的条款', got)

        r = s.cli('keys', 'create', '--json', '--role', 'reader', '--kb', 'laws')
        key = json.loads(r.stdout)['key'] if r.returncode == 0 else ''
        time.sleep(1.2)  # the server re-reads "are there keys?" at most once a second
        driver.execute_script("localStorage.setItem('cq.key', arguments[0])", key)
        driver.get(base)
        got = driver.execute_async_script(API_MESSAGE_JS, '/api/v1/conversations?all=true')
        check('this needs an admin key, in Chinese', got == '此操作需要管理员密钥', got)

        driver.execute_script("localStorage.setItem('cq.lang', 'en')")
        driver.get(base)
        got = driver.execute_async_script(API_MESSAGE_JS, '/api/v1/clauses/419')
        check('the English page: the server\'s English', got == 'no clause with id 419', got)
        reason = wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, '.doc-error').text, 'the failed document')
        check('… and the plain English reason', reason == 'the PDF is damaged and cannot be read', reason)
    T.finish()


if __name__ == '__main__':
    main()
