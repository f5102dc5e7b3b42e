#include "app/json.h"

#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/plain_reason.h"
#include "web/messages.h"
#include "reader/reader.h"

#define PAGE_WARNINGS_MAX 20 /* page quality warnings listed per document */

static cJSON *str_or_null(const char *s) { return s ? cJSON_CreateString(s) : cJSON_CreateNull(); }

/* A failure's reason as a client sees it: the plain one (core/plain_reason.h: a row stored before, or a PostgreSQL
 * job's), with its code and values for the page's language (web/messages.h). */
static void add_reason(cJSON *o, const char *why) {
    char plain[256];
    if (why && cq_plain_reason(why, plain, sizeof plain)) why = plain;
    cJSON_AddItemToObject(o, "error", str_or_null(why));
    cJSON *args = cJSON_CreateArray();
    const char *code = why ? cq_web_message_code(why, args) : NULL;
    if (code) {
        cJSON_AddStringToObject(o, "error_message_code", code);
        cJSON_AddItemToObject(o, "error_message_args", args);
    } else
        cJSON_Delete(args);
}

static cJSON *page_or_null(int page) { return page > 0 ? cJSON_CreateNumber(page) : cJSON_CreateNull(); }

cJSON *cq_json_hit(const cq_hit *h) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "doc", cJSON_CreateString(h->doc_name));
    cJSON_AddItemToObject(o, "title", str_or_null(h->doc_title));
    cJSON_AddItemToObject(o, "clause", str_or_null(h->label));
    cJSON_AddItemToObject(o, "path", cJSON_CreateString(h->path ? h->path : ""));
    cJSON_AddItemToObject(o, "page", page_or_null(h->page_first));
    if (h->page_last > h->page_first) {
        cJSON *pages = cJSON_CreateArray();
        for (int p = h->page_first; p <= h->page_last; p++) cJSON_AddItemToArray(pages, cJSON_CreateNumber(p));
        cJSON_AddItemToObject(o, "pages", pages);
    }
    cJSON_AddItemToObject(o, "text", cJSON_CreateString(h->text));
    cJSON_AddNumberToObject(o, "score", h->score);
    cJSON_AddNumberToObject(o, "clause_id", (double)h->clause_id);
    cJSON_AddNumberToObject(o, "document_id", (double)h->doc_id);
    cJSON_AddStringToObject(o, "source", cq_retrieve_source_name(h->source));
    cJSON *v = cq_json_version(&h->version);
    if (v) cJSON_AddItemToObject(o, "version", v);
    return o;
}

cJSON *cq_json_hits(const cq_hits *h) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < h->n; i++) cJSON_AddItemToArray(a, cq_json_hit(&h->hits[i]));
    return a;
}

static cJSON *answer_compare(const cq_answer_compare *x);
static cJSON *date_or_null(cq_date d);

cJSON *cq_json_answer(const cq_answer *a) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "answer", a->answer);
    cJSON_AddBoolToObject(o, "abstained", a->abstained);
    cJSON_AddBoolToObject(o, "generated", a->generated);
    if (a->verdict) cJSON_AddStringToObject(o, "verdict", a->verdict);
    if (a->forbidden) cJSON_AddBoolToObject(o, "forbidden", true);
    if (a->notice) cJSON_AddStringToObject(o, "notice", a->notice);
    if (a->context) cJSON_AddStringToObject(o, "context", a->context);
    if (a->tokens_generated) cJSON_AddNumberToObject(o, "confidence", (double)(long long)(a->confidence * 1e4) / 1e4);
    cJSON *cites = cJSON_CreateArray();
    for (size_t i = 0; i < a->n_citations; i++) {
        const cq_citation *c = &a->citations[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "clause_id", (double)c->clause_id);
        cJSON_AddNumberToObject(x, "document_id", (double)c->doc_id);
        cJSON_AddStringToObject(x, "doc", c->doc);
        cJSON_AddItemToObject(x, "clause", str_or_null(c->clause));
        cJSON_AddItemToObject(x, "path", str_or_null(c->path));
        cJSON_AddItemToObject(x, "page", page_or_null(c->page));
        cJSON_AddStringToObject(x, "quote", c->quote);
        cJSON *v = cq_json_version(&c->version);
        if (v) cJSON_AddItemToObject(x, "version", v);
        cJSON_AddItemToArray(cites, x);
    }
    cJSON_AddItemToObject(o, "citations", cites);
    if (a->n_choices) {
        cJSON *ch = cJSON_CreateArray();
        for (size_t i = 0; i < a->n_choices; i++) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "document", a->choices[i].document);
            cJSON_AddStringToObject(x, "question", a->choices[i].question);
            cJSON_AddItemToArray(ch, x);
        }
        cJSON_AddItemToObject(o, "choices", ch);
    }
    if (a->version_notice) cJSON_AddStringToObject(o, "version_notice", a->version_notice);
    if (a->as_of) cJSON_AddItemToObject(o, "as_of", date_or_null(a->as_of));
    if (a->compare) cJSON_AddItemToObject(o, "compare", answer_compare(a->compare));
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "retrieve_ms", a->retrieve_ms);
    cJSON_AddNumberToObject(t, "answer_ms", a->answer_ms);
    cJSON_AddItemToObject(o, "timings", t);
    return o;
}

cJSON *cq_json_kb(const cq_kb_info *k) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", k->name);
    cJSON_AddNumberToObject(o, "documents", (double)k->n_documents);
    cJSON_AddNumberToObject(o, "clauses", (double)k->n_clauses);
    cJSON_AddNumberToObject(o, "created_at", (double)k->created_at);
    return o;
}

cJSON *cq_json_doc(const cq_doc_info *d, const char *kb) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)d->id);
    cJSON_AddStringToObject(o, "kb", kb);
    cJSON_AddStringToObject(o, "name", d->name ? d->name : "");
    cJSON_AddStringToObject(o, "filename", d->filename ? d->filename : "");
    cJSON_AddStringToObject(o, "format", d->format ? d->format : "");
    cJSON_AddStringToObject(o, "sha256", d->sha256);
    cJSON_AddNumberToObject(o, "size_bytes", (double)d->size_bytes);
    cJSON_AddItemToObject(o, "title", str_or_null(d->title));
    cJSON_AddNumberToObject(o, "pages", d->n_pages);
    cJSON_AddNumberToObject(o, "clauses", d->n_clauses);
    cJSON_AddStringToObject(o, "status", cq_doc_state_name(d->state));
    add_reason(o, d->error);
    cJSON_AddNumberToObject(o, "quality", d->quality);
    cJSON_AddStringToObject(o, "quality_reason", d->quality_reason ? d->quality_reason : "");
    cJSON_AddNumberToObject(o, "created_at", (double)d->created_at);
    char url[96];
    snprintf(url, sizeof url, "/api/v1/documents/%lld/original", (long long)d->id);
    cJSON_AddStringToObject(o, "original_url", url);
    return o;
}

void cq_json_doc_add_pages(cJSON *o, const cq_page_info *pages, size_t n, bool all_pages) {
    cJSON *warnings = cJSON_AddArrayToObject(o, "warnings");
    cJSON *list = all_pages ? cJSON_AddArrayToObject(o, "page_quality") : NULL;
    size_t n_warn = 0, n_low = 0;
    for (size_t i = 0; i < n; i++) {
        const cq_page_info *p = &pages[i];
        if (list) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "page", p->page_no);
            cJSON_AddNumberToObject(x, "quality", p->quality);
            cJSON_AddNumberToObject(x, "chars", p->n_chars);
            cJSON_AddStringToObject(x, "reason", p->quality_reason);
            cJSON_AddItemToArray(list, x);
        }
        if (p->quality < CQ_PAGE_QUALITY_WARN) {
            n_low++;
            if (n_warn++ < PAGE_WARNINGS_MAX) {
                char w[220];
                snprintf(w, sizeof w, "page %d: %s", p->page_no,
                         p->quality_reason[0] ? p->quality_reason : "low text quality");
                cJSON_AddItemToArray(warnings, cJSON_CreateString(w));
            }
        }
    }
    if (n_low > PAGE_WARNINGS_MAX) {
        char w[96];
        snprintf(w, sizeof w, "... and %zu more pages", n_low - PAGE_WARNINGS_MAX);
        cJSON_AddItemToArray(warnings, cJSON_CreateString(w));
    }
}

cJSON *cq_json_job(const cq_job_info *j, cJSON *doc) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)j->id);
    cJSON_AddStringToObject(o, "kb", j->kb);
    cJSON_AddStringToObject(o, "state", cq_job_state_name(j->state));
    cJSON_AddStringToObject(o, "filename", j->filename ? j->filename : "");
    cJSON_AddNumberToObject(o, "size_bytes", (double)j->size_bytes);
    cJSON_AddNumberToObject(o, "done", j->done);
    cJSON_AddNumberToObject(o, "total", j->total);
    bool ended = cq_job_state_ended(j->state);
    double progress = ended ? 1 : j->total > 0 ? (double)j->done / j->total : 0;
    cJSON_AddNumberToObject(o, "progress", progress);
    add_reason(o, j->error);
    cJSON_AddItemToObject(o, "error_code", str_or_null(j->error_code[0] ? j->error_code : NULL));
    cJSON_AddNumberToObject(o, "attempts", j->attempts);
    cJSON_AddItemToObject(o, "document_id", j->doc_id ? cJSON_CreateNumber((double)j->doc_id) : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "created_at", (double)j->created_at);
    cJSON_AddNumberToObject(o, "updated_at", (double)j->updated_at);
    char url[64];
    snprintf(url, sizeof url, "/api/v1/jobs/%lld", (long long)j->id);
    cJSON_AddStringToObject(o, "url", url);
    if (doc) cJSON_AddItemToObject(o, "document", doc);
    return o;
}

cJSON *cq_json_clause(const cq_clause_row *c, const cq_doc_info *d, const char *kb, const cq_page_info *pages,
                      size_t n_pages, bool page_images) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "clause_id", (double)c->id);
    cJSON_AddNumberToObject(o, "document_id", (double)c->doc_id);
    cJSON_AddStringToObject(o, "kb", kb);
    cJSON_AddStringToObject(o, "doc", c->doc_name ? c->doc_name : "");
    cJSON_AddItemToObject(o, "title", str_or_null(c->doc_title));
    cJSON_AddStringToObject(o, "format", d->format ? d->format : "");
    cJSON_AddItemToObject(o, "clause", str_or_null(c->label));
    cJSON_AddStringToObject(o, "path", c->path ? c->path : "");
    cJSON_AddStringToObject(o, "text", c->text ? c->text : "");
    cJSON_AddItemToObject(o, "page", page_or_null(c->page_first));
    cJSON_AddItemToObject(o, "page_last", page_or_null(c->page_last));
    cJSON_AddNumberToObject(o, "doc_pages", d->n_pages); /* the viewer browses them all */
    cJSON *boxes = cJSON_AddArrayToObject(o, "boxes");
    for (size_t i = 0; i < c->n_boxes; i++) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddNumberToObject(b, "page", c->boxes[i].page_no);
        cJSON_AddNumberToObject(b, "x0", c->boxes[i].x0);
        cJSON_AddNumberToObject(b, "y0", c->boxes[i].y0);
        cJSON_AddNumberToObject(b, "x1", c->boxes[i].x1);
        cJSON_AddNumberToObject(b, "y1", c->boxes[i].y1);
        cJSON_AddItemToArray(boxes, b);
    }
    cJSON *sizes = cJSON_AddArrayToObject(o, "page_sizes");
    for (size_t i = 0; c->page_first > 0 && i < n_pages; i++)
        if (pages[i].page_no >= c->page_first && pages[i].page_no <= c->page_last) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddNumberToObject(p, "page", pages[i].page_no);
            cJSON_AddNumberToObject(p, "width", pages[i].width);
            cJSON_AddNumberToObject(p, "height", pages[i].height);
            cJSON_AddItemToArray(sizes, p);
        }
    /* the clause's pages whose text is doubtful (a low-confidence OCR page, damaged text): the page view says so */
    cJSON *warnings = cJSON_AddArrayToObject(o, "page_warnings");
    for (size_t i = 0; c->page_first > 0 && i < n_pages; i++)
        if (pages[i].page_no >= c->page_first && pages[i].page_no <= c->page_last &&
            pages[i].quality < CQ_PAGE_QUALITY_WARN) {
            cJSON *w = cJSON_CreateObject();
            cJSON_AddNumberToObject(w, "page", pages[i].page_no);
            cJSON_AddNumberToObject(w, "quality", pages[i].quality);
            cJSON_AddStringToObject(w, "reason", pages[i].quality_reason);
            cJSON_AddItemToArray(warnings, w);
        }
    if (c->page_first > 0 && page_images) {
        char url[128];
        snprintf(url, sizeof url, "/api/v1/documents/%lld/pages/%d.png?clause=%lld", (long long)c->doc_id,
                 c->page_first, (long long)c->id);
        cJSON_AddStringToObject(o, "page_image_url", url);
    }
    return o;
}

cJSON *cq_json_formats(void) {
    size_t n;
    const cq_reader_format *f = cq_reader_formats(&n);
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", f[i].name);
        cJSON_AddStringToObject(o, "label", f[i].label);
        cJSON *ext = cJSON_AddArrayToObject(o, "extensions");
        for (size_t e = 0; e < CQ_READER_MAX_EXTENSIONS && f[i].extensions[e]; e++)
            cJSON_AddItemToArray(ext, cJSON_CreateString(f[i].extensions[e]));
        cJSON_AddStringToObject(o, "mime", f[i].mime);
        cJSON_AddBoolToObject(o, "pages", f[i].has_pages);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static cJSON *date_or_null(cq_date d) {
    char buf[11];
    return d > 0 ? cJSON_CreateString(cq_date_format(d, buf)) : cJSON_CreateNull();
}

static cJSON *version_ref(const cq_version_entry *e, bool from) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "document_id", (double)e->doc_id);
    cJSON_AddStringToObject(o, "doc", e->name);
    cJSON_AddStringToObject(o, "label", e->label);
    cJSON_AddItemToObject(o, from ? "from" : "effective", date_or_null(e->effective ? e->effective : e->promulgated));
    return o;
}

cJSON *cq_json_version(const cq_version_status *v) {
    if (v->state == CQ_VERSION_UNKNOWN) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", cq_version_state_name(v->state));
    cJSON_AddItemToObject(o, "on", date_or_null(v->on));
    if (v->state_today != v->state) cJSON_AddStringToObject(o, "status_today", cq_version_state_name(v->state_today));
    cJSON_AddStringToObject(o, "label", v->label);
    cJSON_AddItemToObject(o, "promulgated", date_or_null(v->promulgated));
    cJSON_AddItemToObject(o, "effective", date_or_null(v->effective));
    cJSON_AddItemToObject(o, "repealed", date_or_null(v->repealed));
    cJSON_AddNumberToObject(o, "versions", v->n_versions);
    cJSON_AddStringToObject(o, "group", v->key);
    cJSON_AddBoolToObject(o, "corrected", v->by_user);
    if (v->previous.doc_id) cJSON_AddItemToObject(o, "previous", version_ref(&v->previous, false));
    if (v->next.doc_id) cJSON_AddItemToObject(o, "next", version_ref(&v->next, true));
    if (v->current.doc_id && v->current.doc_id != v->doc_id)
        cJSON_AddItemToObject(o, "current", version_ref(&v->current, false));
    return o;
}

static cJSON *cmp_clause(const cq_cmp_clause *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "clause_id", (double)c->clause_id);
    cJSON_AddItemToObject(o, "clause", str_or_null(c->label));
    cJSON_AddItemToObject(o, "key", str_or_null(c->label_key));
    cJSON_AddStringToObject(o, "path", c->path ? c->path : "");
    cJSON_AddStringToObject(o, "text", c->text ? c->text : "");
    return o;
}

static cJSON *json_pair(const cq_comparison *c, const cq_cmp_pair *p) {
    static const char *const ops[] = {"equal", "removed", "added"};
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", cq_pair_kind_name(p->kind));
    cJSON_AddNumberToObject(o, "similarity", (double)(long long)(p->similarity * 1000 + 0.5) / 1000);
    cJSON_AddBoolToObject(o, "renumbered", p->renumbered);
    cJSON_AddBoolToObject(o, "moved", p->moved);
    cJSON *a = cJSON_AddArrayToObject(o, "a"), *b = cJSON_AddArrayToObject(o, "b");
    for (size_t k = 0; k < p->n_a; k++) cJSON_AddItemToArray(a, cmp_clause(&c->a[p->a[k]]));
    for (size_t k = 0; k < p->n_b; k++) cJSON_AddItemToArray(b, cmp_clause(&c->b[p->b[k]]));
    if (p->kind == CQ_PAIR_CHANGED) {
        cJSON *d = cJSON_AddArrayToObject(o, "diff");
        for (size_t k = 0; k < p->diff.n; k++) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "op", ops[p->diff.spans[k].op]);
            cJSON_AddStringToObject(x, "text", p->diff.spans[k].text);
            cJSON_AddItemToArray(d, x);
        }
    }
    return o;
}

/* Does pair p pass the filter? */
static bool pair_wanted(const cq_comparison *c, const cq_cmp_pair *p, const cq_compare_filter *f) {
    if (!f) return true;
    if (f->changes_only && p->kind == CQ_PAIR_SAME && !p->renumbered) return false;
    if (f->no_pairs) return false;
    if (!f->clause_key && !f->clause_id) return true;
    return cq_cmp_pair_holds(c, p, f->clause_key, f->clause_id);
}

static cJSON *cmp_side(const cq_doc_info *d, const cq_version_status *v, size_t n_clauses) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "document_id", (double)d->id);
    cJSON_AddStringToObject(o, "doc", d->name ? d->name : "");
    cJSON_AddItemToObject(o, "title", str_or_null(d->title));
    cJSON_AddNumberToObject(o, "clauses", (double)n_clauses);
    cJSON *ver = v ? cq_json_version(v) : NULL;
    cJSON_AddItemToObject(o, "version", ver ? ver : cJSON_CreateNull());
    return o;
}

cJSON *cq_json_comparison(const cq_comparison *c, const cq_doc_info *da, const cq_doc_info *db,
                          const cq_version_status *va, const cq_version_status *vb, const cq_compare_filter *f) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "a", cmp_side(da, va, c->n_a));
    cJSON_AddItemToObject(o, "b", cmp_side(db, vb, c->n_b));
    cJSON *s = cJSON_AddObjectToObject(o, "summary");
    cJSON_AddNumberToObject(s, "same", (double)c->al.n_same);
    cJSON_AddNumberToObject(s, "changed", (double)c->al.n_changed);
    cJSON_AddNumberToObject(s, "added", (double)c->al.n_added);
    cJSON_AddNumberToObject(s, "removed", (double)c->al.n_removed);
    cJSON_AddNumberToObject(s, "renumbered", (double)c->al.n_renumbered);
    cJSON_AddNumberToObject(s, "renumbered_changed", (double)c->al.n_renumbered_changed);
    cJSON *pairs = cJSON_AddArrayToObject(o, "pairs");
    for (size_t k = 0; k < c->al.n_pairs; k++)
        if (pair_wanted(c, &c->al.pairs[k], f)) cJSON_AddItemToArray(pairs, json_pair(c, &c->al.pairs[k]));
    return o;
}

/* An answer's comparison: the comparison JSON with the pairs of the article asked about (none for a whole
 * regulation: "url" gives them), and the URL of the whole comparison. */
static cJSON *answer_compare(const cq_answer_compare *x) {
    cq_doc_info da = {.id = x->cmp.doc_a, .name = x->name_a, .title = x->title_a};
    cq_doc_info db = {.id = x->cmp.doc_b, .name = x->name_b, .title = x->title_b};
    cq_compare_filter f = {.clause_key = x->key[0] ? x->key : NULL, .no_pairs = !x->key[0]};
    cJSON *o = cq_json_comparison(&x->cmp, &da, &db, &x->va, &x->vb, &f);
    char url[160];
    snprintf(url, sizeof url, "/api/v1/documents/%lld/compare/%lld%s%s", (long long)x->cmp.doc_a,
             (long long)x->cmp.doc_b, x->key[0] ? "?clause=" : "", x->key);
    cJSON_AddStringToObject(o, "url", url);
    return o;
}

void cq_json_print_line(cJSON *v, FILE *f) {
    char *s = cq_json_print(v, NULL); /* valid UTF-8 whatever the strings hold (core/json.h) */
    if (s) {
        fputs(s, f);
        fputc('\n', f);
        free(s);
    }
    cJSON_Delete(v);
}
