#!/usr/bin/python3
"""The page's everyday use in headless Chromium (Selenium), at desktop width and at 390 px:
- upload errors in the page's language (the server's error codes mapped), the whole file name (its end always shown,
  all of it in the title), the bar full and red, never stuck at 50 %, dismissible;
- the real stage shown while an answer is awaited (the server's stage events), stop (the stream aborted);
- conversations kept by the server: reopened after a reload, follow-ups resolved from them, listed, renamed and
  deleted in the sidebar; regenerate (the last turn replaced), copy, the view brought to the citations;
- the notice of a generated answer that fell back to quoted text, shown with the answer;
- a clause named without its document that two documents have: the answer asks which, one button a document, and
  a click asks the question of that one;
- at 390 px: one pane at a time (chat, conversations, library, page) with tabs to switch, a header whose buttons
  stay on one line, the page image full width and zoomable.
Screenshots of both widths go to tests/browser/out/ (ignored by git). Skips (77) without Selenium or Chromium.

usage: test_browser_chat.py path/to/clauseqa"""
import os
import sys
import tempfile
import time

from chromium import OUT, By, Keys, session, waiter  # skips (77) without Chromium
from http_server import DEMO_PDF, SOURCE_DIR, Checks, Server

T = Checks('test_browser_chat')
check = T.check
wait = waiter(check)
KB = '法规'
Q1 = '劳动法第四十四条规定了什么？'
STAGES = ('理解追问…', '检索条款…', '生成回答…', '整理答案…')
NOTICE = '生成的回答无法在条文中核实，以下为条文原文摘录。'

# The answer's event stream, one event at a time every `delay` ms: the page's waiting and stop can be watched.
SLOW_ASK_JS = """
const delay = arguments[0], orig = window.fetch;
window.fetch = async (url, opts) => {
  const res = await orig(url, opts);
  if (!String(url).endsWith('/ask') || !res.ok) return res;
  const reader = res.body.getReader(), enc = new TextEncoder(), dec = new TextDecoder();
  let buf = '', ctrl = null;
  const stream = new ReadableStream({
    start(c) {
      ctrl = c;
      if (opts && opts.signal) opts.signal.addEventListener('abort', () => c.error(new DOMException('aborted', 'AbortError')));
    },
    async pull(c) {
      for (;;) {
        const i = buf.indexOf('\\n\\n');
        if (i >= 0) {
          const ev = buf.slice(0, i + 2);
          buf = buf.slice(i + 2);
          await new Promise((r) => setTimeout(r, delay));
          try { c.enqueue(enc.encode(ev)); } catch (e) { /* aborted meanwhile */ }
          return;
        }
        const { value, done } = await reader.read();
        if (done) { c.close(); return; }
        buf += dec.decode(value, { stream: true });
      }
    },
    cancel() { reader.cancel(); },
  });
  return new Response(stream, { status: res.status, headers: res.headers });
};
"""

# A stream as the server sends it for a generated answer that fell back to the quoted clause (its notice).
FAKE_ASK_JS = """
const events = arguments[0], orig = window.fetch;
window.fetch = async (url, opts) => {
  if (!String(url).endsWith('/ask')) return orig(url, opts);
  const body = events.map(([n, d]) => 'event: ' + n + '\\ndata: ' + JSON.stringify(d) + '\\n\\n').join('');
  return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
};
"""

CLIPBOARD_JS = """
window.__copied = null;
Object.defineProperty(navigator, 'clipboard', { configurable: true,
  value: { writeText: (s) => { window.__copied = s; return Promise.resolve(); } } });
"""

# Is the element inside the visible part of #messages (the chat's scroll box)?
IN_VIEW_JS = """
const e = arguments[0], box = document.getElementById('messages').getBoundingClientRect(), r = e.getBoundingClientRect();
return r.top >= box.top - 1 && r.bottom <= box.bottom + 1 && r.height > 0;
"""


def drawer_in(driver):
    """The page view is open and has finished sliding in."""
    return driver.execute_script("const d = document.getElementById('drawer'); "
                                 "return d.classList.contains('open') && Math.abs(d.getBoundingClientRect().right - "
                                 "window.innerWidth) < 1")


def shot(driver, name):
    driver.save_screenshot(os.path.join(OUT, name))


def css(driver, sel):
    return driver.find_elements(By.CSS_SELECTOR, sel)


def answers_done(driver):
    """The page is not busy and the last answer has finished streaming."""
    return driver.execute_script("return !document.querySelector('.bubble.streaming') && "
                                 "document.getElementById('ask-button').textContent === '发送'")


def ask(driver, question):
    q = driver.find_element(By.ID, 'question')
    q.send_keys(question)
    q.send_keys(Keys.ENTER)


def upload_errors(driver, tmp, screenshot):
    """A file that is not what its name says, and one with no text: Chinese messages, whole name, dismissible."""
    bad = os.path.join(tmp, '关于进一步加强劳动合同管理和加班工资支付的若干意见（征求意见稿）.pdf')
    with open(bad, 'w') as f:
        f.write('this is not a PDF at all')
    driver.find_element(By.ID, 'file-input').send_keys(bad)
    row = wait(driver, lambda d: css(d, '.upload.failed'), 'failed upload row')
    if not row:
        return
    row = row[0]
    err = row.find_element(By.CSS_SELECTOR, '.upload-error').text
    check('upload error in Chinese', '文件格式不对或已损坏' in err, err)
    check('no English in the row', not any(w in row.text for w in ('PDF header', 'named', 'not a')), row.text)
    check('status says failed', row.find_element(By.CSS_SELECTOR, '.upload-status').text == '失败')
    name = row.find_element(By.CSS_SELECTOR, '.upload-name')
    check('the whole name in the title', name.get_attribute('title') == os.path.basename(bad), name.get_attribute('title'))
    end = row.find_element(By.CSS_SELECTOR, '.name-end')
    check('the name\'s end (extension) shown', end.text.endswith('.pdf') and end.is_displayed(), end.text)
    check('the server\'s words kept on hover', 'PDF' in (row.get_attribute('title') or ''), row.get_attribute('title'))
    share = ("const r = arguments[0]; return r.querySelector('.bar-fill').getBoundingClientRect().width / "
             "r.querySelector('.bar').getBoundingClientRect().width")
    wait(driver, lambda d: d.execute_script(share, row) > 0.99, 'the failed bar is full, not stuck at 50 %', 5)
    shot(driver, screenshot)
    row.find_element(By.CSS_SELECTOR, '.upload-dismiss').click()
    check('dismissed', wait(driver, lambda d: not css(d, '.upload.failed'), 'row dismissed') is not None)


def job_error(driver, tmp):
    blank = os.path.join(tmp, 'blank.md')
    with open(blank, 'w') as f:
        f.write('   \n\n   \n')
    driver.find_element(By.ID, 'file-input').send_keys(blank)
    row = wait(driver, lambda d: css(d, '.upload.failed'), 'failed job row', 60)
    if row:
        err = row[0].find_element(By.CSS_SELECTOR, '.upload-error').text
        check('a failed job\'s reason in Chinese', '文件是空的' in err, err)
        row[0].find_element(By.CSS_SELECTOR, '.upload-dismiss').click()


def stage_and_stop(driver):
    driver.execute_script(SLOW_ASK_JS, 250)
    ask(driver, Q1)
    stage = wait(driver, lambda d: css(d, '.msg.assistant .stage'), 'a stage shown while waiting')
    label = stage[0].text if stage else ''
    check('the stage is the server\'s', label.split(' ')[0] in STAGES, label)
    check('the stop button', driver.find_element(By.ID, 'ask-button').text == '停止')
    wait(driver, lambda d: not css(d, '.msg.assistant .stage') and css(d, '.msg.assistant .bubble')[-1].text,
         'the first words')
    driver.find_element(By.ID, 'ask-button').click()
    stopped = wait(driver, lambda d: css(d, '.msg.assistant.stopped'), 'stopped')
    check('stopped: says so', stopped and '已停止' in stopped[0].text, stopped and stopped[0].text)
    check('stopped: cut short', stopped and '百分之三百' not in stopped[0].text, stopped and stopped[0].text)
    check('stopped: the button sends again', driver.find_element(By.ID, 'ask-button').text == '发送')


def notice(driver, clause_id):
    driver.find_element(By.ID, 'new-chat').click()
    answer = '支付不低于工资的百分之二百的工资报酬'
    driver.execute_script(FAKE_ASK_JS, [
        ['stage', {'stage': 'retrieving'}], ['stage', {'stage': 'generating', 'retrieve_ms': 2}],
        ['token', {'text': '休息日'}], ['token', {'text': '加班'}],
        ['citations', {'citations': [{'clause_id': clause_id, 'doc': '劳动法(2018-12-29)', 'clause': '第四十四条',
                                      'page': 4, 'quote': answer}]}],
        ['done', {'answer': answer, 'abstained': False, 'generated': False, 'notice': NOTICE, 'question': '休息日加班呢',
                  'timings': {'retrieve_ms': 2, 'generate_ms': 900}}]])
    ask(driver, '休息日加班工资怎么算？')
    note = wait(driver, lambda d: css(d, '.msg.assistant .notice'), 'notice shown')
    if note:
        msg = note[0].find_element(By.XPATH, '..')
        check('the notice says why', NOTICE in note[0].text, note[0].text)
        check('the notice is with its answer', answer in msg.find_element(By.CSS_SELECTOR, '.bubble').text, msg.text)
        check('the streamed words replaced by the answer kept', '休息日加班' not in msg.find_element(
            By.CSS_SELECTOR, '.bubble').text)
    shot(driver, 'desktop-notice.png')


def context(driver, clause_id):
    """A short generated span comes with the sentence around it, muted under the answer."""
    driver.find_element(By.ID, 'new-chat').click()
    answer = '不低于工资的百分之二百的工资报酬'
    sentence = '（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬；'
    driver.execute_script(FAKE_ASK_JS, [
        ['stage', {'stage': 'generating', 'retrieve_ms': 2}], ['token', {'text': answer}],
        ['citations', {'citations': [{'clause_id': clause_id, 'doc': '劳动法(2018-12-29)', 'clause': '第四十四条',
                                      'page': 4, 'quote': answer}]}],
        ['done', {'answer': answer, 'abstained': False, 'generated': True, 'context': sentence,
                  'question': '休息日加班呢', 'timings': {'retrieve_ms': 2, 'generate_ms': 900}}]])
    ask(driver, '休息日加班工资怎么算？')
    ctx = wait(driver, lambda d: css(d, '.msg.assistant .answer-context'), 'context shown')
    if ctx:
        check('the context is the sentence', sentence in ctx[0].text, ctx[0].text)
        check('the context is muted', 'muted' in ctx[0].get_attribute('class'), ctx[0].get_attribute('class'))
        msg = ctx[0].find_element(By.XPATH, '..')
        check('the answer stays the span', msg.find_element(By.CSS_SELECTOR, '.bubble').text.strip() == answer,
              msg.text)


def choices(driver, s):
    """With 劳动合同法 beside 劳动法, "第四十四条规定了什么？" names a clause both have: the answer asks which one, a
    button a document; clicking 劳动法's asks the question of it."""
    law = os.path.join(SOURCE_DIR, 'data', 'demo', '劳动合同法(2012-12-28).md')
    job = s.wait_job(s.upload(KB, law).json()['job']['id'])
    check('the second law ready', job.get('state') == 'ready', job)
    driver.find_element(By.ID, 'new-chat').click()
    ask(driver, '第四十四条规定了什么？')
    buttons = wait(driver, lambda d: css(d, '.msg.assistant .choices .chip.choice'), 'the documents to choose from')
    if not buttons:
        return
    msg = buttons[0].find_element(By.XPATH, '../..')
    check('asks which document', '请在问题中写明' in msg.find_element(By.CSS_SELECTOR, '.bubble').text, msg.text)
    check('badge: which document', '请指明文件' in msg.find_element(By.CSS_SELECTOR, '.badge').text, msg.text)
    names = [b.text for b in buttons]
    check('one button a law', names == ['中华人民共和国劳动法', '中华人民共和国劳动合同法'], names)
    shot(driver, 'desktop-choices.png')
    buttons[0].click()
    wait(driver, lambda d: answers_done(d) and len(css(d, '.msg.assistant')) == 2, 'the chosen question answered')
    user = css(driver, '.msg.user')
    check('the question asked of 劳动法', user and user[-1].text == '《中华人民共和国劳动法》第四十四条规定了什么？',
          user and user[-1].text)
    cites = css(driver, '.msg.assistant')[-1].find_elements(By.CSS_SELECTOR, '.chip.cite')
    check('answered from 劳动法 第四十四条', cites and '劳动法' in cites[0].text and '第四十四条' in cites[0].text,
          cites and cites[0].text)


def conversations(driver, s):
    driver.find_element(By.CSS_SELECTOR, '[data-side-tab=convs]').click()
    items = wait(driver, lambda d: [e for e in css(d, '.conv') if e.is_displayed()], 'conversations listed')
    check('one conversation listed (the notice was not the server\'s)', items and len(items) == 1,
          items and [i.text for i in items])
    check('it says its turns', items and '2 轮' in items[0].text, items and items[0].text)
    items[0].find_element(By.CSS_SELECTOR, '.conv-open').click()
    wait(driver, lambda d: len(css(d, '.msg.assistant')) == 2, 'a listed conversation opens')
    check('the open one is marked', 'active' in css(driver, '.conv')[0].get_attribute('class'))
    driver.find_element(By.ID, 'conv-new').click()
    ask(driver, '试用期最长多长时间？')
    wait(driver, lambda d: len(css(d, '.conv')) == 2, 'the new conversation listed')
    wait(driver, answers_done, 'answer done')
    first = [e for e in css(driver, '.conv') if Q1 in e.text]
    if first:
        first[0].find_element(By.CSS_SELECTOR, '.conv-rename').click()
        alert = wait(driver, lambda d: d.switch_to.alert, 'rename prompt')
        if alert:
            alert.send_keys('加班问题')
            alert.accept()
    wait(driver, lambda d: any('加班问题' in e.text for e in css(d, '.conv')), 'renamed in the list')
    convs = s.get('/api/v1/conversations').json()['conversations']
    check('renamed on the server', any(c['title'] == '加班问题' for c in convs), convs)
    shot(driver, 'desktop-conversations.png')
    second = [e for e in css(driver, '.conv') if '试用期' in e.text]
    gone_id = int(second[0].get_attribute('data-conv-id')) if second else 0
    if second:
        second[0].find_element(By.CSS_SELECTOR, '.conv-delete').click()
        alert = wait(driver, lambda d: d.switch_to.alert, 'delete confirm')
        if alert:
            alert.accept()
    wait(driver, lambda d: len(css(d, '.conv')) == 1, 'deleted from the list')
    check('deleted on the server', s.get(f'/api/v1/conversations/{gone_id}').status == 404)
    check('its messages left the screen', not css(driver, '.msg'), [m.text for m in css(driver, '.msg')])
    css(driver, '.conv .conv-open')[0].click()
    wait(driver, lambda d: len(css(d, '.msg.assistant')) == 2, 'a listed conversation reopens')


def mobile(driver, s, tmp):
    driver.execute_cdp_cmd('Emulation.setDeviceMetricsOverride',
                           {'width': 390, 'height': 844, 'deviceScaleFactor': 2, 'mobile': True})
    driver.refresh()
    wait(driver, lambda d: len(css(d, '.msg.assistant')) == 2, 'the conversation after a reload at 390 px')
    width = driver.execute_script('return window.innerWidth')
    check('390 px wide', width == 390, width)
    heights = driver.execute_script(
        "return [...document.querySelectorAll('.topbar button, .topbar select, .pane-tab')]"
        ".filter((e) => e.offsetParent).map((e) => [e.textContent, e.getBoundingClientRect().height])")
    check('header buttons on one line each', heights and all(h < 48 for _, h in heights), heights)
    header = driver.execute_script("return document.querySelector('.topbar').getBoundingClientRect().height")
    check('header at most two rows', header < 120, header)
    check('one pane: chat shown, side pane hidden', driver.find_element(By.CSS_SELECTOR, '.chat').is_displayed()
          and not driver.find_element(By.CSS_SELECTOR, '.side').is_displayed())
    overflow = driver.execute_script('return document.documentElement.scrollWidth')
    check('nothing wider than the screen', overflow <= 390, overflow)

    ask(driver, Q1)
    wait(driver, answers_done, 'answer at 390 px')
    time.sleep(0.8)  # the smooth scroll to the citations
    actions = css(driver, '.msg.assistant .msg-actions')
    cites = css(driver, '.msg.assistant .cites')
    check('scrolled to the citations', cites and driver.execute_script(IN_VIEW_JS, cites[-1])
          and driver.execute_script(IN_VIEW_JS, actions[-1]))
    shot(driver, 'mobile-chat.png')

    cites[-1].find_element(By.CSS_SELECTOR, '.chip.cite').click()
    wait(driver, lambda d: d.execute_script(
        "const i = document.getElementById('page-image'); return i.complete && i.naturalWidth > 0 && "
        "!i.classList.contains('loading')"), 'page image at 390 px')
    wait(driver, drawer_in, 'the page view slides in')
    drawer = driver.execute_script("return document.getElementById('drawer').getBoundingClientRect().width")
    check('the page view fills the screen', drawer == 390, drawer)
    img_w = driver.execute_script("return document.getElementById('page-image').clientWidth")
    check('the page image full width', img_w >= 330, img_w)
    shot(driver, 'mobile-page.png')
    before = driver.execute_script("return document.getElementById('page-image').naturalWidth")
    driver.find_element(By.ID, 'zoom-in').click()
    wait(driver, lambda d: d.execute_script("return document.getElementById('page-image').naturalWidth") > before
         and not d.execute_script("return document.getElementById('page-image').classList.contains('loading')"),
         'zoomed image loads')
    zoomed = driver.execute_script("return document.getElementById('page-image').clientWidth")
    check('zoom makes the page larger than the screen', zoomed > 450, zoomed)
    shot(driver, 'mobile-page-zoomed.png')
    driver.find_element(By.ID, 'drawer-back').click()
    wait(driver, lambda d: 'open' not in d.find_element(By.ID, 'drawer').get_attribute('class'), 'back to the chat')
    tab = driver.find_element(By.ID, 'tab-page')
    check('the page tab reopens it', tab.is_enabled())
    tab.click()
    wait(driver, drawer_in, 'the page tab reopens the page view')
    driver.find_element(By.ID, 'drawer-back').click()

    driver.find_element(By.ID, 'tab-convs').click()
    check('conversations pane alone', driver.find_element(By.ID, 'conv-list').is_displayed()
          and not driver.find_element(By.CSS_SELECTOR, '.chat').is_displayed())
    shot(driver, 'mobile-conversations.png')
    driver.find_element(By.ID, 'tab-library').click()
    check('library pane alone', driver.find_element(By.ID, 'docs').is_displayed()
          and not driver.find_element(By.ID, 'conv-list').is_displayed())
    upload_errors(driver, tmp, 'mobile-upload-error.png')
    driver.find_element(By.ID, 'tab-chat').click()
    check('back to the chat', driver.find_element(By.ID, 'messages').is_displayed())


def main():
    s = Server(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix='cq-browser-') as tmp, session(s, check, 'chat') as driver:
        s.post('/api/v1/kbs', {'name': KB})
        job = s.wait_job(s.upload(KB, DEMO_PDF).json()['job']['id'])
        check('document ready', job.get('state') == 'ready', job)
        base = f'http://127.0.0.1:{s.port}/'
        driver.get(base)
        driver.execute_script("localStorage.setItem('cq.lang', 'zh')")
        driver.get(base)
        wait(driver, lambda d: d.find_element(By.ID, 'kb-select').get_attribute('value') == KB, 'page loads')

        upload_errors(driver, tmp, 'desktop-upload-error.png')
        job_error(driver, tmp)

        stage_and_stop(driver)
        driver.refresh()  # the conversation the stopped question began is the server's: it comes back, answered
        user = wait(driver, lambda d: css(d, '.msg.user'), 'the conversation after a reload')
        check('reload: the question', user and user[0].text == Q1, user and user[0].text)
        answer = css(driver, '.msg.assistant .bubble')
        check('reload: the answer', answer and '百分之一百五十' in answer[0].text, answer and answer[0].text)

        ask(driver, '那第二款呢？')
        wait(driver, lambda d: len(css(d, '.msg.assistant .chip.cite')) >= 2, 'follow-up answered')
        resolved = css(driver, '.resolved')
        check('follow-up resolved from the stored conversation', resolved and '第四十四条第二款' in resolved[-1].text,
              resolved and resolved[-1].text)
        time.sleep(0.8)  # the smooth scroll
        check('scrolled to the citations', driver.execute_script(IN_VIEW_JS, css(driver, '.msg.assistant .cites')[-1]))
        conv_id = int(driver.execute_script("return localStorage.getItem('cq.conv.' + arguments[0])", KB) or 0)
        turns = s.get(f'/api/v1/conversations/{conv_id}').json().get('turns', [])
        check('the server has both turns', len(turns) == 2, turns)

        regen = [b for b in css(driver, '.msg.assistant .regen') if b.is_displayed()]
        check('regenerate offered on the last answer only', len(regen) == 1
              and regen[0].find_element(By.XPATH, '../..') == css(driver, '.msg.assistant')[-1])
        regen[0].click()
        wait(driver, lambda d: answers_done(d) and len(css(d, '.msg.assistant .chip.cite')) >= 2, 'regenerated')
        check('regenerate: still two answers', len(css(driver, '.msg.assistant')) == 2)
        turns = s.get(f'/api/v1/conversations/{conv_id}').json().get('turns', [])
        check('regenerate: the server replaced the last turn', [t['question'] for t in turns] == [Q1, '那第二款呢？'],
              turns)

        driver.execute_script(CLIPBOARD_JS)
        css(driver, '.msg.assistant .copy')[-1].click()
        copied = wait(driver, lambda d: d.execute_script('return window.__copied'), 'copied')
        check('copy: the answer and its sources', copied and '第四十四条' in copied and '[1] 劳动法' in copied, copied)
        check('copy: says so', '已复制' in css(driver, '.msg.assistant .copy')[-1].text)
        shot(driver, 'desktop-chat.png')

        clause_id = int(css(driver, '.chip.cite')[0].get_attribute('data-clause-id'))
        notice(driver, clause_id)
        context(driver, clause_id)
        driver.refresh()
        wait(driver, lambda d: d.find_element(By.ID, 'kb-select').get_attribute('value') == KB, 'reload')
        conversations(driver, s)
        mobile(driver, s, tmp)
        driver.execute_cdp_cmd('Emulation.clearDeviceMetricsOverride', {})  # desktop again, after the other steps:
        driver.get(base)                                                    # a second law changes what they ask of
        wait(driver, lambda d: d.find_element(By.ID, 'kb-select').get_attribute('value') == KB, 'desktop again')
        choices(driver, s)

        severe = [e for e in driver.get_log('browser') if e['level'] == 'SEVERE'
                  and 'Failed to load resource' not in e['message']]  # the refused upload's 415
        check('no console errors', not severe, severe)
    print('screenshots in', OUT)
    T.finish()


if __name__ == '__main__':
    main()
