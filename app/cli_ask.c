/* clauseqa ask --kb KB [--k 5] [--json | --jsonl] QUESTION */
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

typedef struct {
    cq_store *s;
    int64_t kb_id;
    cq_answer_options opt;
} ask_ctx;

static cJSON *ask_one(void *p, const char *question, cq_err *err) {
    ask_ctx *x = p;
    cq_answer a;
    if (cq_answer_question(x->s, x->kb_id, question, &x->opt, &a, err)) return NULL;
    cJSON *out = cq_json_answer(&a);
    cq_answer_free(&a);
    return out;
}

int cq_cmd_ask(int argc, char **argv) {
    cq_question_cli o;
    int rc = cq_cli_parse_question("ask", argc, argv, usage, &o);
    if (rc >= 0) return rc;
    cq_store *s = cq_cli_open_store(cq_cli_data_dir(o.data));
    if (!s) return 1;
    ask_ctx x = {s, cq_cli_kb(s, o.kb, false), {.k = (size_t)o.k, .modes = o.modes}};
    int status = 1;
    if (x.kb_id && o.jsonl) {
        status = cq_cli_jsonl(ask_one, &x);
    } else if (x.kb_id) {
        cq_err err = {0};
        cq_answer a;
        if (cq_answer_question(s, x.kb_id, o.question, &x.opt, &a, &err)) {
            fprintf(stderr, "clauseqa ask: %s\n", err.msg);
        } else {
            if (o.json) {
                cJSON *out = cq_json_answer(&a);
                cJSON_AddStringToObject(out, "question", o.question);
                cq_json_print_line(out, stdout);
            } else {
                print_text(&a);
            }
            cq_answer_free(&a);
            status = 0;
        }
    }
    cq_store_close(s);
    return status;
}
