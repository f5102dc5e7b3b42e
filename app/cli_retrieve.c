/* clauseqa retrieve --kb KB [--k 5] [--mode hybrid] [--json | --jsonl] QUESTION */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "core/utf8.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa retrieve --kb KB [--k 5] [--mode router,bm25,dense,hybrid] [--json] QUESTION\n"
               "       clauseqa retrieve --kb KB --jsonl < questions.jsonl\n"
               "Ranks the clauses of KB that answer QUESTION (default mode: hybrid = router + bm25).\n"
               "  --jsonl   read {\"id\", \"question\"} lines on stdin, write {\"id\", \"results\"} lines\n");
}

static void print_text(const cq_hits *h) {
    if (h->n == 0) {
        printf("no matching clauses\n");
        return;
    }
    for (size_t i = 0; i < h->n; i++) {
        const cq_hit *x = &h->hits[i];
        printf("%zu. %s", i + 1, x->doc_name);
        if (x->path && *x->path) printf(" | %s", x->path);
        if (x->page_first) printf(" | p. %d", x->page_first);
        printf("  [%s %.2f]\n   ", x->source == CQ_RETRIEVE_ROUTER ? "router" : "bm25", x->score);
        /* First 160 characters of the clause on one line. */
        const char *t = x->text;
        size_t n = strlen(t), i_b = 0, chars = 0;
        while (i_b < n && chars < 160) {
            size_t len;
            uint32_t cp = cq_utf8_decode(t + i_b, n - i_b, &len);
            if (cp == '\n') fputc(' ', stdout);
            else fwrite(t + i_b, 1, len, stdout);
            i_b += len;
            chars++;
        }
        printf("%s\n", i_b < n ? "…" : "");
    }
}

int cq_cmd_retrieve(int argc, char **argv) {
    static const struct option opts[] = {{"kb", required_argument, 0, 'b'},   {"k", required_argument, 0, 'k'},
                                         {"mode", required_argument, 0, 'm'}, {"data", required_argument, 0, 'd'},
                                         {"json", no_argument, 0, 'j'},       {"jsonl", no_argument, 0, 'l'},
                                         {"help", no_argument, 0, 'h'},       {0, 0, 0, 0}};
    const char *kb = NULL, *data = NULL, *mode = "hybrid";
    long k = 5;
    int json = 0, jsonl = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'b': kb = optarg; break;
        case 'k':
            if ((k = cq_cli_positive("--k", optarg)) < 0) return 2;
            break;
        case 'm': mode = optarg; break;
        case 'd': data = optarg; break;
        case 'j': json = 1; break;
        case 'l': jsonl = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!kb || (!jsonl && optind >= argc)) {
        fprintf(stderr, "clauseqa retrieve: %s\n", !kb ? "--kb is required" : "no question given");
        usage(stderr);
        return 2;
    }
    cq_err err = {0};
    int modes = cq_retrieve_parse_mode(mode, &err);
    if (!modes) {
        fprintf(stderr, "clauseqa retrieve: %s\n", err.msg);
        return 2;
    }
    cq_store *s = cq_cli_open_store(cq_cli_data_dir(data));
    if (!s) return 1;
    int64_t kb_id = cq_cli_kb(s, kb, false);
    if (!kb_id) {
        cq_store_close(s);
        return 1;
    }
    int status = 0;
    if (jsonl) {
        char *line;
        while ((line = cq_read_line(stdin))) {
            cJSON *in = cJSON_Parse(line);
            free(line);
            cJSON *out = cJSON_CreateObject();
            cJSON *id = in ? cJSON_GetObjectItem(in, "id") : NULL;
            cJSON_AddItemToObject(out, "id", id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
            const cJSON *q = in ? cJSON_GetObjectItem(in, "question") : NULL;
            if (!cJSON_IsString(q)) {
                cJSON_AddStringToObject(out, "error", "each line needs a string \"question\"");
                status = 1;
            } else {
                cq_hits h;
                if (cq_retrieve(s, kb_id, q->valuestring, modes, (size_t)k, &h, &err)) {
                    cJSON_AddStringToObject(out, "error", err.msg);
                    status = 1;
                } else {
                    cJSON_AddItemToObject(out, "results", cq_json_hits(&h));
                    cq_hits_free(&h);
                }
            }
            cJSON_Delete(in);
            cq_json_print_line(out, stdout);
            fflush(stdout);
        }
    } else {
        const char *question = argv[optind];
        cq_hits h;
        if (cq_retrieve(s, kb_id, question, modes, (size_t)k, &h, &err)) {
            fprintf(stderr, "clauseqa retrieve: %s\n", err.msg);
            status = 1;
        } else {
            if (json) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "question", question);
                cJSON_AddItemToObject(o, "results", cq_json_hits(&h));
                cq_json_print_line(o, stdout);
            } else {
                print_text(&h);
            }
            cq_hits_free(&h);
        }
    }
    cq_store_close(s);
    return status;
}
