/* Chinese and Arabic numerals as they appear in clause labels: 第三十三条, 第12条, 第一百零五条, 第二十条之一. */
#ifndef CQ_CORE_NUMERALS_H
#define CQ_CORE_NUMERALS_H

#include <stdbool.h>
#include <stddef.h>

/* Parses a number at s[0..n): Arabic digits (ASCII or full-width) or Chinese numerals (零〇一二两三四五六七八九
 * 十百千万, also 壹贰叁肆伍陆柒捌玖拾佰仟). Returns the value (>= 0) and sets *used to the bytes consumed, or returns -1
 * (with *used = 0) when s does not start with a number. Values above 99,999,999 are rejected. */
long cq_number_parse(const char *s, size_t n, size_t *used);

/* What cq_number_parse_ref reads a numeral run too large for cq_number_parse as: beyond any document's numbering. */
#define CQ_NUMBER_TOO_LARGE 100000000L

/* cq_number_parse for the number of a reference (第…条, 第…款): a run of numerals too large for it is still read,
 * *used its bytes, as CQ_NUMBER_TOO_LARGE — "第99999999999条" names an article no document has (and is answered so),
 * it is not words to search for. -1 (with *used = 0) when s does not start with a numeral. */
long cq_number_parse_ref(const char *s, size_t n, size_t *used);

/* Writes v (0 <= v < 100,000,000) in Chinese numerals as used in labels (10 → 十, 12 → 十二, 105 → 一百零五,
 * 110 → 一百一十) to out (64 bytes room). Returns out. */
char *cq_number_format_cn(long v, char *out);

/* True if cp is a Chinese numeral character accepted by cq_number_parse. */
bool cq_is_cn_numeral(unsigned int cp);

/* Parses a Roman numeral at s[0..n): the letters I V X L C in either case, read left to right, a letter worth less
 * than the next one subtracted (IV = 4, XIV = 14, xl = 40). Returns the value and sets *used to the letters read
 * (it stops at the first other byte), or returns -1 (with *used = 0) when s does not start with one. Malformed
 * sequences ("IIV") get the value the rule gives; callers that need whole words check *used. */
long cq_roman_parse(const char *s, size_t n, size_t *used);

#endif
