/* clauseqa doc list --kb KB [--json] | show ID [--json] | delete ID: the documents of a knowledge base. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "app/originals.h"
#include "store/jobs.h"
#include "search/vectors.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa doc list --kb KB [--json]\n"
               "       clauseqa doc show ID [--json]\n"
               "       clauseqa doc delete ID\n"
               "The documents of a knowledge base: list them with their ids, show one with its pages' text quality,\n"
               "delete one with its clauses, search entries and vectors (and the stored original, when no other\n"
               "document has the same content).\n");
}

/* The REST API's document object (app/json.h) and where the original is kept. */
static cJSON *doc_json(const cq_doc_info *d, const char *kb, const char *data_dir) {
    cJSON *o = cq_json_doc(d, kb);
    char path[1200];
    cJSON_AddItemToObject(o, "original", cq_original_path(data_dir, d->sha256, d->format, path, sizeof path)
                                             ? cJSON_CreateString(path)
                                             : cJSON_CreateNull());
    return o;
}

static int list(cq_store *s, const char *kb, int json) {
    int64_t kb_id = cq_cli_kb(s, kb, false);
    if (!kb_id) return 1;
    cq_doc_info *docs;
    size_t n;
    cq_err err = {0};
    if (cq_store_doc_list(s, kb_id, &docs, &n, &err)) {
        fprintf(stderr, "clauseqa doc list: %s\n", err.msg);
        return 1;
    }
    if (json) {
        cJSON *a = cJSON_CreateArray(), *o = cJSON_CreateObject();
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, doc_json(&docs[i], kb, cq_cli_data_dir()));
        cJSON_AddStringToObject(o, "kb", kb);
        cJSON_AddItemToObject(o, "documents", a);
        cq_json_print_line(o, stdout);
    } else if (!n) {
        fprintf(stderr, "knowledge base '%s' has no documents (clauseqa ingest --kb %s FILE...)\n", kb, kb);
    } else {
        printf("%6s  %-40s %-6s %6s %8s  %-8s %s\n", "id", "name", "format", "pages", "clauses", "status", "quality");
        for (size_t i = 0; i < n; i++) {
            const cq_doc_info *d = &docs[i];
            printf("%6lld  ", (long long)d->id);
            cq_cli_print_cell(stdout, d->name ? d->name : "", 40);
            printf(" %-6s %6d %8d  %-8s %.2f\n", d->format ? d->format : "", d->n_pages, d->n_clauses,
                   cq_doc_state_name(d->state), d->quality);
        }
    }
    cq_doc_info_free_array(docs, n);
    return 0;
}

/* The document and the name of its KB; 0, or 1 with the error printed. */
static int find_doc(cq_store *s, const char *cmd, int64_t id, cq_doc_info *d, char kb[128]) {
    cq_err err = {0};
    if (cq_store_doc_get(s, id, d, &err)) {
        fprintf(stderr, "clauseqa doc %s: %s\n", cmd, err.msg);
        return 1;
    }
    cq_kb_info info;
    snprintf(kb, 128, "%s", cq_store_kb_get(s, d->kb_id, &info, &err) == CQ_OK ? info.name : "?");
    return 0;
}

static int show(cq_store *s, int64_t id, int json) {
    cq_doc_info d;
    char kb[128];
    if (find_doc(s, "show", id, &d, kb)) return 1;
    const char *data_dir = cq_cli_data_dir();
    cq_page_info *pages = NULL;
    size_t n_pages = 0;
    cq_err err = {0};
    cq_store_page_list(s, id, &pages, &n_pages, &err);
    if (json) {
        cJSON *o = doc_json(&d, kb, data_dir);
        cq_json_doc_add_pages(o, pages, n_pages, true);
        cq_json_print_line(o, stdout);
    } else {
        char when[32], path[1200];
        cq_cli_format_time(d.created_at, when, sizeof when);
        printf("document %lld: %s\n", (long long)d.id, d.name);
        printf("  kb         %s\n", kb);
        printf("  file       %s (%s, %lld bytes)\n", d.filename, d.format, (long long)d.size_bytes);
        if (d.title) printf("  title      %s\n", d.title);
        printf("  status     %s%s%s\n", cq_doc_state_name(d.state), d.error ? ": " : "", d.error ? d.error : "");
        printf("  contents   %d pages, %d clauses\n", d.n_pages, d.n_clauses);
        printf("  quality    %.2f%s%s\n", d.quality, d.quality_reason && *d.quality_reason ? " - " : "",
               d.quality_reason ? d.quality_reason : "");
        for (size_t i = 0; i < n_pages; i++)
            if (pages[i].quality < CQ_PAGE_QUALITY_WARN)
                printf("             page %d: %.2f %s\n", pages[i].page_no, pages[i].quality, pages[i].quality_reason);
        printf("  added      %s UTC\n", when);
        printf("  sha256     %s\n", d.sha256);
        if (cq_original_path(data_dir, d.sha256, d.format, path, sizeof path)) printf("  original   %s\n", path);
    }
    free(pages);
    cq_doc_info_free(&d);
    return 0;
}

static int delete_doc(cq_store *s, int64_t id) {
    cq_doc_info d;
    char kb[128];
    if (find_doc(s, "delete", id, &d, kb)) return 1;
    cq_err err = {0};
    /* As the server deletes: the vectors first (FAISS follows SQLite), then the rows, then the unshared original. */
    int status = 0;
    cq_dense *dense = cq_cli_open_dense(cq_cli_data_dir());
    if (cq_dense_forget_doc(dense, s, id, &err) || cq_store_doc_delete(s, id, &err)) {
        fprintf(stderr, "clauseqa doc delete: %s\n", err.msg);
        status = 1;
    } else {
        cq_original_remove_unused(s, cq_cli_data_dir(), d.sha256, d.format);
        fprintf(stderr, "document %lld (%s) deleted from '%s' with its %d clauses\n", (long long)id, d.name, kb,
                d.n_clauses);
    }
    cq_dense_close(dense);
    cq_doc_info_free(&d);
    return status;
}

int cq_cmd_doc(int argc, char **argv) {
    static const struct option opts[] = {{"kb", required_argument, 0, 'b'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *kb = NULL;
    int json = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'b': kb = optarg; break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint("doc");
        }
    }
    const char *action = optind < argc ? argv[optind] : NULL;
    bool listing = action && !strcmp(action, "list");
    if (!action || (!listing && strcmp(action, "show") && strcmp(action, "delete"))) {
        if (action) fprintf(stderr, "clauseqa doc: unknown action '%s' (list, show or delete)\n", action);
        else fprintf(stderr, "clauseqa doc: say list --kb KB, show ID or delete ID\n");
        return cq_cli_usage_hint("doc");
    }
    long long id = 0;
    if (listing && (!kb || optind + 1 < argc)) {
        fprintf(stderr, "clauseqa doc list: %s\n", kb ? "takes no arguments besides --kb KB" : "--kb KB is required");
        return cq_cli_usage_hint("doc");
    }
    if (!listing) {
        char *end = NULL;
        id = optind + 2 == argc ? strtoll(argv[optind + 1], &end, 10) : 0;
        if (id <= 0 || *end) {
            fprintf(stderr, "clauseqa doc %s: give one document id (clauseqa doc list --kb KB shows them)\n", action);
            return cq_cli_usage_hint("doc");
        }
    }
    cq_store *s = cq_cli_open_store(cq_cli_data_dir());
    if (!s) return 1;
    int status = listing                    ? list(s, kb, json)
                 : !strcmp(action, "show") ? show(s, (int64_t)id, json)
                                           : delete_doc(s, (int64_t)id);
    cq_store_close(s);
    return status;
}
