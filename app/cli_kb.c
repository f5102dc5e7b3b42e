/* clauseqa kb list [--json] | create NAME | delete NAME: the knowledge bases of the data directory. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "app/originals.h"
#include "search/vectors.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa kb list [--json]\n"
               "       clauseqa kb create NAME\n"
               "       clauseqa kb delete NAME\n"
               "The knowledge bases of the data directory (--data DIR). delete removes the KB with all its documents:\n"
               "their clauses, search entries and vectors, and the stored originals no other KB uses.\n"
               "Names: 1-64 letters, digits, CJK, '-', '_', '.'. `ingest --kb NAME` creates a KB too.\n");
}

static int list(cq_store *s, int json) {
    cq_kb_info *kbs;
    size_t n;
    cq_err err = {0};
    if (cq_store_kb_list(s, &kbs, &n, &err)) {
        fprintf(stderr, "clauseqa kb list: %s\n", err.msg);
        return 1;
    }
    if (json) {
        cJSON *a = cJSON_CreateArray(), *o = cJSON_CreateObject();
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cq_json_kb(&kbs[i]));
        cJSON_AddItemToObject(o, "kbs", a);
        cq_json_print_line(o, stdout);
    } else if (!n) {
        fprintf(stderr, "no knowledge base in %s yet (clauseqa kb create NAME, or clauseqa ingest --kb NAME FILE...)\n",
                cq_cli_store_name());
    } else {
        printf("%-24s %9s %9s  %s\n", "name", "documents", "clauses", "created (UTC)");
        for (size_t i = 0; i < n; i++) {
            char when[32];
            cq_cli_format_time(kbs[i].created_at, when, sizeof when);
            cq_cli_print_cell(stdout, kbs[i].name, 24);
            printf(" %9lld %9lld  %s\n", (long long)kbs[i].n_documents, (long long)kbs[i].n_clauses, when);
        }
    }
    free(kbs);
    return 0;
}

static int delete_kb(cq_store *s, const char *data_dir, const char *name) {
    int64_t id = cq_cli_kb(s, name, false);
    if (!id) return 1;
    cq_err err = {0};
    cq_doc_info *docs = NULL;
    size_t n = 0;
    if (cq_store_doc_list(s, id, &docs, &n, &err) || cq_store_kb_delete(s, id, &err)) {
        fprintf(stderr, "clauseqa kb delete: %s\n", err.msg);
        cq_doc_info_free_array(docs, n);
        return 1;
    }
    /* What lives beside SQLite: the KB's vector index and the originals no other KB shares. */
    cq_dense *dense = cq_cli_open_dense(data_dir);
    if (dense) {
        cq_dense_forget_kb(dense, id);
        cq_dense_close(dense);
    } else {
        char faiss[1200];
        snprintf(faiss, sizeof faiss, "%s/vectors/kb%lld.faiss", data_dir, (long long)id);
        unlink(faiss);
    }
    int64_t clauses = 0;
    for (size_t i = 0; i < n; i++) {
        clauses += docs[i].n_clauses;
        cq_original_remove_unused(s, data_dir, docs[i].sha256, docs[i].format);
    }
    fprintf(stderr, "knowledge base '%s' deleted with its %zu documents (%lld clauses)\n", name, n, (long long)clauses);
    cq_doc_info_free_array(docs, n);
    return 0;
}

int cq_cmd_kb(int argc, char **argv) {
    static const struct option opts[] = {{"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int json = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint("kb");
        }
    }
    const char *action = optind < argc ? argv[optind] : NULL;
    int n_args = argc - optind - 1;
    bool listing = action && !strcmp(action, "list");
    if (!action || (!listing && strcmp(action, "create") && strcmp(action, "delete"))) {
        if (action) fprintf(stderr, "clauseqa kb: unknown action '%s' (list, create or delete)\n", action);
        else fprintf(stderr, "clauseqa kb: say list, create NAME or delete NAME\n");
        return cq_cli_usage_hint("kb");
    }
    if (n_args != (listing ? 0 : 1)) {
        if (listing) fprintf(stderr, "clauseqa kb list: takes no name\n");
        else fprintf(stderr, "clauseqa kb %s: give one NAME\n", action);
        return cq_cli_usage_hint("kb");
    }
    const char *data_dir = cq_cli_data_dir();
    cq_store *s = cq_cli_open_store(data_dir);
    if (!s) return 1;
    int status;
    if (listing) {
        status = list(s, json);
    } else if (!strcmp(action, "create")) {
        int64_t id;
        cq_err err = {0};
        status = cq_store_kb_create(s, argv[optind + 1], &id, &err) ? 1 : 0;
        if (status) fprintf(stderr, "clauseqa kb create: %s\n", err.msg);
        else fprintf(stderr, "knowledge base '%s' created\n", argv[optind + 1]);
    } else {
        status = delete_kb(s, data_dir, argv[optind + 1]);
    }
    cq_store_close(s);
    return status;
}
