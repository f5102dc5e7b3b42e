/* clauseqa user add NAME [--role admin|editor|reader] [--kb KB ...] | list | remove NAME | passwd NAME
 *               | set NAME --role ROLE [--kb KB ...]  [--json] [--data DIR]
 * Local users who sign in to the page (store/users.h). Passwords are read from standard input, never from the
 * command line (where `ps` and the shell's history would show them): asked twice without echo on a terminal, else
 * the first line of the input. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "core/log.h"
#include "store/users.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa user add NAME [--role admin|editor|reader] [--kb KB ...|'*'] [--json]\n"
               "       clauseqa user list [--json]\n"
               "       clauseqa user passwd NAME\n"
               "       clauseqa user set NAME --role admin|editor|reader [--kb KB ...|'*']\n"
               "       clauseqa user remove NAME\n"
               "       clauseqa user disable|enable NAME\n"
               "Users who sign in to the page (POST /api/v1/login). Roles as API keys' (clauseqa keys --help):\n"
               "admin (everything), editor (upload and delete in its KBs), reader (ask in its KBs); the role\n"
               "defaults to reader. Give --kb once per KB (or KB,KB), '*' for every KB; admins take none.\n"
               "The password is read from standard input (asked twice, without echo, on a terminal; else the\n"
               "first line), never from the command line: at least %d characters. The first user, as the first\n"
               "key, turns authentication on. passwd, disable and remove sign the user out everywhere.\n"
               "Groups (clauseqa group --help) add their role and KBs to their members'.\n"
               "All take --data DIR.\n",
            CQ_PASSWORD_MIN_CHARS);
}

/* One line of f without its line end, into buf; false at end of input or when it is longer than the buffer. */
static bool read_line(FILE *f, char *buf, size_t cap) {
    if (!fgets(buf, (int)cap, f)) return false;
    size_t n = strlen(buf);
    if (n == cap - 1 && buf[n - 1] != '\n' && !feof(f)) return false;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = 0;
    return true;
}

/* Reads a password into buf: asked twice without echo on a terminal, else one line of standard input. Prints why
 * and returns false when there is none or the two differ. */
static bool read_password(const char *cmd, char *buf, size_t cap) {
    if (!isatty(STDIN_FILENO)) {
        if (read_line(stdin, buf, cap)) return true;
        fprintf(stderr, "clauseqa user %s: give the password on standard input (one line, at most %d bytes)\n", cmd,
                CQ_PASSWORD_MAX_BYTES);
        return false;
    }
    struct termios old, quiet;
    bool echo_off = tcgetattr(STDIN_FILENO, &old) == 0;
    if (echo_off) {
        quiet = old;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    }
    char again[CQ_PASSWORD_MAX_BYTES + 2];
    fprintf(stderr, "Password: ");
    bool ok = read_line(stdin, buf, cap);
    fprintf(stderr, "\nAgain: ");
    ok = ok && read_line(stdin, again, sizeof again);
    fprintf(stderr, "\n");
    if (echo_off) tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
    if (ok && strcmp(buf, again)) {
        fprintf(stderr, "clauseqa user %s: the two passwords differ; nothing changed\n", cmd);
        ok = false;
    } else if (!ok) {
        fprintf(stderr, "clauseqa user %s: no password given; nothing changed\n", cmd);
    }
    memset(again, 0, sizeof again);
    return ok;
}

static void cli_audit_user(cq_store *s, const char *action, const char *kb, const char *name) {
    char target[96];
    snprintf(target, sizeof target, "user %s", name);
    cq_cli_audit(s, action, kb, target);
}

static cJSON *user_json(const cq_user_info *u) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)u->id);
    cJSON_AddStringToObject(o, "name", u->name);
    cJSON_AddStringToObject(o, "role", cq_key_role_name(u->role));
    cJSON_AddItemToObject(o, "kbs", cq_cli_grant_json(u->kb));
    cJSON_AddBoolToObject(o, "kb_deleted", u->kb_gone);
    cJSON_AddNumberToObject(o, "created_at", (double)u->created_at);
    cJSON_AddNumberToObject(o, "last_login_at", (double)u->last_login_at);
    cJSON_AddStringToObject(o, "source", u->source[0] ? u->source : "local");
    cJSON_AddBoolToObject(o, "disabled", u->disabled_at != 0);
    return o;
}

static int list(cq_store *s, bool json) {
    cq_err err = {0};
    cq_user_info *users;
    size_t n;
    if (cq_store_user_list(s, &users, &n, &err)) {
        fprintf(stderr, "clauseqa user list: %s\n", err.msg);
        return 1;
    }
    if (json) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, user_json(&users[i]));
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "users", a);
        cq_json_print_line(o, stdout);
    } else {
        printf("%-5s %-24s %-7s %-30s %s\n", "id", "name", "role", "kbs", "last sign-in");
        for (size_t i = 0; i < n; i++) {
            char when[32];
            cq_cli_format_time(users[i].last_login_at, when, sizeof when);
            printf("%-5lld %-24s %-7s %-30s %s%s\n", (long long)users[i].id, users[i].name,
                   cq_key_role_name(users[i].role), users[i].kb[0] ? users[i].kb : "-", when,
                   users[i].kb_gone ? " (its KBs were deleted)" : "");
        }
    }
    free(users);
    return 0;
}

int cq_cmd_user(int argc, char **argv) {
    static const char *const named_actions[] = {"add", "passwd", "set", "remove", "disable", "enable", NULL};
    cq_cli_principal_args a;
    /* the grant is checked before the password is asked for */
    int parsed = cq_cli_principal_parse(argc, argv, "user", "add, list, passwd, set, disable, enable or remove",
                                        named_actions, NULL, cq_user_name_valid, usage, &a);
    if (parsed >= 0) return parsed;
    const char *action = a.action, *name = a.name, *kbs = a.kbs;
    cq_key_role r = a.role;
    bool json = a.json;
    char password[CQ_PASSWORD_MAX_BYTES + 2] = "";
    if ((!strcmp(action, "add") || !strcmp(action, "passwd")) && !read_password(action, password, sizeof password))
        return 1;
    cq_store *s = cq_cli_open_store(cq_cli_data_dir());
    if (!s) return 1;
    cq_err err = {0};
    int status = 0;
    if (!strcmp(action, "list")) {
        status = list(s, json);
    } else if (!strcmp(action, "add")) {
        cq_user_info u;
        if (cq_store_user_add(s, name, password, r, kbs[0] ? kbs : NULL, &u, &err)) {
            fprintf(stderr, "clauseqa user add: %s; nothing changed\n", err.msg);
            status = 1;
        } else {
            char target[96];
            snprintf(target, sizeof target, "user %s (%s)", u.name, cq_key_role_name(u.role));
            cq_cli_audit(s, "user_add", u.kb, target);
            if (json)
                cq_json_print_line(user_json(&u), stdout);
            else
                fprintf(stderr, "user %s added (%s%s%s); they sign in on the page\n", u.name,
                        cq_key_role_name(u.role), u.kb[0] ? " of " : "", u.kb);
        }
    } else if (!strcmp(action, "passwd")) {
        if (cq_store_user_passwd(s, name, password, &err)) {
            fprintf(stderr, "clauseqa user passwd: %s; nothing changed\n", err.msg);
            status = 1;
        } else {
            cli_audit_user(s, "user_passwd", NULL, name);
            fprintf(stderr, "password of %s changed; their sessions have ended\n", name);
        }
    } else if (!strcmp(action, "set")) {
        if (cq_store_user_grant(s, name, r, kbs[0] ? kbs : NULL, &err)) {
            fprintf(stderr, "clauseqa user set: %s; nothing changed\n", err.msg);
            status = 1;
        } else {
            char target[96];
            snprintf(target, sizeof target, "user %s (%s)", name, cq_key_role_name(r));
            cq_cli_audit(s, "user_set", kbs, target);
            fprintf(stderr, "%s is now %s%s%s\n", name, cq_key_role_name(r), kbs[0] ? " of " : "", kbs);
        }
    } else if (!strcmp(action, "disable") || !strcmp(action, "enable")) {
        bool off = !strcmp(action, "disable");
        if (cq_store_user_disable(s, name, off, &err)) {
            fprintf(stderr, "clauseqa user %s: %s; nothing changed\n", action, err.msg);
            status = 1;
        } else {
            cli_audit_user(s, off ? "user_disable" : "user_enable", NULL, name);
            fprintf(stderr, off ? "user %s disabled; their sessions have ended\n" : "user %s may sign in again\n", name);
        }
    } else {
        if (cq_store_user_remove(s, name, &err)) {
            fprintf(stderr, "clauseqa user remove: %s\n", err.msg);
            status = 1;
        } else {
            cli_audit_user(s, "user_remove", NULL, name);
            fprintf(stderr, "user %s removed; their sessions have ended\n", name);
        }
    }
    memset(password, 0, sizeof password);
    cq_store_close(s);
    return status;
}
