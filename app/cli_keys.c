/* clauseqa keys create --role admin|editor|reader [--kb KB ...|*] [--name NAME] | list | revoke ID | open-mode [on|off]
 *              [--data DIR] */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "core/log.h"
#include "store/keys.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa keys create --role admin|editor|reader [--kb KB ...|'*'] [--name NAME] [--json]\n"
               "       clauseqa keys list [--json]\n"
               "       clauseqa keys revoke ID\n"
               "       clauseqa keys open-mode [on|off]\n"
               "API keys for the HTTP API (Authorization: Bearer KEY). Roles: admin (keys, KBs, everything),\n"
               "editor (upload and delete documents of its KBs, and read them), reader (retrieve and ask in its\n"
               "KBs); give --kb once per KB (or KB,KB), --kb '*' for every KB. The key is printed once; only its\n"
               "hash is stored.\n"
               "The first key turns authentication on for good: revoking every key leaves every request refused.\n"
               "open-mode on lets a loopback server answer without keys again (no key may be active); off requires\n"
               "keys even before one exists; without an argument it says which mode is on. A running server\n"
               "follows within a second and logs the change.\n"
               "All take --data DIR.\n");
}

static cJSON *key_json(const cq_key_info *k) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)k->id);
    cJSON_AddStringToObject(o, "name", k->name);
    cJSON_AddStringToObject(o, "prefix", k->prefix);
    cJSON_AddStringToObject(o, "role", cq_key_role_name(k->role));
    cJSON_AddItemToObject(o, "kb", k->kb[0] ? cJSON_CreateString(k->kb) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "kbs", cq_cli_grant_json(k->kb));
    cJSON_AddNumberToObject(o, "created_at", (double)k->created_at);
    cJSON_AddNumberToObject(o, "last_used_at", (double)k->last_used_at);
    cJSON_AddBoolToObject(o, "revoked", k->revoked_at != 0);
    cJSON_AddBoolToObject(o, "kb_deleted", k->kb_gone); /* its KB was deleted: the key reaches nothing */
    return o;
}

/* keys open-mode [on|off]: says, or changes, whether authentication is required. */
static int open_mode(const char *to) {
    cq_store *s = cq_cli_open_store(cq_cli_data_dir());
    if (!s) return 1;
    cq_err err = {0};
    bool required = false;
    int64_t since = 0, active = 0;
    int status = 0;
    if (cq_store_auth_required(s, &required, &since, &err) || cq_store_key_count_active(s, &active, &err)) {
        fprintf(stderr, "clauseqa keys open-mode: %s\n", err.msg);
        status = 1;
    } else if (!to) {
        char when[32];
        cq_cli_format_time(since, when, sizeof when);
        if (required || active)
            printf("authentication on%s%s: %lld active key%s\n", required ? " since " : "", required ? when : "",
                   (long long)active, active == 1 ? "" : "s");
        else
            printf("open mode: a server on a loopback address answers without keys until a key is made\n");
    } else if (!strcmp(to, "on") && active) {
        fprintf(stderr, "clauseqa keys open-mode on: %lld key%s active: revoke %s first (clauseqa keys list)\n",
                (long long)active, active == 1 ? " is" : "s are", active == 1 ? "it" : "them");
        status = 1;
    } else if (cq_store_auth_set_required(s, !strcmp(to, "off"), &err)) {
        fprintf(stderr, "clauseqa keys open-mode: %s\n", err.msg);
        status = 1;
    } else if (!strcmp(to, "on")) {
        cq_cli_audit(s, "open_mode", NULL, "on");
        CQ_WARN("keys open-mode on (by %s): a server on a loopback address answers without keys, as admin",
                getenv("USER") ? getenv("USER") : "?");
    } else {
        cq_cli_audit(s, "open_mode", NULL, "off");
        CQ_INFO("keys open-mode off (by %s): every request needs an API key", getenv("USER") ? getenv("USER") : "?");
    }
    cq_store_close(s);
    return status;
}

int cq_cmd_keys(int argc, char **argv) {
    static const struct option opts[] = {{"role", required_argument, 0, 'r'}, {"kb", required_argument, 0, 'k'},
                                         {"name", required_argument, 0, 'n'}, {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},       {0, 0, 0, 0}};
    const char *role = NULL, *name = NULL;
    char kb_list[CQ_GRANT_BYTES] = "";
    const char *kb = NULL;
    int json = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'r': role = optarg; break;
        case 'k': /* every --kb counts (issue 30: the last one alone was kept) */
            if (cq_cli_grant_add(kb_list, optarg, "keys create")) return 2;
            kb = kb_list;
            break;
        case 'n': name = optarg; break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint("keys");
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "clauseqa keys: say create, list or revoke ID\n");
        return cq_cli_usage_hint("keys");
    }
    const char *action = argv[optind];
    if (!strcmp(action, "open-mode")) {
        const char *to = optind + 1 < argc ? argv[optind + 1] : NULL;
        if ((to && strcmp(to, "on") && strcmp(to, "off")) || optind + 2 < argc) {
            fprintf(stderr, "clauseqa keys open-mode: give on, off, or nothing (to see the mode)\n");
            return 2;
        }
        return open_mode(to);
    }
    if (strcmp(action, "create") && strcmp(action, "list") && strcmp(action, "revoke")) {
        fprintf(stderr, "clauseqa keys: unknown action '%s'\n", action);
        return cq_cli_usage_hint("keys");
    }
    cq_key_role r = CQ_ROLE_NONE;
    long long revoke_id = 0;
    if (!strcmp(action, "create")) {
        r = cq_key_role_parse(role);
        if (r == CQ_ROLE_NONE) {
            fprintf(stderr, "clauseqa keys create: --role must be admin, editor or reader\n");
            return 2;
        }
        if ((r == CQ_ROLE_ADMIN) == (kb != NULL)) {
            fprintf(stderr, "clauseqa keys create: %s\n",
                    r == CQ_ROLE_ADMIN ? "admin keys take no --kb" : "editor and reader keys need --kb KB (or '*')");
            return 2;
        }
    } else if (!strcmp(action, "revoke")) {
        char *end;
        revoke_id = optind + 1 < argc ? strtoll(argv[optind + 1], &end, 10) : 0;
        if (revoke_id <= 0 || *end) {
            fprintf(stderr, "clauseqa keys revoke: give the key's id (see clauseqa keys list)\n");
            return 2;
        }
    }
    cq_store *s = cq_cli_open_store(cq_cli_data_dir());
    if (!s) return 1;
    cq_err err = {0};
    int status = 0;
    if (!strcmp(action, "create")) {
        char secret[CQ_KEY_SECRET_BYTES];
        cq_key_info k;
        if (cq_store_key_create(s, name, r, kb, secret, &k, &err)) {
            fprintf(stderr, "clauseqa keys create: %s\n", err.msg);
            status = 1;
        } else {
            char target[96];
            snprintf(target, sizeof target, "key %lld %s (%s)", (long long)k.id, k.name, cq_key_role_name(k.role));
            cq_cli_audit(s, "key_create", k.kb, target);
            if (json) {
                cJSON *o = key_json(&k);
                cJSON_AddStringToObject(o, "key", secret);
                cq_json_print_line(o, stdout);
            } else {
                printf("%s\n", secret);
                fprintf(stderr, "key %lld (%s%s%s) created. It is shown only this once; send it as\n"
                                "  Authorization: Bearer %s\n",
                        (long long)k.id, cq_key_role_name(k.role), k.kb[0] ? " of " : "", k.kb, secret);
            }
        }
        secret[0] = 0;
    } else if (!strcmp(action, "list")) {
        cq_key_info *keys;
        size_t n;
        if (cq_store_key_list(s, &keys, &n, &err)) {
            fprintf(stderr, "clauseqa keys list: %s\n", err.msg);
            status = 1;
        } else if (json) {
            cJSON *a = cJSON_CreateArray();
            for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, key_json(&keys[i]));
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToObject(o, "keys", a);
            cq_json_print_line(o, stdout);
        } else {
            printf("%-5s %-20s %-13s %-7s %-20s %-17s %s\n", "id", "name", "prefix", "role", "kb", "last used",
                   "state");
            for (size_t i = 0; i < n; i++) {
                char used[32];
                cq_cli_format_time(keys[i].last_used_at, used, sizeof used);
                printf("%-5lld %-20s %-13s %-7s %-20s %-17s %s\n", (long long)keys[i].id, keys[i].name,
                       keys[i].prefix, cq_key_role_name(keys[i].role), keys[i].kb[0] ? keys[i].kb : "-", used,
                       keys[i].revoked_at ? "revoked" : keys[i].kb_gone ? "kb deleted" : "active");
            }
        }
        if (!status) free(keys);
    } else {
        if (cq_store_key_revoke(s, (int64_t)revoke_id, &err)) {
            fprintf(stderr, "clauseqa keys revoke: %s\n", err.msg);
            status = 1;
        } else {
            char target[32];
            snprintf(target, sizeof target, "key %lld", revoke_id);
            cq_cli_audit(s, "key_revoke", NULL, target);
            fprintf(stderr, "key %lld revoked\n", revoke_id);
        }
    }
    cq_store_close(s);
    return status;
}
