/* Throughput of the cjk tokenizer and what it costs FTS5, on real laws when given them.
 *
 *   bench_fts_cjk [--fts-mb N] [FILE|DIR ...]
 *
 * Without paths: $CLAUSEQA_SHARED/eval/laws-zh/docs when that exists, else 32 MB of a synthetic law-like text.
 * Prints tokenizer MB/s (document mode on 1 and 2 threads, query mode on 1), token counts, and FTS5 ingest
 * time and index size for the first N MB (default 16) split into paragraph rows, next to the built-in
 * trigram tokenizer on the same rows. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "core/clock.h"
#include "core/strbuf.h"
#include "store/fts_cjk.h"

static void append_file(cq_strbuf *all, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) cq_strbuf_append(all, buf, n);
    cq_strbuf_append(all, "\n", 1);
    fclose(f);
}

static void append_path(cq_strbuf *all, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "bench_fts_cjk: cannot stat %s\n", path);
        return;
    }
    if (!S_ISDIR(sb.st_mode)) {
        append_file(all, path);
        return;
    }
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        cq_strbuf child = {0};
        cq_strbuf_printf(&child, "%s/%s", path, e->d_name);
        if (!child.failed) append_path(all, child.data);
        cq_strbuf_free(&child);
    }
    closedir(d);
}

static void synthetic(cq_strbuf *all, size_t bytes) {
    static const char para[] =
        "第四十四条 有下列情形之一的，用人单位应当按照下列标准支付高于劳动者正常工作时间工资的工资报酬："
        "（一）安排劳动者延长工作时间的，支付不低于工资的百分之一百五十的工资报酬；"
        "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬。\n"
        "See Section 7.2 of the Employment Agreement (2017 revision), clause 3.1.4.\n";
    while (all->len < bytes && !all->failed) cq_strbuf_append(all, para, sizeof para - 1);
}

typedef struct {
    size_t tokens, positions, colocated, tails;
} counts;

static int count_cb(void *ctx, const char *tok, size_t len, size_t start, size_t end, unsigned flags) {
    (void)tok, (void)len, (void)start, (void)end;
    counts *c = ctx;
    c->tokens++;
    if (flags & CQ_FTS_TOK_COLOCATED) c->colocated++;
    else c->positions++;
    if (flags & CQ_FTS_TOK_TAIL) c->tails++;
    return 0;
}

typedef struct {
    const char *text;
    size_t len;
    cq_fts_cjk_mode mode;
    counts c;
} slice_job;

static void *run_slice(void *arg) {
    slice_job *j = arg;
    cq_fts_cjk_tokenize(j->text, j->len, j->mode, count_cb, &j->c);
    return NULL;
}

/* Tokenizes text on `threads` threads (split at line ends); returns seconds, fills c with the sums. */
static double tokenize_timed(const char *text, size_t len, cq_fts_cjk_mode mode, int threads, counts *c) {
    slice_job jobs[2];
    pthread_t tid[2];
    size_t cut = len;
    if (threads == 2) {
        cut = len / 2;
        while (cut < len && text[cut] != '\n') cut++;
    }
    jobs[0] = (slice_job){text, cut, mode, {0}};
    jobs[1] = (slice_job){text + cut, len - cut, mode, {0}};
    double t0 = cq_clock_seconds();
    for (int i = 0; i < threads; i++) pthread_create(&tid[i], NULL, run_slice, &jobs[i]);
    for (int i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    double s = cq_clock_seconds() - t0;
    *c = jobs[0].c;
    if (threads == 2) {
        c->tokens += jobs[1].c.tokens;
        c->positions += jobs[1].c.positions;
        c->colocated += jobs[1].c.colocated;
        c->tails += jobs[1].c.tails;
    }
    return s;
}

/* Inserts text[0..len), one row per non-empty line, into an FTS5 table with the given tokenizer;
 * returns seconds and sets *index_bytes to the size of the FTS5 index blocks. */
static double fts_ingest(const char *text, size_t len, const char *tokenizer, long long *index_bytes, int *rows) {
    sqlite3 *db = NULL;
    sqlite3_open(":memory:", &db);
    cq_err err = {0};
    if (cq_fts_cjk_register(db, &err) != CQ_OK) {
        fprintf(stderr, "bench_fts_cjk: %s\n", err.msg);
        exit(1);
    }
    char sql[128];
    snprintf(sql, sizeof sql, "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='%s')", tokenizer);
    sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_stmt *ins = NULL;
    sqlite3_prepare_v2(db, "INSERT INTO t(body) VALUES(?)", -1, &ins, NULL);
    *rows = 0;
    double t0 = cq_clock_seconds();
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && text[j] != '\n') j++;
        if (j > i) {
            sqlite3_bind_text(ins, 1, text + i, (int)(j - i), SQLITE_STATIC);
            sqlite3_step(ins);
            sqlite3_reset(ins);
            ++*rows;
        }
        i = j + 1;
    }
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_exec(db, "INSERT INTO t(t) VALUES('optimize')", NULL, NULL, NULL);
    double s = cq_clock_seconds() - t0;
    sqlite3_finalize(ins);
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(db, "SELECT sum(length(block)) FROM t_data", -1, &q, NULL);
    *index_bytes = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
    sqlite3_finalize(q);
    sqlite3_close(db);
    return s;
}

int main(int argc, char **argv) {
    size_t fts_mb = 16;
    cq_strbuf all = {0};
    const char *source = "synthetic";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--fts-mb") == 0 && i + 1 < argc) {
            fts_mb = (size_t)strtoul(argv[++i], NULL, 10);
            continue;
        }
        append_path(&all, argv[i]);
        source = "arguments";
    }
    if (!all.len) {
        const char *shared = getenv("CLAUSEQA_SHARED");
        if (shared) {
            cq_strbuf dir = {0};
            cq_strbuf_printf(&dir, "%s/eval/laws-zh/docs", shared);
            struct stat sb;
            if (!dir.failed && stat(dir.data, &sb) == 0) {
                append_path(&all, dir.data);
                source = "$CLAUSEQA_SHARED/eval/laws-zh/docs";
            }
            cq_strbuf_free(&dir);
        }
    }
    if (!all.len) synthetic(&all, 32u << 20);
    if (all.failed) {
        fprintf(stderr, "bench_fts_cjk: out of memory\n");
        return 1;
    }
    double mb = (double)all.len / 1e6;
    printf("input: %s, %.1f MB\n\n", source, mb);
    printf("%-34s %8s %9s %12s %12s %10s\n", "tokenizer pass", "seconds", "MB/s", "positions", "colocated", "tokens/MB");

    struct {
        const char *name;
        cq_fts_cjk_mode mode;
        int threads;
    } passes[] = {
        {"cjk document, 1 thread", CQ_FTS_CJK_DOCUMENT, 1},
        {"cjk document, 2 threads", CQ_FTS_CJK_DOCUMENT, 2},
        {"cjk query, 1 thread", CQ_FTS_CJK_QUERY, 1},
    };
    for (size_t p = 0; p < sizeof passes / sizeof passes[0]; p++) {
        counts c;
        tokenize_timed(all.data, all.len, passes[p].mode, passes[p].threads, &c); /* warm the caches */
        double s = tokenize_timed(all.data, all.len, passes[p].mode, passes[p].threads, &c);
        printf("%-34s %8.3f %9.1f %12zu %12zu %10.0f\n", passes[p].name, s, mb / s, c.positions, c.colocated,
               (double)c.tokens / mb);
    }

    size_t fts_len = all.len < (fts_mb << 20) ? all.len : (fts_mb << 20);
    while (fts_len < all.len && (all.data[fts_len] & 0xC0) == 0x80) fts_len++;
    printf("\nFTS5 ingest of %.1f MB as paragraph rows (in-memory DB, one transaction, then optimize)\n",
           (double)fts_len / 1e6);
    printf("%-34s %8s %9s %8s %12s %12s\n", "tokenizer", "seconds", "MB/s", "rows", "index bytes", "index/text");
    const char *tokenizers[] = {"cjk", "trigram"};
    for (size_t k = 0; k < 2; k++) {
        long long bytes = 0;
        int rows = 0;
        double s = fts_ingest(all.data, fts_len, tokenizers[k], &bytes, &rows);
        printf("%-34s %8.2f %9.1f %8d %12lld %12.2f\n", tokenizers[k], s, (double)fts_len / 1e6 / s, rows, bytes,
               (double)bytes / (double)fts_len);
    }
    cq_strbuf_free(&all);
    return 0;
}
