#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"

static bool reserve(cq_strbuf *b, size_t extra) {
    if (b->failed) return false;
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void cq_strbuf_append(cq_strbuf *b, const char *s, size_t n) {
    if (!reserve(b, n)) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void cq_strbuf_puts(cq_strbuf *b, const char *s) { cq_strbuf_append(b, s, strlen(s)); }

void cq_strbuf_printf(cq_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void cq_strbuf_put_cp(cq_strbuf *b, uint32_t cp) {
    char tmp[4];
    size_t n = cq_utf8_encode(cp, tmp);
    cq_strbuf_append(b, tmp, n);
}

void cq_strbuf_reset(cq_strbuf *b) {
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

char *cq_strbuf_take(cq_strbuf *b) {
    char *s = b->data;
    if (!s) s = calloc(1, 1);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = false;
    return s;
}

char *cq_strbuf_finish(cq_strbuf *b) {
    if (!b->failed) return cq_strbuf_take(b);
    cq_strbuf_free(b);
    return NULL;
}

void cq_strbuf_free(cq_strbuf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}
