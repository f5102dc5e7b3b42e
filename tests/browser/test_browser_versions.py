#!/usr/bin/python3
"""Versions of a regulation in the page (headless Chromium, Selenium): the document list shows each version's status
and label; its compare button opens the comparison with the character diff (added and removed highlighted); a
comparison question is answered with the diff inline; a question with the "as of" day says which version it rests
on and its citation carries the version's status; the clause drawer compares the clause with the other version; a
version is corrected in its dialog. Screenshots go to tests/browser/out/. Skips (77) without Selenium or Chromium.

usage: test_browser_versions.py path/to/clauseqa"""
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
from http_server import Checks, Server  # noqa: E402

try:
    from selenium import webdriver
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    print('skip: python3-selenium is not installed')
    sys.exit(77)
CHROMIUM = shutil.which('chromium') or '/usr/bin/chromium'
DRIVER = shutil.which('chromedriver') or '/usr/bin/chromedriver'
if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
    print('skip: chromium / chromedriver are not installed')
    sys.exit(77)

sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
from test_http_versions import V2018, V2023  # noqa: E402

OUT = os.path.join(HERE, 'out')
T = Checks('test_browser_versions')
check = T.check


def wait(driver, cond, what, timeout_s=30):
    try:
        return WebDriverWait(driver, timeout_s, poll_frequency=0.1).until(cond)
    except TimeoutException:
        check(what, False, 'timed out')
        return None


def ask(driver, question, n_before):
    q = driver.find_element(By.ID, 'question')
    q.send_keys(question)
    q.send_keys(Keys.ENTER)
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, '.msg.assistant .timing')) > n_before, 'answer: ' + question)
    return driver.find_elements(By.CSS_SELECTOR, '.msg.assistant')[-1]


def main():
    os.makedirs(OUT, exist_ok=True)
    s = Server(sys.argv[1])
    driver = None
    try:
        s.start()
        s.post('/api/v1/kbs', {'name': 'laws'})
        for name, text in (('示例法(2018-10-26).md', V2018), ('示例法(2023-12-29).md', V2023)):
            r = s.upload('laws', None, filename=name, content=text.encode())
            s.wait_job(r.json()['job']['id'])
        opts = webdriver.ChromeOptions()
        for a in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--window-size=1400,900',
                  '--lang=zh-CN', '--no-proxy-server', '--disable-extensions', '--disable-background-networking',
                  '--disable-component-update', '--disable-sync', '--no-first-run'):
            opts.add_argument(a)
        opts.binary_location = CHROMIUM
        opts.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
        driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
        base = f'http://127.0.0.1:{s.port}/'
        driver.get(base)
        driver.execute_script("localStorage.setItem('cq.lang', 'zh'); localStorage.setItem('cq.kb', 'laws')")
        driver.get(base)

        # the library: each version with its status
        docs = wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, '.doc .doc-version')) == 2 and
                    d.find_elements(By.CSS_SELECTOR, '.doc'), 'versions listed')
        text = {e.find_element(By.CSS_SELECTOR, '.doc-name').text: e.text for e in docs or []}
        check('older: superseded, labelled', '已被取代' in text.get('示例法(2018-10-26)', '') and
              '2018年修正' in text.get('示例法(2018-10-26)', ''), text)
        check('newer: in force, two versions', '现行有效' in text.get('示例法(2023-12-29)', '') and
              '共 2 个版本' in text.get('示例法(2023-12-29)', ''), text)
        driver.save_screenshot(os.path.join(OUT, 'versions_library.png'))

        # compare from the list: the diff, added and removed marked
        newer = [e for e in docs or [] if '2023-12-29' in e.text][0]
        newer.find_element(By.CSS_SELECTOR, '.compare-doc').click()
        wait(driver, lambda d: d.find_element(By.ID, 'compare-dialog').get_attribute('open') is not None and
             d.find_elements(By.CSS_SELECTOR, '#compare-pairs .pair'), 'compare dialog')
        check('summary', '修改 2' in driver.find_element(By.ID, 'compare-summary').text,
              driver.find_element(By.ID, 'compare-summary').text)
        dels = [e.text for e in driver.find_elements(By.CSS_SELECTOR, '#compare-pairs del.diff')]
        ins = [e.text for e in driver.find_elements(By.CSS_SELECTOR, '#compare-pairs ins.diff')]
        check('removed text marked', '一人' in dels, dels)
        check('added text marked', '只有一个股东的' in ins and any('国家鼓励' in x for x in ins), ins)
        colour = driver.execute_script(
            "return getComputedStyle(document.querySelector('#compare-pairs del.diff')).textDecorationLine")
        check('removed text struck through', 'line-through' in colour, colour)
        heads = [e.text for e in driver.find_elements(By.CSS_SELECTOR, '#compare-pairs .pair-head')]
        check('renumbered pair shown', any('第二条 → 第三条' in h for h in heads), heads)
        check('changes only: unchanged clauses left out', not any(h.endswith('第一条 → 第一条') for h in heads), heads)
        driver.find_element(By.ID, 'compare-changed').click()
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '#compare-pairs .pair[data-kind=same]'),
             'all clauses shown')
        driver.save_screenshot(os.path.join(OUT, 'versions_compare.png'))
        driver.find_element(By.ID, 'compare-close').click()
        wait(driver, lambda d: d.find_element(By.ID, 'compare-dialog').get_attribute('open') is None, 'dialog closes')

        # a comparison question: the diff in the answer
        msg = ask(driver, '示例法新旧版本第三条有何不同？', 0)
        check('comparison answered', '新版第三条（原第二条）有修改' in msg.text, msg.text)
        check('inline diff', msg.find_elements(By.CSS_SELECTOR, '.inline-compare del.diff'), msg.text)

        # a day: the answer says which version, the chip its status
        driver.find_element(By.ID, 'as-of').send_keys('01012020')  # typed as the date control expects (mm/dd/yyyy)
        day = driver.find_element(By.ID, 'as-of').get_attribute('value')
        check('as-of day set', day == '2020-01-01', day)
        msg = ask(driver, '示例法第二条规定了什么？', 1)
        check('answer for the day', '依据2018年修正版（2018-10-26起施行）回答' in msg.text, msg.text)
        chips = msg.find_elements(By.CSS_SELECTOR, '.chip.cite')
        check('citation status', chips and chips[0].find_elements(By.CSS_SELECTOR, '.badge.version') and
              '现行有效' in chips[0].text, chips and chips[0].text)
        driver.save_screenshot(os.path.join(OUT, 'versions_as_of.png'))

        # the drawer compares the clause with the next version
        chips[0].click()
        wait(driver, lambda d: 'open' in d.find_element(By.ID, 'drawer').get_attribute('class'), 'drawer opens')
        line = driver.find_element(By.ID, 'drawer-version')
        wait(driver, lambda d: line.is_displayed() and '2018年修正' in line.text, 'drawer: version line')
        check('drawer: no stray text', 'null' not in line.text, line.text)
        time.sleep(0.3)  # the drawer's slide-in
        driver.execute_script('arguments[0].click()', line.find_element(By.CSS_SELECTOR, 'button'))
        wait(driver, lambda d: d.find_element(By.ID, 'compare-dialog').get_attribute('open') is not None and
             len(d.find_elements(By.CSS_SELECTOR, '#compare-pairs .pair')) == 1, 'clause comparison')
        check('clause comparison: one pair', '第二条 → 第三条' in driver.find_element(By.ID, 'compare-pairs').text)
        check('whole comparison offered', driver.find_element(By.ID, 'compare-all').is_displayed())
        driver.find_element(By.ID, 'compare-close').click()
        driver.find_element(By.TAG_NAME, 'body').send_keys(Keys.ESCAPE)

        # correct a version in its dialog
        driver.find_element(By.ID, 'as-of').clear()
        newer = [e for e in driver.find_elements(By.CSS_SELECTOR, '.doc') if '2023-12-29' in e.text][0]
        newer.find_element(By.CSS_SELECTOR, '.edit-version').click()
        wait(driver, lambda d: d.find_element(By.ID, 'version-dialog').get_attribute('open') is not None and
             d.find_element(By.ID, 'v-effective').get_attribute('value') == '2024-07-01', 'version dialog')
        driver.execute_script("document.getElementById('v-effective').value = '2099-01-01'")
        driver.find_element(By.CSS_SELECTOR, '#version-dialog button[value=save]').click()
        wait(driver, lambda d: d.execute_script(
            "return [...document.querySelectorAll('.doc')].some(e => e.textContent.includes('2023-12-29') && "
            "e.textContent.includes('尚未施行'))"), 'corrected in the list')
        v = s.get('/api/v1/documents/2/version').json()['version']
        check('corrected on the server', v['effective'] == '2099-01-01' and v['corrected'] is True, v)

        severe = [e for e in driver.get_log('browser') if e['level'] == 'SEVERE']
        check('no console errors', not severe, severe)
    except Exception as e:
        check('no exception', False, f'{e!r}\n{s.log_text()}')
        if driver:
            driver.save_screenshot(os.path.join(OUT, 'versions_failure.png'))
        raise
    finally:
        if driver:
            driver.quit()
        check('server exits 0', s.stop() == 0, s.log_text())
        s.close()
    print('screenshots in', OUT)
    T.finish()


if __name__ == '__main__':
    main()
