/* clauseqa ingest --kb KB [--data DIR] [--replace] [--ocr off|auto|force] [--json] [--max-pages N]
 *                 [--doc-memory-mb N] [--jobs N] FILE|DIR... */
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "app/ingest.h"
#include "core/fileio.h"
#include "reader/reader.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa ingest --kb KB [--data DIR] [--replace] [--ocr off|auto|force] [--json]\n"
               "                       [--max-pages 5000] [--doc-memory-mb 512] [--jobs N] FILE|DIR...\n"
               "Adds documents to knowledge base KB (created when absent):");
    size_t n;
    const cq_reader_format *formats = cq_reader_formats(&n);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s %s (", i ? "," : "", formats[i].label);
        for (size_t e = 0; e < CQ_READER_MAX_EXTENSIONS && formats[i].extensions[e]; e++)
            fprintf(f, "%s.%s", e ? " " : "", formats[i].extensions[e]);
        fprintf(f, ")");
    }
    fprintf(f, ".\n"
               "A directory adds every supported file in it (not recursive). Identical files are skipped.\n"
               "  --replace   replace a document of the same name instead of refusing it\n"
               "  --ocr MODE  scanned PDF pages: auto (default) recognises pages without a usable text layer,\n"
               "              off leaves them flagged, force recognises every page (its text layer ignored)\n"
               "  --json      print one JSON document with every file's outcome\n"
               "  --jobs N    files read and parsed at once (default: one per CPU); the result is the same\n"
               CQ_CLI_LIMITS_HELP
               "Exit status 1 when any file failed; the reason is printed for each.\n");
}

typedef struct {
    char **v;
    size_t n, cap;
} path_list;

static int push(path_list *l, const char *p) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n] = strdup(p);
    return l->v[l->n] ? (int)(l->n++, 0) : -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Expands directories into their supported files, sorted. */
static int expand(path_list *out, const char *arg) {
    struct stat st;
    if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
        DIR *d = opendir(arg);
        if (!d) return push(out, arg); /* reported as unreadable later */
        path_list tmp = {0};
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.' || !cq_reader_format_of_name(e->d_name)) continue;
            size_t n = strlen(arg) + strlen(e->d_name) + 2;
            char *p = malloc(n);
            if (!p) break;
            snprintf(p, n, "%s/%s", arg, e->d_name);
            push(&tmp, p);
            free(p);
        }
        closedir(d);
        qsort(tmp.v, tmp.n, sizeof *tmp.v, cmp_str);
        for (size_t i = 0; i < tmp.n; i++) {
            push(out, tmp.v[i]);
            free(tmp.v[i]);
        }
        free(tmp.v);
        return 0;
    }
    return push(out, arg);
}

/* Files done of total, and within the current file the pages read (a scanned PDF's OCR takes a while). */
static void progress_bar(size_t done, size_t total, const char *name, int page, int pages) {
    static int pages_drawn; /* the width of the pages last drawn: blanked when the line gets shorter */
    int width = 30, filled = total ? (int)(width * done / total) : width;
    fprintf(stderr, "\r[");
    for (int i = 0; i < width; i++) fputc(i < filled ? '#' : '.', stderr);
    fprintf(stderr, "] %zu/%zu ", done, total);
    cq_cli_print_cell(stderr, name, 40); /* by display width: a Chinese name is never cut inside a character */
    int drawn = pages > 0 ? fprintf(stderr, " (page %d/%d)", page, pages) : 0;
    for (int i = drawn; i < pages_drawn; i++) fputc(' ', stderr);
    pages_drawn = drawn;
    fflush(stderr);
}

/* What the outcome callback prints and counts. */
typedef struct {
    const char *kb;
    char **files;
    size_t total, ok, dup, failed, clauses;
    int tty;
    cJSON *results; /* --json */
} report_state;

static const char *base_name(const char *path) { return strrchr(path, '/') ? strrchr(path, '/') + 1 : path; }

/* The pages of file index read so far (the files before the next to be reported are done). */
static void report_pages(void *user, size_t index, int pages_read, int n_pages) {
    report_state *st = user;
    progress_bar(st->ok + st->dup + st->failed, st->total, base_name(st->files[index]), pages_read, n_pages);
}

static void report(void *user, size_t index, const char *path, cq_status rc, const cq_err *err,
                   const cq_ingest_result *r) {
    report_state *st = user;
    if (rc) st->failed++;
    else if (r->duplicate) st->dup++;
    else {
        st->ok++;
        st->clauses += (size_t)r->n_clauses;
    }
    if (st->results) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", path);
        cJSON_AddStringToObject(o, "status", rc ? "failed" : r->duplicate ? "duplicate" : "ready");
        if (rc) {
            cJSON_AddStringToObject(o, "error", err->msg);
            cJSON_AddStringToObject(o, "code", cq_err_name(err));
        } else {
            cJSON_AddNumberToObject(o, "document_id", (double)r->doc_id);
            cJSON_AddNumberToObject(o, "pages", r->n_pages);
            cJSON_AddNumberToObject(o, "clauses", r->n_clauses);
            cJSON_AddNumberToObject(o, "quality", r->quality);
            cJSON_AddStringToObject(o, "quality_reason", r->quality_reason);
            cJSON_AddNumberToObject(o, "seconds", r->seconds);
        }
        cJSON_AddItemToArray(st->results, o);
    } else if (rc) {
        if (st->tty) fputc('\n', stderr);
        fprintf(stderr, "FAILED %s: %s\n", path, err->msg);
    } else if (!st->tty) {
        if (r->duplicate) fprintf(stderr, "skip   %s: already in '%s'\n", path, st->kb);
        else
            fprintf(stderr, "ok     %s: %d clauses, %d pages, quality %.2f%s%s (%.2f s)\n", path, r->n_clauses,
                    r->n_pages, r->quality, r->quality_reason[0] ? " - " : "", r->quality_reason, r->seconds);
    } else if (r->quality < CQ_PAGE_QUALITY_WARN && !r->duplicate) {
        fprintf(stderr, "\nwarning %s: text quality %.2f - %s\n", path, r->quality, r->quality_reason);
    }
    if (st->tty) /* the next file's name: it is being read */
        progress_bar(index + 1, st->total, index + 1 < st->total ? base_name(st->files[index + 1]) : "", 0, 0);
}

int cq_cmd_ingest(int argc, char **argv) {
    static const struct option opts[] = {{"kb", required_argument, 0, 'k'},
                                         {"replace", no_argument, 0, 'r'},
                                         {"json", no_argument, 0, 'j'},
                                         {"ocr", required_argument, 0, 'o'},
                                         {"max-pages", required_argument, 0, 'p'},
                                         {"doc-memory-mb", required_argument, 0, 'M'},
                                         {"jobs", required_argument, 0, 'J'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *kb = NULL;
    int replace = 0, json = 0, c;
    cq_reader_ocr ocr = CQ_OCR_AUTO;
    long max_pages = CQ_READER_DEFAULT_MAX_PAGES, memory_mb = CQ_READER_DEFAULT_MAX_MB, jobs = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'k': kb = optarg; break;
        case 'r': replace = 1; break;
        case 'j': json = 1; break;
        case 'o':
            if (!cq_cli_ocr("ingest", optarg, &ocr)) return 2;
            break;
        case 'p':
            if ((max_pages = cq_cli_count("--max-pages", optarg)) < 0) return 2;
            break;
        case 'M':
            if ((memory_mb = cq_cli_count("--doc-memory-mb", optarg)) < 0) return 2;
            break;
        case 'J':
            if ((jobs = cq_cli_count("--jobs", optarg)) < 0) return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint("ingest");
        }
    }
    if (!kb || optind >= argc) {
        fprintf(stderr, "clauseqa ingest: %s\n", !kb ? "--kb is required" : "no files given");
        return cq_cli_usage_hint("ingest");
    }
    path_list files = {0};
    for (int i = optind; i < argc; i++) expand(&files, argv[i]);
    const char *data_dir = cq_cli_data_dir();
    cq_store *s = cq_cli_open_store(data_dir);
    if (!s) return 1;
    char files_dir[4200];
    snprintf(files_dir, sizeof files_dir, "%s/files", data_dir);
    cq_remove_stale_temp_files(files_dir, CQ_TEMP_STALE_AGE_S); /* what an ingest killed while writing left */
    int64_t kb_id = cq_cli_kb(s, kb, true);
    if (!kb_id) {
        cq_store_close(s);
        return 1;
    }
    cq_dense *dense = cq_cli_open_dense(data_dir); /* encodes the clauses when dense retrieval is on */
    report_state st = {.kb = kb, .files = files.v, .total = files.n, .tty = isatty(fileno(stderr)) && !json,
                       .results = json ? cJSON_CreateArray() : NULL};
    if (st.tty && files.n) progress_bar(0, files.n, base_name(files.v[0]), 0, 0);
    cq_ingest_options o = {.replace = replace, .dense = dense, .ocr = ocr,
                           .limits = {.max_pages = (int)max_pages, .max_bytes = (size_t)memory_mb << 20}};
    cq_ingest_batch_options bo = {.n_workers = (int)jobs, .done = report, .pages = st.tty ? report_pages : NULL,
                                  .user = &st};
    cq_err err = {0};
    if (cq_ingest_files(s, data_dir, kb_id, (const char *const *)files.v, files.n, &o, &bo, &err)) {
        fprintf(stderr, "clauseqa ingest: %s\n", err.msg);
        st.failed += files.n - (st.ok + st.dup + st.failed);
    }
    for (size_t i = 0; i < files.n; i++) free(files.v[i]);
    free(files.v);
    if (st.tty) {
        progress_bar(files.n, files.n, "", 0, 0);
        fputc('\n', stderr);
    }
    size_t ok = st.ok, dup = st.dup, failed = st.failed, clauses = st.clauses;
    cJSON *results = st.results;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kb", kb);
        cJSON_AddNumberToObject(o, "ingested", (double)ok);
        cJSON_AddNumberToObject(o, "duplicates", (double)dup);
        cJSON_AddNumberToObject(o, "failed", (double)failed);
        cJSON_AddItemToObject(o, "files", results);
        cq_json_print_line(o, stdout);
    } else {
        fprintf(stderr, "%zu ingested (%zu clauses), %zu already present, %zu failed\n", ok, clauses, dup, failed);
    }
    cq_store_close(s);
    cq_dense_close(dense);
    return failed ? 1 : 0;
}
