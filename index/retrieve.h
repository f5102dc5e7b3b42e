/* Retrieval: ranked clauses for a question.
 *
 * Retrievers:
 *   router  exact clause references (index/router.h): 《X条例》第十二条, Article 5, Section 7.2
 *   bm25    FTS5 full-text ranking with the cjk tokenizer; when the question names documents (title match), their
 *           clauses are ranked first, then the whole KB
 *   dense   SSM encoder vectors (not built yet: asking for it is an error)
 * Fusion: router hits first (they are exact), then the BM25 list; duplicates keep their best place. */
#ifndef CQ_INDEX_RETRIEVE_H
#define CQ_INDEX_RETRIEVE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "index/store.h"

enum {
    CQ_RETRIEVE_ROUTER = 1,
    CQ_RETRIEVE_BM25 = 2,
    CQ_RETRIEVE_DENSE = 4,
    CQ_RETRIEVE_HYBRID = CQ_RETRIEVE_ROUTER | CQ_RETRIEVE_BM25,
};

/* Parses "router,bm25" / "hybrid" / "bm25" into a mode mask; 0 with a message in err when invalid. */
int cq_retrieve_parse_mode(const char *s, cq_err *err);
/* "router", "bm25" or "dense": the name of a hit's source (as JSON and the CLI print it). */
const char *cq_retrieve_source_name(int source);

typedef struct {
    int64_t clause_id, doc_id;
    char *doc_name;   /* document name (file name without extension) */
    char *doc_title;  /* title or NULL */
    char *label;      /* "第十二条" or NULL */
    char *path;       /* heading path */
    char *text;       /* clause text */
    int page_first, page_last; /* 0 for documents without pages */
    double score;     /* higher is better; router hits score 1000 */
    int source;       /* CQ_RETRIEVE_ROUTER, CQ_RETRIEVE_BM25 or CQ_RETRIEVE_DENSE */
    int paragraph;    /* 款 the question named (router), 0 none */
    int item;         /* 项 the question named with it (router), 0 none */
    cq_store_box *boxes;
    size_t n_boxes;
} cq_hit;

typedef struct {
    cq_hit *hits;
    size_t n;
    int n_query_terms; /* distinct BM25 terms used */
} cq_hits;

cq_status cq_retrieve(cq_store *s, int64_t kb_id, const char *question, int modes, size_t k, cq_hits *out,
                      cq_err *err);
void cq_hits_free(cq_hits *h);

/* Query terms of a question as the BM25 retriever uses them (question words and stop words removed, deduplicated):
 * a malloc'd array of malloc'd strings. Also used by extractive answering to score sentences. */
size_t cq_retrieve_terms(const char *question, char ***terms);
void cq_retrieve_terms_free(char **terms, size_t n);

#endif
