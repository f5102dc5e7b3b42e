#!/usr/bin/python3
"""What an office expects of the page (issue 30), in headless Chromium (Selenium):
- thumbs up / down on an answer, a comment with thumbs down, the same thumb again takes it back; the rating kept by
  the server and shown again after a reload;
- the conversation exported as Markdown and PDF from the buttons under the chat (the files the page hands over);
- the conversations searched from the box above the list (title, questions, answers), "no match" said;
- dark mode: the system's choice (prefers-color-scheme, emulated) until the toggle chooses, the choice remembered in
  localStorage over a reload and over the system's;
- admins: the quality of the answers per day in a dialog (answers, thumbs down).
Skips (77) without Selenium or Chromium. Screenshots go to tests/browser/out/ (ignored by git).

usage: test_browser_office.py path/to/clauseqa"""
import os
import sys
from urllib.parse import quote

from chromium import OUT, By, Keys, session, waiter  # skips (77) without Chromium
from http_server import DEMO_PDF, Checks, Server

T = Checks('test_browser_office')
check = T.check
wait = waiter(check)
KB = '法规'
Q1 = '劳动法第四十四条规定了什么？'

CAPTURE_JS = """
window.__blobs = [];
const orig = URL.createObjectURL;
URL.createObjectURL = (b) => { window.__blobs.push(b); return orig(b); };
HTMLAnchorElement.prototype.click = function () { window.__clicked = this.download; };
"""
BLOB_TEXT_JS = """
const done = arguments[arguments.length - 1], b = window.__blobs[arguments[0]];
b.arrayBuffer().then((a) => done({type: b.type, head: new TextDecoder().decode(new Uint8Array(a).slice(0, 8)),
  text: new TextDecoder().decode(a), size: b.size}));
"""
BG = "return getComputedStyle(document.documentElement).getPropertyValue('--bg').trim()"


def scheme(driver, dark):
    driver.execute_cdp_cmd('Emulation.setEmulatedMedia', {
        'features': [{'name': 'prefers-color-scheme', 'value': 'dark' if dark else 'light'}]})


def turn_feedback(s, cid):
    turns = (s.get(f'/api/v1/conversations/{cid}').json() or {}).get('turns') or [{}]
    return turns[0].get('feedback') or {}


def main():
    s = Server(sys.argv[1])
    with session(s, check, 'office') as driver:
        s.post('/api/v1/kbs', {'name': KB})
        job = s.wait_job(s.upload(KB, DEMO_PDF).json()['job']['id'])
        check('upload ready', job.get('state') == 'ready', job)
        base = f'http://127.0.0.1:{s.port}/'
        driver.get(base)
        driver.execute_script("localStorage.setItem('cq.lang', 'zh'); localStorage.setItem('cq.kb', arguments[0]);"
                              "localStorage.removeItem('cq.theme')", KB)
        scheme(driver, False)
        driver.get(base)
        wait(driver, lambda d: d.find_element(By.ID, 'kb-select').get_attribute('value') == KB, 'the KB is chosen')
        logs = [e for e in driver.get_log('browser') if e['level'] == 'SEVERE']
        check('no script errors', not logs, logs)

        # an answer, rated
        q = driver.find_element(By.ID, 'question')
        q.send_keys(Q1, Keys.ENTER)
        up = wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, '.msg.assistant .feedback .rate-up'),
                  'the answer has thumbs')
        cid = driver.execute_script('return state.conversationId')
        check('the conversation is known', isinstance(cid, int) and cid > 0, cid)
        up.click()
        wait(driver, lambda d: up.get_attribute('aria-pressed') == 'true', 'thumbs up shown as given')
        check('thumbs up kept by the server', turn_feedback(s, cid).get('rating') == 'up', turn_feedback(s, cid))
        up.click()
        wait(driver, lambda d: up.get_attribute('aria-pressed') == 'false', 'the same thumb again takes it back')
        check('… on the server too', turn_feedback(s, cid) == {}, turn_feedback(s, cid))
        driver.find_element(By.CSS_SELECTOR, '.msg.assistant .rate-down').click()
        box = wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, '.rate-form textarea'), 'thumbs down asks why')
        check('… with a placeholder in the page\'s language', '哪里不对' in (box.get_attribute('placeholder') or ''))
        box.send_keys('引用的条款不对')
        driver.find_element(By.CSS_SELECTOR, '.rate-form .rate-send').click()
        down = driver.find_element(By.CSS_SELECTOR, '.msg.assistant .rate-down')
        wait(driver, lambda d: down.get_attribute('aria-pressed') == 'true', 'thumbs down shown as given')
        f = turn_feedback(s, cid)
        check('thumbs down and its comment kept', f == {'rating': 'down', 'comment': '引用的条款不对'}, f)
        note = driver.find_element(By.CSS_SELECTOR, '.msg.assistant .rate-note').text
        check('the page thanks, with the comment', '谢谢反馈' in note and '引用的条款不对' in note, note)
        driver.save_screenshot(os.path.join(OUT, 'office-feedback.png'))

        # after a reload: the conversation reopened with its rating
        driver.get(base)
        wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, '.msg.assistant .rate-down').get_attribute(
            'aria-pressed') == 'true', 'the rating shown again after a reload')

        # export
        exp = wait(driver, lambda d: d.find_element(By.ID, 'conv-export').is_displayed() and
                   d.find_element(By.ID, 'conv-export'), 'export buttons for a conversation')
        check('export buttons labelled', '导出 Markdown' in exp.text and '导出 PDF' in exp.text, exp.text)
        driver.execute_script(CAPTURE_JS)
        driver.find_element(By.ID, 'export-md').click()
        wait(driver, lambda d: d.execute_script('return window.__blobs.length') == 1, 'Markdown handed over')
        md = driver.execute_async_script(BLOB_TEXT_JS, 0)
        check('Markdown: question, answer, citation with its quote', '## 1. ' + Q1 in md['text'] and
              '第四十四条' in md['text'] and '\n   > ' in md['text'] and driver.execute_script(
                  'return window.__clicked') == f'conversation-{cid}.md', md['text'][:600])
        driver.find_element(By.ID, 'export-pdf').click()
        wait(driver, lambda d: d.execute_script('return window.__blobs.length') == 2, 'PDF handed over')
        pdf = driver.execute_async_script(BLOB_TEXT_JS, 1)
        check('PDF: a PDF file', pdf['type'] == 'application/pdf' and pdf['head'].startswith('%PDF-') and
              pdf['size'] > 1000, {k: pdf[k] for k in ('type', 'head', 'size')})
        driver.find_element(By.ID, 'conv-new').click() if driver.find_element(By.ID, 'conv-new').is_displayed() \
            else driver.find_element(By.ID, 'new-chat').click()
        wait(driver, lambda d: not d.find_element(By.ID, 'conv-export').is_displayed(), 'no export without a chat')

        # search
        s.request('PATCH', f'/api/v1/conversations/{cid}', {'title': 'Overtime pay'})
        s.post(f'/api/v1/kbs/{quote(KB)}/ask', {'question': '试用期最长多长时间？'})
        driver.find_element(By.CSS_SELECTOR, '[data-side-tab="convs"]').click()
        driver.execute_script('loadConvs()')  # the other conversation was begun over the API
        wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, '#conv-list .conv')) == 2, 'two conversations')
        search = driver.find_element(By.ID, 'conv-search')
        check('the search box says what it does', search.get_attribute('placeholder') == '搜索对话')
        search.send_keys('overtime')
        wait(driver, lambda d: [e.get_attribute('data-conv-id') for e in d.find_elements(
            By.CSS_SELECTOR, '#conv-list .conv')] == [str(cid)], 'a title found, any case')
        search.clear()
        search.send_keys('第四十四条')
        wait(driver, lambda d: [e.get_attribute('data-conv-id') for e in d.find_elements(
            By.CSS_SELECTOR, '#conv-list .conv')] == [str(cid)], 'a question found')
        search.send_keys('zzzz')
        wait(driver, lambda d: not d.find_elements(By.CSS_SELECTOR, '#conv-list .conv') and
             d.find_element(By.ID, 'convs-empty').text == '没有匹配的对话。', 'no match said')
        search.send_keys(Keys.CONTROL, 'a')
        search.send_keys(Keys.DELETE)
        wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, '#conv-list .conv')) == 2, 'cleared: all again')

        # dark mode
        light = driver.execute_script(BG)
        check('light by default on a light system', light == '#f6f7f9', light)
        scheme(driver, True)
        wait(driver, lambda d: d.execute_script(BG) == '#12161c', 'dark on a dark system, without a choice')
        toggle = driver.find_element(By.ID, 'theme-toggle')
        wait(driver, lambda d: toggle.get_attribute('aria-pressed') == 'true', 'the toggle says dark')
        driver.save_screenshot(os.path.join(OUT, 'office-dark.png'))
        toggle.click()
        check('the toggle chooses light over the system', driver.execute_script(BG) == '#f6f7f9' and
              driver.execute_script("return localStorage.getItem('cq.theme')") == 'light')
        driver.get(base)
        wait(driver, lambda d: d.find_element(By.ID, 'theme-toggle'), 'reloaded')
        check('the choice is remembered over a reload', driver.execute_script(BG) == '#f6f7f9')
        driver.find_element(By.ID, 'theme-toggle').click()
        scheme(driver, False)
        check('dark chosen stays dark on a light system', driver.execute_script(BG) == '#12161c' and
              driver.execute_script("return localStorage.getItem('cq.theme')") == 'dark')

        # quality, for admins (open mode is an admin's)
        qb = wait(driver, lambda d: d.find_element(By.ID, 'quality-button').is_displayed() and
                  d.find_element(By.ID, 'quality-button'), 'the quality button for an admin')
        qb.click()
        table = wait(driver, lambda d: d.find_element(By.ID, 'quality-dialog').is_displayed() and
                     d.find_element(By.ID, 'quality-table'), 'the quality dialog')
        cells = {e.get_attribute('data-col'): e.text for e in table.find_elements(By.CSS_SELECTOR, 'tbody tr:first-child td')}
        check('today: answers and the thumbs down', int(cells.get('answers', 0)) >= 2 and cells.get('thumbs_down') == '1',
              cells)
        driver.save_screenshot(os.path.join(OUT, 'office-quality.png'))
        driver.find_element(By.CSS_SELECTOR, '#quality-dialog button[value="close"]').click()

        # English
        driver.find_element(By.ID, 'lang-toggle').click()
        check('English labels', driver.find_element(By.ID, 'conv-search').get_attribute('placeholder') ==
              'Search conversations' and driver.find_element(By.ID, 'theme-toggle').text.endswith('Light'),
              driver.find_element(By.ID, 'theme-toggle').text)
        logs = [e for e in driver.get_log('browser') if e['level'] == 'SEVERE']
        check('no script errors at the end', not logs, logs)
    T.finish()


if __name__ == '__main__':
    main()
