/* Text normalization.
 *
 * Two levels, for two jobs:
 *  - repair (what we store and show): fixes what extraction breaks while keeping the document's look —
 *    CJK radicals and compatibility ideographs become the standard characters (⽇ → 日), full-width letters and
 *    digits become ASCII (ＡＢ１２ → AB12), private-use and control characters and U+FFFD are dropped, exotic
 *    spaces become ' '. Full-width CJK punctuation (，。：（）) is kept as printed.
 *  - fold (what we match and index): NFKC of the repaired text, case-folded. The eval format's norm() is
 *    fold + removal of white space.
 * Both count what they changed, which feeds the per-page text-quality score. */
#ifndef CQ_CORE_TEXT_NORM_H
#define CQ_CORE_TEXT_NORM_H

#include <stddef.h>
#include <stdint.h>

#include "core/strbuf.h"

typedef struct {
    size_t chars;        /* code points read */
    size_t replacement;  /* U+FFFD or invalid UTF-8 */
    size_t private_use;  /* U+E000..F8FF, planes 15-16 */
    size_t radicals;     /* radicals / compatibility ideographs mapped to standard characters */
    size_t controls;     /* C0/C1 controls other than \n \t \f */
    size_t fullwidth;    /* full-width ASCII letters/digits mapped to ASCII */
    size_t cjk;          /* Han ideographs (after repair) */
} cq_text_stats;

/* Maps one code point as repair does; returns 0 when the code point is to be dropped. */
uint32_t cq_text_repair_cp(uint32_t cp, cq_text_stats *st);

/* Appends the repaired form of s[0..n) to out. st may be NULL; counts are added to it. */
void cq_text_repair(const char *s, size_t n, cq_strbuf *out, cq_text_stats *st);

/* NFKC + case fold of s[0..n). Returns a malloc'd NUL-terminated string, or NULL on allocation failure. */
char *cq_text_fold(const char *s, size_t n);

/* The eval format's norm(): fold, then all white space removed. Malloc'd; NULL on failure. */
char *cq_text_norm_key(const char *s, size_t n);

#endif
