/* clauseqa retrieve --kb KB [--k 5] [--mode hybrid] [--json | --jsonl] QUESTION */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "app/rerank.h"
#include "core/utf8.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa retrieve --kb KB [--k 5] [--mode router,bm25,dense,rerank] [--fusion F] [--as-of DAY]"
               " [--json] QUESTION...\n"
               "       clauseqa retrieve --kb KB --jsonl < questions.jsonl\n"
               "Ranks the clauses of KB that answer QUESTION (default mode: " CQ_RETRIEVE_DEFAULT_MODE
               " = router + bm25; rerank: the trained decoder rescores the candidates, see --adapter).\n"
               "  --jsonl   read {\"id\", \"question\"} lines on stdin, write {\"id\", \"results\"} lines\n"
               CQ_CLI_FUSION_USAGE CQ_CLI_AS_OF_USAGE);
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
        printf("  [%s %.2f]", cq_retrieve_source_name(x->source), x->score);
        if (x->version.n_versions > 1 || (x->version.state && x->version.state != CQ_VERSION_IN_FORCE))
            printf(" [%s%s%s]", x->version.label, x->version.label[0] ? ", " : "", cq_version_state_name(x->version.state));
        printf("\n   ");
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

typedef struct {
    cq_store *s;
    int64_t kb_id;
    cq_retrieve_options opt;
    cq_date as_of;
} retrieve_ctx;

static cq_status retrieve(const retrieve_ctx *x, const char *question, cq_hits *h, cq_err *err) {
    cq_query q;
    cq_status rc = cq_query_parse(x->s, x->kb_id, question, &q, err);
    if (!rc && x->as_of) cq_query_set_as_of(&q, x->as_of);
    if (!rc) rc = cq_retrieve(x->s, &q, &x->opt, h, err);
    cq_query_free(&q);
    return rc;
}

static cJSON *retrieve_one(void *p, const char *question, cq_err *err) {
    cq_hits h;
    if (retrieve(p, question, &h, err)) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "results", cq_json_hits(&h));
    cq_hits_free(&h);
    return o;
}

int cq_cmd_retrieve(int argc, char **argv) {
    cq_question_cli o;
    int rc = cq_cli_parse_question("retrieve", argc, argv, usage, &o);
    if (rc >= 0) return rc;
    const char *data_dir = cq_cli_data_dir();
    cq_store *s = cq_cli_open_store(data_dir);
    if (!s) return 1;
    cq_dense *dense = o.modes & CQ_RETRIEVE_DENSE ? cq_cli_open_dense(data_dir) : NULL;
    retrieve_ctx x = {s, cq_cli_kb(s, o.kb, false), {.modes = o.modes, .k = (size_t)o.k, .dense = dense, .fusion = o.fusion}, o.as_of};
    cq_decoder *dec = o.modes & CQ_RETRIEVE_RERANK ? cq_cli_open_decoder("retrieve", &o.answer) : NULL;
    cq_reranker reranker = {0};
    cq_rerank_attach(&x.opt, &reranker, dec, false); /* retrieve loads the decoder only for --mode ...,rerank */
    int status = 1;
    if (x.kb_id && o.jsonl) {
        status = cq_cli_jsonl(retrieve_one, &x);
    } else if (x.kb_id) {
        cq_err err = {0};
        cq_hits h;
        if (retrieve(&x, o.question, &h, &err)) {
            fprintf(stderr, "clauseqa retrieve: %s\n", err.msg);
        } else {
            if (o.json) {
                cJSON *out = cJSON_CreateObject();
                cJSON_AddStringToObject(out, "question", o.question);
                cJSON_AddItemToObject(out, "results", cq_json_hits(&h));
                cq_json_print_line(out, stdout);
            } else {
                print_text(&h);
            }
            cq_hits_free(&h);
            status = 0;
        }
    }
    cq_store_close(s);
    cq_dense_close(dense);
    cq_decoder_close(dec);
    return status;
}
