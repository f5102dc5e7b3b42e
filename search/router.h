/* Clause-reference router: finds "which document, which clause" when the question names them.
 *
 *   《数字经济促进条例》第三章第十二条   →  the document whose title matches, article 12
 *   公司法第12条第二款                   →  article 12 of 公司法 (paragraph 2 noted for highlighting)
 *   第二十条之一 / Article 5 / Section 7.2 / §3 / 第三章
 *
 * Titles are matched against every document of the KB, tolerating missing 《》, the 中华人民共和国 prefix, a
 * province/city prefix, dates in file names ("公司法(2018-10-26)") and the leading category words some questions
 * carry ("民法商法公司法第N条"). Several versions of a law rank newest first. When the reference does not exist the
 * router returns nothing rather than a neighbouring clause. */
#ifndef CQ_SEARCH_ROUTER_H
#define CQ_SEARCH_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/router_rows.h"
#include "store/store.h"

typedef struct {
    long part, chapter, section; /* 编 章 节, 0 when absent */
    long article;                /* 条 (or Article/Section major number), 0 when absent */
    long article_sub;            /* 之一 → 1 */
    long paragraph, item;        /* 款 项, 0 when absent */
    char key[32];                /* label_key to look up: "12", "20-1", "7.2"; "" when no clause is named */
    size_t start, end;           /* byte span of the reference in the question */
    bool latin;                  /* an English reference ("Section 7.2", "Article 5"): it means clauses labelled so,
                                  * not a Chinese document's 第五条 of the same key */
} cq_clause_ref;

/* Parses the first clause reference in question. Returns 1 when one was found, else 0 (ref zeroed). */
int cq_router_parse(const char *question, cq_clause_ref *ref);

/* Whether a clause labelled label is of the reference's kind: 第…条 (Han) for a Chinese reference, Latin otherwise. */
bool cq_router_label_fits(const cq_clause_ref *ref, const char *label);

/* Whether two documents having a label (store/router_rows.h) are versions of one regulation: one version group, or
 * one title (what they are called: before the versions analysis, and where the same title twice tells no one apart). */
bool cq_router_same_regulation(const cq_store_label_doc *a, const cq_store_label_doc *b);

/* Versions of one regulation a reference without a document may mean (search/router.c docs_with_label). */
#define CQ_ROUTER_MAX_VERSIONS 16

/* A document named by the question. */
typedef struct {
    int64_t doc_id;
    double score; /* matched title length in characters, lowered for weak variants */
} cq_title_match;

/* Documents of the KB (ready ones) whose title or name the question mentions, best first; at most max. The match
 * cache lives in the store connection's router state and reloads when the KB's documents change. */
cq_status cq_router_titles(cq_store *s, int64_t kb_id, const char *question, cq_title_match *out, size_t max,
                           size_t *n, cq_err *err);

/* Resolves a parsed reference in the documents the question names (titles, best first, from cq_router_titles):
 * clause ids (best first) into out, at most max; *n = 0 when nothing matches. */
cq_status cq_router_resolve(cq_store *s, int64_t kb_id, const cq_title_match *titles, size_t n_titles,
                            const cq_clause_ref *ref, int64_t *out, size_t max, size_t *n, cq_err *err);

/* A local regulation's place: "上海市住宅物业管理规定" → 1 and place "上海市"; national documents → 0. */
int cq_router_local_place(const char *name, char *place, size_t cap);

/* Frees the router cache of a store (called by cq_store_close). */
void cq_router_cache_free(void *cache);

#endif
