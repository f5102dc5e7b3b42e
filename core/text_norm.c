#include "core/text_norm.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/utf8.h"
#include "core/radicals_table.h"

static uint32_t radical_lookup(uint32_t cp) {
    size_t lo = 0, hi = sizeof cq_radical_table / sizeof cq_radical_table[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cq_radical_table[mid][0] == cp) return cq_radical_table[mid][1];
        if (cq_radical_table[mid][0] < cp) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

uint32_t cq_text_repair_cp(uint32_t cp, cq_text_stats *st) {
    cq_text_stats dummy;
    if (!st) st = &dummy;
    st->chars++;
    if (cp == CQ_UTF8_REPLACEMENT) {
        st->replacement++;
        return 0;
    }
    if ((cp >= 0xE000 && cp <= 0xF8FF) || cp >= 0xF0000) {
        st->private_use++;
        return 0;
    }
    if (cp == '\n' || cp == '\t' || cp == '\f') return cp;
    if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) {
        st->controls++;
        return 0;
    }
    if (cp == 0x200B || cp == 0xFEFF || cp == 0x00AD || cp == 0x200C || cp == 0x200D) return 0; /* invisible */
    if (cq_is_space(cp)) return ' ';
    if ((cp >= 0x2E80 && cp <= 0x2FDF) || (cp >= 0x31C0 && cp <= 0x31EF)) {
        uint32_t m = radical_lookup(cp);
        if (m) {
            st->radicals++;
            st->cjk++;
            return m;
        }
        return cp;
    }
    if (cp >= 0xF900 && cp <= 0xFAFF) {
        /* CJK compatibility ideographs: most have a canonical decomposition to one unified ideograph (a dozen in
         * this block are unified ideographs themselves and stay). */
        char in[5] = {0};
        cq_utf8_encode(cp, in);
        utf8proc_uint8_t *out = NULL;
        if (utf8proc_map((const utf8proc_uint8_t *)in, 0, &out, UTF8PROC_NULLTERM | UTF8PROC_STABLE |
                                                                     UTF8PROC_COMPOSE) > 0) {
            size_t len, n = strlen((const char *)out);
            uint32_t m = cq_utf8_decode((const char *)out, n, &len);
            free(out);
            if (len == n && m != cp) {
                st->radicals++;
                st->cjk++;
                return m;
            }
        } else {
            free(out);
        }
    }
    if ((cp >= 0xFF10 && cp <= 0xFF19) || (cp >= 0xFF21 && cp <= 0xFF3A) || (cp >= 0xFF41 && cp <= 0xFF5A)) {
        st->fullwidth++;
        return cp - 0xFEE0;
    }
    if (cq_is_cjk(cp)) st->cjk++;
    return cp;
}

void cq_text_repair(const char *s, size_t n, cq_strbuf *out, cq_text_stats *st) {
    size_t i = 0;
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(s + i, n - i, &len);
        i += len;
        uint32_t m = cq_text_repair_cp(cp, st);
        if (m) cq_strbuf_put_cp(out, m);
    }
}

char *cq_text_fold(const char *s, size_t n) {
    /* utf8proc wants valid UTF-8: pass it through repair's decoder first (invalid bytes become U+FFFD). */
    cq_strbuf clean = {0};
    size_t i = 0;
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(s + i, n - i, &len);
        cq_strbuf_put_cp(&clean, cp);
        i += len;
    }
    if (clean.failed) {
        cq_strbuf_free(&clean);
        return NULL;
    }
    char *src = cq_strbuf_take(&clean);
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)src, 0, &dst,
                                      UTF8PROC_NULLTERM | UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT |
                                          UTF8PROC_CASEFOLD);
    free(src);
    if (r < 0) return NULL;
    return (char *)dst;
}

char *cq_text_norm_key(const char *s, size_t n) {
    char *f = cq_text_fold(s, n);
    if (!f) return NULL;
    size_t len = strlen(f), i = 0, o = 0;
    while (i < len) {
        size_t l;
        uint32_t cp = cq_utf8_decode(f + i, len - i, &l);
        if (!cq_is_space(cp)) {
            memmove(f + o, f + i, l);
            o += l;
        }
        i += l;
    }
    f[o] = 0;
    return f;
}
