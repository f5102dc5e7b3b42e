/* The scoring rules of shared/eval/FORMAT.md, as pure functions (unit-tested).
 *   norm(s)       NFKC, lower case, all white space removed   (cq_text_norm_key)
 *   charF1(a, b)  F1 of the character multisets of norm(a) and norm(b) */
#ifndef CQ_APP_EVAL_SCORE_H
#define CQ_APP_EVAL_SCORE_H

#include <stdbool.h>

double cq_eval_char_f1(const char *a, const char *b);
bool cq_eval_exact(const char *prediction, const char *answer);

/* A gold evidence item: doc name, optional page (0 = null) and optional text (NULL = null). */
typedef struct {
    const char *doc;
    int page;
    const char *text;
} cq_eval_gold;

/* A retrieved passage: doc name, text, pages [page_first, page_last] (0 = no pages). */
typedef struct {
    const char *doc;
    const char *text;
    int page_first, page_last;
} cq_eval_passage;

/* The hit rule: same doc and (no gold text and page matches or is null) / passage contains gold text / gold text
 * contains a passage of >= 20 characters / charF1 >= 0.5. */
bool cq_eval_is_hit(const cq_eval_passage *r, const cq_eval_gold *g);

#endif
