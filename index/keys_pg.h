/* API keys and the settings row that requires authentication, on PostgreSQL (issue 20): index/keys.h's semantics
 * over the tables of store_pg.c's migration 2 (api_keys, settings; the SQLite store's columns). Validation, the
 * secret and its hash are keys.c's, shared by both stores (cq_key_prepare, cq_key_secret_hash). */
#ifndef CQ_INDEX_KEYS_PG_H
#define CQ_INDEX_KEYS_PG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "index/keys.h"
#include "index/store_pg.h"

#define CQ_KEY_PREFIX_CHARS 10 /* "cq_" + 7 hex digits */

/* keys.c, for both stores: checks a new key's role, KB and name (*name "" or NULL becomes the role's name), draws
 * its secret and gives its SHA-256 (hex) and prefix. */
cq_status cq_key_prepare(const char **name, cq_key_role role, const char *kb, char secret[CQ_KEY_SECRET_BYTES],
                         char hash[65], char prefix[CQ_KEY_PREFIX_CHARS + 1], cq_err *err);
/* The SHA-256 (hex) of a secret of the right shape; false for anything that cannot be a key. */
bool cq_key_secret_hash(const char *secret, char hash[65]);

cq_status cq_pg_key_create(cq_pg *pg, const char *name, cq_key_role role, const char *kb,
                           char secret[CQ_KEY_SECRET_BYTES], cq_key_info *info, cq_err *err);
cq_status cq_pg_key_list(cq_pg *pg, cq_key_info **out, size_t *n, cq_err *err);
cq_status cq_pg_key_revoke(cq_pg *pg, int64_t id, cq_err *err);
cq_status cq_pg_key_check(cq_pg *pg, const char *secret, cq_key_info *out, cq_err *err);
cq_status cq_pg_key_count_active(cq_pg *pg, int64_t *n, cq_err *err);
cq_status cq_pg_auth_required(cq_pg *pg, bool *required, int64_t *since, cq_err *err);
cq_status cq_pg_auth_set_required(cq_pg *pg, bool required, cq_err *err);

#endif
