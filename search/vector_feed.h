/* A node's FAISS cache on PostgreSQL, kept current by the vector change feed (issue 20, docs/SCALE.md "Vectors").
 *
 * Each node keeps, per KB, a FAISS index of the KB's clause vectors (search/vectors.h) as a cache of the store's
 * clause_vectors (store/vectors.h). One cq_vector_feed per node: its own PostgreSQL connection and thread, which
 *   - LISTENs on clauseqa_vectors; on a notification reads vector_changes after the last seq it applied and, for
 *     each change of an open KB, removes the change's clause ids from that KB's index and adds the vectors the
 *     store holds for them now (so applying a change twice, or late, leaves the same index);
 *   - reads the feed every poll_ms as well, so a notification lost with a silent connection costs latency only;
 *   - reconnects when the connection drops (and LISTENs again), then catches up from its last seq;
 *   - saves changed indexes every save_every_s (with their seq), and prunes changes older than prune_after_s.
 * A KB's index opens from the node's FAISS file when the file's seq is still covered by the feed (not pruned away;
 * not from another database), caught up from there; otherwise it is rebuilt from clause_vectors in one snapshot.
 * The node's own writes (cq_vectors_add, cq_vectors_remove, cq_dense_forget) change its index at once; the feed
 * brings them back, which is harmless. */
#ifndef CQ_SEARCH_VECTOR_FEED_H
#define CQ_SEARCH_VECTOR_FEED_H

#include <stdint.h>

#include "core/error.h"
#include "search/vectors.h"

typedef struct cq_vector_feed cq_vector_feed;

typedef struct {
    int poll_ms;           /* the feed is read this often without a notification (0: 2000) */
    int save_every_s;      /* changed indexes are saved this often (0: 60) */
    int64_t prune_after_s; /* changes older than this are pruned, hourly (0: a day; negative: never) */
} cq_vector_feed_options;

/* Starts the feed on a connection of its own, made with the connection parameters of s (a PostgreSQL store); FAISS files under
 * data_dir/vectors. opt may be NULL (the defaults). */
cq_status cq_vector_feed_start(cq_store *s, const char *data_dir, const cq_vector_feed_options *opt,
                               cq_vector_feed **out, cq_err *err);
/* KB kb_id's index for vectors of `dim` floats made by `model`: opened (and caught up) on first use, then kept
 * current; it belongs to the feed and stays valid until the feed stops. */
cq_status cq_vector_feed_kb(cq_vector_feed *f, int64_t kb_id, const char *model, int dim, cq_vectors **out,
                            cq_err *err);
/* Stops the thread, saves the changed indexes, closes them and the connection. */
void cq_vector_feed_stop(cq_vector_feed *f);

typedef struct {
    int64_t seq;              /* the last change read */
    uint64_t n_applied;       /* changes that touched an open index */
    uint64_t n_notifications; /* NOTIFY messages received */
    uint64_t n_reconnects;
    uint64_t n_loaded, n_rebuilt; /* indexes opened from their file / rebuilt from the store */
    int backend_pid;          /* the feed connection's server process (0 while disconnected) */
} cq_vector_feed_stats;
void cq_vector_feed_stats_get(cq_vector_feed *f, cq_vector_feed_stats *out);

#endif
