/* Keyword retrieval, SQLite FTS5 against the PostgreSQL store (issue 20, docs/SCALE.md): copies a KB of a data
 * folder's SQLite store (the documents' clauses and the exact texts its FTS table indexes) into the PostgreSQL store,
 * then ranks every answerable question of a suite with BM25 on both and prints hit@5 (shared/eval/FORMAT.md's hit
 * rule), how many top-k lists are identical, and the ranking latency of each (p50, p95).
 *
 *   bench_store_pg --data DIR --kb KB --suite DIR [--pg CONNINFO] [--k 5] [--limit N] [--gin]
 * CONNINFO defaults to $CLAUSEQA_PG, so `tests/pg/cluster.sh build/tests/bench_store_pg ...` runs it on a throwaway
 * cluster. The KB must already be in DIR (clauseqa ingest --data DIR --kb KB SUITE/docs); its PostgreSQL copy is
 * made again on every run (the KB is dropped first).
 *
 * What is compared is the BM25 ranking alone, over the whole KB, with the question's terms (search/query.h) — the
 * part of retrieval the PostgreSQL store replaces — not the whole retrieval (the router, the documents a question
 * names, the local prior and versions read the store through index/ modules still bound to SQLite). SQLite's query
 * is search/retrieve.c's, ordered by (score, rowid) so that ties cut at k the same way on both. */
#include <getopt.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "app/cli_common.h"
#include "app/eval_score.h"
#include "core/clock.h"
#include "core/fileio.h"
#include "core/strbuf.h"
#include "store/bm25.h"
#include "search/query.h"
#include "../pg/pg_handle.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(double *v, size_t n, double p) {
    if (!n) return 0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

/* PostgreSQL clause id -> SQLite clause id, sorted by the former. */
typedef struct {
    int64_t pg, sq;
} id_pair;

static int cmp_pair(const void *a, const void *b) {
    const id_pair *x = a, *y = b;
    return (x->pg > y->pg) - (x->pg < y->pg);
}

static int64_t to_sqlite(const id_pair *map, size_t n, int64_t pg) {
    id_pair key = {pg, 0};
    const id_pair *p = bsearch(&key, map, n, sizeof *map, cmp_pair);
    return p ? p->sq : -1;
}

static char *col_dup(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

/* Copies the KB's documents and clauses from SQLite into PostgreSQL; fills the id map. */
/* The PostgreSQL store (store/store.h): its KBs, documents and clauses are store/documents.c's. */
static cq_store *pg_store;

static int copy_kb(cq_store *s, int64_t kb_sq, cq_pg *pg, int64_t kb_pg, id_pair **map, size_t *n_map, double *secs) {
    cq_err err = {0};
    cq_doc_info *docs = NULL;
    size_t n_docs = 0;
    if (cq_store_doc_list(s, kb_sq, &docs, &n_docs, &err)) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT c.id, c.ord, c.kind, c.label, c.label_key, c.path, c.text, c.page_first, c.page_last, c.start_off, "
             "c.end_off, c.boxes, f.title FROM clauses c JOIN " CQ_FTS_TABLE_FMT " f ON f.rowid = c.id "
             "WHERE c.doc_id = ? ORDER BY c.id",
             (long long)kb_sq);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "bench: %s\n", sqlite3_errmsg(cq_store_db(s)));
        return 1;
    }
    size_t cap = 0;
    *n_map = 0;
    double t0 = cq_clock_seconds();
    int rc = 0;
    for (size_t d = 0; d < n_docs && !rc; d++) {
        cq_store_clause *c = NULL;
        int64_t *sq_ids = NULL;
        char *label = NULL;
        size_t n = 0, cap_c = 0;
        sqlite3_bind_int64(st, 1, docs[d].id);
        while (sqlite3_step(st) == SQLITE_ROW) {
            if (n == cap_c) {
                cap_c = cap_c ? 2 * cap_c : 64;
                c = realloc(c, cap_c * sizeof *c);
                sq_ids = realloc(sq_ids, cap_c * sizeof *sq_ids);
                if (!c || !sq_ids) return 1;
            }
            int box_bytes = sqlite3_column_bytes(st, 11);
            cq_store_box *boxes = box_bytes > 0 ? malloc((size_t)box_bytes) : NULL;
            if (boxes) memcpy(boxes, sqlite3_column_blob(st, 11), (size_t)box_bytes);
            sq_ids[n] = sqlite3_column_int64(st, 0);
            c[n] = (cq_store_clause){.ord = sqlite3_column_int(st, 1), .kind = sqlite3_column_int(st, 2),
                                     .label = col_dup(st, 3), .label_key = col_dup(st, 4), .path = col_dup(st, 5),
                                     .text = col_dup(st, 6), .page_first = sqlite3_column_int(st, 7),
                                     .page_last = sqlite3_column_int(st, 8),
                                     .start_off = (uint32_t)sqlite3_column_int64(st, 9),
                                     .end_off = (uint32_t)sqlite3_column_int64(st, 10), .boxes = boxes,
                                     .n_boxes = boxes ? (size_t)box_bytes / sizeof *boxes : 0};
            if (!label) label = col_dup(st, 12);
            n++;
        }
        sqlite3_reset(st);
        int64_t doc_pg;
        int64_t *pg_ids = malloc((n ? n : 1) * sizeof *pg_ids);
        if (cq_store_doc_create(pg_store, kb_pg, docs[d].name, docs[d].filename, docs[d].format, docs[d].sha256,
                             docs[d].size_bytes, &doc_pg, &err) ||
            cq_pg_doc_add_clauses(pg, doc_pg, label ? label : "", c, n, pg_ids, &err)) {
            fprintf(stderr, "bench: %s: %s\n", docs[d].name, err.msg);
            rc = 1;
        }
        if (*n_map + n > cap) {
            cap = (*n_map + n) * 2;
            *map = realloc(*map, cap * sizeof **map);
            if (!*map) return 1;
        }
        for (size_t i = 0; i < n && !rc; i++) (*map)[(*n_map)++] = (id_pair){pg_ids[i], sq_ids[i]};
        for (size_t i = 0; i < n; i++) {
            free((char *)c[i].label);
            free((char *)c[i].label_key);
            free((char *)c[i].path);
            free((char *)c[i].text);
            free((void *)c[i].boxes);
        }
        free(c);
        free(sq_ids);
        free(pg_ids);
        free(label);
    }
    *secs = cq_clock_seconds() - t0;
    sqlite3_finalize(st);
    cq_doc_info_free_array(docs, n_docs);
    qsort(*map, *n_map, sizeof **map, cmp_pair);
    return rc;
}

/* search/retrieve.c's FTS5 query over the whole KB, ties by rowid; ids and scores into out. */
static size_t sqlite_bm25(sqlite3_stmt *st, const cq_query *q, size_t k, int64_t *out) {
    cq_strbuf m = {0};
    for (size_t i = 0; i < q->n_terms; i++) {
        if (i) cq_strbuf_puts(&m, " OR ");
        cq_strbuf_puts(&m, "\"");
        for (const char *p = q->terms[i]; *p; p++) cq_strbuf_puts(&m, *p == '"' ? "\"\"" : (char[]){*p, 0});
        cq_strbuf_puts(&m, "\"");
    }
    sqlite3_bind_text(st, 1, m.data ? m.data : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)k);
    size_t n = 0;
    while (n < k && sqlite3_step(st) == SQLITE_ROW) out[n++] = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    cq_strbuf_free(&m);
    return n;
}

static bool any_hit(const cq_clause_row *rows, size_t n, cJSON *gold) {
    for (size_t i = 0; i < n; i++) {
        cq_eval_passage p = {rows[i].doc_name, rows[i].text, rows[i].page_first, rows[i].page_last};
        cJSON *g;
        cJSON_ArrayForEach(g, gold) {
            cJSON *doc = cJSON_GetObjectItem(g, "doc"), *page = cJSON_GetObjectItem(g, "page"),
                  *text = cJSON_GetObjectItem(g, "text");
            cq_eval_gold gg = {cJSON_IsString(doc) ? doc->valuestring : "", cJSON_IsNumber(page) ? page->valueint : 0,
                               cJSON_IsString(text) ? text->valuestring : NULL};
            if (cq_eval_is_hit(&p, &gg)) return true;
        }
    }
    return false;
}

/* --gin: the alternative this design turned down, measured. Each clause's distinct tokens (the same cjk tokens) go
 * into gin_probe(id, tokens text[]) with a GIN index; a question then reads the clauses holding any of its tokens
 * with their token arrays (tokens && $1) — the least a GIN-based BM25 would read before it could score anything
 * (and without the counts and positions BM25 and phrases need). */
static int gin_build(cq_store *s, int64_t kb_sq, cq_pg *pg, const id_pair *map, size_t n_map, double *secs) {
    double t0 = cq_clock_seconds();
    PGconn *c = cq_pg_conn(pg);
    PQclear(PQexec(c, "DROP TABLE IF EXISTS gin_probe; CREATE TABLE gin_probe(id bigint PRIMARY KEY, tokens text[] "
                      "COLLATE \"C\" NOT NULL)"));
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT rowid, title, path, body FROM " CQ_FTS_TABLE_FMT " ORDER BY rowid",
             (long long)kb_sq);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), sql, -1, &st, NULL) != SQLITE_OK) return 1;
    PGresult *r = PQexec(c, "COPY gin_probe FROM STDIN");
    PQclear(r);
    cq_strbuf line = {0};
    size_t row = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        /* both stores number a KB's clauses in the same order, so the i-th rowid is the i-th PostgreSQL id */
        int64_t pg_id = row < n_map ? map[row].pg : -1;
        row++;
        cq_strbuf_reset(&line);
        cq_strbuf_printf(&line, "%lld\t{", (long long)pg_id);
        /* the clause's distinct tokens: the keyword index's own rows for a one-clause document */
        cq_keyword_clause kc = {1, (const char *)sqlite3_column_text(st, 1), (const char *)sqlite3_column_text(st, 2),
                                (const char *)sqlite3_column_text(st, 3)};
        cq_keyword_doc one;
        cq_err err = {0};
        if (cq_keyword_doc_build(&kc, 1, &one, &err)) return 1;
        for (size_t i = 0; i < one.n; i++) cq_strbuf_printf(&line, "%s\"%s\"", i ? "," : "", one.rows[i].token);
        cq_keyword_doc_free(&one);
        cq_strbuf_puts(&line, "}\n");
        PQputCopyData(c, line.data, (int)line.len);
    }
    PQputCopyEnd(c, NULL);
    while ((r = PQgetResult(c))) PQclear(r);
    sqlite3_finalize(st);
    cq_strbuf_free(&line);
    PQclear(PQexec(c, "CREATE INDEX gin_probe_tokens ON gin_probe USING gin(tokens); VACUUM ANALYZE gin_probe"));
    *secs = cq_clock_seconds() - t0;
    return 0;
}

int main(int argc, char **argv) {
    static const struct option opts[] = {{"data", required_argument, 0, 'd'}, {"kb", required_argument, 0, 'b'},
                                         {"suite", required_argument, 0, 's'}, {"pg", required_argument, 0, 'p'},
                                         {"k", required_argument, 0, 'k'},     {"limit", required_argument, 0, 'n'},
                                         {"gin", no_argument, 0, 'g'},         {0, 0, 0, 0}};
    const char *data = NULL, *kb = NULL, *suite = NULL, *conninfo = getenv("CLAUSEQA_PG");
    long k = 5, limit = 0;
    int c, gin = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': data = optarg; break;
        case 'b': kb = optarg; break;
        case 's': suite = optarg; break;
        case 'p': conninfo = optarg; break;
        case 'k': k = atol(optarg); break;
        case 'n': limit = atol(optarg); break;
        case 'g': gin = 1; break;
        default: goto usage;
        }
    }
    if (!data || !kb || !suite || !conninfo || k < 1 || k > 100) goto usage;

    cq_store *s = cq_cli_open_store(data);
    if (!s) return 1;
    int64_t kb_sq = cq_cli_kb(s, kb, false);
    if (!kb_sq) return 1;
    cq_err err = {0};
    cq_pg *pg = NULL;
    int64_t kb_pg = 0;
    if (cq_store_open_uri(conninfo, &pg_store, &err) || cq_store_kb_ensure(pg_store, kb, &kb_pg, &err) ||
        cq_store_kb_delete(pg_store, kb_pg, &err) || cq_store_kb_ensure(pg_store, kb, &kb_pg, &err)) {
        cq_store_close(pg_store);
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    pg = cq_store_pg(pg_store);
    id_pair *map = NULL;
    size_t n_map = 0;
    double load_s = 0;
    /* sizes: what the copy adds to the tables (the database may hold other KBs) */
    const char *size_sql = "SELECT pg_total_relation_size('keyword_postings'), pg_total_relation_size('clauses')";
    PQclear(PQexec(cq_pg_conn(pg), "VACUUM"));
    PGresult *size = PQexec(cq_pg_conn(pg), size_sql);
    long long index_bytes = -atoll(PQgetvalue(size, 0, 0)), clause_bytes = -atoll(PQgetvalue(size, 0, 1));
    PQclear(size);
    if (copy_kb(s, kb_sq, pg, kb_pg, &map, &n_map, &load_s)) return 1;
    PQclear(PQexec(cq_pg_conn(pg), "VACUUM ANALYZE"));
    size = PQexec(cq_pg_conn(pg), size_sql);
    index_bytes += atoll(PQgetvalue(size, 0, 0));
    clause_bytes += atoll(PQgetvalue(size, 0, 1));
    PQclear(size);
    char count_sql[128];
    snprintf(count_sql, sizeof count_sql, "SELECT count(*) FROM keyword_postings WHERE kb_id = %lld", (long long)kb_pg);
    size = PQexec(cq_pg_conn(pg), count_sql);
    long long index_rows = atoll(PQgetvalue(size, 0, 0));
    PQclear(size);

    double gin_s = 0;
    if (gin && gin_build(s, kb_sq, pg, map, n_map, &gin_s)) return 1;

    char sql[400];
    snprintf(sql, sizeof sql,
             "SELECT rowid, bm25(" CQ_FTS_TABLE_FMT ", %g, %g, %g) AS r FROM " CQ_FTS_TABLE_FMT " WHERE " CQ_FTS_TABLE_FMT
             " MATCH ?1 ORDER BY r, rowid LIMIT ?2",
             (long long)kb_sq, CQ_BM25_W_TITLE, CQ_BM25_W_PATH, CQ_BM25_W_BODY, (long long)kb_sq, (long long)kb_sq);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), sql, -1, &st, NULL) != SQLITE_OK) return 1;

    char path[4200];
    snprintf(path, sizeof path, "%s/questions.jsonl", suite);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench: cannot open %s\n", path);
        return 1;
    }
    size_t n_q = 0, hits_sq = 0, hits_pg = 0, same = 0, cap_t = 1024;
    double *t_sq = malloc(cap_t * sizeof *t_sq), *t_pg = malloc(cap_t * sizeof *t_pg);
    double *t_gin = malloc(cap_t * sizeof *t_gin), *n_gin = malloc(cap_t * sizeof *n_gin);
    char *line;
    while ((line = cq_read_line(f)) && (!limit || (long)n_q < limit)) {
        cJSON *j = cJSON_Parse(line);
        free(line);
        cJSON *question = cJSON_GetObjectItem(j, "question"), *gold = cJSON_GetObjectItem(j, "gold");
        if (!cJSON_IsString(question) || !cJSON_IsTrue(cJSON_GetObjectItem(j, "answerable")) ||
            cJSON_GetArraySize(gold) == 0) {
            cJSON_Delete(j);
            continue;
        }
        cq_query q;
        if (cq_query_parse(NULL, 0, question->valuestring, &q, &err)) {
            cJSON_Delete(j);
            continue;
        }
        int64_t ids_sq[100];
        cq_keyword_hit *hp = NULL;
        size_t n_sq, n_pg = 0;
        double t0 = cq_clock_seconds();
        n_sq = sqlite_bm25(st, &q, (size_t)k, ids_sq);
        double t1 = cq_clock_seconds();
        if (cq_pg_bm25(pg, kb_pg, (const char *const *)q.terms, q.n_terms, NULL, 0, (size_t)k, &hp, &n_pg, &err)) {
            fprintf(stderr, "bench: %s\n", err.msg);
            return 1;
        }
        double t2 = cq_clock_seconds();
        if (n_q == cap_t) {
            cap_t *= 2;
            t_sq = realloc(t_sq, cap_t * sizeof *t_sq);
            t_pg = realloc(t_pg, cap_t * sizeof *t_pg);
            t_gin = realloc(t_gin, cap_t * sizeof *t_gin);
            n_gin = realloc(n_gin, cap_t * sizeof *n_gin);
        }
        t_gin[n_q] = n_gin[n_q] = 0;
        if (gin) {
            cq_keyword_search *ks = NULL;
            const char *const *toks;
            cq_strbuf arr = {0};
            if (!cq_keyword_search_new((const char *const *)q.terms, q.n_terms, &ks, &err)) {
                size_t nt = cq_keyword_search_tokens(ks, &toks);
                cq_strbuf_puts(&arr, "{");
                for (size_t i = 0; i < nt; i++) cq_strbuf_printf(&arr, "%s\"%s\"", i ? "," : "", toks[i]);
                cq_strbuf_puts(&arr, "}");
                const char *params[] = {arr.data};
                double g0 = cq_clock_seconds();
                PGresult *r = PQexecParams(cq_pg_conn(pg), "SELECT id, tokens FROM gin_probe WHERE tokens && $1::text[]",
                                           1, NULL, params, NULL, NULL, 1);
                t_gin[n_q] = (cq_clock_seconds() - g0) * 1e3;
                n_gin[n_q] = PQntuples(r);
                PQclear(r);
            }
            cq_strbuf_free(&arr);
            cq_keyword_search_free(ks);
        }
        t_sq[n_q] = (t1 - t0) * 1e3;
        t_pg[n_q] = (t2 - t1) * 1e3;
        bool identical = n_sq == n_pg;
        for (size_t i = 0; i < n_pg && identical; i++) identical = to_sqlite(map, n_map, hp[i].clause_id) == ids_sq[i];
        same += identical;
        cq_clause_row rows[100];
        size_t got = 0;
        for (size_t i = 0; i < n_sq; i++)
            if (!cq_store_clause_get(s, ids_sq[i], &rows[got], &err)) got++;
        hits_sq += any_hit(rows, got, gold);
        for (size_t i = 0; i < got; i++) cq_clause_row_free(&rows[i]);
        got = 0;
        for (size_t i = 0; i < n_pg; i++)
            if (!cq_store_clause_get(pg_store, hp[i].clause_id, &rows[got], &err)) got++;
        hits_pg += any_hit(rows, got, gold);
        for (size_t i = 0; i < got; i++) cq_clause_row_free(&rows[i]);
        free(hp);
        cq_query_free(&q);
        cJSON_Delete(j);
        n_q++;
    }
    fclose(f);
    double h_sq = n_q ? (double)hits_sq / (double)n_q : 0, h_pg = n_q ? (double)hits_pg / (double)n_q : 0;
    printf("| suite (KB) | clauses | questions | hit@%ld SQLite | hit@%ld PostgreSQL | diff | identical top-%ld | "
           "SQLite p50 / p95 ms | PostgreSQL p50 / p95 ms | copy into PostgreSQL | index size |\n",
           k, k, k);
    printf("| %s | %zu | %zu | %.3f | %.3f | %.3f | %.1f %% | %.1f / %.1f | %.1f / %.1f | %.1f s (%.0f clauses/s) | "
           "%lld rows, %.0f MB (+ clauses %.0f MB) |\n",
           kb, n_map, n_q, h_sq, h_pg, h_pg - h_sq, n_q ? 100.0 * (double)same / (double)n_q : 0,
           percentile(t_sq, n_q, 0.5), percentile(t_sq, n_q, 0.95), percentile(t_pg, n_q, 0.5),
           percentile(t_pg, n_q, 0.95), load_s, load_s > 0 ? (double)n_map / load_s : 0, index_rows,
           (double)index_bytes / 1e6, (double)clause_bytes / 1e6);
    if (gin)
        printf("GIN alternative: built in %.1f s; clauses read per question p50 %.0f, p95 %.0f; read time p50 %.1f ms, "
               "p95 %.1f ms\n",
               gin_s, percentile(n_gin, n_q, 0.5), percentile(n_gin, n_q, 0.95), percentile(t_gin, n_q, 0.5),
               percentile(t_gin, n_q, 0.95));
    free(t_gin);
    free(n_gin);
    free(t_sq);
    free(t_pg);
    free(map);
    sqlite3_finalize(st);
    cq_store_close(pg_store);
    cq_store_close(s);
    return 0;
usage:
    fprintf(stderr, "usage: %s --data DIR --kb KB --suite DIR [--pg CONNINFO] [--k 5] [--limit N] [--gin]\n", argv[0]);
    return 2;
}
