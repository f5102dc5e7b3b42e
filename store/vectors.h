/* Clause vectors, the store's side (issue 28): the rows that search/'s FAISS indexes (search/vectors.h) are built
 * from, written on db/db.h for both databases, and PostgreSQL's change feed of them.
 *
 *   clause_vectors(clause_id, kb_id, model, vec)   one vector per clause, dim floats as a blob (bytea); PostgreSQL's
 *                                                  rows also name the clause's doc_id (the feed groups by document)
 *   vector_changes(seq, kb_id, doc_id, op, clause_ids, created_at), vector_changes_horizon(pruned_to)   PostgreSQL:
 *                                                  written by statement triggers on clause_vectors in the writer's
 *                                                  transaction, with NOTIFY CQ_STORE_VECTORS_CHANNEL (delivered at
 *                                                  commit); writers are serialised, so seq order is commit order
 *
 * Most statements are written once (clause ids go in as IN lists of at most CQ_STORE_VECTORS_BATCH placeholders).
 * The one real difference is how vectors are stored: SQLite inserts and, for a clause that had one, updates row by
 * row (an upsert would open a statement journal on this indexed table, and FTS5 writes its pending terms at every
 * savepoint); PostgreSQL replaces a batch with one DELETE and one INSERT … SELECT (never an update in place: the
 * feed's triggers see a delete and an add, one change row per statement and document) and checks the clauses are
 * the KB's. On SQLite there is no feed: its calls answer CQ_ERR_UNSUPPORTED, and read_all's *seq is -1. */
#ifndef CQ_STORE_VECTORS_H
#define CQ_STORE_VECTORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"

#define CQ_STORE_VECTORS_CHANNEL "clauseqa_vectors"
#define CQ_STORE_VECTORS_BATCH 500 /* clause ids per statement */

/* Whether the vectors are shared by several nodes (PostgreSQL: each node's FAISS index is a cache its feed keeps
 * current) rather than the node's own (SQLite). */
bool cq_store_vectors_shared(cq_store *s);

/* Stores n vectors (n × dim floats) of clauses of KB kb_id, replacing earlier ones of those clauses, in the caller's
 * transaction or one of its own. *replaced (may be NULL): whether any clause had one (PostgreSQL: assumed).
 * PostgreSQL: CQ_ERR_NOT_FOUND when a clause is not one of the KB's. */
cq_status cq_store_vectors_store(cq_store *s, int64_t kb_id, const char *model, int dim, const int64_t *clause_ids,
                                 const float *vectors, size_t n, bool *replaced, cq_err *err);
cq_status cq_store_vectors_delete(cq_store *s, const int64_t *clause_ids, size_t n, cq_err *err);
cq_status cq_store_vectors_count(cq_store *s, int64_t kb_id, const char *model, size_t *n, cq_err *err);
/* Every vector of the KB and model (ids ascending; *ids and *x malloc'd), read a row at a time, and the feed
 * position they are current to (*seq: the last change included, in the same statement's snapshot; -1 on SQLite).
 * CQ_ERR_FORMAT when a stored vector is not dim floats. */
cq_status cq_store_vectors_read_all(cq_store *s, int64_t kb_id, const char *model, int dim, int64_t **ids, float **x,
                                    size_t *n, int64_t *seq, cq_err *err);
/* The stored vectors of these clauses of the KB and model (those that are still there), ids ascending: ids into
 * out_ids, vectors into out_x (both with room for n), *got how many. */
cq_status cq_store_vectors_get(cq_store *s, int64_t kb_id, const char *model, int dim, const int64_t *clause_ids,
                               size_t n, int64_t *out_ids, float *out_x, size_t *got, cq_err *err);
/* Keeps ids[i] (and scores[i]) whose vector the KB and model hold, in order; *n shrinks. */
cq_status cq_store_vectors_keep_stored(cq_store *s, int64_t kb_id, const char *model, int64_t *ids, float *scores,
                                       size_t *n, cq_err *err);
/* The document of each clause (doc_of[i] -1 when clause_ids[i] is gone), for document routing (search/doc_route.h). */
cq_status cq_store_clause_docs(cq_store *s, const int64_t *clause_ids, size_t n, int64_t *doc_of, cq_err *err);
/* The normalized mean of each document's stored clause vectors of model (dim floats) into vecs (n × dim): zeros for
 * a document without any. CQ_ERR_FORMAT when a stored vector is not dim floats. */
cq_status cq_store_doc_vector_means(cq_store *s, const char *model, int dim, const int64_t *docs, size_t n,
                                    float *vecs, cq_err *err);
/* The KB of a document (-1 when there is no such document). */
cq_status cq_store_doc_kb(cq_store *s, int64_t doc_id, int64_t *kb_id, cq_err *err);

/* ---- a KB's model, a document's clause ids (search/vectors.h's names) ---- */

/* The model and dimension of KB kb_id's newest clause vectors (`clauseqa reindex`); model "" and dim 0 when the KB
 * has none. */
cq_status cq_vectors_kb_model(cq_store *s, int64_t kb_id, char model[80], int *dim, cq_err *err);
cq_status cq_vectors_doc_clause_ids(cq_store *s, int64_t doc_id, int64_t **ids, size_t *n, cq_err *err);
/* ---- document vectors (the encoder's document head, ssm.h cq_ssm_model_doc_head_id; search/doc_route.h) ----
 *   doc_vectors(doc_id, kb_id, model, head, vec)   one a document, dim floats; model and head name the weights and
 *                                                  the head that made it; goes with its document (ON DELETE CASCADE) */

/* Stores document doc_id's vector (of KB kb_id), replacing any it had, in the caller's transaction or its own. */
cq_status cq_store_doc_vector_put(cq_store *s, int64_t kb_id, int64_t doc_id, const char *model, const char *head,
                                  int dim, const float *vec, cq_err *err);
/* How many document vectors the KB has of model and head, and the largest document id among them (0 without): what
 * changes whenever they change, document ids never being used twice (search/doc_route.c's cache). */
cq_status cq_store_doc_vectors_stamp(cq_store *s, int64_t kb_id, const char *model, const char *head, int64_t *count,
                                     int64_t *max_doc, cq_err *err);
/* Every document vector of the KB made by model and head (doc ids ascending; *ids and *vecs malloc'd, n × dim).
 * CQ_ERR_FORMAT when a stored vector is not dim floats. */
cq_status cq_store_doc_vectors_kb(cq_store *s, int64_t kb_id, const char *model, const char *head, int dim,
                                  int64_t **ids, float **vecs, size_t *n, cq_err *err);

/* ---- the change feed (PostgreSQL) ---- */

typedef struct {
    int64_t seq, kb_id, doc_id;
    int deleted;          /* op: 1 'delete', 0 'add' */
    int64_t *clause_ids;  /* the clauses whose vectors the statement added or deleted */
    size_t n_clause_ids;
} cq_vector_change;
void cq_vector_changes_free(cq_vector_change *c, size_t n);

/* Changes after seq `after`, in seq order, at most limit. */
cq_status cq_store_vector_changes(cq_store *s, int64_t after, size_t limit, cq_vector_change **out, size_t *n,
                                  cq_err *err);
/* The feed's horizon: changes up to *pruned_to are gone (a cache older than that rebuilds); *last: the sequence's
 * last value (a cache claiming more is of another database). */
cq_status cq_store_vector_feed_bounds(cq_store *s, int64_t *pruned_to, int64_t *last, cq_err *err);
/* Deletes the changes made before now - max_age_s (whole transactions: up to the newest such seq) and moves the
 * horizon; *pruned (may be NULL) says how many rows went. */
cq_status cq_store_vector_changes_prune(cq_store *s, int64_t max_age_s, int64_t *pruned, cq_err *err);

#endif
