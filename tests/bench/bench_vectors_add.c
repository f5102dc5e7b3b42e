/* Cost of adding one document's clause vectors to a KB's vector index, before and after the index grows past the
 * flat limit into an IVF one (docs/PERF.md, "Ingestion with the trained encoder"): the per-document adds of an
 * ingest, without parsing or encoding.
 *
 *   bench_vectors_add [--after N] [--per K] [--dim D]
 *
 * Fills a fresh store in /tmp with documents of K clauses (default 44, laws-zh's mean) and random unit vectors of
 * D dimensions (default 256, the encoder's), one cq_vectors_add a document inside its transaction (as ingest does): first up to the IVF switch
 * (CQ_VECTORS_IVF_MIN vectors, which trains the IVF index), then N more documents (default 1,000). Prints wall,
 * user and system time and milliseconds an add for each phase. Thread counts are FAISS's and OpenBLAS's defaults
 * (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS change them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "store/store.h"
#include "search/vectors.h"

typedef struct {
    double wall, user, sys;
} stamp;

static stamp now(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (stamp){cq_clock_seconds(),
                   (double)r.ru_utime.tv_sec + 1e-6 * (double)r.ru_utime.tv_usec,
                   (double)r.ru_stime.tv_sec + 1e-6 * (double)r.ru_stime.tv_usec};
}

static void die(const char *what, const cq_err *err) {
    fprintf(stderr, "bench_vectors_add: %s: %s\n", what, err->msg);
    exit(1);
}

/* One document of `per` clauses in the store, their vectors added to v; returns the add's own time. */
static stamp add_document(cq_store *s, cq_vectors *v, int64_t kb, int doc_no, int per, int dim, unsigned *seed,
                          int64_t *ids, float *x) {
    cq_err err = {0};
    char name[32], file[40], sha[40];
    snprintf(name, sizeof name, "d%d", doc_no);
    snprintf(file, sizeof file, "d%d.txt", doc_no);
    snprintf(sha, sizeof sha, "%032d", doc_no);
    int64_t doc;
    if (cq_store_begin(s, &err) || cq_store_doc_create(s, kb, name, file, "txt", sha, 1, &doc, &err))
        die("document", &err);
    for (int i = 0; i < per; i++) {
        cq_store_clause c = {.ord = i, .text = "clause", .path = "", .start_off = 0, .end_off = 6};
        if (cq_store_clause_add(s, kb, doc, name, &c, &ids[i], &err)) die("clause", &err);
        double n2 = 0;
        for (int j = 0; j < dim; j++) {
            float r = (float)rand_r(seed) / (float)RAND_MAX - 0.5f;
            x[(size_t)i * dim + j] = r;
            n2 += (double)r * r;
        }
        for (int j = 0; j < dim; j++) x[(size_t)i * dim + j] /= (float)sqrt(n2);
    }
    stamp a = now(); /* inside the document's transaction, as ingest adds them */
    if (cq_vectors_add(v, s, ids, x, (size_t)per, &err)) die("add", &err);
    stamp b = now();
    if (cq_store_commit(s, &err)) die("commit", &err);
    return (stamp){b.wall - a.wall, b.user - a.user, b.sys - a.sys};
}

static void row(const char *phase, int docs, int per, stamp t) {
    printf("| %s | %d | %d | %.2f | %.2f | %.2f | %.2f |\n", phase, docs, docs * per, t.wall, t.user, t.sys,
           1e3 * t.wall / docs);
}

int main(int argc, char **argv) {
    int after = 1000, per = 44, dim = 256;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--after") && i + 1 < argc) after = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--per") && i + 1 < argc) per = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dim") && i + 1 < argc) dim = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_vectors_add [--after N] [--per K] [--dim D]\n");
            return 2;
        }
    }
    if (after < 1 || per < 1 || per > 4096 || dim < 8) {
        fprintf(stderr, "bench_vectors_add: --after >= 1, --per 1..4096, --dim >= 8\n");
        return 2;
    }
    char dir[64], path[96];
    snprintf(dir, sizeof dir, "/tmp/cq_bench_vectors_%d", (int)getpid());
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/clauseqa.db", dir);
    cq_err err = {0};
    cq_store *s;
    int64_t kb;
    if (cq_store_open(path, &s, &err) || cq_store_kb_create(s, "bench", &kb, &err)) die("store", &err);
    cq_vectors *v;
    if (cq_vectors_open(s, dir, kb, "bench", dim, &v, &err)) die("vectors", &err);
    int64_t *ids = malloc(sizeof *ids * (size_t)per);
    float *x = malloc(sizeof *x * (size_t)per * (size_t)dim);
    unsigned seed = 1;
    stamp flat = {0}, sw = {0}, ivf = {0};
    int doc_no = 0, n_flat = 0;
    while (!cq_vectors_is_ivf(v)) {
        stamp t = add_document(s, v, kb, doc_no++, per, dim, &seed, ids, x);
        if (cq_vectors_is_ivf(v)) sw = t; /* this add trained the IVF index */
        else {
            flat.wall += t.wall, flat.user += t.user, flat.sys += t.sys;
            n_flat++;
        }
    }
    for (int i = 0; i < after; i++) {
        stamp t = add_document(s, v, kb, doc_no++, per, dim, &seed, ids, x);
        ivf.wall += t.wall, ivf.user += t.user, ivf.sys += t.sys;
    }
    printf("| phase | documents | vectors | wall s | user s | sys s | ms an add |\n|---|---|---|---|---|---|---|\n");
    row("flat index", n_flat, per, flat);
    row("the add that trains the IVF index", 1, per, sw);
    row("IVF index", after, per, ivf);
    printf("(%zu vectors in the end, %d dimensions)\n", cq_vectors_count(v), dim);
    cq_vectors_close(v);
    cq_store_close(s);
    free(ids);
    free(x);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) ? 1 : 0;
}
