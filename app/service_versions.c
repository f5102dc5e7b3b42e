/* The service's versions of a regulation (store/versions.h): a document's version and a person's corrections, and
 * two documents compared clause by clause (search/compare.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/json.h"
#include "app/service_internal.h"
#include "core/log.h"
#include "search/compare.h"
#include "store/versions.h"

/* A day field of an edit: "YYYY-MM-DD", or null for none; absent: keep (-1). */
static cq_status edit_day(const cJSON *body, const char *field, cq_date *out, cq_err *err) {
    const cJSON *v = cJSON_GetObjectItem(body, field);
    *out = -1;
    if (!v) return CQ_OK;
    if (cJSON_IsNull(v)) {
        *out = 0;
        return CQ_OK;
    }
    if (cJSON_IsString(v) && !v->valuestring[0]) {
        *out = 0;
        return CQ_OK;
    }
    cq_date d = cJSON_IsString(v) ? cq_date_parse_iso(v->valuestring) : 0;
    if (!d) return cq_err_set(err, CQ_ERR_INVALID, "\"%s\" must be a day written YYYY-MM-DD, or null", field);
    *out = d;
    return CQ_OK;
}

static cq_status edit_text(const cJSON *body, const char *field, size_t max, const char **out, cq_err *err) {
    const cJSON *v = cJSON_GetObjectItem(body, field);
    *out = NULL;
    if (!v) return CQ_OK;
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= max)
        return cq_err_set(err, CQ_ERR_INVALID, "\"%s\" must be a string of at most %zu bytes", field, max - 1);
    *out = v->valuestring;
    return CQ_OK;
}

/* The correction a PUT body asks for. */
static cq_status parse_edit(const cJSON *body, cq_version_edit *e, cq_err *err) {
    static const char *const known[] = {"group", "label", "promulgated", "effective", "repealed", "status"};
    for (const cJSON *f = body ? body->child : NULL; f; f = f->next) {
        bool ok = false;
        for (size_t i = 0; i < sizeof known / sizeof *known; i++) ok |= !strcmp(f->string, known[i]);
        if (!ok)
            return cq_err_set(err, CQ_ERR_INVALID,
                              "unknown field \"%s\" (use group, label, promulgated, effective, repealed, status)",
                              f->string);
    }
    cq_status rc = edit_text(body, "group", CQ_VERSION_KEY_MAX, &e->key, err);
    if (!rc) rc = edit_text(body, "label", CQ_VERSION_LABEL_MAX, &e->label, err);
    if (!rc) rc = edit_day(body, "promulgated", &e->promulgated, err);
    if (!rc) rc = edit_day(body, "effective", &e->effective, err);
    if (!rc) rc = edit_day(body, "repealed", &e->repealed, err);
    const cJSON *status = cJSON_GetObjectItem(body, "status");
    if (!rc && status) {
        /* "repealed" without a day: repealed today; "in_force": not repealed */
        if (cJSON_IsString(status) && !strcmp(status->valuestring, "repealed")) {
            if (e->repealed <= 0) e->repealed = cq_date_today();
        } else if (cJSON_IsString(status) && !strcmp(status->valuestring, "in_force")) {
            if (e->repealed > 0)
                return cq_err_set(err, CQ_ERR_INVALID, "\"status\": \"in_force\" contradicts a \"repealed\" day");
            e->repealed = 0;
        } else {
            return cq_err_set(err, CQ_ERR_INVALID, "\"status\" is \"repealed\" or \"in_force\" (the others follow "
                                                   "from the dates)");
        }
    }
    return rc;
}

static cJSON *version_list(const cq_version_group *g, cq_date on) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < g->n; i++) {
        cq_version_status v;
        cq_version_status_in(g, g->v[i].doc_id, on, &v);
        char d[11];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "document_id", (double)g->v[i].doc_id);
        cJSON_AddStringToObject(o, "doc", g->v[i].name);
        cJSON_AddStringToObject(o, "label", g->v[i].label);
        cJSON_AddItemToObject(o, "promulgated", g->v[i].promulgated ? cJSON_CreateString(cq_date_format(g->v[i].promulgated, d)) : cJSON_CreateNull());
        cJSON_AddItemToObject(o, "effective", g->v[i].effective ? cJSON_CreateString(cq_date_format(g->v[i].effective, d)) : cJSON_CreateNull());
        cJSON_AddStringToObject(o, "status", cq_version_state_name(v.state));
        cJSON_AddBoolToObject(o, "corrected", g->v[i].by_user);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

cJSON *cq_svc_version_json(cq_store *st, int64_t doc_id) {
    cq_version_group g;
    cq_err err = {0};
    if (cq_versions_group_of(st, doc_id, &g, &err)) return NULL;
    cq_version_status v;
    cq_version_status_in(&g, doc_id, 0, &v);
    cJSON *o = cq_json_version(&v);
    if (o) cJSON_AddItemToObject(o, "version_list", version_list(&g, v.on));
    cq_version_group_free(&g);
    return o;
}

static cq_status svc_doc_version(void *ctx, int64_t doc_id, const cJSON *edit, bool reset, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_doc_info d = {0};
    cq_status rc = cq_store_doc_get(st, doc_id, &d, err);
    if (!rc && d.state != CQ_DOC_READY)
        rc = cq_err_set(err, CQ_ERR_INVALID, "document %lld is %s: only ready documents have versions",
                        (long long)doc_id, cq_doc_state_name(d.state));
    if (!rc) rc = cq_versions_ensure(st, d.kb_id, false, NULL, err);
    cq_version_edit e = {.promulgated = -1, .effective = -1, .repealed = -1};
    if (!rc && edit) rc = parse_edit(edit, &e, err);
    if (!rc && (edit || reset)) {
        rc = cq_store_begin(st, err);
        if (!rc) rc = reset ? cq_versions_reset(st, doc_id, err) : cq_versions_set(st, doc_id, &e, err);
        if (!rc) rc = cq_store_commit(st, err);
        else cq_store_rollback(st);
        if (!rc) CQ_INFO("document %lld: version %s", (long long)doc_id, reset ? "back to automatic" : "corrected");
    }
    if (!rc) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "document_id", (double)doc_id);
        cJSON_AddStringToObject(o, "doc", d.name);
        cJSON *v = cq_svc_version_json(st, doc_id);
        cJSON_AddItemToObject(o, "version", v ? v : cJSON_CreateNull());
        *out = o;
    }
    cq_doc_info_free(&d);
    cq_svc_pool_put(s, st);
    return rc;
}

static cq_status svc_doc_compare(void *ctx, int64_t doc_a, int64_t doc_b, const cq_web_compare *q, cJSON **out,
                                 cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_doc_info da = {0}, db = {0};
    cq_version_status va, vb;
    cq_comparison cmp = {0};
    cq_status rc = cq_store_doc_get(st, doc_a, &da, err);
    if (!rc) rc = cq_store_doc_get(st, doc_b, &db, err);
    if (!rc && (da.state != CQ_DOC_READY || db.state != CQ_DOC_READY))
        rc = cq_err_set(err, CQ_ERR_INVALID, "only ready documents can be compared");
    if (!rc) rc = cq_versions_ensure(st, da.kb_id, false, NULL, err);
    if (!rc && db.kb_id != da.kb_id) rc = cq_versions_ensure(st, db.kb_id, false, NULL, err);
    if (!rc) rc = cq_versions_status(st, doc_a, 0, &va, err);
    if (!rc) rc = cq_versions_status(st, doc_b, 0, &vb, err);
    if (!rc) rc = cq_compare_docs(st, doc_a, doc_b, &cmp, err);
    cq_svc_pool_put(s, st);
    if (rc == CQ_ERR_UNSUPPORTED) err->code = rc = CQ_ERR_INVALID; /* too long: the request's problem, not a format */
    if (!rc) {
        char key[32] = "";
        if (q->clause) cq_compare_clause_key(q->clause, key, sizeof key);
        cq_compare_filter f = {.changes_only = q->changes_only, .clause_key = q->clause ? key : NULL,
                               .clause_id = q->clause_id};
        *out = cq_json_comparison(&cmp, &da, &db, &va, &vb, &f);
    }
    cq_comparison_free(&cmp);
    cq_doc_info_free(&da);
    cq_doc_info_free(&db);
    return rc;
}

void cq_svc_versions_web(cq_web_service *w) {
    w->doc_version = svc_doc_version;
    w->doc_compare = svc_doc_compare;
}
