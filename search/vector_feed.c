/* The feed that keeps the per-node FAISS caches current on PostgreSQL, and their catch-up (vector_feed.h,
 * vectors_internal.h; a cache is opened by search/vectors.c). */
#include "search/vector_feed.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/grow.h"
#include "core/log.h"
#include "db/db.h"
#include "search/vectors_internal.h"
#include "store/vectors.h"

#define CHANGES_BATCH 1000

/* ---- a KB's cache ------------------------------------------------------------------------------------------ */

/* v->seq is read and written under v's lock: a request thread's rebuild (cq_vectors_add growing past flat) sets it
 * too. */
static int64_t get_seq(cq_vectors *v) {
    pthread_rwlock_rdlock(&v->lock);
    int64_t seq = v->seq;
    pthread_rwlock_unlock(&v->lock);
    return seq;
}

static void set_seq(cq_vectors *v, int64_t seq) {
    pthread_rwlock_wrlock(&v->lock);
    if (seq > v->seq) v->seq = seq;
    pthread_rwlock_unlock(&v->lock);
}

/* Applies one change to v: its clause ids out, the vectors the store holds for them now in. */
static cq_status apply_change(cq_store *s, cq_vectors *v, const cq_vector_change *c, cq_err *err) {
    size_t n = c->n_clause_ids, got = 0;
    int64_t *ids = NULL;
    float *x = NULL;
    cq_status rc = CQ_OK;
    if (!c->deleted && n) {
        ids = malloc(n * sizeof *ids);
        x = malloc(n * (size_t)v->dim * sizeof *x);
        rc = ids && x ? cq_store_vectors_get(s, v->kb_id, v->model, v->dim, c->clause_ids, n, ids, x, &got, err)
                      : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    bool rebuild = false;
    if (!rc) rc = cq_vectors_update(v, c->clause_ids, n, ids, x, got, &rebuild, err);
    free(ids);
    free(x);
    if (!rc && rebuild) return cq_vectors_rebuild(v, s, err); /* its seq: the rebuild's snapshot, ≥ c->seq */
    if (!rc) set_seq(v, c->seq);
    return rc;
}

cq_status cq_vectors_catch_up(cq_store *s, cq_vectors *const *v, size_t n_v, int64_t after, int64_t *last,
                              size_t *applied, cq_err *err) {
    if (applied) *applied = 0;
    /* from the oldest position of the indexes: none may miss a change */
    for (size_t j = 0; j < n_v; j++)
        if (get_seq(v[j]) < after) after = get_seq(v[j]);
    int64_t pos = after;
    cq_status rc = CQ_OK;
    for (;;) {
        cq_vector_change *c = NULL;
        size_t n = 0;
        rc = cq_store_vector_changes(s, pos, CHANGES_BATCH, &c, &n, err);
        for (size_t i = 0; !rc && i < n; i++) {
            for (size_t j = 0; !rc && j < n_v; j++) {
                if (v[j]->kb_id != c[i].kb_id || c[i].seq <= get_seq(v[j])) continue;
                rc = apply_change(s, v[j], &c[i], err);
                if (!rc && applied) (*applied)++;
            }
            if (!rc) pos = c[i].seq;
        }
        cq_vector_changes_free(c, n);
        if (rc || n < CHANGES_BATCH) break;
    }
    /* every change up to pos is in (the other KBs' changes concern none of them) */
    if (!rc)
        for (size_t j = 0; j < n_v; j++) set_seq(v[j], pos);
    if (last) *last = rc ? after : pos;
    return rc;
}

/* ---- the feed ---------------------------------------------------------------------------------------------- */

struct cq_vector_feed {
    cq_store *s; /* the feed's own connection: its thread and cq_vector_feed_kb use it under mu */
    char data_dir[4000];
    cq_vector_feed_options opt;
    pthread_t thread;
    pthread_mutex_t mu;
    int wake[2]; /* a byte written: stop */
    atomic_bool stop;
    cq_vectors **kbs;
    size_t n_kbs, cap_kbs;
    cq_vector_feed_stats stats;
    bool connected;
};

static cq_status feed_listen(cq_vector_feed *f, cq_err *err) {
    cq_status rc = cq_db_exec(cq_store_conn(f->s), "LISTEN " CQ_STORE_VECTORS_CHANNEL, err);
    return rc ? cq_err_prefix(err, "vector feed: listen: ") : CQ_OK;
}

/* Reads the feed into every open index (under mu). */
static cq_status catch_up(cq_vector_feed *f, cq_err *err) {
    size_t applied = 0;
    int64_t last = f->stats.seq;
    cq_status rc = cq_vectors_catch_up(f->s, f->kbs, f->n_kbs, f->stats.seq, &last, &applied, err);
    if (!rc) {
        f->stats.seq = last;
        f->stats.n_applied += applied;
    }
    return rc;
}

static void save_changed(cq_vector_feed *f) {
    for (size_t i = 0; i < f->n_kbs; i++) {
        cq_err err = {0};
        if (f->kbs[i]->dirty && cq_vectors_save(f->kbs[i], &err))
            CQ_WARN("vectors: %s (PostgreSQL keeps the vectors)", err.msg);
    }
}

/* Takes the notifications libpq holds (under mu); how many. libpq reads them off the socket while it waits for any
 * result on the connection (a catch-up's, cq_vector_feed_kb's), so one that came then is in its queue, not on the
 * socket, and poll() would not wake for it: the loop looks here before it waits. */
static int take_notifications(cq_vector_feed *f) {
    int n = 0;
    cq_db_notifications(cq_store_conn(f->s), false, &n);
    f->stats.n_notifications += (uint64_t)n;
    return n;
}

static void *feed_main(void *arg) {
    cq_vector_feed *f = arg;
    cq_db *c = cq_store_conn(f->s);
    time_t last_save = time(NULL), last_prune = 0;
    bool warned = false, pending = true;
    while (!atomic_load(&f->stop)) {
        cq_err err = {0};
        pthread_mutex_lock(&f->mu);
        /* The connection dropped: again, LISTEN, and catch up from the last seq. Or db/db_pg.c re-established it
         * itself, at a statement after the server had dropped it: a new session, whose LISTEN is gone. */
        if (f->connected ? cq_db_connected(c) && cq_db_backend_pid(c) != f->stats.backend_pid : cq_db_reconnect(c)) {
            f->connected = !feed_listen(f, &err);
            if (f->connected) {
                f->stats.n_reconnects++;
                f->stats.backend_pid = cq_db_backend_pid(c);
                CQ_INFO("vector feed: reconnected; catching up from %lld", (long long)f->stats.seq);
                warned = false;
                pending = true;
            }
        }
        bool ok = f->connected;
        if (ok && take_notifications(f)) pending = true;
        pthread_mutex_unlock(&f->mu);
        struct pollfd fds[2] = {{.fd = ok ? cq_db_socket(c) : -1, .events = POLLIN}, {.fd = f->wake[0], .events = POLLIN}};
        /* a change waiting: no wait; disconnected: try again within a second */
        int timeout_ms = pending ? 0 : ok || f->opt.poll_ms < 1000 ? f->opt.poll_ms : 1000;
        int ready = poll(fds, 2, timeout_ms);
        if (ready < 0 && errno != EINTR) break;
        if (fds[1].revents) break;
        pthread_mutex_lock(&f->mu);
        int got = 0;
        if (f->connected && fds[0].revents && !cq_db_notifications(c, true, &got)) f->connected = false;
        f->stats.n_notifications += (uint64_t)got;
        if (f->connected) take_notifications(f);
        /* a notification or the poll: read the feed either way (one indexed query when nothing changed) */
        cq_status rc = f->connected ? catch_up(f, &err) : CQ_ERR_DB;
        pending = false;
        if (rc && !cq_db_connected(c)) {
            f->connected = false;
            f->stats.backend_pid = 0;
        }
        if (rc && !warned) {
            CQ_WARN("vector feed: %s", f->connected ? err.msg : "connection lost; reconnecting");
            warned = true;
        }
        time_t now = time(NULL);
        if (now - last_save >= f->opt.save_every_s) {
            save_changed(f);
            last_save = now;
        }
        if (f->connected && f->opt.prune_after_s >= 0 && now - last_prune >= 3600) {
            int64_t pruned = 0;
            if (cq_store_vector_changes_prune(f->s, f->opt.prune_after_s, &pruned, &err))
                CQ_WARN("vector feed: %s", err.msg);
            else if (pruned)
                CQ_INFO("vector feed: %lld changes older than %llds pruned", (long long)pruned,
                        (long long)f->opt.prune_after_s);
            last_prune = now;
        }
        pthread_mutex_unlock(&f->mu);
    }
    return NULL;
}

cq_status cq_vector_feed_start(cq_store *s, const char *data_dir, const cq_vector_feed_options *opt,
                               cq_vector_feed **out, cq_err *err) {
    *out = NULL;
    cq_vector_feed *f = calloc(1, sizeof *f);
    if (!f) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (opt) f->opt = *opt;
    if (f->opt.poll_ms <= 0) f->opt.poll_ms = 2000;
    if (f->opt.save_every_s <= 0) f->opt.save_every_s = 60;
    if (f->opt.prune_after_s == 0) f->opt.prune_after_s = 86400;
    snprintf(f->data_dir, sizeof f->data_dir, "%s", data_dir);
    f->wake[0] = f->wake[1] = -1;
    char *conninfo = cq_db_conninfo(cq_store_conn(s));
    cq_status rc = conninfo ? cq_store_open_uri(conninfo, &f->s, err)
               : cq_store_vectors_shared(s) ? cq_err_set(err, CQ_ERR_NOMEM, "out of memory")
                                            : cq_err_set(err, CQ_ERR_UNSUPPORTED, "vector feed: not a PostgreSQL store");
    free(conninfo);
    if (!rc) rc = feed_listen(f, err);
    if (!rc && pipe(f->wake)) rc = cq_err_set(err, CQ_ERR_IO, "vector feed: pipe: %s", strerror(errno));
    if (!rc) {
        /* the feed starts at its end: indexes opened later catch up from their own position */
        int64_t pruned_to = 0, last = 0;
        rc = cq_store_vector_feed_bounds(f->s, &pruned_to, &last, err);
        f->stats.seq = last;
        f->stats.backend_pid = cq_db_backend_pid(cq_store_conn(f->s));
        f->connected = true;
    }
    pthread_mutex_init(&f->mu, NULL);
    if (!rc && pthread_create(&f->thread, NULL, feed_main, f)) rc = cq_err_set(err, CQ_ERR_INTERNAL, "vector feed: thread");
    if (rc) {
        pthread_mutex_destroy(&f->mu);
        if (f->wake[0] >= 0) close(f->wake[0]), close(f->wake[1]);
        cq_store_close(f->s);
        free(f);
        return rc;
    }
    *out = f;
    return CQ_OK;
}

cq_status cq_vector_feed_kb(cq_vector_feed *f, int64_t kb_id, const char *model, int dim, cq_vectors **out,
                            cq_err *err) {
    *out = NULL;
    pthread_mutex_lock(&f->mu);
    cq_status rc = CQ_OK;
    for (size_t i = 0; i < f->n_kbs && !*out; i++)
        if (f->kbs[i]->kb_id == kb_id) {
            if (strcmp(f->kbs[i]->model, model) || f->kbs[i]->dim != dim)
                rc = cq_err_set(err, CQ_ERR_INVALID, "vectors: KB %lld is open for another model", (long long)kb_id);
            else
                *out = f->kbs[i];
        }
    if (!rc && !*out && !cq_grow((void **)&f->kbs, &f->cap_kbs, f->n_kbs + 1, sizeof *f->kbs))
        rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc && !*out) {
        bool rebuilt = false;
        rc = cq_vectors_load(f->s, f->data_dir, kb_id, model, dim, out, &rebuilt, err);
        if (!rc) {
            f->kbs[f->n_kbs++] = *out;
            if (rebuilt) f->stats.n_rebuilt++;
            else f->stats.n_loaded++;
        }
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

void cq_vector_feed_stop(cq_vector_feed *f) {
    if (!f) return;
    atomic_store(&f->stop, true);
    if (write(f->wake[1], "x", 1) != 1) CQ_WARN("vector feed: cannot wake its thread");
    pthread_join(f->thread, NULL);
    for (size_t i = 0; i < f->n_kbs; i++) cq_vectors_close(f->kbs[i]); /* saves what changed */
    free(f->kbs);
    close(f->wake[0]);
    close(f->wake[1]);
    cq_store_close(f->s);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

void cq_vector_feed_stats_get(cq_vector_feed *f, cq_vector_feed_stats *out) {
    pthread_mutex_lock(&f->mu);
    *out = f->stats;
    pthread_mutex_unlock(&f->mu);
}
