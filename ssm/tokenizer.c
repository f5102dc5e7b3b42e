/* Tokenizer cq-hash-v1 (docs/SSM.md has the table; tools/ssm_ref/tokenizer.py is its Python twin).
 *
 *   0..4           PAD UNK BOS SEP QRY
 *   33..126        ASCII punctuation, digits and one-letter words (lower-cased), one id each
 *   128..8319      ASCII words of 2+ letters, lower-cased, FNV-1a hashed into 8192 buckets
 *   8320..29311    CJK Unified Ideographs U+4E00..U+9FFF, one id each
 *   29312..32767   every other code point, FNV-1a hashed into 3456 buckets
 * Whitespace and control characters separate tokens and emit none; invalid UTF-8 bytes give UNK. */
#include <stdint.h>

#include "ssm/ssm.h"

enum {
    WORD_BASE = 128,
    WORD_BUCKETS = 8192,
    CJK_BASE = WORD_BASE + WORD_BUCKETS,
    CJK_FIRST = 0x4E00,
    CJK_COUNT = 0x9FFF - 0x4E00 + 1,
    OTHER_BASE = CJK_BASE + CJK_COUNT,
    OTHER_BUCKETS = CQ_SSM_VOCAB_SIZE - OTHER_BASE,
};

_Static_assert(OTHER_BASE == 29312 && OTHER_BUCKETS == 3456, "cq-hash-v1 layout");

#define FNV_OFFSET 2166136261u
#define FNV_PRIME 16777619u

/* Decodes one UTF-8 sequence at s (n bytes left); returns its length, or 0 for an invalid byte. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char c = s[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

static int is_space(uint32_t cp) {
    return cp <= 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0xA0) || cp == 0x3000 || cp == 0xFEFF ||
           (cp >= 0x2000 && cp <= 0x200F) || cp == 0x2028 || cp == 0x2029;
}

static int ascii_letter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

size_t cq_ssm_tokenize(const char *text, size_t len, int32_t *ids, size_t cap) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0, n = 0;
#define EMIT(id)                         \
    do {                                 \
        if (n < cap) ids[n] = (int32_t)(id); \
        n++;                             \
    } while (0)
    while (i < len) {
        unsigned char c = s[i];
        if (ascii_letter(c)) {
            size_t j = i;
            uint32_t h = FNV_OFFSET;
            while (j < len && ascii_letter(s[j])) {
                unsigned char lc = (unsigned char)(s[j] | 0x20);
                h = (h ^ lc) * FNV_PRIME;
                j++;
            }
            EMIT(j - i == 1 ? (c | 0x20) : WORD_BASE + h % WORD_BUCKETS);
            i = j;
            continue;
        }
        uint32_t cp;
        size_t k = utf8_next(s + i, len - i, &cp);
        if (!k) {
            EMIT(CQ_SSM_TOK_UNK);
            i++;
            continue;
        }
        i += k;
        if (is_space(cp)) continue;
        if (cp < 0x80) {
            EMIT(cp);
        } else if (cp >= CJK_FIRST && cp < CJK_FIRST + CJK_COUNT) {
            EMIT(CJK_BASE + (cp - CJK_FIRST));
        } else {
            uint32_t h = FNV_OFFSET;
            for (int b = 0; b < 4; b++) h = (h ^ ((cp >> (8 * b)) & 0xFF)) * FNV_PRIME;
            EMIT(OTHER_BASE + h % OTHER_BUCKETS);
        }
    }
#undef EMIT
    return n;
}
