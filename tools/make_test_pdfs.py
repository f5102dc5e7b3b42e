#!/usr/bin/env python3
"""Writes the small PDF fixtures of tests/unit/test_app_doctext.c into tests/data/pdf/.

Plain Python (no PDF library): every page is a hand-made content stream, so the tests know exactly where each
line sits. The CJK text uses the non-embedded Adobe font STSong-Light with the UniGB-UCS2-H CMap (full-width
glyphs of 1000 units, text extractable through the CMap without any font file); the English text uses Courier
(600 units per character), so that line widths are simple to compute. The encrypted fixture is the English one
re-saved by `mutool clean` with a user password (mupdf-tools is in tools/setup.sh).

    python3 tools/make_test_pdfs.py            # rewrites tests/data/pdf/*.pdf
"""
import os
import subprocess
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "pdf")

PAGE_W, PAGE_H = 595, 842


def utf16_hex(s):
    """Text string for the Info dictionary: UTF-16BE with a BOM, as a hex string."""
    return "<FEFF" + s.encode("utf-16-be").hex().upper() + ">"


def ucs2_hex(s):
    """String for a Type0 font with the UniGB-UCS2-H CMap: one 2-byte code per character."""
    return "<" + s.encode("utf-16-be").hex().upper() + ">"


def latin_str(s):
    return "(" + s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


class Pdf:
    def __init__(self):
        self.objects = []  # bytes of object i+1

    def add(self, body):
        self.objects.append(body if isinstance(body, bytes) else body.encode("latin-1"))
        return len(self.objects)

    def reserve(self):
        self.objects.append(None)
        return len(self.objects)

    def set(self, num, body):
        self.objects[num - 1] = body if isinstance(body, bytes) else body.encode("latin-1")

    def stream(self, data, extra="", compress=False):
        if isinstance(data, str):
            data = data.encode("latin-1")
        if compress:
            data = zlib.compress(data)
            extra += " /Filter /FlateDecode"
        return self.add(b"<< /Length %d%s >>\nstream\n" % (len(data), extra.encode()) + data + b"\nendstream")

    def write(self, path, root, info=None):
        out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
        offsets = []
        for i, body in enumerate(self.objects):
            offsets.append(len(out))
            out += b"%d 0 obj\n" % (i + 1) + body + b"\nendobj\n"
        xref = len(out)
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(self.objects) + 1)
        for off in offsets:
            out += b"%010d 00000 n \n" % off
        trailer = "<< /Size %d /Root %d 0 R" % (len(self.objects) + 1, root)
        if info:
            trailer += " /Info %d 0 R" % info
        out += (trailer + " >>\nstartxref\n%d\n%%%%EOF\n" % xref).encode()
        with open(path, "wb") as f:
            f.write(out)


def cjk_font(pdf):
    desc = pdf.add("<< /Type /FontDescriptor /FontName /STSong-Light /Flags 6 /FontBBox [-25 -254 1000 880] "
                   "/ItalicAngle 0 /Ascent 880 /Descent -120 /CapHeight 880 /StemV 93 >>")
    cid = pdf.add("<< /Type /Font /Subtype /CIDFontType0 /BaseFont /STSong-Light "
                  "/CIDSystemInfo << /Registry (Adobe) /Ordering (GB1) /Supplement 4 >> "
                  "/FontDescriptor %d 0 R /DW 1000 /W [1 95 500] >>" % desc)
    return pdf.add("<< /Type /Font /Subtype /Type0 /BaseFont /STSong-Light /Encoding /UniGB-UCS2-H "
                   "/DescendantFonts [%d 0 R] >>" % cid)


def courier(pdf):
    return pdf.add("<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /WinAnsiEncoding >>")


def pages_tree(pdf, pages_num, kids):
    pdf.set(pages_num, "<< /Type /Pages /Kids [%s] /Count %d >>" % (" ".join("%d 0 R" % k for k in kids), len(kids)))


def page(pdf, pages_num, content, resources):
    c = pdf.stream(content)
    return pdf.add("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 %d %d] /Contents %d 0 R /Resources %s >>"
                   % (pages_num, PAGE_W, PAGE_H, c, resources))


# ---- Chinese law: 3 pages -------------------------------------------------------------------------------------
# Lines of 40 full-width characters at 12 pt fill x = 60 .. 540 exactly. y is from the top (converted below).

ZH_SIZE = 12
ZH_LEFT = 60
ZH_PITCH = 20

ZH_PAGES = [
    [  # page 1
        ("title", "测试法规"),
        ("line", "第一章 总则"),
        ("line", "第一条 为了规范测试文件的组织和行为，鼓励、支持、引导测试工作的发展，保护"),  # 40: wraps
        ("line", "测试人员的合法权益，制定本法。"),
        ("line", "第二条 本法所称测试文件，是指在软件开发过程中，由开发者编写、维护并用于验证"),
        ("line", "程序行为的文件。"),
        ("line", "第三条 测试文件应当遵循下列原则："),
        ("line", "（一）测试以需求为依据；"),
        ("line", "（二）结果可重复。"),
        ("spaced", ["第", "五", "条"], "本法自2 0 1 7年起施行。"),
        ("line", "第六条 测试人员应当如实记录结果，任何单位和个人不得篡改测试记录，不得隐瞒"),  # wraps to page 2
    ],
    [  # page 2
        ("line", "测试中发现的缺陷。"),
        ("line", "第七条 国家鼓励公民、法人和其他组织参与测试工作，依法保护其合法权益。本条"),
        ("line", "所称测试工作包括单元测试和集成测试。"),
        ("line", "第八条 违反本法规定的，由有关部门责令改正。"),
    ],
    [  # page 3
        ("line", "第二章 附则"),
        ("line", "第九条 本法由测试委员会负责解释。"),
    ],
]


def zh_content(lines, page_no):
    out = []
    y = 90  # first baseline, from the top
    # running header in the top margin, page number in the bottom margin
    out.append("BT /F1 10 Tf 1 0 0 1 %d %d Tm %s Tj ET" % (ZH_LEFT, PAGE_H - 40, ucs2_hex("测试法规汇编")))
    out.append("BT /F2 10 Tf 1 0 0 1 %d %d Tm %s Tj ET" % (PAGE_W // 2 - 15, 40, latin_str("- %d -" % page_no)))
    for item in lines:
        kind = item[0]
        if kind == "title":
            w = len(item[1]) * 18
            out.append("BT /F1 18 Tf 1 0 0 1 %d %d Tm %s Tj ET" % ((PAGE_W - w) // 2, PAGE_H - y, ucs2_hex(item[1])))
            y += 34
            continue
        if kind == "line":
            out.append("BT /F1 %d Tf 1 0 0 1 %d %d Tm %s Tj ET" % (ZH_SIZE, ZH_LEFT, PAGE_H - y, ucs2_hex(item[1])))
        elif kind == "spaced":
            # a label printed with wide gaps between its characters ("第 五 条"), then the body, whose year is
            # printed digit by digit with gaps ("2 0 1 7年")
            x = ZH_LEFT
            for ch in item[1]:
                out.append("BT /F1 %d Tf 1 0 0 1 %d %d Tm %s Tj ET" % (ZH_SIZE, x, PAGE_H - y, ucs2_hex(ch)))
                x += ZH_SIZE + 8
            x += 4
            body = item[2]
            for part in body.split(" "):
                out.append("BT /F1 %d Tf 1 0 0 1 %d %d Tm %s Tj ET" % (ZH_SIZE, x, PAGE_H - y, ucs2_hex(part)))
                x += sum(6 if ord(c) < 128 else ZH_SIZE for c in part) + 5
        y += ZH_PITCH
    return "\n".join(out)


def make_zh(path):
    pdf = Pdf()
    pages_num = pdf.reserve()
    f1 = cjk_font(pdf)
    f2 = courier(pdf)
    res = "<< /Font << /F1 %d 0 R /F2 %d 0 R >> >>" % (f1, f2)
    kids = [page(pdf, pages_num, zh_content(lines, i + 1), res) for i, lines in enumerate(ZH_PAGES)]
    pages_tree(pdf, pages_num, kids)
    root = pdf.add("<< /Type /Catalog /Pages %d 0 R >>" % pages_num)
    info = pdf.add("<< /Title %s /Producer (clauseqa tools/make_test_pdfs.py) >>" % utf16_hex("测试法规"))
    pdf.write(path, root, info)


# ---- English contract: 2 text pages and a scanned exhibit ------------------------------------------------------
# Courier 10 pt: 6 pt per character; column x = 72 .. 72 + 78 * 6 = 540.

EN_SIZE = 10
EN_LEFT = 72
EN_PITCH = 12
EN_WIDTH = 78

EN_PARAS = [
    ("SERVICES AGREEMENT", "center"),
    ("This Services Agreement is made between Alpha Corp. and Beta LLC on the date of the last signature below.",
     "wrap"),
    ("1. Definitions.", "plain"),
    ("\"Services\" means the consulting services described in Exhibit A, as amended from time to time by written "
     "agreement of the parties, together with any reports delivered under this Agreement.", "wrap"),
    ("2. Term and Termination.", "plain"),
    ("This Agreement starts on the Effective Date and continues for two years unless terminated earlier. Either "
     "party may terminate this Agreement for convenience upon thirty days prior written notice, and the legal "
     "consequences of termi-nation are set out in Section 5.", "wrap"),
    ("Section 3 Fees", "plain"),
    ("Beta shall pay Alpha the fees set out in Exhibit B within forty-five days of receiving each invoice. Late "
     "payments bear interest at one percent per month until paid in full, and Alpha may suspend the Services while "
     "any undisputed invoice remains unpaid for more than sixty days after its due date, provided that Alpha first "
     "gives Beta written notice of the suspension and a chance to cure. Beta shall reimburse reasonable travel "
     "expenses approved in advance in writing by Beta.", "wrap"),
    ("4. Confidentiality.", "plain"),
    ("Each party shall keep the other party's confidential information secret.", "wrap"),
    (("5.1", "All notices under this Agreement shall be in writing."), "tab"),
]


def wrap_words(text, width):
    """Greedy wrap at `width` characters; "termi-nation" (the fixture's one hyphenated word) may break after its
    hyphen."""
    words = text.split(" ")
    lines, cur = [], ""
    for w in words:
        if not cur:
            cur = w
        elif len(cur) + 1 + len(w) <= width:
            cur += " " + w
        elif w.startswith("termi-") and len(cur) + 1 + w.index("-") + 1 <= width:
            head, tail = w.split("-", 1)
            lines.append(cur + " " + head + "-")
            cur = tail
        else:
            lines.append(cur)
            cur = w
    if cur:
        lines.append(cur)
    return lines


def en_lines():
    out = []
    for text, kind in EN_PARAS:
        if kind == "wrap":
            for i, l in enumerate(wrap_words(text, EN_WIDTH)):
                out.append((l, "left"))
        else:
            out.append((text, kind))
        out.append(("", "gap"))
    return out


def en_pages():
    lines = en_lines()
    per_page = 22
    pages, cur, n = [], [], 0
    for l in lines:
        if n >= per_page and l[1] != "gap":
            pages.append(cur)
            cur, n = [], 0
        cur.append(l)
        n += 1
    pages.append(cur)
    return pages


def en_content(lines, page_no, n_pages):
    out = ["BT /F1 8 Tf 1 0 0 1 %d %d Tm %s Tj ET" % (EN_LEFT, PAGE_H - 36, latin_str("CONFIDENTIAL"))]
    foot = "Page %d of %d" % (page_no, n_pages)
    out.append("BT /F1 8 Tf 1 0 0 1 %d %d Tm %s Tj ET" % (PAGE_W - 72 - len(foot) * 5, 30, latin_str(foot)))
    y = 80
    for text, kind in lines:
        if kind == "gap":
            y += EN_PITCH // 2
            continue
        if kind == "tab":  # a label, then its text at a tab stop 3 em to the right of the label's end
            label, body = text
            out.append("BT /F1 %d Tf 1 0 0 1 %d %d Tm %s Tj ET" % (EN_SIZE, EN_LEFT, PAGE_H - y, latin_str(label)))
            x = EN_LEFT + len(label) * 6 + 3 * EN_SIZE
            out.append("BT /F1 %d Tf 1 0 0 1 %d %d Tm %s Tj ET" % (EN_SIZE, x, PAGE_H - y, latin_str(body)))
            y += EN_PITCH
            continue
        x = EN_LEFT if kind != "center" else (PAGE_W - len(text) * 6) // 2
        out.append("BT /F1 %d Tf 1 0 0 1 %d %d Tm %s Tj ET" % (EN_SIZE, x, PAGE_H - y, latin_str(text)))
        y += EN_PITCH
    return "\n".join(out)


def image_page(pdf, pages_num):
    """A page with one 16x16 grey image scaled over most of it and no text: what a scanner produces."""
    pixels = bytes((x * 16 + y * 3) % 256 for y in range(16) for x in range(16))
    img = pdf.stream(pixels, " /Type /XObject /Subtype /Image /Width 16 /Height 16 /ColorSpace /DeviceGray "
                     "/BitsPerComponent 8", compress=True)
    content = "q 450 0 0 650 72 100 cm /Im1 Do Q"
    return page(pdf, pages_num, content, "<< /XObject << /Im1 %d 0 R >> >>" % img)


def make_en(path):
    pdf = Pdf()
    pages_num = pdf.reserve()
    f1 = courier(pdf)
    res = "<< /Font << /F1 %d 0 R >> >>" % f1
    text_pages = en_pages()
    n_pages = len(text_pages) + 1
    kids = [page(pdf, pages_num, en_content(lines, i + 1, n_pages), res) for i, lines in enumerate(text_pages)]
    kids.append(image_page(pdf, pages_num))
    pages_tree(pdf, pages_num, kids)
    root = pdf.add("<< /Type /Catalog /Pages %d 0 R >>" % pages_num)
    info = pdf.add("<< /Title (Microsoft Word - services_agreement_v3.docx) >>")
    pdf.write(path, root, info)


def make_scanned(path):
    pdf = Pdf()
    pages_num = pdf.reserve()
    kids = [image_page(pdf, pages_num), image_page(pdf, pages_num)]
    pages_tree(pdf, pages_num, kids)
    root = pdf.add("<< /Type /Catalog /Pages %d 0 R >>" % pages_num)
    pdf.write(path, root)


def main():
    os.makedirs(OUT, exist_ok=True)
    make_zh(os.path.join(OUT, "zh_law.pdf"))
    make_en(os.path.join(OUT, "en_contract.pdf"))
    make_scanned(os.path.join(OUT, "scanned.pdf"))
    enc = os.path.join(OUT, "encrypted.pdf")
    try:
        subprocess.run(["mutool", "clean", "-E", "aes-128", "-U", "secret", "-O", "owner-secret",
                        os.path.join(OUT, "en_contract.pdf"), enc], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("make_test_pdfs: mutool clean failed (%s); install mupdf-tools (tools/setup.sh)" % e)
    for name in sorted(os.listdir(OUT)):
        print("%-20s %6d bytes" % (name, os.path.getsize(os.path.join(OUT, name))))


if __name__ == "__main__":
    main()
