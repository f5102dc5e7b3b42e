/* The service's library: knowledge bases, documents, their originals and page images, clauses. The originals
 * (DATA/files/<sha256>.<format>) and cached page images (DATA/cache/pages/) of content no document uses any more
 * are removed with the last document that used them. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/json.h"
#include "app/originals.h"
#include "app/service_internal.h"
#include "core/log.h"
#include "core/sha256.h"
#include "store/versions.h"
#include "reader/reader.h"

/* ---- knowledge bases ------------------------------------------------------------------------------------------ */

static cq_status svc_kb_list(void *ctx, cJSON **out, cq_err *err) {
    cq_kb_info *kbs;
    size_t n;
    cq_status rc = cq_svc_kb_list(ctx, &kbs, &n, err);
    if (rc) return rc;
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cq_json_kb(&kbs[i]));
    free(kbs);
    *out = a;
    return CQ_OK;
}

static cq_status svc_kb_get(void *ctx, const char *kb, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    int64_t id;
    cq_store *st = cq_svc_open_kb(s, kb, &id, err);
    if (!st) return err->code;
    cq_kb_info info;
    cq_status rc = cq_store_kb_get(st, id, &info, err);
    cq_svc_pool_put(s, st);
    if (!rc) *out = cq_json_kb(&info);
    return rc;
}

static cq_status svc_kb_create(void *ctx, const char *kb, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    int64_t id;
    cq_status rc = cq_store_kb_create(st, kb, &id, err);
    cq_svc_pool_put(s, st);
    if (rc) return rc;
    CQ_INFO("knowledge base '%s' created", kb);
    return svc_kb_get(ctx, kb, out, err);
}

static cq_status svc_kb_delete(void *ctx, const char *kb, cq_err *err) {
    cq_service *s = ctx;
    int64_t id;
    cq_store *st = cq_svc_open_kb(s, kb, &id, err);
    if (!st) return err->code;
    cq_doc_info *docs = NULL;
    size_t n = 0;
    cq_status rc = cq_store_doc_list(st, id, &docs, &n, err);
    if (!rc) rc = cq_store_kb_delete(st, id, err);
    if (!rc) {
        cq_dense_forget_kb(s->dense, id);
        for (size_t i = 0; i < n; i++) cq_original_remove_unused(st, s->data_dir, docs[i].sha256, docs[i].format);
        CQ_INFO("knowledge base '%s' deleted with its %zu documents", kb, n);
    }
    cq_doc_info_free_array(docs, n);
    cq_svc_pool_put(s, st);
    return rc;
}

/* ---- documents ------------------------------------------------------------------------------------------------ */

static cq_status svc_doc_list(void *ctx, const char *kb, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    int64_t id;
    cq_store *st = cq_svc_open_kb(s, kb, &id, err);
    if (!st) return err->code;
    cq_doc_info *docs = NULL;
    size_t n = 0;
    cq_status rc = cq_store_doc_list(st, id, &docs, &n, err);
    /* every document's version today (store/versions.h), analysing those never analysed */
    cq_version_status *versions = NULL;
    size_t n_versions = 0;
    cq_err verr = {0};
    if (!rc && (cq_versions_ensure(st, id, false, NULL, &verr) ||
                cq_versions_statuses(st, id, 0, &versions, &n_versions, &verr)) &&
        verr.code != CQ_ERR_UNSUPPORTED) /* not on PostgreSQL yet */
        CQ_WARN("versions of KB %s: %s", kb, verr.msg);
    if (!rc) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) { /* the pages of documents that need a warning */
            cJSON *d = docs[i].quality < CQ_PAGE_QUALITY_WARN ? cq_svc_doc_json(st, &docs[i], kb, false)
                                                              : cq_json_doc(&docs[i], kb);
            const cq_version_status *v = cq_versions_find(versions, n_versions, docs[i].id);
            cJSON *vj = v ? cq_json_version(v) : NULL;
            if (vj) cJSON_AddItemToObject(d, "version", vj);
            cJSON_AddItemToArray(a, d);
        }
        *out = a;
    }
    free(versions);
    cq_doc_info_free_array(docs, n);
    cq_svc_pool_put(s, st);
    return rc;
}

static cq_status svc_doc_get(void *ctx, int64_t doc_id, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_doc_info d;
    char kb[128];
    cq_status rc = cq_store_doc_get(st, doc_id, &d, err);
    if (!rc) {
        rc = cq_svc_kb_name(st, d.kb_id, kb, err);
        if (!rc) *out = cq_svc_doc_json(st, &d, kb, true);
        cq_doc_info_free(&d);
    }
    cq_svc_pool_put(s, st);
    return rc;
}

static cq_status svc_doc_kb(void *ctx, int64_t doc_id, char kb[128], cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_doc_info d;
    cq_status rc = cq_store_doc_get(st, doc_id, &d, err);
    if (!rc) {
        rc = cq_svc_kb_name(st, d.kb_id, kb, err);
        cq_doc_info_free(&d);
    }
    cq_svc_pool_put(s, st);
    return rc;
}

static cq_status svc_doc_delete(void *ctx, int64_t doc_id, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_doc_info d;
    cq_status rc = cq_store_doc_get(st, doc_id, &d, err);
    if (!rc) {
        rc = cq_dense_forget_doc(s->dense, st, doc_id, err);
        if (!rc) rc = cq_store_doc_delete(st, doc_id, err);
        if (!rc) {
            cq_original_remove_unused(st, s->data_dir, d.sha256, d.format);
            CQ_INFO("document %lld (%s) deleted", (long long)doc_id, d.name);
        }
        cq_doc_info_free(&d);
    }
    cq_svc_pool_put(s, st);
    return rc;
}

/* The original's file on this node: on PostgreSQL fetched from the store when this node has no copy yet. */
static cq_status original_path(cq_service *s, const cq_doc_info *d, char *path, size_t cap, cq_err *err) {
    if (!cq_original_path(s->data_dir, d->sha256, d->format, path, cap))
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "document %lld has no stored original", (long long)d->id);
    if (access(path, R_OK) == 0) return CQ_OK;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_err why = {0};
    cq_status rc = cq_original_local(st, s->data_dir, d->sha256, d->format, path, cap, &why);
    cq_svc_pool_put(s, st);
    if (rc == CQ_ERR_NOT_FOUND)
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "the original of document %lld is missing", (long long)d->id);
    if (rc) return cq_err_set(err, rc, "the original of document %lld: %s", (long long)d->id, why.msg);
    return CQ_OK;
}

static cq_status svc_doc_original(void *ctx, int64_t doc_id, cq_web_file *f, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_doc_info d;
    cq_status rc = cq_store_doc_get(st, doc_id, &d, err);
    cq_svc_pool_put(s, st);
    if (rc) return rc;
    memset(f, 0, sizeof *f);
    rc = original_path(s, &d, f->path, sizeof f->path, err);
    if (!rc) {
        snprintf(f->mime, sizeof f->mime, "%s", cq_reader_format_named(d.format)->mime);
        snprintf(f->download_name, sizeof f->download_name, "%s", d.filename ? d.filename : d.name);
    }
    cq_doc_info_free(&d);
    return rc;
}

/* Page images are cached by content, page, width and the highlighted boxes; widths are rounded to 100 pixels so
 * that the cache stays small whatever clients ask for. */
static cq_status svc_page_image(void *ctx, int64_t doc_id, int page_no, int64_t clause_id, int width,
                                cq_web_file *f, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_doc_info d;
    cq_clause_row c = {0};
    cq_status rc = cq_store_doc_get(st, doc_id, &d, err);
    if (rc) {
        cq_svc_pool_put(s, st);
        return rc;
    }
    if (clause_id) {
        rc = cq_store_clause_get(st, clause_id, &c, err);
        if (!rc && c.doc_id != doc_id)
            rc = cq_err_set(err, CQ_ERR_INVALID, "clause %lld is not in document %lld", (long long)clause_id,
                            (long long)doc_id);
    }
    cq_svc_pool_put(s, st);
    memset(f, 0, sizeof *f);
    char original[1100];
    const cq_reader_format *format = cq_reader_format_named(d.format);
    if (!rc && (!format || !format->render))
        rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "document %lld is %s, a format without pages: it has no page images",
                        (long long)doc_id, d.format);
    if (!rc && (page_no < 1 || page_no > d.n_pages))
        rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "document %lld has %d pages; there is no page %d", (long long)doc_id,
                        d.n_pages, page_no);
    if (!rc) rc = original_path(s, &d, original, sizeof original, err);
    if (!rc) {
        width = (width + 50) / 100 * 100;
        if (width < 100) width = 100;
        /* The boxes on this page, hashed: the same highlight is the same file. */
        cq_sha256 h;
        cq_sha256_init(&h);
        size_t n_on_page = 0;
        for (size_t i = 0; i < c.n_boxes; i++)
            if (c.boxes[i].page_no == page_no) {
                cq_sha256_update(&h, &c.boxes[i], sizeof c.boxes[i]);
                n_on_page++;
            }
        uint8_t digest[32];
        cq_sha256_final(&h, digest);
        char tag[17] = "plain";
        if (n_on_page)
            for (int i = 0; i < 8; i++) snprintf(tag + 2 * i, 3, "%02x", digest[i]);
        snprintf(f->path, sizeof f->path, "%s/%s-p%d-w%d-%s.png", s->cache_dir, d.sha256, page_no, width, tag);
        snprintf(f->mime, sizeof f->mime, "image/png");
        if (access(f->path, R_OK) == 0) {
            atomic_fetch_add(&s->page_cache_hits, 1);
        } else {
            cq_box *boxes = c.n_boxes ? malloc(c.n_boxes * sizeof *boxes) : NULL;
            for (size_t i = 0; boxes && i < c.n_boxes; i++)
                boxes[i] = (cq_box){c.boxes[i].page_no, c.boxes[i].x0, c.boxes[i].y0, c.boxes[i].x1, c.boxes[i].y1};
            rc = c.n_boxes && !boxes ? cq_err_set(err, CQ_ERR_NOMEM, "out of memory")
                                     : format->render(original, page_no, width, boxes, c.n_boxes, f->path, err);
            free(boxes);
            if (!rc) atomic_fetch_add(&s->pages_rendered, 1);
        }
    }
    cq_clause_row_free(&c);
    cq_doc_info_free(&d);
    return rc;
}

static cq_status svc_clause_get(void *ctx, int64_t clause_id, cJSON **out, char kb[128], cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_clause_row c;
    cq_doc_info d = {0};
    cq_status rc = cq_store_clause_get(st, clause_id, &c, err);
    if (!rc) rc = cq_store_doc_get(st, c.doc_id, &d, err);
    if (!rc) rc = cq_svc_kb_name(st, d.kb_id, kb, err);
    if (!rc) {
        cq_page_info *pages = NULL;
        size_t n_pages = 0;
        cq_err e2 = {0};
        if (c.page_first > 0) cq_store_page_list(st, c.doc_id, &pages, &n_pages, &e2);
        const cq_reader_format *format = cq_reader_format_named(d.format);
        *out = cq_json_clause(&c, &d, kb, pages, n_pages, format && format->render);
        free(pages);
        cJSON *v = cq_svc_version_json(st, c.doc_id); /* for the drawer: status, and the versions to compare with */
        if (v) cJSON_AddItemToObject(*out, "version", v);
    }
    cq_svc_pool_put(s, st);
    cq_clause_row_free(&c);
    cq_doc_info_free(&d);
    return rc;
}

static cq_status svc_doc_search(void *ctx, int64_t doc_id, const char *q, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_doc_info d;
    cq_status rc = cq_store_doc_get(st, doc_id, &d, err); /* NOT_FOUND for a missing document */
    cq_clause_row *rows = NULL;
    size_t n = 0;
    bool more = false;
    if (!rc) {
        cq_doc_info_free(&d);
        rc = cq_store_clause_search(st, doc_id, q, CQ_WEB_DOC_SEARCH_MAX, &rows, &n, &more, err);
    }
    cq_svc_pool_put(s, st);
    if (rc) return rc;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "document_id", (double)doc_id);
    cJSON_AddStringToObject(o, "q", q);
    cJSON *a = cJSON_AddArrayToObject(o, "clauses");
    for (size_t i = 0; i < n; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "clause_id", (double)rows[i].id);
        cJSON_AddItemToObject(c, "clause", rows[i].label ? cJSON_CreateString(rows[i].label) : cJSON_CreateNull());
        cJSON_AddStringToObject(c, "path", rows[i].path ? rows[i].path : "");
        cJSON_AddItemToObject(c, "page", rows[i].page_first > 0 ? cJSON_CreateNumber(rows[i].page_first)
                                                                 : cJSON_CreateNull());
        cJSON_AddItemToObject(c, "page_last", rows[i].page_last > 0 ? cJSON_CreateNumber(rows[i].page_last)
                                                                     : cJSON_CreateNull());
        cJSON_AddItemToArray(a, c);
        cq_clause_row_free(&rows[i]);
    }
    free(rows);
    cJSON_AddBoolToObject(o, "more", more);
    *out = o;
    return CQ_OK;
}

void cq_svc_library_web(cq_web_service *w) {
    w->kb_list = svc_kb_list;
    w->kb_get = svc_kb_get;
    w->kb_create = svc_kb_create;
    w->kb_delete = svc_kb_delete;
    w->doc_list = svc_doc_list;
    w->doc_get = svc_doc_get;
    w->doc_kb = svc_doc_kb;
    w->doc_delete = svc_doc_delete;
    w->doc_original = svc_doc_original;
    w->page_image = svc_page_image;
    w->clause_get = svc_clause_get;
    w->doc_search = svc_doc_search;
}
