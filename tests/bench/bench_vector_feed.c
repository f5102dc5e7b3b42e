/* The vector change feed (issue 20, docs/SCALE.md "Vectors"): how soon a document's vectors added or deleted through
 * one connection are searchable or gone in every node's FAISS cache, how fast the feed carries a bulk load, and what
 * a node pays at start-up (a rebuild from clause_vectors; a restart from its FAISS file).
 *
 *   bench_vector_feed [--pg CONNINFO] [--nodes 3] [--docs 50] [--clauses 50] [--dim 256] [--bulk 150000]
 *
 * CONNINFO defaults to $CLAUSEQA_PG (tests/pg/cluster.sh sets it); a database of its own is made for the run. The
 * nodes are feeds of this process (a connection and a thread each, their own data folders), at the default poll
 * (2 s): what arrives sooner arrives by NOTIFY. Clauses are inserted as bare rows (no keyword index): the feed is
 * measured, not ingest. */
#include <getopt.h>
#include <libpq-fe.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../pg/pg_handle.h"
#include "search/vector_feed.h"
#include "search/vectors.h"
#include "store/vectors.h"

#define MODEL "bench"
#define MAX_NODES 16

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void summary(const char *what, double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    printf("%-58s p50 %7.1f ms  p95 %7.1f ms  max %7.1f ms  (%zu)\n", what, v[n / 2],
           v[(size_t)(0.95 * (double)(n - 1) + 0.5)], v[n - 1], n);
}

static void die(const char *what, const cq_err *err) {
    fprintf(stderr, "bench_vector_feed: %s: %s\n", what, err ? err->msg : "failed");
    exit(1);
}

/* The store on the bench's database (store/store.h): its KBs and documents are store/documents.c's. */
static cq_store *store;

/* A document of n bare clauses; their ids into ids. */
static int64_t add_doc(cq_pg *pg, int64_t kb, size_t n, int64_t *ids) {
    static int k;
    char name[32];
    snprintf(name, sizeof name, "doc%d", ++k);
    cq_err err = {0};
    int64_t doc = 0;
    if (cq_store_doc_create(store, kb, name, name, "md", name, 1, &doc, &err)) die("document", &err);
    char d[32], count[32];
    snprintf(d, sizeof d, "%lld", (long long)doc);
    snprintf(count, sizeof count, "%zu", n);
    const char *params[] = {d, count};
    PGresult *r = PQexecParams(cq_pg_conn(pg),
                               "INSERT INTO clauses(doc_id, ord, kind, text, start_off, end_off) SELECT $1::bigint, g, "
                               "1, 'x', 0, 0 FROM generate_series(0, $2::int - 1) g RETURNING id",
                               2, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || (size_t)PQntuples(r) != n) {
        cq_err_set(&err, CQ_ERR_DB, "%s", PQerrorMessage(cq_pg_conn(pg)));
        die("clauses", &err);
    }
    for (size_t i = 0; i < n; i++) ids[i] = atoll(PQgetvalue(r, (int)i, 0));
    PQclear(r);
    return doc;
}

static void random_units(float *x, size_t n, int dim, unsigned *seed) {
    for (size_t i = 0; i < n; i++) {
        double norm = 0;
        for (int d = 0; d < dim; d++) {
            float v = (float)rand_r(seed) / RAND_MAX - 0.5f;
            x[i * dim + d] = v;
            norm += (double)v * v;
        }
        for (int d = 0; d < dim; d++) x[i * dim + d] /= (float)sqrt(norm);
    }
}

static int nearest_is(cq_vectors *v, const float *q, int64_t id) {
    int64_t got[1];
    float score[1];
    size_t n = 0;
    cq_err err = {0};
    if (cq_vectors_search(v, q, 1, got, score, &n, &err)) die("search", &err);
    return n == 1 && got[0] == id;
}

/* Milliseconds from t0 until every node's nearest to q is id (want) or is not; -1 after 10 s. */
static double wait_all(cq_vectors **v, int n, const float *q, int64_t id, int want, double t0) {
    for (int i = 0; i < n; i++)
        while (nearest_is(v[i], q, id) != want) {
            if (now_ms() - t0 > 10000) return -1;
            usleep(200);
        }
    return now_ms() - t0;
}

int main(int argc, char **argv) {
    const char *conninfo = getenv("CLAUSEQA_PG");
    int nodes = 3, docs = 50, clauses = 50, dim = 256;
    long bulk = 150000;
    static const struct option longopts[] = {{"pg", 1, 0, 'p'},      {"nodes", 1, 0, 'n'}, {"docs", 1, 0, 'd'},
                                             {"clauses", 1, 0, 'c'}, {"dim", 1, 0, 'm'},   {"bulk", 1, 0, 'b'},
                                             {0, 0, 0, 0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (opt == 'p') conninfo = optarg;
        else if (opt == 'n') nodes = atoi(optarg);
        else if (opt == 'd') docs = atoi(optarg);
        else if (opt == 'c') clauses = atoi(optarg);
        else if (opt == 'm') dim = atoi(optarg);
        else if (opt == 'b') bulk = atol(optarg);
        else return 2;
    }
    if (!conninfo || nodes < 1 || nodes > MAX_NODES || docs < 1 || clauses < 1 || dim < 1 || bulk < 0) {
        fprintf(stderr, "usage: bench_vector_feed [--pg CONNINFO] [--nodes 1-16] [--docs N] [--clauses N] [--dim N] "
                        "[--bulk N]\n");
        return 2;
    }
    /* a database of its own */
    char dbname[64], sql[128], info[1024];
    snprintf(dbname, sizeof dbname, "bench_feed_%d", (int)getpid());
    PGconn *admin = PQconnectdb(conninfo);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", dbname);
    PGresult *r = PQexec(admin, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        fprintf(stderr, "bench_vector_feed: %s", PQerrorMessage(admin));
        return 1;
    }
    PQclear(r);
    snprintf(info, sizeof info, "%s dbname=%s", conninfo, dbname);
    cq_err err = {0};
    cq_pg *pg = NULL;
    int64_t kb = 0;
    if (cq_store_open_uri(info, &store, &err) || cq_store_kb_ensure(store, "bench", &kb, &err)) die("open", &err);
    pg = cq_store_pg(store);

    char dirs[MAX_NODES + 1][64];
    cq_vector_feed *feed[MAX_NODES + 1];
    cq_vectors *v[MAX_NODES + 1];
    for (int i = 0; i <= nodes; i++) {
        snprintf(dirs[i], sizeof dirs[i], "/tmp/cq-bench-feed-XXXXXX");
        if (!mkdtemp(dirs[i])) die("mkdtemp", NULL);
    }
    for (int i = 0; i < nodes; i++)
        if (cq_vector_feed_start(store, dirs[i], NULL, &feed[i], &err) || cq_vector_feed_kb(feed[i], kb, MODEL, dim, &v[i], &err))
            die("start a node", &err);
    printf("%d nodes, documents of %d clauses, %d-float vectors\n", nodes, clauses, dim);

    unsigned seed = 7;
    int64_t *ids = malloc((size_t)docs * clauses * sizeof *ids), *doc_ids = malloc((size_t)docs * sizeof *doc_ids);
    float *x = malloc((size_t)docs * clauses * dim * sizeof *x);
    double *store_ms = malloc((size_t)docs * sizeof *store_ms), *add_ms = malloc((size_t)docs * sizeof *add_ms),
           *del_ms = malloc((size_t)docs * sizeof *del_ms);
    for (int d = 0; d < docs; d++) {
        int64_t *di = ids + (size_t)d * clauses;
        float *dx = x + (size_t)d * clauses * dim;
        doc_ids[d] = add_doc(pg, kb, (size_t)clauses, di);
        random_units(dx, (size_t)clauses, dim, &seed);
        double t0 = now_ms();
        if (cq_store_vectors_store(store, kb, MODEL, dim, di, dx, (size_t)clauses, NULL, &err)) die("store", &err);
        double t1 = now_ms();
        store_ms[d] = t1 - t0;
        add_ms[d] = wait_all(v, nodes, dx + (size_t)(clauses - 1) * dim, di[clauses - 1], 1, t1);
        if (add_ms[d] < 0) die("a document's vectors did not reach every node within 10 s", NULL);
    }
    for (int d = 0; d < docs; d++) {
        int64_t *di = ids + (size_t)d * clauses;
        float *dx = x + (size_t)d * clauses * dim;
        if (cq_store_doc_delete(store, doc_ids[d], &err)) die("delete", &err);
        del_ms[d] = wait_all(v, nodes, dx, di[0], 0, now_ms());
        if (del_ms[d] < 0) die("a document's vectors were still found on a node after 10 s", NULL);
    }
    summary("store a document's vectors (commit)", store_ms, (size_t)docs);
    summary("added: commit to searchable on every node", add_ms, (size_t)docs);
    summary("deleted: commit to gone from every node", del_ms, (size_t)docs);

    if (bulk > 0) {
        const size_t per_doc = 1000;
        int64_t *bi = malloc(per_doc * sizeof *bi);
        float *bx = malloc(per_doc * dim * sizeof *bx);
        double t0 = now_ms(), store_total = 0;
        for (long done = 0; done < bulk;) {
            size_t n = (size_t)(bulk - done) < per_doc ? (size_t)(bulk - done) : per_doc;
            add_doc(pg, kb, n, bi);
            random_units(bx, n, dim, &seed);
            double s0 = now_ms();
            if (cq_store_vectors_store(store, kb, MODEL, dim, bi, bx, n, NULL, &err)) die("store", &err);
            store_total += now_ms() - s0;
            done += (long)n;
        }
        double stored = now_ms();
        for (int i = 0; i < nodes; i++)
            while (cq_vectors_count(v[i]) < (size_t)bulk) usleep(10000);
        double all = now_ms();
        printf("bulk: %ld vectors stored in %.1f s (%.0f vectors/s; the store statements alone %.1f s); every node "
               "current %.1f s after the last commit (%s)\n",
               bulk, (stored - t0) / 1e3, (double)bulk / ((stored - t0) / 1e3), store_total / 1e3, (all - stored) / 1e3,
               cq_vectors_is_ivf(v[0]) ? "IVF" : "flat");
        free(bi);
        free(bx);
        /* what a rebuild reads: every vector of the KB, one snapshot */
        int64_t *all_ids = NULL, seq = 0;
        float *all_x = NULL;
        size_t n_all = 0;
        double r0 = now_ms();
        if (cq_store_vectors_read_all(store, kb, MODEL, dim, &all_ids, &all_x, &n_all, &seq, &err)) die("read", &err);
        printf("reading the KB's %zu vectors from PostgreSQL (one snapshot, row by row): %.1f s\n", n_all,
               (now_ms() - r0) / 1e3);
        free(all_ids);
        free(all_x);
        /* a late node: rebuilt from clause_vectors; then restarted from its file */
        double s0 = now_ms();
        if (cq_vector_feed_start(store, dirs[nodes], NULL, &feed[nodes], &err) ||
            cq_vector_feed_kb(feed[nodes], kb, MODEL, dim, &v[nodes], &err))
            die("late node", &err);
        double s1 = now_ms();
        cq_vector_feed_stop(feed[nodes]);
        double s2 = now_ms();
        if (cq_vector_feed_start(store, dirs[nodes], NULL, &feed[nodes], &err) ||
            cq_vector_feed_kb(feed[nodes], kb, MODEL, dim, &v[nodes], &err))
            die("restarted node", &err);
        double s3 = now_ms();
        cq_vector_feed_stats st;
        cq_vector_feed_stats_get(feed[nodes], &st);
        printf("a node started later: %zu vectors rebuilt from PostgreSQL in %.1f s; restarted from its FAISS file in "
               "%.1f s (%s)\n",
               cq_vectors_count(v[nodes]), (s1 - s0) / 1e3, (s3 - s2) / 1e3, st.n_loaded ? "loaded" : "rebuilt");
        cq_vector_feed_stop(feed[nodes]);
    }
    for (int i = 0; i < nodes; i++) cq_vector_feed_stop(feed[i]);
    cq_store_close(store);
    snprintf(sql, sizeof sql, "DROP DATABASE %s", dbname);
    PQclear(PQexec(admin, sql));
    PQfinish(admin);
    for (int i = 0; i <= nodes; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dirs[i]);
        if (system(cmd)) fprintf(stderr, "cannot remove %s\n", dirs[i]);
    }
    free(ids);
    free(doc_ids);
    free(x);
    free(store_ms);
    free(add_ms);
    free(del_ms);
    return 0;
}
