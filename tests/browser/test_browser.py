#!/usr/bin/python3
"""The page in headless Chromium (Selenium): create a KB, upload a PDF, wait until it is ready, ask, see an answer
with a citation, open it and see the clause with its highlighted page image; a follow-up; language switch; keyboard;
no requests leave the server; delete. Screenshots go to tests/browser/out/ (ignored by git).
Skips (77) without Selenium or Chromium.

usage: test_browser.py path/to/clauseqa"""
import os
import sys
import time

from chromium import OUT, By, Keys, session, waiter  # skips (77) without Chromium
from http_server import DEMO_PDF, Checks, Server

T = Checks('test_browser')
check = T.check
wait = waiter(check)

# Share of pixels in the marker colour, drawn on a canvas (the image is same-origin, so readable).
HIGHLIGHT_SHARE_JS = """
const img = document.getElementById('page-image');
const c = document.createElement('canvas');
c.width = img.naturalWidth; c.height = img.naturalHeight;
const g = c.getContext('2d'); g.drawImage(img, 0, 0);
const d = g.getImageData(0, 0, c.width, c.height).data;
let n = 0;
for (let i = 0; i < d.length; i += 4) if (d[i] > 200 && d[i + 1] > 150 && d[i + 2] < 120) n++;
return n / (c.width * c.height);
"""


def main():
    s = Server(sys.argv[1])
    with session(s, check, 'browser') as driver:
        base = f'http://127.0.0.1:{s.port}/'
        driver.get(base)
        driver.execute_script("localStorage.setItem('cq.lang', 'zh')")
        driver.get(base)
        wait(driver, lambda d: d.find_element(By.ID, 'auth-state').is_displayed(), 'page loads')
        check('Chinese labels', driver.find_element(By.ID, 'library-title').text == '文档库')
        accept = driver.find_element(By.ID, 'file-input').get_attribute('accept') or ''
        check('file picker offers the server\'s formats', {'.pdf', '.md', '.markdown', '.txt', 'application/pdf'}
              <= set(accept.split(',')), accept)

        # a knowledge base, made with the "new" button
        driver.find_element(By.ID, 'kb-new').click()
        alert = wait(driver, lambda d: d.switch_to.alert, 'name prompt')
        if alert:
            alert.send_keys('法规')
            alert.accept()
        wait(driver, lambda d: d.find_element(By.ID, 'kb-select').get_attribute('value') == '法规', 'kb created')

        # upload through the file input (what a drop or the file dialog hands over)
        driver.find_element(By.ID, 'file-input').send_keys(DEMO_PDF)
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '.upload .bar-fill'), 'upload progress shown')
        doc = wait(driver, lambda d: [e for e in d.find_elements(By.CSS_SELECTOR, '.doc[data-status=ready]')
                                      if '劳动法' in e.text], 'document ready', 60)
        check('document listed with pages', doc and '9 页' in doc[0].text, doc and doc[0].text)
        up = driver.find_elements(By.CSS_SELECTOR, '.upload.ready')
        check('upload row says ready', up and '就绪' in up[0].text, [u.text for u in up])
        driver.save_screenshot(os.path.join(OUT, 'library.png'))

        # ask (keyboard: "/" focuses the question, Enter sends)
        driver.find_element(By.TAG_NAME, 'body').send_keys('/')
        q = driver.switch_to.active_element
        check('/ focuses the question', q.get_attribute('id') == 'question')
        q.send_keys('劳动法第四十四条规定了什么？')
        q.send_keys(Keys.ENTER)
        chip = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg.assistant .chip.cite'), 'citation chip')
        answer = driver.find_elements(By.CSS_SELECTOR, '.msg.assistant .bubble')
        check('answer shown', answer and '百分之一百五十' in answer[-1].text, answer and answer[-1].text)
        check('chip names the clause', chip and '第四十四条' in chip[0].text, chip and chip[0].text)

        # open the citation: clause text, heading path, highlighted page image
        if chip:
            chip[0].click()
        wait(driver, lambda d: 'open' in d.find_element(By.ID, 'drawer').get_attribute('class'), 'drawer opens')
        wait(driver, lambda d: d.execute_script(
            "const i = document.getElementById('page-image'); return i.complete && i.naturalWidth > 0"),
            'page image loads')
        check('drawer title', driver.find_element(By.ID, 'drawer-title').text == '第四十四条')
        check('heading path', '第四章' in driver.find_element(By.ID, 'drawer-path').text)
        check('clause text', '百分之三百' in driver.find_element(By.ID, 'drawer-text').text)
        share = driver.execute_script(HIGHLIGHT_SHARE_JS)
        check('page image is highlighted', share > 0.01, share)
        time.sleep(0.3)  # the drawer's slide-in
        driver.save_screenshot(os.path.join(OUT, 'citation.png'))
        driver.find_element(By.TAG_NAME, 'body').send_keys(Keys.ESCAPE)
        wait(driver, lambda d: 'open' not in d.find_element(By.ID, 'drawer').get_attribute('class'), 'Esc closes')

        # a follow-up in the same conversation
        q = driver.find_element(By.ID, 'question')
        q.send_keys('那第二款呢？')
        q.send_keys(Keys.ENTER)
        wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, '.msg.assistant .chip.cite')) >= 2, 'follow-up')
        resolved = driver.find_elements(By.CSS_SELECTOR, '.resolved')
        check('follow-up resolved', resolved and '第四十四条第二款' in resolved[-1].text, resolved and resolved[-1].text)
        driver.save_screenshot(os.path.join(OUT, 'chat.png'))

        # English
        driver.find_element(By.ID, 'lang-toggle').click()
        check('English labels', driver.find_element(By.ID, 'library-title').text == 'Library')
        check('English placeholder', 'Enter' in driver.find_element(By.ID, 'question').get_attribute('placeholder'))

        # nothing but this server was asked for anything
        urls = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        foreign = [u for u in urls + [driver.current_url] if not u.startswith(base) and not u.startswith('data:')
                   and not u.startswith('blob:')]
        check('no external requests', not foreign, foreign)
        severe = [e for e in driver.get_log('browser') if e['level'] == 'SEVERE']
        check('no console errors', not severe, severe)

        # delete the document from the library
        driver.find_element(By.CSS_SELECTOR, '.doc .danger-text').click()
        alert = wait(driver, lambda d: d.switch_to.alert, 'confirm delete')
        if alert:
            alert.accept()
        wait(driver, lambda d: not d.find_elements(By.CSS_SELECTOR, '.doc'), 'document deleted')
        check('deleted on the server', s.get('/api/v1/kbs/' + '%E6%B3%95%E8%A7%84' + '/documents').json()['documents']
              == [])
    print('screenshots in', OUT)
    T.finish()


if __name__ == '__main__':
    main()
