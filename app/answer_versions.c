/* Versions in answers (app/answer_versions.h): which version an answer rests on, and answers comparing versions. */
#include "app/answer_versions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/numerals.h"
#include "core/strbuf.h"
#include "core/utf8.h"
#include "search/router.h"

#define COMPARE_QUOTE_CHARS 40 /* characters of each changed piece a comparison answer quotes */
#define COMPARE_LIST_MAX 8     /* changed articles a whole-regulation comparison names */

/* "2018年修正版" / "the 2018 version": how an answer names a version. */
static void version_name(cq_strbuf *b, const char *label, const char *doc, bool zh) {
    if (!label || !*label) {
        cq_strbuf_printf(b, zh ? "《%s》" : "\"%s\"", doc);
        return;
    }
    size_t n = strlen(label);
    bool ends_ban = n >= 3 && !strcmp(label + n - 3, "版");
    /* "2016年通过" is the first version: "2016年版"; "2018年修正" stays "2018年修正版" */
    static const char *const first[] = {"通过", "公布", "发布", "颁布", "印发", "批准"};
    for (size_t i = 0; zh && i < sizeof first / sizeof *first; i++)
        if (n > 6 && !strcmp(label + n - 6, first[i]) && !strncmp(label + n - 9, "年", 3)) {
            cq_strbuf_append(b, label, n - 6);
            cq_strbuf_puts(b, "版");
            return;
        }
    if (zh) cq_strbuf_printf(b, "%s%s", label, ends_ban || !cq_utf8_has_cjk(label) ? "" : "版");
    else cq_strbuf_printf(b, "the %s", label);
}

/* "（2018-10-26起施行）" / " (in force from 2018-10-26)" */
static void effective_words(cq_strbuf *b, cq_date effective, bool zh) {
    char d[11];
    if (!effective) return;
    cq_strbuf_printf(b, zh ? "（%s起施行）" : " (in force from %s)", cq_date_format(effective, d));
}

static void entry_words(cq_strbuf *b, const cq_version_entry *e, bool zh) {
    version_name(b, e->label, e->name, zh);
    effective_words(b, e->effective ? e->effective : e->promulgated, zh);
}

/* The day or period a question asked about: "2020年", "2019年12月", "2020-03-01"; "in 2020", "on 2020-03-01". */
static void period_words(cq_strbuf *b, const cq_query *q, bool zh) {
    cq_date first = q->as_of_first ? q->as_of_first : q->as_of, on = q->as_of;
    int y = on / 10000, m = on / 100 % 100;
    char d[11];
    if (first != on && first == cq_date_make(y, 1, 1) && on == cq_date_make(y, 12, 31))
        cq_strbuf_printf(b, zh ? "%d年" : "in %d", y);
    else if (first != on && first == cq_date_make(y, m, 1) && on == cq_date_make(y, m, cq_date_last_day(y, m)))
        cq_strbuf_printf(b, zh ? "%d年%d月" : "in %04d-%02d", y, m);
    else cq_strbuf_printf(b, zh ? "%s" : "on %s", cq_date_format(on, d));
}

static const cq_version_entry *entry_of(const cq_version_group *g, int64_t doc_id) {
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].doc_id == doc_id) return &g->v[i];
    return NULL;
}

static cq_date start_day(const cq_version_entry *e) { return e->effective ? e->effective : e->promulgated; }

/* For a question about a day: which version the answer rests on, and what else a reader must know. */
static void notes_for_day(const cq_query *q, const cq_version_group *g, const cq_citation *c, cq_strbuf *b, bool zh) {
    const cq_version_status *v = &c->version;
    const cq_version_entry *self = entry_of(g, c->doc_id);
    if (!self) return;
    char d[11];
    switch (v->state) {
    case CQ_VERSION_IN_FORCE:
        cq_strbuf_puts(b, zh ? "依据" : "Answered from ");
        entry_words(b, self, zh);
        if (zh) {
            cq_strbuf_puts(b, "回答，这是");
            period_words(b, q, zh);
            cq_strbuf_puts(b, "时有效的版本。");
        } else {
            cq_strbuf_puts(b, ", the version in force ");
            period_words(b, q, zh);
            cq_strbuf_puts(b, ".");
        }
        break;
    case CQ_VERSION_SUPERSEDED:
        cq_strbuf_puts(b, zh ? "注意：所引" : "Note: the cited ");
        entry_words(b, self, zh);
        cq_strbuf_puts(b, zh ? "在" : " had been superseded ");
        period_words(b, q, zh);
        cq_strbuf_puts(b, zh ? "时已被" : " by ");
        entry_words(b, &v->next, zh);
        cq_strbuf_puts(b, zh ? "取代。" : ".");
        break;
    case CQ_VERSION_NOT_YET:
        cq_strbuf_puts(b, zh ? "注意：所引" : "Note: the cited ");
        entry_words(b, self, zh);
        cq_strbuf_puts(b, zh ? "在" : " was not yet in force ");
        period_words(b, q, zh);
        cq_strbuf_puts(b, zh ? "时尚未施行" : "");
        if (v->previous.doc_id) {
            cq_strbuf_puts(b, zh ? "，当时有效的是" : "; the version then in force was ");
            entry_words(b, &v->previous, zh);
        }
        cq_strbuf_puts(b, zh ? "。" : ".");
        break;
    case CQ_VERSION_REPEALED:
        cq_strbuf_printf(b, zh ? "注意：该法规已于%s废止。" : "Note: the regulation was repealed on %s.",
                         cq_date_format(v->repealed, d));
        break;
    default: return;
    }
    /* the version in force today, when it is another one */
    int cur = cq_version_group_pick(g, cq_date_today(), 0);
    if (cur >= 0 && start_day(&g->v[cur]) != start_day(self) && v->state_today != CQ_VERSION_REPEALED) {
        cq_strbuf_puts(b, zh ? "现行版本为" : " The version in force today is ");
        entry_words(b, &g->v[cur], zh);
        cq_strbuf_puts(b, zh ? "。" : ".");
    }
    /* a version that took effect within the period asked about */
    cq_date first = q->as_of_first ? q->as_of_first : q->as_of;
    for (size_t i = 0; i < g->n && first < q->as_of; i++) {
        cq_date s = start_day(&g->v[i]);
        if (s > first && s <= q->as_of && s != start_day(self)) {
            cq_strbuf_puts(b, zh ? "该期间法规有修改：" : " It changed within that period: ");
            entry_words(b, &g->v[i], zh);
            cq_strbuf_puts(b, zh ? "在此期间开始施行。" : " took effect then.");
            break;
        }
    }
}

/* Whether the cited clause changed when its version took effect: a note naming the clause before. */
static void recent_change(cq_store *s, const cq_citation *c, const cq_version_status *v, cq_strbuf *b, bool zh) {
    cq_comparison cmp;
    cq_err err = {0};
    if (cq_compare_docs(s, v->previous.doc_id, c->doc_id, &cmp, &err)) {
        CQ_WARN("version note: %s", err.msg);
        return;
    }
    const cq_cmp_pair *p = cq_comparison_pair_of(&cmp, c->clause_id);
    char d[11];
    cq_date from = v->effective ? v->effective : v->promulgated;
    const char *label = c->clause ? c->clause : (zh ? "该条" : "this clause");
    if (p && p->kind == CQ_PAIR_ADDED) {
        cq_strbuf_printf(b, zh ? "%s是" : "%s was added by ", label);
        version_name(b, v->label, c->doc, zh);
        cq_strbuf_printf(b, zh ? "新增的条文，%s起施行。" : ", in force from %s.", cq_date_format(from, d));
    } else if (p && p->kind == CQ_PAIR_CHANGED && p->n_a) {
        const cq_cmp_clause *old = &cmp.a[p->a[0]];
        char *what = cq_diff_describe(&p->diff, zh, COMPARE_QUOTE_CHARS);
        cq_strbuf_printf(b, zh ? "%s于%s起修改（" : "%s changed on %s (", label, cq_date_format(from, d));
        version_name(b, v->label, c->doc, zh);
        cq_strbuf_printf(b, zh ? "），修改前为" : "); before, it was ");
        version_name(b, v->previous.label, v->previous.name, zh);
        cq_strbuf_printf(b, zh ? "%s。修改：%s。" : " %s. Changes: %s.", old->label ? old->label : "", what ? what : "");
        free(what);
    }
    cq_comparison_free(&cmp);
}

void cq_answer_version_notes(cq_store *s, const cq_query *q, cq_answer *a) {
    if (!a->n_citations || a->abstained) return;
    const cq_citation *c = &a->citations[0];
    const cq_version_status *v = &c->version;
    if (v->state == CQ_VERSION_UNKNOWN) return;
    cq_version_group g;
    cq_err err = {0};
    if (cq_versions_group_of(s, c->doc_id, &g, &err)) return;
    const bool zh = q->lang == CQ_QUERY_ZH;
    cq_strbuf b = {0};
    char d[11];
    if (q->as_of && (g.n > 1 || v->state != CQ_VERSION_IN_FORCE)) {
        notes_for_day(q, &g, c, &b, zh);
    } else if (!q->as_of && v->state != CQ_VERSION_IN_FORCE) {
        const cq_version_entry *self = entry_of(&g, c->doc_id);
        cq_strbuf_puts(&b, zh ? "注意：所引" : "Note: the cited ");
        if (self) entry_words(&b, self, zh);
        if (v->state == CQ_VERSION_SUPERSEDED && v->next.doc_id) {
            cq_strbuf_puts(&b, zh ? "已被" : " has been superseded by ");
            entry_words(&b, &v->next, zh);
            cq_strbuf_puts(&b, zh ? "取代。" : ".");
            int cur = cq_version_group_pick(&g, v->on, 0);
            if (cur >= 0 && start_day(&g.v[cur]) != start_day(&v->next)) {
                cq_strbuf_puts(&b, zh ? "现行版本为" : " The version in force today is ");
                entry_words(&b, &g.v[cur], zh);
                cq_strbuf_puts(&b, zh ? "。" : ".");
            }
        } else if (v->state == CQ_VERSION_REPEALED) {
            cq_strbuf_printf(&b, zh ? "已于%s废止。" : " was repealed on %s.", cq_date_format(v->repealed, d));
        } else if (v->state == CQ_VERSION_NOT_YET) {
            cq_strbuf_puts(&b, zh ? "尚未施行" : " is not yet in force");
            if (v->previous.doc_id) {
                cq_strbuf_puts(&b, zh ? "，现行有效的是" : "; the version in force is ");
                entry_words(&b, &v->previous, zh);
            }
            cq_strbuf_puts(&b, zh ? "。" : ".");
        }
    } else if (!q->as_of && v->previous.doc_id) {
        cq_date from = v->effective ? v->effective : v->promulgated;
        if (from > cq_date_add_months(v->on, -CQ_ANSWER_RECENT_MONTHS)) recent_change(s, c, v, &b, zh);
    }
    cq_version_group_free(&g);
    if (b.failed || !b.len) {
        cq_strbuf_free(&b);
        return;
    }
    a->version_notice = cq_strbuf_take(&b);
    if (q->as_of && a->answer) { /* the answer says which version it rests on */
        cq_strbuf t = {0};
        cq_strbuf_printf(&t, "%s\n%s", a->version_notice, a->answer);
        if (!t.failed) {
            free(a->answer);
            a->answer = cq_strbuf_take(&t);
        } else {
            cq_strbuf_free(&t);
        }
    }
}

/* ---- comparing versions ------------------------------------------------------------------------------------- */

void cq_answer_compare_free(cq_answer_compare *c) {
    cq_comparison_free(&c->cmp);
    free(c->name_a);
    free(c->name_b);
    free(c->title_a);
    free(c->title_b);
    memset(c, 0, sizeof *c);
}

/* The group a comparison question is about: the first regulation it names that has several versions, else the
 * KB's only one. */
static cq_status find_group(cq_store *s, const cq_query *q, cq_version_group *g, bool *found, cq_strbuf *several,
                            cq_err *err) {
    *found = false;
    for (size_t i = 0; i < q->n_titles; i++) {
        if (q->titles[i].score < q->titles[0].score) break;
        cq_err e2 = {0};
        if (cq_versions_group_of(s, q->titles[i].doc_id, g, &e2)) continue;
        if (g->n > 1) {
            *found = true;
            return CQ_OK;
        }
        cq_version_group_free(g);
    }
    if (q->n_titles) return CQ_OK; /* it names a regulation without versions */
    cq_version_group *all = NULL;
    size_t n = 0;
    cq_status rc = cq_versions_list(s, q->kb_id, &all, &n, err);
    if (rc) return rc;
    if (n == 1) {
        *g = all[0];
        *found = true;
    } else {
        for (size_t i = 0; i < n; i++) {
            if (i < COMPARE_LIST_MAX) cq_strbuf_printf(several, "%s%s", i ? "、" : "", all[i].key);
            cq_version_group_free(&all[i]);
        }
        if (n > COMPARE_LIST_MAX) cq_strbuf_puts(several, "…");
    }
    free(all);
    return CQ_OK;
}

/* The two versions to compare: the two years the question names, else the version meant for its day and the one
 * before it (the oldest: it and the one after). */
static bool choose_versions(const cq_query *q, const cq_version_group *g, int *ia, int *ib) {
    int years[4];
    size_t ny = cq_question_years(q->text, years, 4);
    *ia = *ib = -1;
    if (ny >= 2 && years[0] != years[1]) {
        *ia = cq_version_group_pick(g, 0, years[0]);
        *ib = cq_version_group_pick(g, 0, years[1]);
        if (*ia >= 0 && *ib >= 0 && *ia != *ib) {
            if (*ia > *ib) {
                int t = *ia;
                *ia = *ib;
                *ib = t;
            }
            return true;
        }
    }
    int b = cq_version_group_pick(g, q->as_of ? q->as_of : cq_date_today(), q->version_year);
    if (b < 0) b = (int)g->n - 1;
    int a = b - 1;
    while (a >= 0 && start_day(&g->v[a]) == start_day(&g->v[b])) a--;
    if (a < 0) {
        a = b;
        b = a + 1;
        while (b < (int)g->n && start_day(&g->v[b]) == start_day(&g->v[a])) b++;
        if (b >= (int)g->n) return false;
    }
    *ia = a;
    *ib = b;
    return true;
}

static cq_status cite_clause(cq_store *s, cq_answer *a, int64_t clause_id, const cq_version_status *v, cq_err *err) {
    cq_clause_row r;
    cq_status rc = cq_store_clause_get(s, clause_id, &r, err);
    if (rc) return rc;
    cq_citation *c = realloc(a->citations, (a->n_citations + 1) * sizeof *c);
    if (!c) {
        cq_clause_row_free(&r);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    a->citations = c;
    c = &c[a->n_citations++];
    *c = (cq_citation){.clause_id = r.id, .doc_id = r.doc_id, .doc = r.doc_name, .clause = r.label, .path = r.path,
                       .page = r.page_first, .quote = r.text, .version = *v};
    r.doc_name = r.label = r.path = r.text = NULL;
    cq_clause_row_free(&r);
    return CQ_OK;
}

/* The pair whose side b (or side a, with on_a) holds an article with label key `key`. */
static const cq_cmp_pair *pair_with_key(const cq_comparison *c, const char *key, bool on_a) {
    for (size_t k = 0; k < c->al.n_pairs; k++) {
        const cq_cmp_pair *p = &c->al.pairs[k];
        const cq_cmp_clause *side = on_a ? c->a : c->b;
        const size_t *idx = on_a ? p->a : p->b;
        size_t n = on_a ? p->n_a : p->n_b;
        for (size_t x = 0; x < n; x++)
            if (side[idx[x]].label_key && !strcmp(side[idx[x]].label_key, key)) return p;
    }
    return NULL;
}

/* A clause's text without the label it starts with ("第六十条 …"): the answer names the clause itself. */
static const char *body(const cq_cmp_clause *c) {
    const char *t = c->text;
    size_t n = c->label ? strlen(c->label) : 0;
    if (n && !strncmp(t, c->label, n)) {
        t += n;
        while (*t == ' ' || *t == '\n') t++;
    }
    return *t ? t : c->text;
}

static const char *labels_of(const cq_cmp_clause *side, const size_t *idx, size_t n, char *buf, size_t cap, bool zh) {
    buf[0] = 0;
    for (size_t k = 0; k < n; k++) {
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "%s%s", k ? (zh ? "、" : ", ") : "", side[idx[k]].label ? side[idx[k]].label : "");
    }
    return buf;
}

/* One clause asked about: what became of the newer version's article `key`, and of the older one's. */
static void describe_clause(const cq_answer_compare *x, cq_strbuf *b, bool zh) {
    const cq_comparison *c = &x->cmp;
    const cq_cmp_pair *pb = pair_with_key(c, x->key, false), *pa = pair_with_key(c, x->key, true);
    char la[128], lb[128];
    if (pb) {
        labels_of(c->b, pb->b, pb->n_b, lb, sizeof lb, zh);
        labels_of(c->a, pb->a, pb->n_a, la, sizeof la, zh);
        if (pb->kind == CQ_PAIR_ADDED) {
            cq_strbuf_printf(b, zh ? "新版%s是新增的条文：\n%s" : "%s of the newer version is new:\n%s", lb,
                             body(&c->b[pb->b[0]]));
        } else if (pb->kind == CQ_PAIR_SAME) {
            if (pb->renumbered) cq_strbuf_printf(b, zh ? "新版%s即原%s，内容未变（条号变化）。" : "%s of the newer version is the former %s, unchanged (renumbered).", lb, la);
            else cq_strbuf_printf(b, zh ? "%s内容未变。" : "%s is unchanged.", lb);
        } else {
            char *what = cq_diff_describe(&pb->diff, zh, COMPARE_QUOTE_CHARS);
            bool same_label = !strcmp(la, lb);
            if (same_label) cq_strbuf_printf(b, zh ? "%s有修改：%s。" : "%s was changed: %s.", lb, what ? what : "");
            else cq_strbuf_printf(b, zh ? "新版%s（原%s）有修改：%s。" : "%s of the newer version (formerly %s) was changed: %s.", lb, la, what ? what : "");
            free(what);
            cq_strbuf_printf(b, zh ? "\n修改前（%s）：" : "\nBefore (%s): ", la);
            for (size_t k = 0; k < pb->n_a; k++) cq_strbuf_printf(b, "%s%s", k ? "\n" : "", body(&c->a[pb->a[k]]));
            cq_strbuf_printf(b, zh ? "\n修改后（%s）：" : "\nAfter (%s): ", lb);
            for (size_t k = 0; k < pb->n_b; k++) cq_strbuf_printf(b, "%s%s", k ? "\n" : "", body(&c->b[pb->b[k]]));
        }
    }
    if (pa && pa != pb) {
        labels_of(c->a, pa->a, pa->n_a, la, sizeof la, zh);
        labels_of(c->b, pa->b, pa->n_b, lb, sizeof lb, zh);
        if (b->len) cq_strbuf_puts(b, "\n");
        if (pa->kind == CQ_PAIR_REMOVED)
            cq_strbuf_printf(b, zh ? "旧版%s在新版中已删除：%s" : "%s of the older version was removed: %s", la,
                             body(&c->a[pa->a[0]]));
        else
            cq_strbuf_printf(b, zh ? "旧版%s现为新版%s（%s）。" : "%s of the older version is now %s (%s).", la, lb,
                             pa->kind == CQ_PAIR_SAME ? (zh ? "内容未变" : "unchanged") : (zh ? "有修改" : "changed"));
    }
    if (!pa && !pb) cq_strbuf_printf(b, zh ? "两个版本都没有该条。" : "Neither version has that article.");
}

static void describe_whole(const cq_answer_compare *x, cq_strbuf *b, bool zh) {
    const cq_alignment *al = &x->cmp.al;
    cq_strbuf_printf(b,
                     zh ? "原%zu条，现%zu条：修改%zu条，新增%zu条，删除%zu条，内容未变%zu条（其中%zu条条号有变化）。"
                        : "%zu articles before, %zu now: %zu changed, %zu added, %zu removed, %zu unchanged (%zu of "
                          "them renumbered).",
                     x->cmp.n_a, x->cmp.n_b, al->n_changed, al->n_added, al->n_removed, al->n_same, al->n_renumbered);
    size_t listed = 0;
    for (size_t k = 0; k < al->n_pairs && listed < COMPARE_LIST_MAX; k++) {
        const cq_cmp_pair *p = &al->pairs[k];
        if (p->kind != CQ_PAIR_CHANGED || !p->n_b) continue;
        const char *label = x->cmp.b[p->b[0]].label;
        if (!label) continue;
        cq_strbuf_printf(b, "%s%s", listed ? (zh ? "、" : ", ") : (zh ? "修改的条文有" : " Changed: "), label);
        listed++;
    }
    if (listed) cq_strbuf_puts(b, al->n_changed > listed ? (zh ? "等。" : "…") : (zh ? "。" : "."));
}

cq_status cq_answer_compare_versions(cq_store *s, const cq_query *q, cq_answer *out, bool *handled, cq_err *err) {
    *handled = false;
    memset(out, 0, sizeof *out);
    if (!q->kb_id) return CQ_OK;
    cq_err verr = {0};
    if (cq_versions_ensure(s, q->kb_id, false, NULL, &verr)) CQ_WARN("versions: %s", verr.msg);
    cq_version_group g = {0};
    bool found;
    cq_strbuf several = {0};
    cq_status rc = find_group(s, q, &g, &found, &several, err);
    const bool zh = q->lang == CQ_QUERY_ZH;
    if (!rc && !found && several.len && q->compare > 1) {
        /* several regulations could be meant: ask which */
        cq_strbuf b = {0};
        cq_strbuf_printf(&b,
                         zh ? "知识库中有多部法规有不同版本（%s），请指明要比较哪一部，例如“公司法新旧版本第六十条有何不同？”。"
                            : "Several regulations of this knowledge base have versions (%s): please name the one to "
                              "compare, e.g. \"What changed in Article 60 of the Company Law?\"",
                         several.data);
        cq_strbuf_free(&several);
        if (b.failed) {
            cq_strbuf_free(&b);
            return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        }
        out->answer = cq_strbuf_take(&b);
        *handled = true;
        return CQ_OK;
    }
    cq_strbuf_free(&several);
    if (rc || !found) return rc;
    int ia, ib;
    if (!choose_versions(q, &g, &ia, &ib)) {
        cq_version_group_free(&g);
        return CQ_OK;
    }
    cq_answer_compare *x = calloc(1, sizeof *x);
    if (!x) {
        cq_version_group_free(&g);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    cq_date on = q->as_of ? q->as_of : cq_date_today();
    cq_version_status_in(&g, g.v[ia].doc_id, on, &x->va);
    cq_version_status_in(&g, g.v[ib].doc_id, on, &x->vb);
    if (q->type == CQ_QUERY_CLAUSE) snprintf(x->key, sizeof x->key, "%s", q->ref.key);
    rc = cq_compare_docs(s, g.v[ia].doc_id, g.v[ib].doc_id, &x->cmp, err);
    cq_doc_info da = {0}, db = {0};
    if (!rc) rc = cq_store_doc_get(s, g.v[ia].doc_id, &da, err);
    if (!rc) rc = cq_store_doc_get(s, g.v[ib].doc_id, &db, err);
    if (!rc) {
        x->name_a = strdup(da.name);
        x->name_b = strdup(db.name);
        x->title_a = da.title ? strdup(da.title) : NULL;
        x->title_b = db.title ? strdup(db.title) : NULL;
        if (!x->name_a || !x->name_b) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    cq_strbuf b = {0};
    if (!rc) {
        const char *law = db.title ? db.title : db.name;
        cq_strbuf_printf(&b, zh ? "《%s》" : "%s: ", law);
        entry_words(&b, &g.v[ia], zh);
        cq_strbuf_puts(&b, zh ? "与" : " compared with ");
        entry_words(&b, &g.v[ib], zh);
        cq_strbuf_puts(&b, zh ? "相比：\n" : ":\n");
        size_t head = b.len;
        if (x->key[0]) describe_clause(x, &b, zh);
        else describe_whole(x, &b, zh);
        if (b.len == head) cq_strbuf_puts(&b, zh ? "没有可比较的条文。" : "Nothing to compare.");
    }
    /* citations: the newer version's clause, then the older one's */
    if (!rc && x->key[0]) {
        const cq_cmp_pair *pb = pair_with_key(&x->cmp, x->key, false), *pa = pair_with_key(&x->cmp, x->key, true);
        const cq_cmp_pair *pairs[2] = {pb, pa != pb ? pa : NULL};
        for (int k = 0; !rc && k < 2; k++) {
            const cq_cmp_pair *p = pairs[k];
            if (!p) continue;
            for (size_t i = 0; !rc && i < p->n_b; i++) rc = cite_clause(s, out, x->cmp.b[p->b[i]].clause_id, &x->vb, err);
            for (size_t i = 0; !rc && i < p->n_a; i++) rc = cite_clause(s, out, x->cmp.a[p->a[i]].clause_id, &x->va, err);
        }
    }
    cq_doc_info_free(&da);
    cq_doc_info_free(&db);
    cq_version_group_free(&g);
    if (!rc && b.failed) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (rc) {
        cq_strbuf_free(&b);
        cq_answer_compare_free(x);
        free(x);
        cq_answer_free(out);
        return rc;
    }
    out->answer = cq_strbuf_take(&b);
    out->compare = x;
    out->as_of = q->as_of;
    out->coverage = 1;
    *handled = true;
    return CQ_OK;
}
