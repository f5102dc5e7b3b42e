/* COPY text-format fields (db/copy.h). */
#include "db/copy.h"

/* A COPY text-format field: backslash, tab, newline and carriage return escaped; NULL is \N. */
void cq_db_copy_text(cq_strbuf *b, const char *s) {
    if (!s) {
        cq_strbuf_puts(b, "\\N");
        return;
    }
    const char *run = s;
    for (; *s; s++) {
        const char *esc = *s == '\\' ? "\\\\" : *s == '\t' ? "\\t" : *s == '\n' ? "\\n" : *s == '\r' ? "\\r" : NULL;
        if (!esc) continue;
        cq_strbuf_append(b, run, (size_t)(s - run));
        cq_strbuf_puts(b, esc);
        run = s + 1;
    }
    cq_strbuf_append(b, run, (size_t)(s - run));
}

/* A bytea COPY field: \x and hex digits, the backslash doubled for COPY. */
void cq_db_copy_bytea(cq_strbuf *b, const unsigned char *p, size_t n) {
    static const char hex[] = "0123456789abcdef";
    cq_strbuf_puts(b, "\\\\x");
    char buf[256];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        buf[k++] = hex[p[i] >> 4];
        buf[k++] = hex[p[i] & 15];
        if (k == sizeof buf) {
            cq_strbuf_append(b, buf, k);
            k = 0;
        }
    }
    cq_strbuf_append(b, buf, k);
}
