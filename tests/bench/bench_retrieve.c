/* Retrieval latency benchmark: ingests a suite's documents into a KB (unless already there) and times retrieve for
 * every question of the suite, per mode. Prints a table (ms): p50, p95, p99, mean, and the ingest time. Then the
 * whole-KB BM25 search of each question (k * 3 candidates, as retrieve asks for them) by cq_bm25_top and by its
 * plain twin cq_bm25_top_reference (FTS5's bm25() over every matching row), alternating which goes first: their
 * latencies, the rows the pruned search scored, and the questions whose results differ (must be 0).
 *
 *   bench_retrieve [--data DIR] [--kb KB] [--suite DIR] [--k 10] [--limit N]
 * Defaults: a fresh temporary data dir, KB "bench", suite ../shared/eval/laws-zh (relative to the source tree). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "app/cli_common.h"
#include "app/ingest.h"
#include "core/clock.h"
#include "core/fileio.h"
#include "store/bm25.h"
#include "search/query.h"
#include "search/retrieve.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    static const struct option opts[] = {{"data", required_argument, 0, 'd'}, {"kb", required_argument, 0, 'b'},
                                         {"suite", required_argument, 0, 's'}, {"k", required_argument, 0, 'k'},
                                         {"limit", required_argument, 0, 'n'}, {0, 0, 0, 0}};
    char tmp[] = "/tmp/cq_bench_XXXXXX";
    const char *data = NULL, *kb = "bench", *suite = NULL;
    long k = 10, limit = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': data = optarg; break;
        case 'b': kb = optarg; break;
        case 's': suite = optarg; break;
        case 'k': k = atol(optarg); break;
        case 'n': limit = atol(optarg); break;
        default: fprintf(stderr, "usage: %s [--data DIR] [--kb KB] [--suite DIR] [--k 10] [--limit N]\n", argv[0]); return 2;
        }
    }
    char default_suite[4096];
    if (!suite) {
        const char *src = getenv("CLAUSEQA_SOURCE_DIR");
        snprintf(default_suite, sizeof default_suite, "%s/../shared/eval/laws-zh", src ? src : ".");
        suite = default_suite;
    }
    if (!data) {
        if (!mkdtemp(tmp)) return 1;
        data = tmp;
    }
    cq_store *s = cq_cli_open_store(data);
    if (!s) return 1;
    int64_t kb_id = cq_cli_kb(s, kb, true);
    if (!kb_id) return 1;

    /* Ingest (skipped for documents already in the KB). */
    if (strlen(suite) > 3000) return 2;
    char path[4200];
    snprintf(path, sizeof path, "%s/docs", suite);
    FILE *ls = NULL;
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls -1 '%s'", path);
    ls = popen(cmd, "r");
    double t0 = cq_clock_seconds();
    long docs = 0, clauses = 0;
    char *line;
    while (ls && (line = cq_read_line(ls))) {
        char file[8192];
        snprintf(file, sizeof file, "%s/%s", path, line);
        free(line);
        cq_ingest_result r;
        cq_err err = {0};
        if (cq_ingest_file(s, data, kb_id, file, NULL, &r, &err) == CQ_OK && !r.duplicate) {
            docs++;
            clauses += r.n_clauses;
        }
    }
    if (ls) pclose(ls);
    double ingest_s = cq_clock_seconds() - t0;

    snprintf(path, sizeof path, "%s/questions.jsonl", suite);
    FILE *qf = fopen(path, "r");
    if (!qf) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    char **questions = NULL;
    size_t nq = 0;
    while ((line = cq_read_line(qf)) && (!limit || (long)nq < limit)) {
        cJSON *q = cJSON_Parse(line);
        free(line);
        const cJSON *t = q ? cJSON_GetObjectItem(q, "question") : NULL;
        if (cJSON_IsString(t)) {
            questions = realloc(questions, (nq + 1) * sizeof *questions);
            questions[nq++] = strdup(t->valuestring);
        }
        cJSON_Delete(q);
    }
    fclose(qf);

    printf("suite %s: %ld documents ingested now (%ld clauses) in %.1f s; %zu questions, k=%ld\n", suite, docs,
           clauses, ingest_s, nq, k);
    printf("%-8s %9s %9s %9s %9s %9s\n", "mode", "p50 ms", "p95 ms", "p99 ms", "mean ms", "q/s");
    const char *modes[] = {"router", "bm25", "hybrid"};
    double *lat = malloc((nq ? nq : 1) * sizeof *lat);
    for (size_t m = 0; m < 3; m++) {
        cq_err err = {0};
        int mode = cq_retrieve_parse_mode(modes[m], &err);
        double total = 0;
        for (size_t i = 0; i < nq; i++) {
            cq_hits h;
            cq_query q;
            cq_retrieve_options o = {.modes = mode, .k = (size_t)k};
            double a = cq_clock_seconds(); /* parsing the question is part of answering it */
            if (cq_query_parse(s, kb_id, questions[i], &q, &err) == CQ_OK && cq_retrieve(s, &q, &o, &h, &err) == CQ_OK)
                cq_hits_free(&h);
            cq_query_free(&q);
            lat[i] = cq_clock_ms_since(a);
            total += lat[i];
        }
        qsort(lat, nq, sizeof *lat, cmp_double);
        if (nq)
            printf("%-8s %9.2f %9.2f %9.2f %9.2f %9.1f\n", modes[m], lat[nq / 2], lat[(size_t)(0.95 * (nq - 1))],
                   lat[(size_t)(0.99 * (nq - 1))], total / nq, 1e3 * nq / total);
    }

    /* the BM25 search against its twin */
    const size_t want = (size_t)k * 3;
    double *lat_ref = malloc((nq ? nq : 1) * sizeof *lat_ref), *rows = malloc((nq ? nq : 1) * sizeof *rows);
    cq_bm25_hit *a = malloc(want * sizeof *a), *b = malloc(want * sizeof *b);
    size_t differ = 0, pruned = 0;
    for (size_t i = 0; i < nq; i++) {
        cq_query q;
        cq_err err = {0};
        lat[i] = lat_ref[i] = rows[i] = 0;
        if (cq_query_parse(s, kb_id, questions[i], &q, &err)) continue;
        const char *const *terms = (const char *const *)q.terms;
        size_t na = 0, nb = 0;
        cq_bm25_trace tr = {0};
        for (int r = 0; r < 2; r++) {
            double t0 = cq_clock_seconds();
            if ((r + (int)i) % 2) {
                cq_bm25_top_reference(s, kb_id, terms, q.n_terms, 1, 0, want, a, &na, &err);
                lat_ref[i] = cq_clock_ms_since(t0);
            } else {
                cq_bm25_top(s, kb_id, terms, q.n_terms, 1, 0, want, b, &nb, &tr, &err);
                lat[i] = cq_clock_ms_since(t0);
            }
        }
        differ += na != nb || memcmp(a, b, na * sizeof *a);
        pruned += tr.pruned_terms > 0;
        rows[i] = (double)tr.rows_visited;
        cq_query_free(&q);
    }
    printf("\nwhole-KB BM25, %zu candidates: cq_bm25_top against cq_bm25_top_reference, %zu questions, %zu pruned, "
           "%zu with other results\n", want, nq, pruned, differ);
    printf("%-10s %9s %9s %9s %9s\n", "search", "p50", "p95", "p99", "mean");
    double *cols[] = {lat_ref, lat, rows};
    const char *names[] = {"reference", "pruned", "rows"};
    for (int c = 0; c < 3; c++) {
        double total = 0;
        for (size_t i = 0; i < nq; i++) total += cols[c][i];
        qsort(cols[c], nq, sizeof *cols[c], cmp_double);
        if (nq)
            printf("%-10s %9.2f %9.2f %9.2f %9.2f\n", names[c], cols[c][nq / 2], cols[c][(size_t)(0.95 * (nq - 1))],
                   cols[c][(size_t)(0.99 * (nq - 1))], total / nq);
    }
    free(lat_ref), free(rows), free(a), free(b);
    free(lat);
    for (size_t i = 0; i < nq; i++) free(questions[i]);
    free(questions);
    cq_store_close(s);
    if (data == tmp) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        if (system(cmd) != 0) return 1;
    }
    return 0;
}
