/* LDAP / Active Directory sign-in (issue 30; docs/OPERATIONS.md "LDAP / Active Directory sign-in").
 *
 * With an [ldap] url configured, a sign-in of a name that is no local account binds to the directory as the user
 * (simple bind; ldap:// with or without StartTLS, or ldaps://), reads the user's directory groups (the groups whose
 * member is the user, by group-filter under base, and the user entry's memberOf) and maps them to our groups
 * (store/groups.h) by group-map; our groups carry the roles and KBs. The user is kept as a directory user
 * (store/users.h cq_store_user_directory: no password here) whose 'ldap' memberships are replaced at each sign-in.
 *
 * Every step runs under timeout-s (connect and each operation): a directory that is down or does not answer is a
 * clear BUSY ("the directory … cannot be reached"), never a hang. An empty password is refused before any bind (an
 * LDAP simple bind with an empty password is an anonymous bind, which succeeds).
 *
 * clauseqa.conf, section [ldap] (each key also as $CLAUSEQA_LDAP_<KEY> with '-' as '_', upper case; the
 * environment wins):
 *   url          ldap://dc.example.com, ldaps://dc.example.com:636  (no url: LDAP is off)
 *   starttls     true: StartTLS on an ldap:// url (refused when the server cannot)
 *   ca-file      PEM file of the CA that signed the directory's certificate (default: the system's)
 *   user-dn      the DN to bind as, %u the user name: "uid=%u,ou=people,dc=example,dc=com", or for Active
 *                Directory "%u@example.com" (a user principal name) with user-filter to find the entry
 *   user-filter  optional: finds the user's entry under base after the bind ("(sAMAccountName=%u)"), for its DN
 *                and memberOf
 *   base         where groups (and users, with user-filter) are searched
 *   group-filter default "(|(member=%d)(uniqueMember=%d)(memberUid=%u))": %d the user's DN, %u the name
 *   group-map    "DIRECTORY-GROUP => GROUP | …": a directory group (its DN, or its cn) to one of our groups ('|'
 *                between entries: in clauseqa.conf a ';' after a space starts a comment)
 *   timeout-s    seconds for connecting and for each operation (default 5, 1-60) */
#ifndef CQ_APP_LDAP_AUTH_H
#define CQ_APP_LDAP_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "app/config.h"
#include "core/error.h"

#define CQ_LDAP_MAX_MAP 64
#define CQ_LDAP_MAX_GROUPS 64 /* our groups one sign-in may map to */
#define CQ_LDAP_DEFAULT_TIMEOUT_S 5

typedef struct cq_ldap_config_s {
    char url[512];
    bool starttls;
    char ca_file[1024];
    char user_dn[512];
    char user_filter[512];
    char base[512];
    char group_filter[512];
    int timeout_s;
    struct {
        char directory[512]; /* a DN or a cn, compared without regard to case */
        char group[64];      /* ours */
    } map[CQ_LDAP_MAX_MAP];
    size_t n_map;
} cq_ldap_config;

/* Reads [ldap] of file (may be NULL) and $CLAUSEQA_LDAP_*: INVALID (naming the key) for a value that cannot be
 * used. out->url[0] == 0: LDAP is off. */
cq_status cq_ldap_config_read(const cq_config *file, cq_ldap_config *out, cq_err *err);

/* Parses group-map text into c->map: INVALID for an entry without "=>" or too many entries. */
cq_status cq_ldap_parse_map(const char *text, cq_ldap_config *c, cq_err *err);

/* Signs user in against the directory: NOT_FOUND ("wrong user name or password") for a wrong password, an unknown
 * user or an empty password; BUSY (retry_after_s set) when the directory cannot be reached or does not answer in
 * time; INVALID for a name that cannot be a directory user (cq_user_name_valid). On success groups gets our groups
 * the user's directory groups map to (each once, at most cap), *n how many. */
cq_status cq_ldap_sign_in(const cq_ldap_config *c, const char *user, const char *password, char groups[][64],
                          size_t cap, size_t *n, cq_err *err);

#endif
