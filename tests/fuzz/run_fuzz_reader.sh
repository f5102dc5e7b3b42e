#!/usr/bin/env bash
# Bounded libFuzzer run of tests/fuzz/fuzz_reader.c (the document readers of the format table): makes the seed corpus
# (the test PDFs and demo documents; generated PDFs: a page tree of page nodes, one whose /Count lies, one that loops,
# nested q operators, a page of many glyphs, a compressed stream, a broken xref; Markdown and text in UTF-8, UTF-16
# and GB18030; HTML pages and Word documents, ordinary and of the hostile shapes of issue 29), then fuzzes for
# SECONDS.
#   usage: run_fuzz_reader.sh path/to/fuzz_reader SECONDS [WORKDIR]
# A seed is "FORMAT\0BYTES" (fuzz_reader.c). A crash leaves its input as WORKDIR/crash-* (replay: fuzz_reader FILE);
# once fixed, it goes into tests/fuzz/regressions/ as reader-WHAT.
# Longer runs: docs/RELIABILITY.md.
set -euo pipefail
fuzzer=$1
seconds=$2
work=${3:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
mkdir -p "$work/corpus"

# seed NAME FORMAT FILE
seed() { { printf '%s\0' "$2"; cat "$3"; } > "$work/corpus/$1"; }
for f in "$src"/tests/data/pdf/*.pdf; do seed "pdf-$(basename "$f" .pdf)" pdf "$f"; done
seed pdf-demo pdf "$src/data/demo/劳动法(2018-12-29).pdf"
seed md-demo md "$src/data/demo/sample-services-agreement.md"
for f in "$src"/tests/data/structure/*.md; do seed "md-$(basename "$f" .md)" md "$f"; done
for f in "$src"/tests/data/structure/*.txt; do seed "txt-$(basename "$f" .txt)" txt "$f"; done
# inputs that found something (docs/RELIABILITY.md), already in NAME\0BYTES form: replayed first by every run
cp "$here"/regressions/reader-* "$work/corpus/"

python3 - "$work/corpus" <<'PY'
import os, sys, zlib
out = sys.argv[1]

def pdf(contents, kids_of_root=None, count=None, extra=b'', compress=False, box=b'[0 0 300 200]'):
    objs, n = [], len(contents)
    page_objs = [4 + 2 * i for i in range(n)]
    kids = kids_of_root if kids_of_root is not None else page_objs
    objs.append(b'<< /Type /Catalog /Pages 2 0 R >>')
    objs.append(b'<< /Type /Pages /Count %d /Kids [%s] %s>>' % (n if count is None else count,
                b' '.join(b'%d 0 R' % k for k in kids), extra))
    objs.append(b'<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>')
    for i, c in enumerate(contents):
        objs.append(b'<< /Type /Page /Parent 2 0 R /MediaBox %s /Resources << /Font << /F1 3 0 R >> >> '
                    b'/Contents %d 0 R >>' % (box, page_objs[i] + 1))
        data = zlib.compress(c) if compress else c
        objs.append(b'<< /Length %d%s >>\nstream\n%s\nendstream' % (len(data), b' /Filter /FlateDecode' if compress
                                                                      else b'', data))
    body, offs = bytearray(b'%PDF-1.4\n'), []
    for i, o in enumerate(objs):
        offs.append(len(body))
        body += b'%d 0 obj\n%s\nendobj\n' % (i + 1, o)
    x = len(body)
    body += b'xref\n0 %d\n0000000000 65535 f \n' % (len(objs) + 1)
    for o in offs:
        body += b'%010d 00000 n \n' % o
    body += b'trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n' % (len(objs) + 1, x)
    return bytes(body)

def text(s):
    return b'BT /F1 10 Tf 12 TL 20 180 Td ' + b''.join(b'(%s) Tj T* ' % l.encode('latin-1') for l in s) + b'ET'

def write(name, fmt, data):
    with open(os.path.join(out, name), 'wb') as f:
        f.write(fmt + b'\0' + data)

pages = [text(['Article %d. Payment' % i, 'The party shall pay within %d days.' % (10 * i)]) for i in range(1, 4)]
write('pdf-gen-flat', b'pdf', pdf(pages))
write('pdf-gen-lying-count', b'pdf', pdf(pages, count=7))
write('pdf-gen-cycle', b'pdf', pdf(pages, kids_of_root=[4, 6, 2]))
write('pdf-gen-nested-q', b'pdf', pdf([b'q ' * 3000 + text(['Nested'])], compress=True))
write('pdf-gen-glyphs', b'pdf', pdf([b'BT /F1 1 Tf 1 TL 10 190 Td ' + b'(ab cd ef gh) Tj T* ' * 150 + b'ET']))
write('pdf-gen-compressed', b'pdf', pdf(pages, compress=True))
write('pdf-gen-bad-xref', b'pdf', pdf(pages).replace(b'startxref\n', b'startxref\n9'))
write('pdf-gen-tj-array', b'pdf', pdf([b'BT /F1 10 Tf 20 100 Td [(Sec) -20 (tion 2.1) 300 (Term)] TJ ET']))
law = '第一章 总则\n\n第一条 为了保护劳动者的合法权益，制定本法。\n\n第二条 本法适用于（一）企业；（二）个体经济组织。\n'
write('txt-gen-utf16', b'txt', b'\xff\xfe' + law.encode('utf-16-le'))
write('txt-gen-gb18030', b'txt', law.encode('gb18030'))
write('md-gen-law', b'md', ('# 劳动法\n\n' + law + '\n## Article 5. Notices\n\n- a\n- b\n').encode())
write('txt-gen-invalid-utf8', b'txt', b'Section 1. \xff\xfe\xc0\xaf ok\r\nSection 2.\x00 end')

# HTML (issue 29): a notice as government sites make it, GBK with a bad byte, tables, lists, broken markup, and the
# hostile shapes at a size the fuzzer keeps (whitespace runs, stray end tags, reopened formatting elements, deep
# nesting, many attributes)
page = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>通知</title><script>x()</script></head><body>'
        '<nav>首页</nav><main><h1>管理办法</h1><h2>第一章 总则</h2><p>第一条 为了规范，\n 制定本办法。</p>'
        '<ol type="a" start="2"><li>一<li>二</ol><ul><li>纸质<b>同时</b>归档</ul>'
        '<table><tr><th>类别<th>期限<tr><td>文书<td><p>永久</p></table><pre>第四条\n施行。</pre>'
        '<p hidden>隐藏</p><div style="display: none">x</div><footer>日期</footer></main></body></html>')
write('html-gen-notice', b'html', page.encode())
gbk = page.replace('utf-8', 'gbk').encode('gb18030')
write('html-gen-gbk-bad-byte', b'html', gbk[:200] + b'\xff' + gbk[200:])
write('html-gen-undeclared-gb', b'html', page.replace('<meta charset="utf-8">', '').encode('gb18030'))
write('html-gen-utf16', b'html', b'\xff\xfe' + page.encode('utf-16-le'))
write('html-gen-broken', b'html', '<p>第一条 <b>未闭合<p>第二条</table></div><td>x<li>y</ul></i>'.encode())
write('html-gen-space-runs', b'html', b'<p>' + b'word \n ' * 8000)
write('html-gen-stray-end', b'html', b'<div></i>' * 3000)
write('html-gen-reopened', b'html', b'<div><b>x</div><i>y</i>' * 2000)
write('html-gen-span-div', b'html', b'<span><div></span>' * 600)
write('html-gen-attributes', b'html', b'<p' + b''.join(b' a%d' % i for i in range(1500)) + b'>x</p>')

# Word (issue 29): a document with styles (a basedOn chain), numbering (a num before its abstractNum, one naming no
# list), a table, a text box, hidden and deleted text, a title; and the hostile shapes small
import io, zipfile
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
def docx(body, styles=None, numbering=None, core=None):
    b = io.BytesIO()
    with zipfile.ZipFile(b, 'w', zipfile.ZIP_DEFLATED) as z:
        z.writestr('[Content_Types].xml', '<Types/>')
        z.writestr('word/document.xml', '<w:document %s><w:body>%s</w:body></w:document>' % (W, body))
        if styles is not None: z.writestr('word/styles.xml', '<w:styles %s>%s</w:styles>' % (W, styles))
        if numbering is not None: z.writestr('word/numbering.xml', '<w:numbering %s>%s</w:numbering>' % (W, numbering))
        if core is not None: z.writestr('docProps/core.xml', core)
    return b.getvalue()
def para(text, style=None, num=None, lvl=0):
    ppr = ''
    if style: ppr += '<w:pStyle w:val="%s"/>' % style
    if num is not None: ppr += '<w:numPr><w:ilvl w:val="%d"/><w:numId w:val="%d"/></w:numPr>' % (lvl, num)
    return '<w:p>%s<w:r><w:t>%s</w:t></w:r></w:p>' % ('<w:pPr>%s</w:pPr>' % ppr if ppr else '', text)
styles = ('<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style>'
          '<w:style w:type="paragraph" w:styleId="H1b"><w:name w:val="x"/><w:basedOn w:val="Heading1"/></w:style>'
          '<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>'
          '<w:style w:type="paragraph" w:styleId="List"><w:name w:val="l"/><w:pPr><w:numPr><w:numId w:val="1"/>'
          '</w:numPr></w:pPr></w:style>')
numbering = ('<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num><w:num w:numId="2"><w:abstractNumId w:val="9"/>'
             '</w:num><w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:start w:val="1"/>'
             '<w:numFmt w:val="chineseCounting"/><w:lvlText w:val="第%1章"/></w:lvl><w:lvl w:ilvl="1">'
             '<w:numFmt w:val="decimal"/><w:lvlText w:val="%1.%2"/><w:suff w:val="space"/></w:lvl></w:abstractNum>')
body = (para('办法', 'Title') + para('总则', 'H1b', 1) + para('第一条 内容。', 'List') + para('一项', None, 1, 1) +
        para('悬空', None, 2) + '<w:tbl><w:tr><w:tc>' + para('甲') + '</w:tc><w:tc>' + para('乙') +
        '</w:tc></w:tr></w:tbl><w:p><w:r><w:rPr><w:vanish/></w:rPr><w:t>隐藏</w:t></w:r><w:del><w:r><w:delText>删'
        '</w:delText></w:r></w:del><w:r><w:txbxContent>' + para('文本框') + '</w:txbxContent></w:r></w:p>')
core = ('<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>标题</dc:title></cp:coreProperties>')
write('docx-gen-document', b'docx', docx(body, styles, numbering, core))
chain = ''.join('<w:style w:type="paragraph" w:styleId="S%d"><w:name w:val="s"/><w:basedOn w:val="S%d"/></w:style>'
                % (i, i - 1) for i in range(1, 200))
write('docx-gen-style-chain', b'docx', docx(''.join(para('段%d' % i, 'S199') for i in range(300)), chain))
dangling = ''.join('<w:num w:numId="%d"><w:abstractNumId w:val="%d"/></w:num>' % (i, 1000 + i) for i in range(1, 300))
write('docx-gen-dangling-nums', b'docx', docx(''.join(para('项', None, 1 + i % 299) for i in range(300)), None,
                                              dangling))
write('docx-gen-empty-elements', b'docx', docx(para('第一条') + '<a/>' * 50000))
write('docx-gen-no-body', b'docx', docx('').replace(b'word/document.xml', b'word/documenx.xml'))
PY

set +e
"$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 -max_len=262144 \
  -dict="$here/reader.dict" -artifact_prefix="$work/" "$work/corpus" > "$work/fuzz.log" 2>&1
rc=$?
grep -E '^#[0-9]+.*(INITED|DONE)|^stat::|^Done|ERROR|SUMMARY|runtime error|broken contract|crash-|Test unit|timeout' \
  "$work/fuzz.log"
exit $rc
