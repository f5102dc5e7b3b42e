/* clauseqa versions --kb KB [--all] [--json]                 the regulations with several versions, and their status
 * clauseqa versions --kb KB --set NAME [--group G] [--label L] [--promulgated DAY] [--effective DAY]
 *                   [--repealed DAY|none]                     a person's correction of a document's version
 * clauseqa versions --kb KB --auto NAME                       back to the automatic analysis (store/versions.h) */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "app/json.h"
#include "store/versions.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa versions --kb KB [--all] [--json]\n"
               "       clauseqa versions --kb KB --set NAME [--group G] [--label L] [--promulgated DAY]\n"
               "                         [--effective DAY] [--repealed DAY|none]\n"
               "       clauseqa versions --kb KB --auto NAME\n"
               "Lists the regulations of KB that have several versions (--all: every document), each version with its\n"
               "dates and its status today (in_force, superseded, repealed, not_yet_in_force). --set corrects a\n"
               "document's version (DAY is YYYY-MM-DD; --group names the regulation it is a version of, \"\" for none);\n"
               "corrections are kept until --auto puts the document back to the automatic analysis.\n");
}

static void print_group(const cq_version_group *g) {
    printf("%s\n", g->key[0] ? g->key : "(alone)");
    for (size_t i = 0; i < g->n; i++) {
        cq_version_status v;
        cq_version_status_in(g, g->v[i].doc_id, 0, &v);
        char p[11], e[11], r[11];
        printf("  %-36s %-14s promulgated %-10s effective %-10s %s%s%s%s\n", g->v[i].name,
               g->v[i].label[0] ? g->v[i].label : "-", g->v[i].promulgated ? cq_date_format(g->v[i].promulgated, p) : "?",
               g->v[i].effective ? cq_date_format(g->v[i].effective, e) : "?", cq_version_state_name(v.state),
               v.repealed ? " (repealed " : "", v.repealed ? cq_date_format(v.repealed, r) : "", v.repealed ? ")" : "");
        if (g->v[i].by_user) printf("  %-36s (corrected by a person)\n", "");
    }
}

static cq_date day_arg(const char *opt, const char *v, int *bad) {
    if (!strcmp(v, "none") || !*v) return 0;
    cq_date d = cq_date_parse_iso(v);
    if (!d) {
        fprintf(stderr, "clauseqa versions: %s is a day written YYYY-MM-DD (or none), not '%s'\n", opt, v);
        *bad = 1;
    }
    return d;
}

int cq_cmd_versions(int argc, char **argv) {
    static const struct option opts[] = {
        {"kb", required_argument, 0, 'b'},       {"all", no_argument, 0, 'a'},
        {"json", no_argument, 0, 'j'},
        {"set", required_argument, 0, 's'},      {"auto", required_argument, 0, 'u'},
        {"group", required_argument, 0, 'g'},    {"label", required_argument, 0, 'l'},
        {"promulgated", required_argument, 0, 'p'}, {"effective", required_argument, 0, 'e'},
        {"repealed", required_argument, 0, 'r'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *kb = NULL, *set = NULL, *reset = NULL;
    bool all = false, json = false;
    cq_version_edit e = {.promulgated = -1, .effective = -1, .repealed = -1};
    int c, bad = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'b': kb = optarg; break;
        case 'a': all = true; break;
        case 'j': json = true; break;
        case 's': set = optarg; break;
        case 'u': reset = optarg; break;
        case 'g': e.key = optarg; break;
        case 'l': e.label = optarg; break;
        case 'p': e.promulgated = day_arg("--promulgated", optarg, &bad); break;
        case 'e': e.effective = day_arg("--effective", optarg, &bad); break;
        case 'r': e.repealed = day_arg("--repealed", optarg, &bad); break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint("versions");
        }
    }
    if (bad) return 2;
    if (!kb || optind < argc || (set && reset)) {
        fprintf(stderr, "clauseqa versions: %s\n",
                !kb             ? "--kb is required"
                : optind < argc ? "unexpected argument"
                                : "--set and --auto name one document each: give one of them");
        return cq_cli_usage_hint("versions");
    }
    cq_store *s = cq_cli_open_store(cq_cli_data_dir());
    if (!s) return 1;
    int64_t kb_id = cq_cli_kb(s, kb, false);
    cq_err err = {0};
    int status = 1;
    cq_status rc = kb_id ? cq_versions_ensure(s, kb_id, false, NULL, &err) : CQ_ERR_NOT_FOUND;
    const char *name = set ? set : reset;
    if (!rc && name) {
        cq_doc_info d;
        rc = cq_store_doc_by_name(s, kb_id, name, &d, &err);
        if (rc == CQ_ERR_NOT_FOUND) cq_err_set(&err, rc, "no document named '%s' in %s", name, kb);
        if (!rc) {
            rc = cq_store_begin(s, &err);
            if (!rc) rc = set ? cq_versions_set(s, d.id, &e, &err) : cq_versions_reset(s, d.id, &err);
            if (!rc) rc = cq_store_commit(s, &err);
            else cq_store_rollback(s);
            cq_version_group g;
            if (!rc && !cq_versions_group_of(s, d.id, &g, &err)) {
                print_group(&g);
                cq_version_group_free(&g);
            }
            cq_doc_info_free(&d);
        }
        if (!rc) status = 0;
    } else if (!rc) {
        cq_version_group *groups = NULL;
        size_t n = 0;
        cq_version_status *all_v = NULL;
        size_t n_all = 0;
        rc = all ? cq_versions_statuses(s, kb_id, 0, &all_v, &n_all, &err) : cq_versions_list(s, kb_id, &groups, &n, &err);
        if (!rc && json) {
            cJSON *a = cJSON_CreateArray();
            for (size_t i = 0; i < n_all; i++) {
                cJSON *v = cq_json_version(&all_v[i]);
                if (!v) continue;
                cJSON_AddNumberToObject(v, "document_id", (double)all_v[i].doc_id);
                cJSON_AddItemToArray(a, v);
            }
            for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < groups[i].n; k++) {
                    cq_version_status st;
                    cq_version_status_in(&groups[i], groups[i].v[k].doc_id, 0, &st);
                    cJSON *v = cq_json_version(&st);
                    cJSON_AddNumberToObject(v, "document_id", (double)st.doc_id);
                    cJSON_AddStringToObject(v, "doc", groups[i].v[k].name);
                    cJSON_AddItemToArray(a, v);
                }
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToObject(o, "versions", a);
            cq_json_print_line(o, stdout);
        } else if (!rc && all) {
            for (size_t i = 0; i < n_all; i++) {
                const cq_version_status *v = &all_v[i];
                char e1[11];
                printf("%-8lld %-24s %-14s effective %-10s %-16s %d version%s\n", (long long)v->doc_id,
                       v->key[0] ? v->key : "-", v->label[0] ? v->label : "-",
                       v->effective ? cq_date_format(v->effective, e1) : "?", cq_version_state_name(v->state),
                       v->n_versions, v->n_versions == 1 ? "" : "s");
            }
        } else if (!rc) {
            for (size_t i = 0; i < n; i++) print_group(&groups[i]);
            if (!n) printf("no regulation of %s has several versions\n", kb);
        }
        for (size_t i = 0; i < n; i++) cq_version_group_free(&groups[i]);
        free(groups);
        free(all_v);
        if (!rc) status = 0;
    }
    if (rc && kb_id) fprintf(stderr, "clauseqa versions: %s\n", err.msg);
    cq_store_close(s);
    return status;
}
