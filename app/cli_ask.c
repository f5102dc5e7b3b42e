/* clauseqa ask --kb KB [--k 5] [--json | --jsonl] QUESTION */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/answer.h"
#include "app/cli.h"
#include "app/cli_common.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa ask --kb KB [--k 5] [--mode hybrid] [--json] QUESTION\n"
               "       clauseqa ask --kb KB --jsonl < questions.jsonl\n"
               "Answers QUESTION from the clauses of KB, citing them; says so when the documents do not answer it.\n"
               "  --jsonl   read {\"id\", \"question\"} lines on stdin, write {\"id\", \"answer\", \"abstained\",\n"
               "            \"citations\"} lines\n");
}

static void print_text(const cq_answer *a) {
    printf("%s\n", a->answer);
    for (size_t i = 0; i < a->n_citations; i++) {
        const cq_citation *c = &a->citations[i];
        printf("\n[%zu] %s", i + 1, c->doc);
        if (c->path && *c->path) printf(" | %s", c->path);
        else if (c->clause) printf(" | %s", c->clause);
        if (c->page) printf(" | p. %d", c->page);
        printf("\n");
    }
}

int cq_cmd_ask(int argc, char **argv) {
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
        fprintf(stderr, "clauseqa ask: %s\n", !kb ? "--kb is required" : "no question given");
        usage(stderr);
        return 2;
    }
    cq_err err = {0};
    cq_answer_options o = {.k = (size_t)k};
    o.modes = cq_retrieve_parse_mode(mode, &err);
    if (!o.modes) {
        fprintf(stderr, "clauseqa ask: %s\n", err.msg);
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
            cJSON *id = in ? cJSON_GetObjectItem(in, "id") : NULL;
            const cJSON *q = in ? cJSON_GetObjectItem(in, "question") : NULL;
            cJSON *out;
            cq_answer a;
            if (!cJSON_IsString(q)) {
                out = cJSON_CreateObject();
                cJSON_AddStringToObject(out, "error", "each line needs a string \"question\"");
                status = 1;
            } else if (cq_answer_question(s, kb_id, q->valuestring, &o, &a, &err)) {
                out = cJSON_CreateObject();
                cJSON_AddStringToObject(out, "error", err.msg);
                status = 1;
            } else {
                out = cq_json_answer(&a);
                cq_answer_free(&a);
            }
            cJSON_AddItemToObjectCS(out, "id", id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
            cJSON_Delete(in);
            cq_json_print_line(out, stdout);
            fflush(stdout);
        }
    } else {
        cq_answer a;
        if (cq_answer_question(s, kb_id, argv[optind], &o, &a, &err)) {
            fprintf(stderr, "clauseqa ask: %s\n", err.msg);
            status = 1;
        } else {
            if (json) {
                cJSON *out = cq_json_answer(&a);
                cJSON_AddStringToObject(out, "question", argv[optind]);
                cq_json_print_line(out, stdout);
            } else {
                print_text(&a);
            }
            cq_answer_free(&a);
        }
    }
    cq_store_close(s);
    return status;
}
