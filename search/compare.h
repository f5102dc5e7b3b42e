/* Clause-by-clause comparison of two versions of a regulation.
 *
 * Alignment. Laws are renumbered when amended (公司法 2018 第五十条 is 2023 第六十条 …), so clauses are paired by
 * what they say, not by number: each clause body (label left out, folded, punctuation and spaces dropped) is a bag
 * of token bigrams (a token is a Han character or a Latin word), weighted by how rare the bigram is among the two
 * documents' clauses (idf); two clauses' similarity is the weighted Dice coefficient of their bags, with a small
 * bonus when their numbers agree. The pairing keeps order: a dynamic program over the two clause sequences
 * maximizes the sum of (similarity − CQ_ALIGN_MATCH) over matched pairs, where one clause may also match two
 * adjacent ones (a clause split in two, or two merged). The gaps between matched pairs are aligned again with the
 * lower threshold CQ_ALIGN_GAP_MATCH (a clause rewritten in place), and what is left unmatched on both sides is
 * paired out of order when very similar (CQ_ALIGN_MOVED: a clause moved to another chapter). A clause still left
 * whose text is mostly inside a matched clause of the other side (CQ_ALIGN_ABSORBED) joins that pair: merged into
 * it from elsewhere, or split off it. The rest is added (only in b) or removed (only in a).
 *
 * Kinds: same (bodies equal once folded and spaces dropped; the number may have changed: renumbered), changed
 * (with a character diff), added, removed.
 *
 * Diff. Myers' O(ND) diff over tokens (a Han character, a Latin word, a run of spaces, any other character), then
 * the semantic clean-up of diff-match-patch: an unchanged run no longer than the changes on both sides of it is
 * folded into them, so that a rewritten phrase reads as one deletion and one insertion. */
#ifndef CQ_SEARCH_COMPARE_H
#define CQ_SEARCH_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"

#define CQ_ALIGN_MATCH 0.35     /* a pair must be at least this similar to be matched by the first pass */
#define CQ_ALIGN_GAP_MATCH 0.15 /* … by the second pass, between two matched pairs */
#define CQ_ALIGN_MOVED 0.5      /* … out of order */
#define CQ_ALIGN_ABSORBED 0.7   /* a clause left over joins a matched pair when this share of its text is inside
                                   that pair's clause of the other side (merged into it, or split off it) */
#define CQ_ALIGN_SAME_NUMBER 0.03 /* bonus for equal numbers (breaks ties between repeated texts) */
#define CQ_ALIGN_MAX_CELLS 4000000 /* clauses of a × clauses of b that one comparison may take */

/* ---- character diff ---- */

typedef enum { CQ_DIFF_EQUAL = 0, CQ_DIFF_DELETE, CQ_DIFF_INSERT } cq_diff_op;

typedef struct {
    cq_diff_op op;
    char *text;
} cq_diff_span;

typedef struct {
    cq_diff_span *spans; /* in reading order; a change is its deletion followed by its insertion */
    size_t n;
} cq_diff;

/* The diff turning a into b. */
cq_status cq_diff_texts(const char *a, const char *b, cq_diff *out, cq_err *err);
void cq_diff_free(cq_diff *d);
/* "删去“…”；增加“…”" / "deleted “…”; added “…”": the changes of a diff in words, at most max_chars characters of
 * each quote. Malloc'd. */
char *cq_diff_describe(const cq_diff *d, bool zh, size_t max_chars);

/* Similarity of two texts as the alignment weighs clauses, without idf: the Dice coefficient of their token
 * bigrams (folded, punctuation and spaces dropped), 0..1. */
double cq_text_similarity(const char *a, const char *b);

/* ---- alignment ---- */

typedef struct {
    int64_t clause_id;
    const char *label, *label_key, *path, *text; /* label and label_key may be NULL */
    int kind; /* clauses.kind (reader/reader.h's cq_clause_kind) when read from the store (cq_compare_docs) */
} cq_cmp_clause;

typedef enum { CQ_PAIR_SAME = 0, CQ_PAIR_CHANGED, CQ_PAIR_ADDED, CQ_PAIR_REMOVED } cq_pair_kind;

typedef struct {
    cq_pair_kind kind;
    size_t a[2], n_a;   /* clauses of side a (indexes; 0, 1 or 2 of them: two adjacent ones split or merged, or a
                           clause merged in from elsewhere) */
    size_t b[2], n_b;   /* clauses of side b */
    double similarity;  /* of the matched texts, 0..1 */
    bool renumbered;    /* matched clauses whose labels differ */
    bool moved;         /* matched out of order */
    cq_diff diff;       /* changed pairs: side a's body → side b's (labels left out) */
} cq_cmp_pair;

typedef struct {
    cq_cmp_pair *pairs; /* in the order of side b, the removed clauses where they stood */
    size_t n_pairs;
    size_t n_same, n_changed, n_added, n_removed; /* pairs of each kind */
    size_t n_renumbered;         /* same pairs whose number changed: renumbered, nothing else (within n_same) */
    size_t n_renumbered_changed; /* changed pairs whose number changed too: counted as changed (within n_changed) */
} cq_alignment;

/* "same", "changed", "added", "removed". */
const char *cq_pair_kind_name(cq_pair_kind k);

/* Aligns clauses a[0..n_a) (the older version) with b[0..n_b). CQ_ERR_UNSUPPORTED when n_a × n_b exceeds
 * CQ_ALIGN_MAX_CELLS. */
cq_status cq_align_clauses(const cq_cmp_clause *a, size_t n_a, const cq_cmp_clause *b, size_t n_b, cq_alignment *out,
                           cq_err *err);
void cq_alignment_free(cq_alignment *al);

/* ---- two documents of the store ---- */

typedef struct {
    int64_t doc_a, doc_b;
    cq_cmp_clause *a, *b; /* their clauses (articles only when both have articles), strings owned */
    size_t n_a, n_b;
    cq_alignment al;
} cq_comparison;

cq_status cq_compare_docs(cq_store *s, int64_t doc_a, int64_t doc_b, cq_comparison *out, cq_err *err);
void cq_comparison_free(cq_comparison *c);
/* Does pair p hold, on either side, a clause with label key `key` ("60", "20-1") or id clause_id (0: no id)? */
bool cq_cmp_pair_holds(const cq_comparison *c, const cq_cmp_pair *p, const char *key, int64_t clause_id);
/* The label key an article is asked for by: "60", "第六十条", "六十", "20-1", "第二十条之一", "7.2" → "60", "20-1",
 * "7.2"; what is not an article number is copied as it is. */
void cq_compare_clause_key(const char *arg, char *key, size_t cap);
/* The pair that holds clause clause_id (either side), or NULL. */
const cq_cmp_pair *cq_comparison_pair_of(const cq_comparison *c, int64_t clause_id);

#endif
