#!/usr/bin/env bash
# Bounded libFuzzer run of tests/fuzz/fuzz_reader.c (the document readers of the format table): makes the seed corpus
# (the test PDFs and demo documents; generated PDFs: a page tree of page nodes, one whose /Count lies, one that loops,
# nested q operators, a page of many glyphs, a compressed stream, a broken xref; Markdown and text in UTF-8, UTF-16
# and GB18030), then fuzzes for SECONDS.
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
PY

set +e
"$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 -max_len=262144 \
  -dict="$here/reader.dict" -artifact_prefix="$work/" "$work/corpus" > "$work/fuzz.log" 2>&1
rc=$?
grep -E '^#[0-9]+.*(INITED|DONE)|^stat::|^Done|ERROR|SUMMARY|runtime error|broken contract|crash-|Test unit|timeout' \
  "$work/fuzz.log"
exit $rc
