/* app/office_export.h: conversations as Markdown and PDF, rated answers as JSONL. */
#include "app/office_export.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/export_pdf.h"
#include "store/conversations.h"
#include "store/feedback.h"

static const char *str_of(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItem(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* "第四十四条 · 第四章 > 第一节 · page 3" for a citation; malloc'd. */
static char *cite_where(const cJSON *c) {
    cq_strbuf b = {0};
    const char *clause = str_of(c, "clause"), *path = str_of(c, "path");
    const cJSON *page = cJSON_GetObjectItem(c, "page");
    if (clause && clause[0]) cq_strbuf_puts(&b, clause);
    if (path && path[0] && (!clause || strcmp(path, clause))) {
        if (b.len) cq_strbuf_puts(&b, " · ");
        cq_strbuf_puts(&b, path);
    }
    if (cJSON_IsNumber(page)) cq_strbuf_printf(&b, "%spage %d", b.len ? " · " : "", page->valueint);
    return cq_strbuf_take(&b);
}

static void utc_now(char out[32]) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%d %H:%M UTC", &tm);
}

/* Markdown: a line break inside a paragraph stays a line break (two spaces before it); a quote's lines each get
 * the prefix. */
static void md_lines(cq_strbuf *b, const char *prefix, const char *text) {
    cq_strbuf_puts(b, prefix);
    for (const char *p = text; *p; p++) {
        if (*p == '\r') continue;
        if (*p == '\n') {
            cq_strbuf_puts(b, "  \n");
            cq_strbuf_puts(b, prefix);
        } else {
            cq_strbuf_append(b, p, 1);
        }
    }
    cq_strbuf_puts(b, "\n");
}

cq_status cq_conversation_export(cq_store *st, int64_t id, bool pdf, char **out, size_t *len, cq_err *err) {
    *out = NULL;
    *len = 0;
    cq_conversation c;
    cq_status rc = cq_store_conversation_get(st, id, &c, err);
    if (rc) return rc;
    cq_conversation_turn *turns = NULL;
    size_t n = 0;
    cq_feedback *fb = NULL;
    size_t n_fb = 0;
    rc = cq_store_conversation_turns(st, id, 0, &turns, &n, err);
    if (!rc) rc = cq_store_feedback_of(st, id, &fb, &n_fb, err);
    if (rc) {
        cq_conversation_free(&c);
        cq_conversation_turns_free(turns, n);
        return rc;
    }
    char now[32], head[400];
    utc_now(now);
    snprintf(head, sizeof head, "KB %s · %zu question%s · exported %s", c.kb, n, n == 1 ? "" : "s", now);
    cq_strbuf md = {0};
    cq_pdf *p = pdf ? cq_pdf_new() : NULL;
    if (pdf) {
        cq_pdf_para(p, CQ_PDF_TITLE, c.title);
        cq_pdf_para(p, CQ_PDF_SMALL, head);
    } else {
        md_lines(&md, "# ", c.title);
        cq_strbuf_printf(&md, "\n%s\n", head);
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *reply = cJSON_Parse(turns[i].reply);
        const char *answer = str_of(reply, "answer");
        bool abstained = cJSON_IsTrue(cJSON_GetObjectItem(reply, "abstained"));
        const cJSON *cites = cJSON_GetObjectItem(reply, "citations");
        char q[64];
        snprintf(q, sizeof q, "%zu. ", i + 1);
        const cq_feedback *rated = NULL;
        for (size_t k = 0; k < n_fb; k++)
            if (fb[k].turn == (int)i + 1) rated = &fb[k];
        if (pdf) {
            cq_strbuf h = {0};
            cq_strbuf_puts(&h, q);
            cq_strbuf_puts(&h, turns[i].question);
            char *ht = cq_strbuf_take(&h);
            cq_pdf_para(p, CQ_PDF_HEADING, ht);
            free(ht);
            cq_pdf_para(p, CQ_PDF_BODY, answer ? answer : "");
            if (abstained) cq_pdf_para(p, CQ_PDF_SMALL, "(The documents do not answer this: abstained.)");
        } else {
            cq_strbuf_puts(&md, "\n");
            cq_strbuf_printf(&md, "## %s", q);
            md_lines(&md, "", turns[i].question);
            cq_strbuf_puts(&md, "\n");
            md_lines(&md, "", answer && answer[0] ? answer : "(no answer)");
            if (abstained) cq_strbuf_puts(&md, "\n*The documents do not answer this: abstained.*\n");
        }
        int k = 0;
        const cJSON *cite;
        cJSON_ArrayForEach(cite, cites) {
            const char *doc = str_of(cite, "doc"), *quote = str_of(cite, "quote");
            char *where = cite_where(cite);
            if (pdf) {
                if (k == 0) cq_pdf_para(p, CQ_PDF_SMALL, "Citations");
                char line[1024];
                snprintf(line, sizeof line, "[%d] %s%s%s", k + 1, doc ? doc : "", where && where[0] ? " · " : "",
                         where ? where : "");
                cq_pdf_para(p, CQ_PDF_SMALL, line);
                if (quote && quote[0]) cq_pdf_para(p, CQ_PDF_QUOTE, quote);
            } else {
                if (k == 0) cq_strbuf_puts(&md, "\n**Citations**\n\n");
                cq_strbuf_printf(&md, "%d. **%s**%s%s\n", k + 1, doc ? doc : "", where && where[0] ? " — " : "",
                                 where ? where : "");
                if (quote && quote[0]) md_lines(&md, "   > ", quote);
            }
            free(where);
            k++;
        }
        if (rated) {
            char line[64];
            snprintf(line, sizeof line, "Rated: %s", rated->rating > 0 ? "thumbs up" : "thumbs down");
            if (pdf) {
                cq_pdf_para(p, CQ_PDF_SMALL, line);
                if (rated->comment[0]) cq_pdf_para(p, CQ_PDF_QUOTE, rated->comment);
            } else {
                cq_strbuf_printf(&md, "\n*%s*\n", line);
                if (rated->comment[0]) md_lines(&md, "> ", rated->comment);
            }
        }
        cJSON_Delete(reply);
    }
    cq_conversation_free(&c);
    cq_conversation_turns_free(turns, n);
    cq_feedback_free_array(fb, n_fb);
    if (pdf) return cq_pdf_finish(p, out, len, err);
    if (md.failed) {
        cq_strbuf_free(&md);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    *len = md.len;
    *out = cq_strbuf_take(&md);
    return CQ_OK;
}

cq_status cq_feedback_jsonl(cq_store *st, int64_t kb_id, cq_strbuf *out, size_t *n_out, cq_err *err) {
    cq_feedback *f;
    size_t n;
    *n_out = 0;
    cq_status rc = cq_store_feedback_rated(st, kb_id, &f, &n, err);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        cJSON *reply = cJSON_Parse(f[i].reply);
        const char *answer = str_of(reply, "answer");
        bool abstained = cJSON_IsTrue(cJSON_GetObjectItem(reply, "abstained")), up = f[i].rating > 0;
        cJSON *o = cJSON_CreateObject(), *gold = cJSON_CreateArray(), *cited = cJSON_CreateArray();
        char id[200];
        snprintf(id, sizeof id, "feedback-%s-%zu", f[i].kb, i + 1);
        cJSON_AddStringToObject(o, "id", id);
        cJSON_AddStringToObject(o, "question", f[i].question);
        cJSON_AddStringToObject(o, "type", "semantic");
        /* a thumbs-up abstention: the documents do not hold the answer */
        cJSON_AddBoolToObject(o, "answerable", !(up && abstained));
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(reply, "citations")) {
            cJSON *g = cJSON_CreateObject();
            const char *clause = str_of(c, "clause"), *quote = str_of(c, "quote");
            const cJSON *page = cJSON_GetObjectItem(c, "page");
            cJSON_AddStringToObject(g, "doc", str_of(c, "doc") ? str_of(c, "doc") : "");
            cJSON_AddItemToObject(g, "clause", clause ? cJSON_CreateString(clause) : cJSON_CreateNull());
            cJSON_AddItemToObject(g, "page", cJSON_IsNumber(page) ? cJSON_CreateNumber(page->valueint)
                                                                  : cJSON_CreateNull());
            cJSON_AddItemToObject(g, "text", quote && quote[0] ? cJSON_CreateString(quote) : cJSON_CreateNull());
            cJSON_AddItemToArray(cited, cJSON_Duplicate(g, 1));
            if (up && !abstained) cJSON_AddItemToArray(gold, g);
            else cJSON_Delete(g);
        }
        cJSON_AddItemToObject(o, "gold", gold);
        cJSON *answers = cJSON_AddArrayToObject(o, "answers");
        if (up && !abstained && answer && answer[0]) cJSON_AddItemToArray(answers, cJSON_CreateString(answer));
        cJSON_AddStringToObject(o, "answer", answer ? answer : "");
        cJSON_AddBoolToObject(o, "abstained", abstained);
        cJSON_AddStringToObject(o, "verdict", up ? "up" : "down");
        cJSON_AddStringToObject(o, "comment", f[i].comment);
        cJSON_AddItemToObject(o, "cited", cited);
        cJSON_AddStringToObject(o, "kb", f[i].kb);
        cJSON_AddNumberToObject(o, "conversation_id", (double)f[i].conversation_id);
        cJSON_AddNumberToObject(o, "turn", f[i].turn);
        cJSON_AddNumberToObject(o, "rated_at", (double)f[i].updated_at);
        char *line = cJSON_PrintUnformatted(o);
        if (line) {
            cq_strbuf_puts(out, line);
            cq_strbuf_puts(out, "\n");
            free(line);
        }
        cJSON_Delete(o);
        cJSON_Delete(reply);
        if (!line) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    cq_feedback_free_array(f, n);
    if (!rc && out->failed) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc) *n_out = n;
    return rc;
}
