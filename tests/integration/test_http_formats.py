#!/usr/bin/python3
"""Word, HTML and scanned PDFs through the HTTP API (issue 18): the formats health lists, uploads that become
documents without pages (citations name the clause; no page images), a scan read by OCR whose clauses highlight on
the page image, the server's OCR default (--ocr off here) and the upload's own ocr parameter, and bad files that
fail as jobs with their reason and code (the readers' finer codes: too_large, too_deep, ocr_off). The documents are
made by format_fixtures.py (the scan: a page of tests/data/pdf/zh_law.pdf drawn by mutool into a grey picture).

usage: test_http_formats.py path/to/clauseqa"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from format_fixtures import HTML, NESTED_HTML, TRUNCATED_WORD, WORD, make_scan, zip_bomb  # noqa: E402
from http_server import Checks, Server, multipart, png_size, quote  # noqa: E402

T = Checks('test_http_formats')
check = T.check


def upload(s, kb, name, content, **fields):
    body, ctype = multipart(fields, ('file', name, content))
    return s.post(f'/api/v1/kbs/{quote(kb)}/documents', body, headers={'Content-Type': ctype})


def job_of(s, r):
    return s.wait_job(r.json()['job']['id']) if r.status == 202 else {'state': 'not accepted', 'error': repr(r)}


def test_formats(s):
    h = s.get('/api/v1/health').json()
    formats = {f['name']: f for f in h.get('formats', [])}
    check('health says the OCR default', h.get('ocr') == {'default': 'off', 'languages': 'chi_sim+eng'}, h)
    check('health lists Word and HTML', {'docx', 'html'} <= set(formats) and formats['docx']['pages'] is False
          and formats['html']['extensions'] == ['html', 'htm', 'xhtml'] and formats['docx']['mime'].startswith(
              'application/vnd.openxmlformats-officedocument'), h)
    s.post('/api/v1/kbs', {'name': 'docs'})

    job = job_of(s, upload(s, 'docs', '档案管理办法.docx', WORD))
    check('Word upload ready', job['state'] == 'ready' and job['document']['format'] == 'docx'
          and job['document']['pages'] == 0 and job['document']['clauses'] >= 2, job)
    word_id = job.get('document_id')
    job = job_of(s, upload(s, 'docs', '通知.htm', HTML))
    check('GB2312 HTML upload ready', job['state'] == 'ready' and job['document']['format'] == 'html', job)

    r = s.post('/api/v1/kbs/docs/retrieve', {'question': '档案管理办法第二条'})
    res = r.json()['results'][0] if r.status == 200 and r.json()['results'] else {}
    check('Word clause retrieved by its label', res.get('clause') == '第二条' and res.get('page') is None
          and res.get('path') == '第一章 总则 > 第二条', r)
    c = s.get(f"/api/v1/clauses/{res.get('clause_id')}").json()
    check('Word clause: text, no page image', c.get('format') == 'docx' and 'page_image_url' not in c
          and c.get('boxes') == [] and c.get('text', '').startswith('第二条 档案工作'), c)
    check('Word document has no page images', s.get(f'/api/v1/documents/{word_id}/pages/1.png').status == 404)
    r = s.get(f'/api/v1/documents/{word_id}/original')
    check('Word original downloads as itself', r.status == 200 and r.body == WORD
          and 'wordprocessingml' in (r.header('Content-Type') or '')
          and (r.header('Content-Disposition') or '').startswith('attachment'), r)

    r = s.post('/api/v1/kbs/docs/retrieve', {'question': '网页应当完整可读', 'mode': 'bm25'})
    res = r.json()['results'][0] if r.status == 200 and r.json()['results'] else {}
    check('HTML clause retrieved', res.get('clause') == '第二条' and res.get('text') == '第二条 归档的网页应当完整可读。'
          and res.get('path') == '一、总体要求 > 第二条', r)

    # bad files: each a failed job with its reason, the document listed as failed
    bad = [('truncated.docx', TRUNCATED_WORD, 'damaged or truncated Word file', 'bad_format'),
           ('bomb.docx', zip_bomb(), 'word/document.xml would expand to 70 MB', 'too_large'),
           ('nested.html', NESTED_HTML, 'nests elements more than 1000 deep', 'too_deep'),
           ('empty.html', b'<script>x()</script>', 'no visible text', 'empty')]
    for name, content, reason, code in bad:
        job = job_of(s, upload(s, 'docs', name, content))
        check(name + ' fails with its reason and code', job['state'] == 'failed' and reason in (job.get('error') or '')
              and job.get('error_code') == code, job)
    r = upload(s, 'docs', 'x.pdf', b'%PDF-1.4\n', ocr='sometimes')
    check('ocr takes off, auto or force', r.status == 400 and r.error_code() == 'invalid', r)


def test_scan(s, tmp):
    scan_path = make_scan(tmp)
    if not scan_path:
        check('mutool for the scan', False, 'mupdf-tools is missing (tools/setup.sh installs it)')
        return
    scan = open(scan_path, 'rb').read()
    # the server runs with --ocr off: without a parameter the scan is only flagged
    job = job_of(s, upload(s, 'docs', 'scan-off.pdf', scan))
    check('server default --ocr off', job['state'] == 'failed' and 'OCR is off' in (job.get('error') or '')
          and job.get('error_code') == 'ocr_off', job)
    # ?ocr=auto on a raw upload: recognised, with progress and OCR confidence in the page report
    r = s.post('/api/v1/kbs/docs/documents?ocr=auto&filename=' + quote('扫描件.pdf'), scan)
    job = job_of(s, r)
    check('scan read by OCR', job['state'] == 'ready' and job['document']['pages'] == 1
          and job['done'] == job['total'] == 1, job)
    doc = s.get(f"/api/v1/documents/{job.get('document_id')}").json()
    pq = doc.get('page_quality') or [{}]
    check('page report says OCR', 'OCR' in pq[0].get('reason', '') and 0.8 <= pq[0].get('quality', 0) <= 1, doc)
    r = s.post('/api/v1/kbs/docs/retrieve', {'question': '扫描件第二条'})
    res = r.json()['results'][0] if r.status == 200 and r.json()['results'] else {}
    check('scanned article found by its label', res.get('clause') == '第二条' and res.get('page') == 1
          and res.get('text', '').startswith('第二条'), r)
    c = s.get(f"/api/v1/clauses/{res.get('clause_id')}").json()
    check('no page warning on a clean scan', c.get('page_warnings') == [], c)
    boxes = c.get('boxes') or []
    check('boxes on the page', boxes and all(b['page'] == 1 and 0 < b['x0'] < b['x1'] < 600 and 0 < b['y0'] < b['y1']
                                            < 850 for b in boxes), c)
    r = s.get(c.get('page_image_url', '/none') + '&width=600')
    check('page image with the highlight', r.status == 200 and png_size(r.body)[0] == 600, r)
    # the form field does the same as the query parameter
    job = job_of(s, upload(s, 'docs', 'scan-force.pdf', scan + b'\n%other copy\n', ocr='force'))
    check('ocr form field', job['state'] == 'ready', job)
    # a scan at 60 dpi: read, with low confidence, which the document and its clauses' page view warn of
    s.post('/api/v1/kbs', {'name': 'blurred'})
    job = job_of(s, upload(s, 'blurred', 'blurred.pdf', open(make_scan(tmp, page=2, dpi=60), 'rb').read(), ocr='auto'))
    warnings = (job.get('document') or {}).get('warnings') or []
    check('low OCR confidence is a warning', job['state'] == 'ready' and any(
        w.startswith('page 1: low OCR confidence') for w in warnings), job)
    r = s.post('/api/v1/kbs/blurred/retrieve', {'question': '第七条'})
    res = r.json()['results'][0] if r.status == 200 and r.json()['results'] else {}
    c = s.get(f"/api/v1/clauses/{res.get('clause_id')}").json()
    pw = c.get('page_warnings') or [{}]
    check("the clause's page warns", pw[0].get('page') == 1 and pw[0].get('quality', 1) < 0.8
          and 'low OCR confidence' in pw[0].get('reason', ''), c)


def main():
    binary = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix='cq-formats-')
    s = Server(binary, args=['--ocr', 'off'])
    try:
        s.start()
        test_formats(s)
        test_scan(s, tmp)
        check('stops cleanly', s.stop() == 0, s.log_text())
    except Exception as e:
        check('no exception', False, f'{e!r}\n{s.log_text()}')
        raise
    finally:
        s.close()
        shutil.rmtree(tmp, ignore_errors=True)
    T.finish()


if __name__ == '__main__':
    main()
