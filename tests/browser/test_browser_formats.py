#!/usr/bin/python3
"""Word, HTML and scanned PDFs in the page (issue 18), in headless Chromium (Selenium), at desktop width and 390 px:
- the drop zone names the server's formats (health's format table) in the page's language, in Chinese and English;
- a Word file and a web page uploaded through the file input: ready rows that count clauses and no pages, listed as
  DOCX and HTML; a Word clause opens with its text and no page image;
- bad files fail with the reason in the page's language (the readers' codes mapped): a truncated Word file, a zip
  bomb, HTML nested too deep, a scan while the server's OCR is off (this server runs with --ocr off);
- a scan read by OCR with low confidence (uploaded with ocr=auto): its clause's page view warns above the page image,
  the server's words on hover.
Screenshots go to tests/browser/out/ (ignored by git). Skips (77) without Selenium or Chromium.

usage: test_browser_formats.py path/to/clauseqa"""
import os
import re
import sys
import tempfile

from chromium import OUT, By, session, waiter  # skips (77) without Chromium
from format_fixtures import HTML, NESTED_HTML, TRUNCATED_WORD, WORD, make_scan, zip_bomb
from http_server import Checks, Server, multipart, quote

T = Checks('test_browser_formats')
check = T.check
wait = waiter(check)
KB = '档案'
PAGES = re.compile(r'\d+ 页')

# what each bad file's row says in Chinese
BAD = [('损坏的办法.docx', TRUNCATED_WORD, '文件格式不对或已损坏'),
       ('炸弹.docx', None, 'zip 炸弹'),
       ('嵌套.html', NESTED_HTML, '嵌套过深'),
       ('扫描件.pdf', 'scan', '服务器关闭了 OCR')]


def css(driver, sel):
    return driver.find_elements(By.CSS_SELECTOR, sel)


def shot(driver, name):
    driver.save_screenshot(os.path.join(OUT, name))


def upload_files(driver, tmp, files):
    """Hands the files to the file input, as a drop or the file dialog does."""
    paths = []
    for name, content in files:
        path = os.path.join(tmp, name)
        with open(path, 'wb') as f:
            f.write(content)
        paths.append(path)
    driver.find_element(By.ID, 'file-input').send_keys('\n'.join(paths))


def row_of(driver, name):
    rows = [r for r in css(driver, '.upload') if r.get_attribute('title').split('\n')[0] == name]
    return rows[0] if rows else None


def formats_named(driver):
    hint = driver.find_element(By.ID, 'drop-hint').text
    check('the drop zone names Word and HTML', all(w in hint for w in ('PDF', 'Word', 'HTML', 'Markdown', '纯文本')),
          hint)
    accept = driver.find_element(By.ID, 'file-input').get_attribute('accept') or ''
    check('the file picker offers .docx and .html', {'.docx', '.html', '.htm'} <= set(accept.split(',')), accept)
    driver.find_element(By.ID, 'lang-toggle').click()
    hint = driver.find_element(By.ID, 'drop-hint').text
    check('in English too', 'plain text' in hint and 'Word' in hint and '纯文本' not in hint, hint)
    driver.find_element(By.ID, 'lang-toggle').click()


def good_files(driver, tmp):
    upload_files(driver, tmp, [('档案管理办法.docx', WORD), ('通知.htm', HTML)])
    for name in ('档案管理办法.docx', '通知.htm'):
        row = wait(driver, lambda d: (r := row_of(d, name)) and 'ready' in r.get_attribute('class') and r,
                   name + ' ready', 60)
        if row:
            status = row.find_element(By.CSS_SELECTOR, '.upload-status').text
            check(name + ': the row counts clauses, no pages', '条' in status and not PAGES.search(status), status)
    docs = wait(driver, lambda d: len(css(d, '.doc[data-status=ready]')) == 2 and css(d, '.doc'), 'both listed')
    metas = sorted(d.find_element(By.CSS_SELECTOR, '.doc-meta').text for d in docs or [])
    check('listed as DOCX and HTML, without pages', len(metas) == 2 and any('DOCX' in m for m in metas)
          and any('HTML' in m for m in metas) and not any(PAGES.search(m) for m in metas), metas)
    shot(driver, 'formats-library.png')


def bad_files(driver, tmp, scan):
    files = [(name, zip_bomb() if content is None else scan if content == 'scan' else content)
             for name, content, _ in BAD]
    upload_files(driver, tmp, files)
    for name, _, words in BAD:
        row = wait(driver, lambda d: (r := row_of(d, name)) and 'failed' in r.get_attribute('class') and r,
                   name + ' fails', 90)
        if not row:
            continue
        err = row.find_element(By.CSS_SELECTOR, '.upload-error').text
        check(name + ': the reason in Chinese', words in err, err)
        check(name + ': the server\'s words on hover', len(row.get_attribute('title').split('\n')) > 1,
              row.get_attribute('title'))
    shot(driver, 'formats-upload-errors.png')
    for row in css(driver, '.upload.failed'):
        row.find_element(By.CSS_SELECTOR, '.upload-dismiss').click()


def word_clause(driver, s):
    r = s.post(f'/api/v1/kbs/{quote(KB)}/retrieve', {'question': '档案管理办法第二条'})
    res = (r.json() or {}).get('results') or [{}]
    driver.execute_script('openClause(arguments[0])', res[0].get('clause_id'))
    wait(driver, lambda d: d.find_element(By.ID, 'drawer-text').text.startswith('第二条'), 'the Word clause opens')
    check('a Word clause has no page view', not driver.find_element(By.ID, 'page-view').is_displayed())


def low_confidence_page(driver, s, screenshot):
    """The clause on a scan OCR read with low confidence: the page view warns."""
    r = s.post('/api/v1/kbs/scans/retrieve', {'question': '第七条'})
    res = (r.json() or {}).get('results') or [{}]
    driver.execute_script('openClause(arguments[0])', res[0].get('clause_id'))
    wait(driver, lambda d: d.find_element(By.ID, 'drawer-text').text.startswith('第七条'), 'the scanned clause opens')
    wait(driver, lambda d: d.execute_script(
        "const i = document.getElementById('page-image'); return i.complete && i.naturalWidth > 0 && "
        "!i.classList.contains('loading')"), 'the scanned page image')
    warn = driver.find_element(By.ID, 'page-warning')
    check('the page warns', warn.is_displayed() and '这一页的文字可能有误' in warn.text, warn.text)
    check('the server\'s words on hover', 'low OCR confidence' in (warn.get_attribute('title') or ''),
          warn.get_attribute('title'))
    above = driver.execute_script("return document.getElementById('page-warning').getBoundingClientRect().bottom <= "
                                  "document.getElementById('page-frame').getBoundingClientRect().top + 1")
    check('above the page image', above)
    shot(driver, screenshot)


def main():
    s = Server(sys.argv[1], args=['--ocr', 'off'])
    with tempfile.TemporaryDirectory(prefix='cq-browser-formats-') as tmp, session(s, check, 'formats') as driver:
        scan = make_scan(tmp)
        blurred = make_scan(tmp, page=2, dpi=60)
        if not (scan and blurred):
            check('mutool for the scans', False, 'mupdf-tools is missing (tools/setup.sh installs it)')
            T.finish()
        s.post('/api/v1/kbs', {'name': KB})
        s.post('/api/v1/kbs', {'name': 'scans'})
        body, ctype = multipart({'ocr': 'auto'}, ('file', 'blurred.pdf', open(blurred, 'rb').read()))
        r = s.post('/api/v1/kbs/scans/documents', body, headers={'Content-Type': ctype})
        job = s.wait_job(r.json()['job']['id']) if r.status == 202 else {}
        check('the blurred scan read by OCR', job.get('state') == 'ready', job)

        base = f'http://127.0.0.1:{s.port}/'
        driver.get(base)
        driver.execute_script("localStorage.setItem('cq.lang', 'zh'); localStorage.setItem('cq.kb', arguments[0])", KB)
        driver.get(base)
        wait(driver, lambda d: d.find_element(By.ID, 'kb-select').get_attribute('value') == KB, 'page loads')
        wait(driver, lambda d: d.find_element(By.ID, 'drop-hint').text, 'the formats named')

        formats_named(driver)
        good_files(driver, tmp)
        bad_files(driver, tmp, open(scan, 'rb').read())
        word_clause(driver, s)
        low_confidence_page(driver, s, 'formats-page-warning.png')

        driver.execute_cdp_cmd('Emulation.setDeviceMetricsOverride',
                               {'width': 390, 'height': 844, 'deviceScaleFactor': 2, 'mobile': True})
        driver.refresh()
        wait(driver, lambda d: d.find_element(By.ID, 'kb-select').get_attribute('value') == KB, 'reload at 390 px')
        low_confidence_page(driver, s, 'formats-mobile-page-warning.png')
        overflow = driver.execute_script('return document.documentElement.scrollWidth')
        check('390 px: nothing wider than the screen', overflow <= 390, overflow)

        severe = [e for e in driver.get_log('browser') if e['level'] == 'SEVERE'
                  and 'Failed to load resource' not in e['message']]
        check('no console errors', not severe, severe)
    print('screenshots in', OUT)
    T.finish()


if __name__ == '__main__':
    main()
