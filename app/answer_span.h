/* Spans that keep their meaning (issue 26): what a quoted answer span must carry with it, and where it may lie.
 *
 * A verbatim span can still say the opposite of its clause: "低于工资的百分之一百五十的工资报酬" is a verbatim span of
 * "支付不低于工资的百分之一百五十的工资报酬", and "the Customer may assign" one of "the Customer may not assign". So:
 *
 *   - cq_span_keep_qualifiers extends a span over the negation and limit words right before or after it (不, 不得,
 *     未经, 不超过, 不低于, 除…外, …以上, …以下, …除外; not, no, never, unless, except, at least, no more than, …
 *     or more) and over any word it cuts in half. It only ever extends: a span is never shortened.
 *   - cq_span_items finds the items (项) of a clause — （一）（二）…, 1. 2. …, (a) (b) …, 一、二、… — so that a span
 *     stays inside one item and the item the question is about can be preferred (app/generate_answer.c).
 *   - cq_span_sentence gives the sentence around a span, shown next to a short answer (the answer stays verbatim).
 *
 * The word lists are in one place, answer_span.c; cq_span_qualifier_words lets the tests generate clauses from them.
 * Offsets are bytes of UTF-8 text at character boundaries. A span never grows across a line break (a new paragraph
 * or item), nor across the end of a sentence (。！？; '.' before a space). */
#ifndef CQ_APP_ANSWER_SPAN_H
#define CQ_APP_ANSWER_SPAN_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    size_t start, end; /* bytes [start, end) */
} cq_text_range;

/* Extends [*start, *end) of text[0..n) so that it neither starts nor ends inside a qualifier word and takes in the
 * qualifier words right before it (and the limit words right after it), repeatedly ("不得不"). Returns true when the
 * span changed. The span must lie inside the text; an empty or invalid span is left alone. */
bool cq_span_keep_qualifiers(const char *text, size_t n, size_t *start, size_t *end);

/* The same for a span given as its text: finds answer's first occurrence in text[0..n) and extends it. Returns the
 * extended span (malloc'd) or NULL when answer does not occur in the text or memory runs out; *changed (may be NULL)
 * says whether it differs from answer. */
char *cq_span_extend_answer(const char *text, size_t n, const char *answer, bool *changed);

typedef enum {
    CQ_QUALIFIER_ZH_BEFORE, /* 不得, 未经, 不超过 … : taken in when right before a span */
    CQ_QUALIFIER_ZH_AFTER,  /* 以上, 以下, 除外 … : taken in when right after a span */
    CQ_QUALIFIER_EN_BEFORE, /* not, unless, no more than … (whole words, any case) */
    CQ_QUALIFIER_EN_AFTER,  /* or more, or less … */
    CQ_QUALIFIER_KINDS
} cq_qualifier_kind;

/* The words of one kind (for tests and docs); *n receives their number. */
const char *const *cq_span_qualifier_words(cq_qualifier_kind kind, size_t *n);

#define CQ_SPAN_MAX_ITEMS 64

/* The items of a clause's text[0..n): markers at the start of the text, of a line, or after ：；。:; (then spaces),
 * numbered 1, 2, 3 … in order (（一）（二）, (1) (2), 1. 2., 1、2、, 一、二、, (a) (b), (i) (ii)); the first run of
 * one kind of marker that starts at 1. Each item runs from its marker to the next one; the last to the end of its
 * line or its first 。；;. Writes at most max items to items and returns how many there are (at most max), or 0 when
 * the text has fewer than two. */
size_t cq_span_items(const char *text, size_t n, cq_text_range *items, size_t max);

/* The sentence of text[0..n) around [start, end): from after the end of the sentence before (。！？；;!? a line
 * break, '.' followed by a space) to the end of the one the span ends in (its end mark included), white space
 * trimmed. A sentence longer than max_chars characters (0: no limit) is cut to max_chars around the span, at
 * character boundaries; *cut_before / *cut_after (may be NULL) say whether it was. */
cq_text_range cq_span_sentence(const char *text, size_t n, size_t start, size_t end, size_t max_chars,
                               bool *cut_before, bool *cut_after);

/* Does the clause text[0..n) forbid what the Chinese question asks leave for? The question asks with 可以, 能否,
 * 是否允许, 有权 … and names an act after it ("用人单位可以扣押劳动者的身份证吗"); the clause forbids it when a
 * 不得 / 禁止 / 严禁 / 不准 / 不能 / 无权 … is followed, within its phrase, by the act's first pair of adjacent
 * characters (its verb; after an adverb the question puts first, 随意…) within VERB_WITHIN characters (after a
 * 违反…规定 there) and by at least two and at least half of its pairs
 * ("不得扣押劳动者的居民身份证"), none of which qualifies a noun there (不得撤销的…合同); the sentence before the word
 * names no one, everyone (任何…) or the question's subject and puts no condition before it ("…的，用人单位不得…":
 * only under that condition); the phrase is no condition itself ("不能胜任工作的，"); an exception in the sentence
 * (但…除外, 除…外) counts only when the question puts a condition of its own before its subject. A question that
 * is itself negative (可以不…, 是否不得…) is not asking leave. *sentence (may be NULL) receives the forbidding
 * sentence. */
bool cq_span_forbids(const char *question, const char *text, size_t n, cq_text_range *sentence);

/* Does the clause text[0..n) forbid the act a Chinese question asks whether someone may be subjected to, in the case
 * the question puts? "女职工怀孕期间可以被辞退吗？" (能被, 会被, 能否被 …) of "劳动者有下列情形之一的，用人单位不得依照本法第四十条、第四十一条的
 * 规定解除劳动合同：…（四）女职工在孕期、产期、哺乳期的；…": the question asks leave passively (可以/能/能否… 被 act),
 * the act as asked or in the statutes' words (search/lexicon.h: 辞退 → 解除劳动合同) follows a prohibition word in the
 * sentence that leads the items in with 下列情形之一, and one item holds two of the pairs of characters the question
 * puts before its permission word that the lead does not (女职工, 孕期). *sentence (may be NULL) receives the text from
 * that sentence to the end of the item. */
bool cq_span_protects(const char *question, const char *text, size_t n, cq_text_range *sentence);

/* Does the clause text[0..n) state the negation of what the Chinese yes/no question asks? The question asks
 * "X是否Y" ("被告是否按照协议支付抚养费？"); Y, without a leading 已经 / 曾 / 有 / 能 / 可以 … and not itself negative,
 * is found in the sentence (split at 。；！？ and line breaks) that holds its first two characters and the largest share
 * of its pairs of adjacent characters, at least half; the clause denies it when a 未 / 没有 / 不 / 无 / 拒不 / 否认 …
 * ends at most two characters before those two ("被告未按照协议支付抚养费", "至今未退还") and the sentence before them
 * holds a pair of the question's subject X (when X has two characters or more). *sentence (may be NULL) receives that
 * sentence. Measured on cjrc-dev's yes/no questions (docs/EVAL.md). */
bool cq_span_denies(const char *question, const char *text, size_t n, cq_text_range *sentence);

#endif
