#!/usr/bin/python3
"""The citation viewer browses the whole document (issue 30 item 4), in headless Chromium: a citation opens on its
clause's page, highlighted; previous/next step outside the clause (no highlight there, a way back to it) up to the
document's last page; the page number jumps; a search inside the document lists the clauses the server finds, and
a hit opens its clause on its page, highlighted; a doubtful page outside the clause warns as the clause's own pages
do; a document without pages (Markdown) offers its original next to the clause's text. Skips (77) without Selenium
or Chromium.

usage: test_browser_viewer.py path/to/clauseqa"""
import os
import sqlite3
import sys

from chromium import OUT, By, Keys, session, waiter  # skips (77) without Chromium
from http_server import DEMO_MD, DEMO_PDF, Checks, Server, quote
from test_browser import HIGHLIGHT_SHARE_JS

T = Checks('test_browser_viewer')
check = T.check
wait = waiter(check)


def page_shown(driver, n):
    """Waits until page n's image is loaded in the viewer; true when it is."""
    return wait(driver, lambda d: d.execute_script(
        "const i = document.getElementById('page-image');"
        "return i.complete && i.naturalWidth > 0 && !i.classList.contains('loading') &&"
        " document.getElementById('page-input').value === arguments[0] &&"
        " decodeURIComponent(i.src).includes('/pages/' + arguments[0] + '.png')", str(n)), f'page {n} shown')


def main():
    s = Server(sys.argv[1])
    with session(s, check, 'viewer') as driver:
        s.post('/api/v1/kbs', {'name': 'laws'})
        pdf_id = s.wait_job(s.upload('laws', DEMO_PDF).json()['job']['id'])['document_id']
        md_id = s.wait_job(s.upload('laws', DEMO_MD).json()['job']['id'])['document_id']
        # page 6 read badly (as a low-confidence OCR page would be): the viewer warns there, outside the clause
        con = sqlite3.connect(os.path.join(s.data, 'clauseqa.db'))
        con.execute("UPDATE pages SET quality = 0.3, quality_reason = 'low OCR confidence 0.30: test' "
                    "WHERE doc_id = ? AND page_no = 6", (pdf_id,))
        con.commit()
        con.close()
        base = f'http://127.0.0.1:{s.port}/'
        driver.get(base)
        driver.execute_script("localStorage.setItem('cq.lang', 'zh'); localStorage.setItem('cq.kb', 'laws')")
        driver.get(base)
        wait(driver, lambda d: d.find_element(By.ID, 'kb-select').get_attribute('value') == 'laws', 'KB chosen')

        # a citation opens on its clause's page, highlighted
        q = driver.find_element(By.ID, 'question')
        q.send_keys('劳动法第四十四条规定了什么？')
        q.send_keys(Keys.ENTER)
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg.assistant .chip.cite'), 'citation chip')
        # the answer streams and its message is drawn again when it ends: click a chip of the finished answer
        wait(driver, lambda d: d.execute_script("return !document.querySelector('.bubble.streaming')"), 'answer done')
        chip = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg.assistant .chip.cite'), 'citation chip')
        if chip:
            chip[0].click()
        # open and done sliding in: a click during the slide lands on whatever is at that point then (zoom-out)
        wait(driver, lambda d: d.execute_script(
            "const d = document.getElementById('drawer'); return d.classList.contains('open') && "
            "Math.abs(d.getBoundingClientRect().right - window.innerWidth) < 1"), 'drawer opens')
        # the drawer's clause arrives by a request of its own
        if wait(driver, lambda d: d.find_element(By.ID, 'drawer-title').text == '第四十四条', 'the cited clause', 10):
            check('the cited clause', True)
        page_shown(driver, 4)
        check('the page count is the document\'s', driver.find_element(By.ID, 'page-count').text == '/ 9')
        check('the clause is highlighted on its page', driver.execute_script(HIGHLIGHT_SHARE_JS) > 0.01)
        check('no way back while on the clause', not driver.find_element(By.ID, 'page-clause').is_displayed())

        # next: a page outside the clause, without highlight, with a way back
        driver.find_element(By.ID, 'page-next').click()
        page_shown(driver, 5)
        check('page 5: no highlight', driver.execute_script(HIGHLIGHT_SHARE_JS) < 0.001)
        check('page 5: says where the clause is', '4' in driver.find_element(By.ID, 'page-label').text,
              driver.find_element(By.ID, 'page-label').text)
        check('page 5: a way back to the clause', driver.find_element(By.ID, 'page-clause').is_displayed())
        check('page 5: no quality warning', not driver.find_element(By.ID, 'page-warning').is_displayed())
        driver.find_element(By.ID, 'page-next').click()
        page_shown(driver, 6)
        warn = wait(driver, lambda d: d.find_element(By.ID, 'page-warning').is_displayed()
                    and d.find_element(By.ID, 'page-warning'), 'page 6: its quality warning')
        check('page 6: the warning with the page\'s quality and reason', warn and '0.30' in warn.text
              and warn.get_attribute('title') == 'low OCR confidence 0.30: test', warn and warn.text)
        driver.find_element(By.ID, 'page-prev').click()
        page_shown(driver, 5)
        wait(driver, lambda d: not d.find_element(By.ID, 'page-warning').is_displayed(), 'page 5: the warning goes')
        driver.save_screenshot(os.path.join(OUT, 'viewer-outside.png'))

        # jump to the last page with the page number; next stops there; previous steps back
        box = driver.find_element(By.ID, 'page-input')
        box.clear()
        box.send_keys('9')
        box.send_keys(Keys.ENTER)
        page_shown(driver, 9)
        check('the last page: next disabled', not driver.find_element(By.ID, 'page-next').is_enabled())
        driver.find_element(By.ID, 'page-prev').click()
        page_shown(driver, 8)
        box.clear()
        box.send_keys('1')
        box.send_keys(Keys.ENTER)
        page_shown(driver, 1)
        check('the first page: previous disabled', not driver.find_element(By.ID, 'page-prev').is_enabled())
        driver.find_element(By.ID, 'page-clause').click()
        page_shown(driver, 4)
        check('back on the clause: highlighted again', driver.execute_script(HIGHLIGHT_SHARE_JS) > 0.01)

        # search inside the document: the server's hits, a hit opens its clause on its page
        word = '工资'
        want = s.get(f'/api/v1/documents/{pdf_id}/search?q=' + quote(word)).json()['clauses']
        field = driver.find_element(By.ID, 'doc-search-q')
        field.send_keys(word)
        field.send_keys(Keys.ENTER)
        rows = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '#doc-search-results li button'), 'hits listed')
        check('the hits are the server\'s', rows and len(rows) == len(want) and len(want) > 1, (len(rows or []), want))
        other = [h for h in want if h['page'] and h['page'] != 4]
        check('a hit on another page', other, want)
        if rows and other:
            i = want.index(other[0])
            rows[i].click()
            wait(driver, lambda d: d.find_element(By.ID, 'drawer-title').text == (other[0]['clause'] or ''),
                 'the hit\'s clause opens')
            page_shown(driver, other[0]['page'])
            check('the hit is highlighted on its page', driver.execute_script(HIGHLIGHT_SHARE_JS) > 0.01)
            check('the hit is marked in the list', driver.find_elements(By.CSS_SELECTOR, '#doc-search-results li.current'))
            check('the text holds the word', word in driver.find_element(By.ID, 'drawer-text').text)
            driver.save_screenshot(os.path.join(OUT, 'viewer-search.png'))
        field.clear()
        field.send_keys('这句话不在劳动法里')
        field.send_keys(Keys.ENTER)
        wait(driver, lambda d: '没有' in d.find_element(By.ID, 'doc-search-status').text, 'no hits said')
        check('no hits: no list', not driver.find_element(By.ID, 'doc-search-results').is_displayed())
        toggle = "document.getElementById('lang-toggle').click()"  # under the open drawer
        driver.execute_script(toggle)
        status = driver.find_element(By.ID, 'doc-search-status').text
        check('the search says so in English after the switch', status == 'No “这句话不在劳动法里” in this document', status)
        driver.execute_script(toggle)

        # a document without pages: its original next to the clause's text
        md_clause = s.get(f'/api/v1/documents/{md_id}/search?q=Confidential').json()['clauses'][0]
        driver.execute_script('openClause(arguments[0])', md_clause['clause_id'])
        wait(driver, lambda d: 'Confidential' in d.find_element(By.ID, 'drawer-text').text, 'markdown clause')
        check('no page view for Markdown', not driver.find_element(By.ID, 'page-view').is_displayed())
        check('the previous document\'s search is cleared', not driver.find_element(By.ID, 'doc-search-status')
              .is_displayed())
        link = driver.find_element(By.ID, 'drawer-original')
        href = link.get_attribute('href') or ''
        check('the original is offered', link.is_displayed() and href.endswith(f'/api/v1/documents/{md_id}/original')
              and link.text == '打开原文件', (href, link.text))
        r = s.get(f'/api/v1/documents/{md_id}/original')
        check('the original is there', r.status == 200 and r.body == open(DEMO_MD, 'rb').read(), r)
        driver.save_screenshot(os.path.join(OUT, 'viewer-markdown.png'))
        severe = [e for e in driver.get_log('browser') if e['level'] == 'SEVERE']
        check('no console errors', not severe, severe)
    T.finish()


if __name__ == '__main__':
    main()
