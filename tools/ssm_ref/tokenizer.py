"""Tokenizer cq-hash-v1, the Python twin of ssm/tokenizer.c (docs/SSM.md has the id table)."""

WORD_BASE, WORD_BUCKETS = 128, 8192
CJK_BASE, CJK_FIRST, CJK_COUNT = WORD_BASE + WORD_BUCKETS, 0x4E00, 0x9FFF - 0x4E00 + 1
OTHER_BASE = CJK_BASE + CJK_COUNT
OTHER_BUCKETS = 32768 - OTHER_BASE
PAD, UNK, BOS, SEP, QRY = 0, 1, 2, 3, 4


def _fnv1a(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def _is_space(cp):
    return (cp <= 0x20 or cp == 0x7F or 0x80 <= cp <= 0xA0 or cp in (0x3000, 0xFEFF, 0x2028, 0x2029)
            or 0x2000 <= cp <= 0x200F)


def _is_letter(b):
    return 0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A


def tokenize(data):
    """data: bytes (UTF-8; invalid bytes give UNK) or str. Returns a list of ids; adds no markers."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    ids, i, n = [], 0, len(data)
    while i < n:
        c = data[i]
        if _is_letter(c):
            j = i
            while j < n and _is_letter(data[j]):
                j += 1
            word = bytes(b | 0x20 for b in data[i:j])
            ids.append(word[0] if j - i == 1 else WORD_BASE + _fnv1a(word) % WORD_BUCKETS)
            i = j
            continue
        cp, k = _utf8_next(data, i)
        if k == 0:
            ids.append(UNK)
            i += 1
            continue
        i += k
        if _is_space(cp):
            continue
        if cp < 0x80:
            ids.append(cp)
        elif CJK_FIRST <= cp < CJK_FIRST + CJK_COUNT:
            ids.append(CJK_BASE + cp - CJK_FIRST)
        else:
            ids.append(OTHER_BASE + _fnv1a(cp.to_bytes(4, "little")) % OTHER_BUCKETS)
    return ids


def _utf8_next(s, i):
    c = s[i]
    if c < 0x80:
        return c, 1
    if c & 0xE0 == 0xC0:
        length, v, lo = 2, c & 0x1F, 0x80
    elif c & 0xF0 == 0xE0:
        length, v, lo = 3, c & 0x0F, 0x800
    elif c & 0xF8 == 0xF0:
        length, v, lo = 4, c & 0x07, 0x10000
    else:
        return 0, 0
    if i + length > len(s):
        return 0, 0
    for b in s[i + 1:i + length]:
        if b & 0xC0 != 0x80:
            return 0, 0
        v = v << 6 | (b & 0x3F)
    if v < lo or v > 0x10FFFF or 0xD800 <= v <= 0xDFFF:
        return 0, 0
    return v, length
