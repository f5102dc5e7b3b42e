/* Cost of the routed dense search (search/doc_route.h cq_doc_route_search, issue 27) at a law corpus's size: per
 * question it reads the KB's document vectors, ranks them, reads the routed documents' clause vectors and merges them
 * into the dense list (the FAISS search and the question's encoding are not in it).
 *
 *   bench_doc_route [--docs N] [--per K] [--dim D] [--top R] [--questions Q]
 *
 * Fills a fresh SQLite store in /tmp with N documents (default 3,368, laws-zh's) of K clauses (default 44, its mean),
 * random unit clause vectors and document vectors of D dimensions (default 256), then routes Q random questions
 * (default 200) with R documents (default 3) and beta 0.05 against a dense list of 50 random clauses, first reading the
 * KB's document vectors every question, then through the retriever's cache. Prints the fill time and the
 * milliseconds a question (mean, and the slowest) of each. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "search/doc_route.h"
#include "store/store.h"
#include "store/vectors.h"

static void die(const char *what, const cq_err *err) {
    fprintf(stderr, "bench_doc_route: %s: %s\n", what, err->msg);
    exit(1);
}

static void unit(float *v, int dim, unsigned *seed) {
    double n = 0;
    for (int j = 0; j < dim; j++) {
        v[j] = (float)rand_r(seed) / (float)RAND_MAX - 0.5f;
        n += (double)v[j] * v[j];
    }
    for (int j = 0; j < dim; j++) v[j] /= (float)sqrt(n);
}

int main(int argc, char **argv) {
    int docs = 3368, per = 44, dim = 256, top = 3, questions = 200;
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--docs")) docs = v;
        else if (!strcmp(argv[i], "--per")) per = v;
        else if (!strcmp(argv[i], "--dim")) dim = v;
        else if (!strcmp(argv[i], "--top")) top = v;
        else if (!strcmp(argv[i], "--questions")) questions = v;
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/bench_doc_route_%d.db", (int)getpid());
    cq_err err = {0};
    cq_store *s = NULL;
    int64_t kb;
    if (cq_store_open(path, &s, &err) || cq_store_kb_create(s, "kb", &kb, &err)) die("store", &err);
    unsigned seed = 7;
    int64_t *ids = malloc((size_t)docs * (size_t)per * sizeof *ids);
    float *x = malloc((size_t)per * (size_t)dim * sizeof *x), *dv = malloc((size_t)dim * sizeof *dv);
    double t0 = cq_clock_seconds();
    if (cq_store_begin(s, &err)) die("begin", &err);
    for (int d = 0; d < docs; d++) {
        char name[32], sha[40];
        snprintf(name, sizeof name, "d%d", d);
        snprintf(sha, sizeof sha, "%032d", d);
        int64_t doc;
        if (cq_store_doc_create(s, kb, name, "d.txt", "txt", sha, 1, &doc, &err)) die("document", &err);
        for (int k = 0; k < per; k++) {
            cq_store_clause c = {.ord = k, .text = "x", .path = "", .start_off = 0, .end_off = 1};
            if (cq_store_clause_add(s, kb, doc, "d", &c, &ids[(size_t)d * (size_t)per + (size_t)k], &err))
                die("clause", &err);
            unit(x + (size_t)k * (size_t)dim, dim, &seed);
        }
        if (cq_store_doc_finish(s, doc, CQ_DOC_READY, NULL, name, 1, per, 1.0, "", &err)) die("finish", &err);
        if (cq_store_vectors_store(s, kb, "m", dim, ids + (size_t)d * (size_t)per, x, (size_t)per, NULL, &err))
            die("vectors", &err);
        unit(dv, dim, &seed);
        if (cq_store_doc_vector_put(s, kb, doc, "m", "h", dim, dv, &err)) die("document vector", &err);
    }
    if (cq_store_commit(s, &err)) die("commit", &err);
    double t1 = cq_clock_seconds();
    printf("filled %d documents × %d clauses, dim %d: %.1f s\n", docs, per, dim, t1 - t0);
    cq_doc_route r = {(size_t)top, 0.05};
    float q[4096], cos[50];
    int64_t list[50];
    cq_doc_route_cache *cache = cq_doc_route_cache_new();
    for (int cached = 0; cached < 2; cached++) {
        double total = 0, worst = 0;
        size_t grown = 0;
        for (int i = 0; i < questions; i++) {
            unit(q, dim, &seed);
            for (int k = 0; k < 50; k++) {
                list[k] = ids[(size_t)rand_r(&seed) % ((size_t)docs * (size_t)per)];
                cos[k] = 0.5f - 0.01f * (float)k;
            }
            size_t n = 50;
            double a = cq_clock_seconds();
            if (cq_doc_route_search(&r, cached ? cache : NULL, s, kb, "m", "h", dim, q, list, cos, &n, 50, &err))
                die("route", &err);
            double b = cq_clock_seconds() - a;
            total += b;
            if (b > worst) worst = b;
            grown += n;
        }
        printf("routed search, %s, %d documents routed, %d questions: %.2f ms a question (slowest %.2f ms; %zu hits)\n",
               cached ? "the KB's document vectors cached" : "read every question", top, questions,
               1e3 * total / questions, 1e3 * worst, grown);
    }
    cq_doc_route_cache_free(cache);
    cq_store_close(s);
    unlink(path);
    free(ids);
    free(x);
    free(dv);
    return 0;
}
