#!/usr/bin/python3
"""Versions of a regulation in the page (headless Chromium, Selenium): the document list shows each version's status
and label; its compare button opens the comparison with the character diff (added and removed highlighted); a
comparison question is answered with the diff inline; a question with the "as of" day says which version it rests
on and its citation carries the version's status; the clause drawer compares the clause with the other version; a
version is corrected in its dialog; regenerate asks for the answer's day again. At 390 px: the day above the question,
the versions in the library pane, the comparison on the whole screen, the version line of the page view. Screenshots
go to tests/browser/out/. Skips (77) without Selenium or Chromium.

usage: test_browser_versions.py path/to/clauseqa"""
import os
import sys
import time

from chromium import OUT, By, Keys, session, waiter  # skips (77) without Chromium
from http_server import Checks, Server
from test_http_versions import V2018, V2023

T = Checks('test_browser_versions')
check = T.check
wait = waiter(check)


def ask(driver, question, n_before):
    q = driver.find_element(By.ID, 'question')
    q.send_keys(question)
    q.send_keys(Keys.ENTER)
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, '.msg.assistant .timing')) > n_before, 'answer: ' + question)
    return driver.find_elements(By.CSS_SELECTOR, '.msg.assistant')[-1]


def css(driver, sel):
    return driver.find_elements(By.CSS_SELECTOR, sel)


def dialog_open(driver, id_):
    return driver.find_element(By.ID, id_).get_attribute('open') is not None


def desktop(driver, s):
    # the library: each version with its status
    docs = wait(driver, lambda d: len(css(d, '.doc .doc-version')) == 2 and css(d, '.doc'), 'versions listed')
    text = {e.find_element(By.CSS_SELECTOR, '.doc-name').text: e.text for e in docs or []}
    check('older: superseded, labelled', '已被取代' in text.get('示例法(2018-10-26)', '') and
          '2018年修正' in text.get('示例法(2018-10-26)', ''), text)
    check('newer: in force, two versions', '现行有效' in text.get('示例法(2023-12-29)', '') and
          '共 2 个版本' in text.get('示例法(2023-12-29)', ''), text)
    driver.save_screenshot(os.path.join(OUT, 'versions_library.png'))

    # compare from the list: the diff, added and removed marked
    newer = [e for e in docs or [] if '2023-12-29' in e.text][0]
    newer.find_element(By.CSS_SELECTOR, '.compare-doc').click()
    wait(driver, lambda d: dialog_open(d, 'compare-dialog') and css(d, '#compare-pairs .pair'), 'compare dialog')
    check('summary', '修改 2' in driver.find_element(By.ID, 'compare-summary').text,
          driver.find_element(By.ID, 'compare-summary').text)
    dels = [e.text for e in css(driver, '#compare-pairs del.diff')]
    ins = [e.text for e in css(driver, '#compare-pairs ins.diff')]
    check('removed text marked', '一人' in dels, dels)
    check('added text marked', '只有一个股东的' in ins and any('国家鼓励' in x for x in ins), ins)
    colour = driver.execute_script(
        "return getComputedStyle(document.querySelector('#compare-pairs del.diff')).textDecorationLine")
    check('removed text struck through', 'line-through' in colour, colour)
    heads = [e.text for e in css(driver, '#compare-pairs .pair-head')]
    check('renumbered pair shown', any('第二条 → 第三条' in h for h in heads), heads)
    check('kinds in words', any(h.startswith('修改') for h in heads) and any(h.startswith('新增') for h in heads), heads)
    check('changes only: unchanged clauses left out', not any(h.endswith('第一条 → 第一条') for h in heads), heads)
    driver.find_element(By.ID, 'compare-changed').click()
    wait(driver, lambda d: css(d, '#compare-pairs .pair[data-kind=same]'), 'all clauses shown')
    driver.save_screenshot(os.path.join(OUT, 'versions_compare.png'))
    driver.find_element(By.ID, 'compare-close').click()
    wait(driver, lambda d: not dialog_open(d, 'compare-dialog'), 'dialog closes')

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

    # regenerate asks for the answer's day again, whatever the box says now
    driver.find_element(By.ID, 'as-of').clear()
    msg.find_element(By.CSS_SELECTOR, '.regen').click()
    wait(driver, lambda d: len(css(d, '.msg.assistant .timing')) == 2 and
         '依据2018年修正版' in css(d, '.msg.assistant')[-1].text, 'regenerated for the same day')

    # the drawer compares the clause with the next version
    css(driver, '.msg.assistant')[-1].find_element(By.CSS_SELECTOR, '.chip.cite').click()
    wait(driver, lambda d: 'open' in d.find_element(By.ID, 'drawer').get_attribute('class'), 'drawer opens')
    line = driver.find_element(By.ID, 'drawer-version')
    wait(driver, lambda d: line.is_displayed() and '2018年修正' in line.text, 'drawer: version line')
    check('drawer: no stray text', 'null' not in line.text, line.text)
    time.sleep(0.3)  # the drawer's slide-in
    driver.execute_script('arguments[0].click()', line.find_element(By.CSS_SELECTOR, 'button'))
    wait(driver, lambda d: dialog_open(d, 'compare-dialog') and len(css(d, '#compare-pairs .pair')) == 1,
         'clause comparison')
    check('clause comparison: one pair', '第二条 → 第三条' in driver.find_element(By.ID, 'compare-pairs').text)
    check('whole comparison offered', driver.find_element(By.ID, 'compare-all').is_displayed())
    driver.find_element(By.ID, 'compare-close').click()
    driver.find_element(By.TAG_NAME, 'body').send_keys(Keys.ESCAPE)

    # correct a version in its dialog
    newer = [e for e in css(driver, '.doc') if '2023-12-29' in e.text][0]
    newer.find_element(By.CSS_SELECTOR, '.edit-version').click()
    wait(driver, lambda d: dialog_open(d, 'version-dialog') and
         d.find_element(By.ID, 'v-effective').get_attribute('value') == '2024-07-01', 'version dialog')
    driver.execute_script("document.getElementById('v-effective').value = '2099-01-01'")
    driver.find_element(By.CSS_SELECTOR, '#version-dialog button[value=save]').click()
    wait(driver, lambda d: d.execute_script(
        "return [...document.querySelectorAll('.doc')].some(e => e.textContent.includes('2023-12-29') && "
        "e.textContent.includes('尚未施行'))"), 'corrected in the list')
    v = s.get('/api/v1/documents/2/version').json()['version']
    check('corrected on the server', v['effective'] == '2099-01-01' and v['corrected'] is True, v)
    s.delete('/api/v1/documents/2/version')


def fits(driver, what):
    width = driver.execute_script('return document.documentElement.scrollWidth')
    check(f'{what}: nothing wider than the screen', width <= 390, width)


def mobile(driver):
    driver.execute_cdp_cmd('Emulation.setDeviceMetricsOverride',
                           {'width': 390, 'height': 844, 'deviceScaleFactor': 2, 'mobile': True})
    driver.refresh()
    wait(driver, lambda d: len(css(d, '.msg.assistant')) == 2, 'the conversation (two turns) after a reload at 390 px')
    check('390 px wide', driver.execute_script('return window.innerWidth') == 390)
    fits(driver, 'chat')
    # the day on a row of its own above the question, which keeps its width
    box = driver.execute_script(
        "const r = (id) => document.getElementById(id).getBoundingClientRect();"
        "return [r('as-of').bottom, r('question').top, r('question').width]")
    check('as-of above the question, the question wide', box[0] <= box[1] and box[2] > 250, box)
    inline = css(driver, '.inline-compare')
    check('inline diff within the screen', inline and inline[0].rect['x'] + inline[0].rect['width'] <= 390,
          inline and inline[0].rect)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", inline[0])
    driver.save_screenshot(os.path.join(OUT, 'versions_mobile_chat.png'))

    # the library pane: versions and their buttons
    driver.find_element(By.ID, 'tab-library').click()
    docs = wait(driver, lambda d: [e for e in css(d, '.doc .doc-version') if e.is_displayed()], 'library at 390 px')
    check('versions in the library at 390 px', docs and len(docs) == 2 and '已被取代' in docs[-1].text,
          docs and [e.text for e in docs])
    fits(driver, 'library')
    driver.save_screenshot(os.path.join(OUT, 'versions_mobile_library.png'))
    css(driver, '.doc .compare-doc')[0].click()
    wait(driver, lambda d: dialog_open(d, 'compare-dialog') and css(d, '#compare-pairs .pair'), 'compare at 390 px')
    rect = driver.find_element(By.ID, 'compare-dialog').rect
    check('the comparison fills the screen', rect['width'] == 390 and rect['x'] == 0, rect)
    pairs = css(driver, '#compare-pairs .pair')
    check('pairs within the screen', all(p.rect['x'] >= 0 and p.rect['x'] + p.rect['width'] <= 390 for p in pairs),
          [p.rect for p in pairs])
    check('close button on screen', driver.find_element(By.ID, 'compare-close').is_displayed() and
          driver.find_element(By.ID, 'compare-close').rect['x'] + 20 <= 390)
    driver.save_screenshot(os.path.join(OUT, 'versions_mobile_compare.png'))
    driver.find_element(By.ID, 'compare-close').click()
    wait(driver, lambda d: not dialog_open(d, 'compare-dialog'), 'dialog closes at 390 px')

    # a citation's page: its version line
    driver.find_element(By.ID, 'tab-chat').click()
    css(driver, '.msg.assistant')[-1].find_element(By.CSS_SELECTOR, '.chip.cite').click()
    line = driver.find_element(By.ID, 'drawer-version')
    wait(driver, lambda d: line.is_displayed() and '2018年修正' in line.text, 'drawer version line at 390 px')
    time.sleep(0.3)  # the drawer's slide-in
    check('version line within the screen', line.rect['x'] + line.rect['width'] <= 390, line.rect)
    driver.save_screenshot(os.path.join(OUT, 'versions_mobile_page.png'))
    driver.find_element(By.ID, 'drawer-back').click()


def main():
    s = Server(sys.argv[1])
    with session(s, check, 'versions') as driver:
        s.post('/api/v1/kbs', {'name': 'laws'})
        for name, text in (('示例法(2018-10-26).md', V2018), ('示例法(2023-12-29).md', V2023)):
            r = s.upload('laws', None, filename=name, content=text.encode())
            s.wait_job(r.json()['job']['id'])
        base = f'http://127.0.0.1:{s.port}/'
        driver.get(base)
        driver.execute_script("localStorage.setItem('cq.lang', 'zh'); localStorage.setItem('cq.kb', 'laws')")
        driver.get(base)
        desktop(driver, s)
        mobile(driver)
        severe = [e for e in driver.get_log('browser') if e['level'] == 'SEVERE']
        check('no console errors', not severe, severe)
    print('screenshots in', OUT)
    T.finish()


if __name__ == '__main__':
    main()
