/* clauseqa compare --kb KB A [B] [--clause N] [--changed] [--json]: two versions of a regulation, clause by clause
 * (search/compare.h). Without B, A is compared with the version before it. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "app/json.h"
#include "search/compare.h"
#include "store/versions.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa compare --kb KB A [B] [--clause N] [--changed] [--json]\n"
               "Compares document A (the older version) with B clause by clause: clauses are paired by what they say\n"
               "(across renumbering), each pair same, changed (with its character diff), added or removed.\n"
               "A and B are document names (file names without extension). Without B, A is compared with the\n"
               "version before it (or, when A is the oldest, with the one after it).\n"
               "  --clause N   only the pairs holding article N (\"60\", \"第六十条\", \"20-1\") on either side\n"
               "  --changed    leave out clauses that did not change\n"
               "  --json       one JSON document (as GET /api/v1/documents/{a}/compare/{b})\n");
}

static void print_body(const cq_cmp_clause *side, const size_t *idx, size_t n) {
    for (size_t k = 0; k < n; k++) printf("%s%s", k ? "\n    " : "", side[idx[k]].text);
}

static const char *labels(const cq_cmp_clause *side, const size_t *idx, size_t n, char *buf, size_t cap) {
    buf[0] = 0;
    for (size_t k = 0; k < n; k++) {
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "%s%s", k ? "+" : "", side[idx[k]].label ? side[idx[k]].label : "(段落)");
    }
    return buf;
}

static void print_pair(const cq_comparison *c, const cq_cmp_pair *p, bool color) {
    char la[160], lb[160];
    switch (p->kind) {
    case CQ_PAIR_ADDED:
        printf("+ %s (added)\n    ", labels(c->b, p->b, p->n_b, lb, sizeof lb));
        print_body(c->b, p->b, p->n_b);
        break;
    case CQ_PAIR_REMOVED:
        printf("- %s (removed)\n    ", labels(c->a, p->a, p->n_a, la, sizeof la));
        print_body(c->a, p->a, p->n_a);
        break;
    case CQ_PAIR_SAME:
        printf("= %s → %s (same%s)", labels(c->a, p->a, p->n_a, la, sizeof la),
               labels(c->b, p->b, p->n_b, lb, sizeof lb), p->moved ? ", moved" : "");
        break;
    case CQ_PAIR_CHANGED:
        printf("~ %s → %s (changed, similarity %.2f%s)\n    ", labels(c->a, p->a, p->n_a, la, sizeof la),
               labels(c->b, p->b, p->n_b, lb, sizeof lb), p->similarity, p->moved ? ", moved" : "");
        for (size_t k = 0; k < p->diff.n; k++) {
            const cq_diff_span *s = &p->diff.spans[k];
            if (s->op == CQ_DIFF_EQUAL) fputs(s->text, stdout);
            else if (color) printf(s->op == CQ_DIFF_DELETE ? "\033[31;9m%s\033[0m" : "\033[32;4m%s\033[0m", s->text);
            else printf(s->op == CQ_DIFF_DELETE ? "[-%s-]" : "{+%s+}", s->text);
        }
        break;
    }
    printf("\n");
}

static void print_side(const char *what, const cq_doc_info *d, const cq_version_status *v) {
    char e[11];
    printf("%s %s", what, d->name);
    if (v->state != CQ_VERSION_UNKNOWN) {
        printf(" (%s", v->label[0] ? v->label : "?");
        if (v->effective) printf(", effective %s", cq_date_format(v->effective, e));
        printf(", %s)", cq_version_state_name(v->state));
    }
    printf("\n");
}

int cq_cmd_compare(int argc, char **argv) {
    static const struct option opts[] = {{"kb", required_argument, 0, 'b'},   {"clause", required_argument, 0, 'c'},
                                         {"changed", no_argument, 0, 'x'},     {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    const char *kb = NULL, *clause = NULL;
    bool json = false, changed = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'b': kb = optarg; break;
        case 'c': clause = optarg; break;
        case 'x': changed = true; break;
        case 'j': json = true; break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint("compare");
        }
    }
    int n_names = argc - optind;
    if (!kb || n_names < 1 || n_names > 2) {
        fprintf(stderr, "clauseqa compare: %s\n", !kb ? "--kb is required" : "name one or two documents");
        return cq_cli_usage_hint("compare");
    }
    cq_store *s = cq_cli_open_store(cq_cli_data_dir());
    if (!s) return 1;
    int64_t kb_id = cq_cli_kb(s, kb, false);
    cq_doc_info da = {0}, db = {0};
    cq_version_status va = {0}, vb = {0};
    cq_comparison cmp = {0};
    cq_err err = {0};
    int status = 1;
    cq_status rc = kb_id ? cq_versions_ensure(s, kb_id, false, NULL, &err) : CQ_ERR_NOT_FOUND;
    if (!rc) {
        rc = cq_store_doc_by_name(s, kb_id, argv[optind], &da, &err);
        if (rc == CQ_ERR_NOT_FOUND) cq_err_set(&err, rc, "no document named '%s' in %s", argv[optind], kb);
    }
    if (!rc && n_names == 2) {
        rc = cq_store_doc_by_name(s, kb_id, argv[optind + 1], &db, &err);
        if (rc == CQ_ERR_NOT_FOUND) cq_err_set(&err, rc, "no document named '%s' in %s", argv[optind + 1], kb);
    } else if (!rc) {
        /* one name: its previous version → it (the oldest: it → the next) */
        rc = cq_versions_status(s, da.id, 0, &va, &err);
        int64_t other = va.previous.doc_id ? va.previous.doc_id : va.next.doc_id;
        if (!rc && !other)
            rc = cq_err_set(&err, CQ_ERR_NOT_FOUND, "'%s' has no other version in %s: name the second document",
                            da.name, kb);
        if (!rc) rc = cq_store_doc_get(s, other, &db, &err);
        if (!rc && va.previous.doc_id) { /* older first */
            cq_doc_info t = da;
            da = db;
            db = t;
        }
    }
    if (!rc) rc = cq_versions_status(s, da.id, 0, &va, &err);
    if (!rc) rc = cq_versions_status(s, db.id, 0, &vb, &err);
    if (!rc) rc = cq_compare_docs(s, da.id, db.id, &cmp, &err);
    if (rc) {
        if (kb_id) fprintf(stderr, "clauseqa compare: %s\n", err.msg);
    } else {
        char key[32] = "";
        if (clause) cq_compare_clause_key(clause, key, sizeof key);
        cq_compare_filter f = {.changes_only = changed, .clause_key = clause ? key : NULL};
        if (json) {
            cq_json_print_line(cq_json_comparison(&cmp, &da, &db, &va, &vb, &f), stdout);
        } else {
            print_side("a:", &da, &va);
            print_side("b:", &db, &vb);
            const cq_alignment *al = &cmp.al;
            printf("%zu → %zu clauses: %zu same (%zu renumbered), %zu changed (%zu renumbered), %zu added, %zu "
                   "removed\n\n",
                   cmp.n_a, cmp.n_b, al->n_same, al->n_renumbered, al->n_changed, al->n_renumbered_changed,
                   al->n_added, al->n_removed);
            bool color = isatty(STDOUT_FILENO);
            size_t shown = 0;
            for (size_t k = 0; k < al->n_pairs; k++) {
                const cq_cmp_pair *p = &al->pairs[k];
                if (changed && p->kind == CQ_PAIR_SAME && !p->renumbered) continue;
                if (clause && !cq_cmp_pair_holds(&cmp, p, key, 0)) continue;
                print_pair(&cmp, p, color);
                shown++;
            }
            if (clause && !shown) printf("no clause %s in either document\n", clause);
        }
        status = 0;
    }
    cq_comparison_free(&cmp);
    cq_doc_info_free(&da);
    cq_doc_info_free(&db);
    cq_store_close(s);
    return status;
}
