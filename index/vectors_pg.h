/* Clause vectors and SSM document states in the PostgreSQL store (issue 20, docs/SCALE.md "Vectors"): the SQL of
 * index/vectors.c for index/store_pg.c's tables, and the change feed the nodes' FAISS caches follow.
 *
 *   clause_vectors(clause_id, doc_id, kb_id, model, vec bytea)   the truth (pgvector is not in Debian 12: FAISS
 *                                                                 on each node answers nearest-neighbour queries)
 *   doc_states(doc_id, model, n_tokens, state bytea)
 *   vector_changes(seq, kb_id, doc_id, op 'add' | 'delete', clause_ids, created_at)
 *   vector_changes_horizon(pruned_to)
 *
 * vector_changes is written by statement triggers on clause_vectors, in the writer's transaction, with NOTIFY
 * clauseqa_vectors (delivered at commit, never for a rollback): whatever adds or deletes vectors — these functions,
 * or deleting a document or KB, by cascade — feeds it. Its writers are serialised (a transaction advisory lock), so
 * seq order is commit order: a reader that has seen seq s has seen every change before s, and a snapshot's largest
 * seq says exactly which changes its rows include. Vectors are never updated in place (a replacement is a delete
 * and an insert). The document states, a KB's model and a document's clause ids are index/vectors.c's, written once
 * for both stores on db/db.h (issue 28). */
#ifndef CQ_INDEX_VECTORS_PG_H
#define CQ_INDEX_VECTORS_PG_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "index/store_pg.h"

#define CQ_PG_VECTORS_CHANNEL "clauseqa_vectors"

/* Stores n vectors (n × dim floats) of clauses of KB kb_id, replacing earlier ones of those clauses, in the
 * caller's transaction or one of its own. CQ_ERR_NOT_FOUND when a clause is not one of the KB's. */
cq_status cq_pg_vectors_store(cq_pg *pg, int64_t kb_id, const char *model, int dim, const int64_t *clause_ids,
                              const float *vectors, size_t n, cq_err *err);
cq_status cq_pg_vectors_delete(cq_pg *pg, const int64_t *clause_ids, size_t n, cq_err *err);
cq_status cq_pg_vectors_count(cq_pg *pg, int64_t kb_id, const char *model, size_t *n, cq_err *err);

/* Every vector of the KB and model (ids ascending; *ids and *x malloc'd) and the feed position they are current
 * to (*seq: the last change included), read in one snapshot (a REPEATABLE READ transaction of its own when none is
 * open). CQ_ERR_FORMAT when a stored vector is not dim floats. */
cq_status cq_pg_vectors_read_all(cq_pg *pg, int64_t kb_id, const char *model, int dim, int64_t **ids, float **x,
                                 size_t *n, int64_t *seq, cq_err *err);
/* The stored vectors of these clauses of the KB and model (those that are still there): ids into out_ids, vectors
 * into out_x (both with room for n), *got how many. */
cq_status cq_pg_vectors_get(cq_pg *pg, int64_t kb_id, const char *model, int dim, const int64_t *clause_ids, size_t n,
                            int64_t *out_ids, float *out_x, size_t *got, cq_err *err);
/* Keeps ids[i] (and scores[i]) whose vector the KB and model hold, in order; *n shrinks. */
cq_status cq_pg_vectors_keep_stored(cq_pg *pg, int64_t kb_id, const char *model, int64_t *ids, float *scores,
                                    size_t *n, cq_err *err);
/* The KB of a document (-1 when there is no such document). */
cq_status cq_pg_vectors_doc_kb(cq_pg *pg, int64_t doc_id, int64_t *kb_id, cq_err *err);

/* ---- the change feed ---- */

typedef struct {
    int64_t seq, kb_id, doc_id;
    int deleted;          /* op: 1 'delete', 0 'add' */
    int64_t *clause_ids;  /* the clauses whose vectors the statement added or deleted */
    size_t n_clause_ids;
} cq_vector_change;
void cq_vector_changes_free(cq_vector_change *c, size_t n);

/* Changes after seq `after`, in seq order, at most limit. */
cq_status cq_pg_vector_changes(cq_pg *pg, int64_t after, size_t limit, cq_vector_change **out, size_t *n,
                               cq_err *err);
/* The feed's horizon: changes up to *pruned_to are gone (a cache older than that rebuilds); *last: the sequence's
 * last value (a cache claiming more is of another database). */
cq_status cq_pg_vector_feed_bounds(cq_pg *pg, int64_t *pruned_to, int64_t *last, cq_err *err);
/* Deletes the changes made before now - max_age_s (whole transactions: up to the newest such seq) and moves the
 * horizon; *pruned (may be NULL) says how many rows went. */
cq_status cq_pg_vector_changes_prune(cq_pg *pg, int64_t max_age_s, int64_t *pruned, cq_err *err);

#endif
