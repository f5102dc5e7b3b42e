#include "core/utf8.h"

#include <string.h>
#include <utf8proc.h>

uint32_t cq_utf8_decode(const char *str, size_t n, size_t *len) {
    const unsigned char *s = (const unsigned char *)str;
    if (n == 0) {
        *len = 0;
        return 0;
    }
    unsigned char c = s[0];
    if (c < 0x80) {
        *len = 1;
        return c;
    }
    size_t need;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
        need = 2;
        cp = c & 0x1F;
        min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        need = 3;
        cp = c & 0x0F;
        min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        need = 4;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        *len = 1;
        return CQ_UTF8_REPLACEMENT;
    }
    if (n < need) {
        *len = 1;
        return CQ_UTF8_REPLACEMENT;
    }
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *len = 1;
            return CQ_UTF8_REPLACEMENT;
        }
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        *len = 1;
        return CQ_UTF8_REPLACEMENT;
    }
    *len = need;
    return cp;
}

size_t cq_utf8_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = CQ_UTF8_REPLACEMENT;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t cq_utf8_count(const char *s, size_t n) {
    size_t count = 0, i = 0;
    while (i < n) {
        size_t len;
        cq_utf8_decode(s + i, n - i, &len);
        i += len;
        count++;
    }
    return count;
}

int cq_utf8_char_width(uint32_t cp) {
    if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return 0;
    int w = utf8proc_charwidth((utf8proc_int32_t)cp);
    return w < 0 ? 0 : w > 2 ? 2 : w;
}

size_t cq_utf8_fit_width(const char *s, size_t n, int max_cols, int *cols) {
    size_t i = 0;
    int used = 0;
    while (i < n) {
        size_t len;
        int w = cq_utf8_char_width(cq_utf8_decode(s + i, n - i, &len));
        if (used + w > max_cols) break;
        used += w;
        i += len;
    }
    if (cols) *cols = used;
    return i;
}

bool cq_utf8_valid(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(s + i, n - i, &len);
        if (cp == CQ_UTF8_REPLACEMENT && len == 1) return false;
        i += len;
    }
    return true;
}

bool cq_is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x323AF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || cp == 0x3007;
}

bool cq_is_cjk_punct(uint32_t cp) {
    return (cp >= 0x3000 && cp <= 0x303F && cp != 0x3007) || (cp >= 0xFF01 && cp <= 0xFF0F) ||
           (cp >= 0xFF1A && cp <= 0xFF20) || (cp >= 0xFF3B && cp <= 0xFF40) || (cp >= 0xFF5B && cp <= 0xFF65) ||
           (cp >= 0x2010 && cp <= 0x2027) || (cp >= 0xFE30 && cp <= 0xFE4F);
}

bool cq_is_latin_alnum(uint32_t cp) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           (cp >= 0xC0 && cp <= 0x24F && cp != 0xD7 && cp != 0xF7);
}

bool cq_utf8_has_cjk(const char *s) {
    size_t n = strlen(s), i = 0;
    while (i < n) {
        size_t len;
        if (cq_is_cjk(cq_utf8_decode(s + i, n - i, &len))) return true;
        i += len ? len : 1;
    }
    return false;
}

bool cq_is_space(uint32_t cp) {
    return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == '\f' || cp == '\v' || cp == 0xA0 ||
           cp == 0x3000 || (cp >= 0x2000 && cp <= 0x200B) || cp == 0x202F || cp == 0x205F || cp == 0xFEFF;
}
