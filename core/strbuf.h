/* A growable byte buffer, always NUL-terminated. Allocation failure is sticky: once `failed` is set, appends do
 * nothing and the caller checks it once at the end. */
#ifndef CQ_CORE_STRBUF_H
#define CQ_CORE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *data;   /* NUL-terminated; NULL until the first append */
    size_t len;
    size_t cap;
    bool failed;  /* an allocation failed; contents are incomplete */
} cq_strbuf;

void cq_strbuf_append(cq_strbuf *b, const char *s, size_t n);
void cq_strbuf_puts(cq_strbuf *b, const char *s);
void cq_strbuf_printf(cq_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cq_strbuf_put_cp(cq_strbuf *b, uint32_t cp); /* UTF-8 encode one code point */
void cq_strbuf_reset(cq_strbuf *b);               /* len = 0, keeps the memory */
char *cq_strbuf_take(cq_strbuf *b);               /* returns data ("" if empty) and leaves b empty; caller frees */
char *cq_strbuf_finish(cq_strbuf *b);             /* as take, or NULL (b freed) when an allocation failed */
void cq_strbuf_free(cq_strbuf *b);

#endif
