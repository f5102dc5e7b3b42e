"""Documents of the formats issue 18 added, made by the tests that need them (the HTTP API's and the page's): a Word
file, a GB2312 web page, bad ones (truncated Word, a zip bomb, HTML nested too deep) and a scan (a page of
tests/data/pdf/zh_law.pdf drawn by mutool, from mupdf-tools, into a grey picture alone on a PDF page)."""
import io
import os
import shutil
import subprocess
import zipfile

from http_server import SOURCE_DIR

W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def docx(body_xml):
    out = io.BytesIO()
    with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as z:
        z.writestr('[Content_Types].xml', '<Types/>')
        z.writestr('word/document.xml', f'<w:document {W}><w:body>{body_xml}</w:body></w:document>')
    return out.getvalue()


def para(text, outline=None):
    ppr = f'<w:pPr><w:outlineLvl w:val="{outline}"/></w:pPr>' if outline is not None else ''
    return f'<w:p>{ppr}<w:r><w:t>{text}</w:t></w:r></w:p>'


WORD = docx(para('档案管理办法') + para('第一章 总则', 0) + para('第一条 为了加强档案管理，制定本办法。')
            + para('第二条 档案工作实行统一领导、分级管理。')
            + '<w:tbl><w:tr><w:tc>' + para('类别') + '</w:tc><w:tc>' + para('期限') + '</w:tc></w:tr>'
            + '<w:tr><w:tc>' + para('文书') + '</w:tc><w:tc>' + para('永久') + '</w:tc></w:tr></w:tbl>')

HTML = ('<html><head><meta http-equiv="Content-Type" content="text/html; charset=gb2312">'
        '<title>通知</title></head><body><nav>首页 | 政务公开</nav><script>var a = 1;</script>'
        '<h1>关于做好网页归档的通知</h1><h2>一、总体要求</h2><p>第一条 各单位应当定期归档网页。</p>'
        '<p>第二条 归档的网页应当\n完整可读。</p><footer>版权所有</footer></body></html>').encode('gb18030')

TRUNCATED_WORD = WORD[:len(WORD) // 2]
NESTED_HTML = b'<div>' * 5000


def zip_bomb():
    """A Word file whose document part expands to 70 MB of spaces (past the 64 MB a part may have)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as z:
        z.writestr('word/document.xml', f'<w:document {W}>' + ' ' * (70 << 20))
    return out.getvalue()


def make_scan(tmp, page=1, dpi=150):
    """A one-page image-only PDF of a page of zh_law.pdf, or None without mutool."""
    if not shutil.which('mutool'):
        return None
    png, pdf = os.path.join(tmp, f'page{page}-{dpi}.png'), os.path.join(tmp, f'scan{page}-{dpi}.pdf')
    src = os.path.join(SOURCE_DIR, 'tests', 'data', 'pdf', 'zh_law.pdf')
    subprocess.run(['mutool', 'draw', '-q', '-r', str(dpi), '-c', 'gray', '-o', png, src, str(page)], check=True,
                   capture_output=True)
    subprocess.run(['mutool', 'convert', '-O', 'compress', '-o', pdf, png], check=True, capture_output=True)
    return pdf
