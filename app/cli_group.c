/* clauseqa group add NAME [--role admin|editor|reader] [--kb KB ...] | list | show NAME | set NAME --role ROLE
 *                [--kb KB ...] | remove NAME | member add|remove GROUP USER  [--json] [--data DIR]
 * Groups of users (store/groups.h): a member has the group's role and KBs on top of the user's own. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "store/groups.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa group add NAME [--role admin|editor|reader] [--kb KB ...|'*'] [--json]\n"
               "       clauseqa group list [--json]\n"
               "       clauseqa group show NAME [--json]\n"
               "       clauseqa group set NAME --role admin|editor|reader [--kb KB ...|'*']\n"
               "       clauseqa group remove NAME\n"
               "       clauseqa group member add|remove GROUP USER\n"
               "Groups of users: a member gets the group's role and KBs on top of the user's own (the highest\n"
               "role, the KBs of all). Roles and --kb as for users (clauseqa user --help); the role defaults to\n"
               "reader. Members come from here (member add) or, for directory users, from their LDAP groups\n"
               "(docs/OPERATIONS.md \"LDAP\"). All take --data DIR.\n");
}

static cJSON *group_json(const cq_group_info *g) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)g->id);
    cJSON_AddStringToObject(o, "name", g->name);
    cJSON_AddStringToObject(o, "role", cq_key_role_name(g->role));
    cJSON_AddItemToObject(o, "kbs", cq_cli_grant_json(g->kb));
    cJSON_AddBoolToObject(o, "kb_deleted", g->kb_gone);
    cJSON_AddNumberToObject(o, "members", (double)g->members);
    cJSON_AddNumberToObject(o, "created_at", (double)g->created_at);
    return o;
}

static int list(cq_store *s, bool json) {
    cq_err err = {0};
    cq_group_info *groups;
    size_t n;
    if (cq_store_group_list(s, &groups, &n, &err)) {
        fprintf(stderr, "clauseqa group list: %s\n", err.msg);
        return 1;
    }
    if (json) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, group_json(&groups[i]));
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "groups", a);
        cq_json_print_line(o, stdout);
    } else {
        printf("%-5s %-24s %-7s %-30s %s\n", "id", "name", "role", "kbs", "members");
        for (size_t i = 0; i < n; i++)
            printf("%-5lld %-24s %-7s %-30s %lld%s\n", (long long)groups[i].id, groups[i].name,
                   cq_key_role_name(groups[i].role), groups[i].kb[0] ? groups[i].kb : "-",
                   (long long)groups[i].members, groups[i].kb_gone ? " (its KBs were deleted)" : "");
    }
    free(groups);
    return 0;
}

static int show(cq_store *s, const char *name, bool json) {
    cq_err err = {0};
    cq_group_info g;
    cq_group_member *m = NULL;
    size_t n = 0;
    if (cq_store_group_get(s, name, &g, &err) || cq_store_group_members(s, name, &m, &n, &err)) {
        fprintf(stderr, "clauseqa group show: %s\n", err.msg);
        return 1;
    }
    if (json) {
        cJSON *o = group_json(&g), *a = cJSON_AddArrayToObject(o, "member_list");
        for (size_t i = 0; i < n; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "user", m[i].user);
            cJSON_AddStringToObject(e, "source", m[i].source);
            cJSON_AddItemToArray(a, e);
        }
        cq_json_print_line(o, stdout);
    } else {
        printf("group %s: %s%s%s, %zu member%s\n", g.name, cq_key_role_name(g.role), g.kb[0] ? " of " : "", g.kb, n,
               n == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++) printf("  %s%s\n", m[i].user, strcmp(m[i].source, "ldap") ? "" : " (directory)");
    }
    free(m);
    return 0;
}

static int member(cq_store *s, const char *op, const char *group, const char *user) {
    cq_err err = {0};
    bool add = !strcmp(op, "add");
    cq_status rc = add ? cq_store_group_member_add(s, group, user, &err)
                       : cq_store_group_member_remove(s, group, user, &err);
    if (rc) {
        fprintf(stderr, "clauseqa group member %s: %s; nothing changed\n", op, err.msg);
        return 1;
    }
    char target[160];
    snprintf(target, sizeof target, "group %s: user %s", group, user);
    cq_cli_audit(s, add ? "group_member_add" : "group_member_remove", NULL, target);
    fprintf(stderr, add ? "%s is now in group %s\n" : "%s is no longer in group %s\n", user, group);
    return 0;
}

int cq_cmd_group(int argc, char **argv) {
    static const char *const named_actions[] = {"add", "show", "set", "remove", NULL};
    static const char *const own_actions[] = {"member", NULL};
    cq_cli_principal_args a;
    int parsed = cq_cli_principal_parse(argc, argv, "group", "add, list, show, set, remove or member", named_actions,
                                        own_actions, cq_group_name_valid, usage, &a);
    if (parsed >= 0) return parsed;
    const char *action = a.action, *name = a.name, *kbs = a.kbs;
    cq_key_role r = a.role;
    bool json = a.json, is_member = !strcmp(action, "member");
    if (is_member && (argc - optind != 4 || (strcmp(argv[optind + 1], "add") && strcmp(argv[optind + 1], "remove")))) {
        fprintf(stderr, "clauseqa group member: say add or remove, a group and a user\n");
        return 2;
    }
    cq_store *s = cq_cli_open_store(cq_cli_data_dir());
    if (!s) return 1;
    cq_err err = {0};
    int status = 0;
    char target[96];
    if (!strcmp(action, "list")) {
        status = list(s, json);
    } else if (!strcmp(action, "show")) {
        status = show(s, name, json);
    } else if (is_member) {
        status = member(s, argv[optind + 1], argv[optind + 2], argv[optind + 3]);
    } else if (!strcmp(action, "add")) {
        cq_group_info g;
        if (cq_store_group_add(s, name, r, kbs[0] ? kbs : NULL, &g, &err)) {
            fprintf(stderr, "clauseqa group add: %s; nothing changed\n", err.msg);
            status = 1;
        } else {
            snprintf(target, sizeof target, "group %s (%s)", g.name, cq_key_role_name(g.role));
            cq_cli_audit(s, "group_add", g.kb, target);
            if (json) cq_json_print_line(group_json(&g), stdout);
            else
                fprintf(stderr, "group %s added (%s%s%s)\n", g.name, cq_key_role_name(g.role), g.kb[0] ? " of " : "",
                        g.kb);
        }
    } else if (!strcmp(action, "set")) {
        if (cq_store_group_set(s, name, r, kbs[0] ? kbs : NULL, &err)) {
            fprintf(stderr, "clauseqa group set: %s; nothing changed\n", err.msg);
            status = 1;
        } else {
            snprintf(target, sizeof target, "group %s (%s)", name, cq_key_role_name(r));
            cq_cli_audit(s, "group_set", kbs, target);
            fprintf(stderr, "group %s is now %s%s%s\n", name, cq_key_role_name(r), kbs[0] ? " of " : "", kbs);
        }
    } else {
        if (cq_store_group_remove(s, name, &err)) {
            fprintf(stderr, "clauseqa group remove: %s\n", err.msg);
            status = 1;
        } else {
            snprintf(target, sizeof target, "group %s", name);
            cq_cli_audit(s, "group_remove", NULL, target);
            fprintf(stderr, "group %s removed; its members lost its rights\n", name);
        }
    }
    cq_store_close(s);
    return status;
}
