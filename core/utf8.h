/* UTF-8 decoding and encoding, and the character classes the parsers and tokenizers share. */
#ifndef CQ_CORE_UTF8_H
#define CQ_CORE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CQ_UTF8_REPLACEMENT 0xFFFDu

/* Decodes one code point at s (n bytes available). Sets *len to the bytes consumed (>= 1 when n > 0).
 * Invalid or truncated sequences decode as U+FFFD consuming one byte, so a loop always makes progress. */
uint32_t cq_utf8_decode(const char *s, size_t n, size_t *len);

/* Encodes cp into out (4 bytes room); returns bytes written. Invalid code points encode as U+FFFD. */
size_t cq_utf8_encode(uint32_t cp, char *out);

/* Number of code points in s[0..n). */
size_t cq_utf8_count(const char *s, size_t n);

/* Terminal columns a code point takes: 2 for wide characters (Han, kana, Hangul, full-width forms), 0 for combining
 * marks and controls, 1 otherwise (Unicode's East Asian Width, through utf8proc). */
int cq_utf8_char_width(uint32_t cp);

/* The longest prefix of s[0..n) that fits in max_cols terminal columns, never cut inside a character: returns its
 * length in bytes and, when cols is not NULL, its width. */
size_t cq_utf8_fit_width(const char *s, size_t n, int max_cols, int *cols);

/* True if s[0..n) is valid UTF-8. */
bool cq_utf8_valid(const char *s, size_t n);

/* Han ideographs (unified, extensions, compatibility). */
bool cq_is_cjk(uint32_t cp);
/* CJK and full-width punctuation such as 。，、；：？！“”《》（）【】 */
bool cq_is_cjk_punct(uint32_t cp);
/* ASCII letters and digits, Latin-1/Extended letters. */
bool cq_is_latin_alnum(uint32_t cp);
/* Unicode white space, including U+3000 ideographic space and NBSP. */
bool cq_is_space(uint32_t cp);
/* True if the NUL-terminated s holds a Han ideograph (the question is Chinese, answer in Chinese). */
bool cq_utf8_has_cjk(const char *s);

#endif
