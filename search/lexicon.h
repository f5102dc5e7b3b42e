/* Everyday words and the words statutes use for them, so that BM25 meets a lay question's clause:
 *
 *   "员工加班费怎么算？"  → also searched: 劳动者 延长工作时间 (劳动法 第四十四条 says "延长工作时间", never "加班")
 *   "租房期间家具坏了，可以找房东修吗？" → 租赁 承租人 出租人
 *
 * A fixed table written from the terms of Chinese statutes (labour, civil code, criminal law, consumer and traffic
 * rules) and a few English contract terms; not fitted to any question set. A lay phrase matches as a substring in
 * Chinese and as a whole word (any case) in English; its statutory phrase is added only when the question does
 * not already hold it. The expansion only widens what BM25 searches for (search/query.h terms): the question,
 * its coverage terms and the answer are unchanged. CLAUSEQA_QUERY_EXPAND=0 turns it off (docs/API.md). */
#ifndef CQ_SEARCH_LEXICON_H
#define CQ_SEARCH_LEXICON_H

#include <stddef.h>

/* The statutory phrases for the lay words of text, space-separated (malloc'd; NULL when none applies, when turned
 * off, or out of memory: *failed says which of the last two). */
char *cq_lexicon_expand(const char *text, int *failed);

/* How many of the space-separated phrases of expansion (cq_lexicon_expand's) text holds whole. */
size_t cq_lexicon_phrases_in(const char *expansion, const char *text);

/* The question in the words of a passage, for the reader (app/generate_answer.c): each lay word of question
 * that the passage lacks, where the passage holds the first of its statutory phrases, replaced by the table's
 * drop-in for it ("员工加班费怎么算？" with 劳动法 第四十四条 → "劳动者延长工作时间的工资报酬怎么算？"): a reader matches
 * the question's words against the passages and, asked about 加班费, quotes the penalty clause that says 加班费
 * rather than the article that sets the rates. Lay words with no drop-in (打工, 辞退, 儿子 …), or whose drop-in the
 * question already holds, stay. malloc'd; NULL when nothing changes, when the lexicon is off, or out of memory
 * (*failed). */
char *cq_lexicon_reword(const char *question, const char *passage, int *failed);

/* Whether the expansion is on: CLAUSEQA_QUERY_EXPAND unset, or anything but "0", "off", "no", "false". */
int cq_lexicon_enabled(void);

/* The weight of the expansion's BM25 scores against the question's own (search/retrieve.c adds weight × the
 * expansion terms' score to a clause's): CQ_LEXICON_WEIGHT, or CLAUSEQA_QUERY_EXPAND_WEIGHT when it is a number in
 * (0, 4]; 0 when the expansion is off. */
#define CQ_LEXICON_WEIGHT 0.5
double cq_lexicon_weight(void);

#endif
