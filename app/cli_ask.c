/* clauseqa ask --kb KB [--k 5] [--json | --jsonl] QUESTION */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/answer.h"
#include "app/cli.h"
#include "app/cli_common.h"
#include "app/rerank.h"
#include "core/strbuf.h"
#include "core/utf8.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa ask --kb KB [--k 5] [--mode " CQ_RETRIEVE_DEFAULT_MODE "] [--fusion F] [--answers auto]"
               " [--as-of DAY] [--json] QUESTION...\n"
               "       clauseqa ask --kb KB --jsonl < questions.jsonl\n"
               "Answers QUESTION from the clauses of KB, citing them; says so when the documents do not answer it.\n"
               "The words after the options are the question (quoting it is optional).\n"
               "Generated answers stream to the terminal as they are written (text output).\n"
               "  --jsonl   read {\"id\", \"question\"} lines on stdin, write {\"id\", \"answer\", \"abstained\",\n"
               "            \"citations\"} lines\n" CQ_CLI_FUSION_USAGE CQ_CLI_AS_OF_USAGE CQ_CLI_ANSWER_USAGE);
}

static void print_citations(const cq_answer *a) {
    for (size_t i = 0; i < a->n_citations; i++) {
        const cq_citation *c = &a->citations[i];
        printf("\n[%zu] %s", i + 1, c->doc);
        if (c->path && *c->path) printf(" | %s", c->path);
        else if (c->clause) printf(" | %s", c->clause);
        if (c->page) printf(" | p. %d", c->page);
        if (c->version.n_versions > 1 || (c->version.state && c->version.state != CQ_VERSION_IN_FORCE))
            printf(" | %s%s%s", c->version.label, c->version.label[0] ? ", " : "", cq_version_state_name(c->version.state));
        printf("\n");
    }
}

typedef struct {
    cq_store *s;
    int64_t kb_id;
    cq_answer_options opt;
    cq_date as_of;
} ask_ctx;

static cq_status ask(const ask_ctx *x, const char *question, cq_answer *a, cq_err *err) {
    cq_query q;
    cq_status rc = cq_query_parse(x->s, x->kb_id, question, &q, err);
    if (!rc && x->as_of) cq_query_set_as_of(&q, x->as_of);
    if (!rc) rc = cq_answer_question(x->s, &q, &x->opt, a, err);
    cq_query_free(&q);
    return rc;
}

static cJSON *ask_one(void *p, const char *question, cq_err *err) {
    cq_answer a;
    if (ask(p, question, &a, err)) return NULL;
    cJSON *out = cq_json_answer(&a);
    cq_answer_free(&a);
    return out;
}

/* What was streamed to the terminal. */
typedef struct {
    int printed;
    cq_strbuf text;
} printed_text;

static bool print_piece(void *user, const char *text, size_t len) {
    printed_text *p = user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    p->printed = 1;
    cq_strbuf_append(&p->text, text, len);
    return true;
}

int cq_cmd_ask(int argc, char **argv) {
    cq_question_cli o;
    int rc = cq_cli_parse_question("ask", argc, argv, usage, &o);
    if (rc >= 0) return rc;
    const char *data_dir = cq_cli_data_dir();
    int failed;
    cq_decoder *dec = cq_cli_answer_decoder("ask", &o.answer, &failed);
    if (failed) return 1;
    cq_store *s = cq_cli_open_store(data_dir);
    if (!s) {
        cq_decoder_close(dec);
        return 1;
    }
    printed_text printed = {0};
    cq_dense *dense = o.modes & CQ_RETRIEVE_DENSE ? cq_cli_open_dense(data_dir) : NULL;
    ask_ctx x = {s, cq_cli_kb(s, o.kb, false),
                 {.retrieve = {.modes = o.modes, .k = (size_t)o.k, .dense = dense, .fusion = o.fusion}, .decoder = dec}, o.as_of};
    cq_reranker reranker = {0};
    cq_rerank_attach(&x.opt.retrieve, &reranker, dec, o.mode == NULL);
    if (!o.json && !o.jsonl) { /* text: show the answer as it is written */
        x.opt.on_text = print_piece;
        x.opt.user = &printed;
    }
    int status = 1;
    if (x.kb_id && o.jsonl) {
        status = cq_cli_jsonl(ask_one, &x);
    } else if (x.kb_id) {
        cq_err err = {0};
        cq_answer a;
        if (ask(&x, o.question, &a, &err)) {
            fprintf(stderr, "clauseqa ask: %s\n", err.msg);
        } else {
            if (o.json) {
                cJSON *out = cq_json_answer(&a);
                cJSON_AddStringToObject(out, "question", o.question);
                cq_json_print_line(out, stdout);
            } else {
                /* the answer is on the screen already, unless the final answer is not what was streamed (a
                 * qualifier was added before the span, app/generate_answer.h) */
                const char *said = a.answer; /* the answer after the version it rests on (answer_versions.c) */
                size_t vn = a.version_notice ? strlen(a.version_notice) : 0;
                if (vn && !strncmp(said, a.version_notice, vn) && said[vn] == '\n') said += vn + 1;
                const bool on_screen = printed.printed && a.generated && printed.text.data &&
                                       !strcmp(printed.text.data, said);
                if (on_screen) {
                    printf("\n");
                    if (a.notice) printf("(%s)\n", a.notice); /* after the answer it qualifies, as it was written first */
                } else {
                    if (printed.printed) printf("\n");
                    if (a.notice) printf("(%s)\n", a.notice);
                    printf("%s\n", a.answer);
                }
                /* the version it rests on (--as-of, or a version not in force), as --json's version_notice: after a
                 * streamed answer too, which showed only the words after it */
                if (a.version_notice && !a.compare && (on_screen || !strstr(a.answer, a.version_notice)))
                    printf("(%s)\n", a.version_notice);
                if (a.context) /* the sentence around a short span */
                    printf(cq_utf8_has_cjk(a.context) ? "（原文：%s）\n" : "(in context: %s)\n", a.context);
                print_citations(&a);
            }
            cq_answer_free(&a);
            status = 0;
        }
    }
    cq_strbuf_free(&printed.text);
    cq_store_close(s);
    cq_dense_close(dense);
    cq_decoder_close(dec);
    return status;
}
