/* index/keys_pg: API keys on PostgreSQL against a throwaway cluster (tests/pg/cluster.sh) — the same semantics as
 * the SQLite store's (index/keys.h, tests/unit/test_index_keys.c): only the secret's hash stored, roles and KBs
 * validated, checks, last use at most once a minute, revocation, and authentication that stays required. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/sha256.h"
#include "index/keys.h"
#include "index/keys_pg.h"
#include "index/store.h"
#include "index/store_pg.h"
#include "pg_fixture.h"

static void test_create_check_revoke(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    char secret[CQ_KEY_SECRET_BYTES];
    cq_key_info k, got;
    int64_t n;
    assert_int_equal(cq_pg_key_count_active(pg, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    assert_int_equal(cq_pg_key_create(pg, "ops", CQ_ROLE_ADMIN, NULL, secret, &k, &err), CQ_OK);
    assert_int_equal(strlen(secret), CQ_KEY_SECRET_BYTES - 1);
    assert_memory_equal(secret, "cq_", 3);
    assert_string_equal(k.name, "ops");
    assert_memory_equal(k.prefix, secret, strlen(k.prefix));
    assert_int_equal(strlen(k.prefix), CQ_KEY_PREFIX_CHARS);
    assert_int_equal(k.role, CQ_ROLE_ADMIN);
    assert_string_equal(k.kb, "");

    /* only the hash is stored */
    char hash[65], sql[160];
    cq_sha256_hex(secret, strlen(secret), hash);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM api_keys WHERE hash = '%s' AND kb IS NULL", hash);
    assert_int_equal(pg_count(pg, sql), 1);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM api_keys WHERE position('%s' in name || prefix || hash) > 0",
             secret);
    assert_int_equal(pg_count(pg, sql), 0);

    assert_int_equal(cq_pg_key_check(pg, secret, &got, &err), CQ_OK);
    assert_int_equal(got.id, k.id);
    assert_string_equal(got.name, "ops");
    assert_int_equal(got.role, CQ_ROLE_ADMIN);
    assert_true(got.last_used_at > 0);
    char wrong[CQ_KEY_SECRET_BYTES];
    memcpy(wrong, secret, sizeof wrong);
    wrong[10] = wrong[10] == 'a' ? 'b' : 'a';
    assert_int_equal(cq_pg_key_check(pg, wrong, &got, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_pg_key_check(pg, "cq_short", &got, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_pg_key_check(pg, "", &got, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_pg_key_check(pg, NULL, &got, &err), CQ_ERR_NOT_FOUND);

    assert_int_equal(cq_pg_key_count_active(pg, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(cq_pg_key_revoke(pg, k.id, &err), CQ_OK);
    assert_int_equal(cq_pg_key_revoke(pg, k.id, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_pg_key_revoke(pg, 999, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_pg_key_check(pg, secret, &got, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_pg_key_count_active(pg, &n, &err), CQ_OK);
    assert_int_equal(n, 0);

    cq_key_info *list;
    size_t count;
    assert_int_equal(cq_pg_key_list(pg, &list, &count, &err), CQ_OK);
    assert_int_equal(count, 1);
    assert_true(list[0].revoked_at > 0);
    assert_true(list[0].last_used_at > 0);
    free(list);
}

static void test_last_use_once_a_minute(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    char secret[CQ_KEY_SECRET_BYTES];
    cq_key_info k, got;
    assert_int_equal(cq_pg_key_create(pg, "r", CQ_ROLE_READER, "合同", secret, &k, &err), CQ_OK);
    assert_int_equal(k.last_used_at, 0);
    assert_int_equal(cq_pg_key_check(pg, secret, &got, &err), CQ_OK);
    assert_string_equal(got.kb, "合同");
    assert_int_equal(got.role, CQ_ROLE_READER);
    int64_t first = got.last_used_at;
    assert_true(first > 0);
    /* within the minute the row is not written again */
    pg_exec(pg, "UPDATE api_keys SET last_used_at = last_used_at - 30");
    assert_int_equal(cq_pg_key_check(pg, secret, &got, &err), CQ_OK);
    assert_int_equal(got.last_used_at, first - 30);
    /* after it, it is */
    pg_exec(pg, "UPDATE api_keys SET last_used_at = last_used_at - 60");
    assert_int_equal(cq_pg_key_check(pg, secret, &got, &err), CQ_OK);
    assert_true(got.last_used_at >= first);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM api_keys WHERE last_used_at >= extract(epoch FROM now()) - 5"),
                     1);
    /* a row another connection holds locked is skipped, not waited for: the check still succeeds at once */
    pg_exec(pg, "UPDATE api_keys SET last_used_at = 0");
    cq_pg *other = pg_connect_again(pg);
    pg_exec(other, "BEGIN");
    pg_exec(other, "SELECT * FROM api_keys FOR UPDATE");
    assert_int_equal(cq_pg_key_check(pg, secret, &got, &err), CQ_OK);
    assert_int_equal(got.last_used_at, 0);
    pg_exec(other, "ROLLBACK");
    cq_pg_close(other);
}

static void test_create_validates(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    char secret[CQ_KEY_SECRET_BYTES];
    cq_key_info k;
    assert_int_equal(cq_pg_key_create(pg, "x", CQ_ROLE_NONE, NULL, secret, &k, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_pg_key_create(pg, "x", CQ_ROLE_ADMIN, "kb", secret, &k, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_pg_key_create(pg, "x", CQ_ROLE_READER, NULL, secret, &k, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_pg_key_create(pg, "x", CQ_ROLE_EDITOR, "../etc", secret, &k, &err), CQ_ERR_INVALID);
    char long_name[80];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    assert_int_equal(cq_pg_key_create(pg, long_name, CQ_ROLE_ADMIN, NULL, secret, &k, &err), CQ_ERR_INVALID);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM api_keys"), 0);
    /* refused keys did not require authentication either */
    bool required = true;
    assert_int_equal(cq_pg_auth_required(pg, &required, NULL, &err), CQ_OK);
    assert_false(required);
    /* no name: the role's */
    assert_int_equal(cq_pg_key_create(pg, "", CQ_ROLE_EDITOR, "*", secret, &k, &err), CQ_OK);
    assert_string_equal(k.name, "editor");
    assert_string_equal(k.kb, "*");
    cq_key_info got;
    assert_int_equal(cq_pg_key_check(pg, secret, &got, &err), CQ_OK);
    assert_true(cq_key_allows(&got, CQ_ROLE_READER, "any"));
    assert_false(cq_key_allows(&got, CQ_ROLE_ADMIN, "any"));
}

static void test_auth_stays_required(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    bool required;
    int64_t since, active;
    assert_int_equal(cq_pg_auth_required(pg, &required, &since, &err), CQ_OK);
    assert_false(required);
    assert_int_equal(since, 0);
    assert_int_equal(cq_pg_auth_set_required(pg, false, &err), CQ_OK); /* as SQLite: nothing written */
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM settings"), 0);

    char secret[CQ_KEY_SECRET_BYTES];
    cq_key_info k;
    assert_int_equal(cq_pg_key_create(pg, "ops", CQ_ROLE_ADMIN, NULL, secret, &k, &err), CQ_OK);
    assert_int_equal(cq_pg_key_revoke(pg, k.id, &err), CQ_OK);
    assert_int_equal(cq_pg_key_count_active(pg, &active, &err), CQ_OK);
    assert_int_equal(active, 0);
    assert_int_equal(cq_pg_auth_required(pg, &required, &since, &err), CQ_OK);
    assert_true(required); /* every key revoked: still closed */
    assert_true(since > 0);
    /* setting it again keeps the time it was set */
    pg_exec(pg, "UPDATE settings SET updated_at = 1000");
    assert_int_equal(cq_pg_auth_set_required(pg, true, &err), CQ_OK);
    assert_int_equal(cq_pg_auth_required(pg, &required, &since, &err), CQ_OK);
    assert_int_equal(since, 1000);

    assert_int_equal(cq_pg_auth_set_required(pg, false, &err), CQ_OK);
    assert_int_equal(cq_pg_auth_required(pg, &required, &since, &err), CQ_OK);
    assert_false(required);
    assert_int_equal(since, 0);
    assert_int_equal(cq_pg_auth_set_required(pg, true, &err), CQ_OK);
    assert_int_equal(cq_pg_auth_required(pg, &required, &since, &err), CQ_OK);
    assert_true(required);
    assert_true(since > 1000);

    /* the key and the setting come together, also inside a caller's transaction */
    assert_int_equal(cq_pg_auth_set_required(pg, false, &err), CQ_OK);
    pg_exec(pg, "BEGIN");
    assert_int_equal(cq_pg_key_create(pg, "r", CQ_ROLE_READER, "*", secret, &k, &err), CQ_OK);
    pg_exec(pg, "ROLLBACK");
    assert_int_equal(cq_pg_auth_required(pg, &required, NULL, &err), CQ_OK);
    assert_false(required);
    assert_int_equal(cq_pg_key_check(pg, secret, &k, &err), CQ_ERR_NOT_FOUND);
}

/* The same keys in both stores list the same (names, prefixes aside: the secrets differ). */
static void test_list_as_sqlite(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    char path[128];
    snprintf(path, sizeof path, "/tmp/cq_test_keys_pg_%d.db", (int)getpid());
    unlink(path);
    cq_store *sq = NULL;
    assert_int_equal(cq_store_open(path, &sq, &err), CQ_OK);
    struct {
        const char *name;
        cq_key_role role;
        const char *kb;
    } keys[] = {{"ops", CQ_ROLE_ADMIN, NULL}, {"", CQ_ROLE_READER, "劳动法"}, {"ed", CQ_ROLE_EDITOR, "*"}};
    char secret[CQ_KEY_SECRET_BYTES];
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(cq_store_key_create(sq, keys[i].name, keys[i].role, keys[i].kb, secret, NULL, &err), CQ_OK);
        assert_int_equal(cq_pg_key_create(pg, keys[i].name, keys[i].role, keys[i].kb, secret, NULL, &err), CQ_OK);
    }
    assert_int_equal(cq_store_key_revoke(sq, 2, &err), CQ_OK);
    assert_int_equal(cq_pg_key_revoke(pg, 2, &err), CQ_OK);
    cq_key_info *a, *b;
    size_t na, nb;
    assert_int_equal(cq_store_key_list(sq, &a, &na, &err), CQ_OK);
    assert_int_equal(cq_pg_key_list(pg, &b, &nb, &err), CQ_OK);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        assert_int_equal(a[i].id, b[i].id);
        assert_string_equal(a[i].name, b[i].name);
        assert_int_equal(a[i].role, b[i].role);
        assert_string_equal(a[i].kb, b[i].kb);
        assert_int_equal(a[i].revoked_at != 0, b[i].revoked_at != 0);
        assert_int_equal(a[i].last_used_at, b[i].last_used_at);
        assert_int_equal(strlen(a[i].prefix), strlen(b[i].prefix));
    }
    free(a);
    free(b);
    int64_t n_sq, n_pg;
    assert_int_equal(cq_store_key_count_active(sq, &n_sq, &err), CQ_OK);
    assert_int_equal(cq_pg_key_count_active(pg, &n_pg, &err), CQ_OK);
    assert_int_equal(n_sq, 2);
    assert_int_equal(n_pg, 2);
    cq_store_close(sq);
    unlink(path);
}

int main(void) {
    PG_FIXTURE_REQUIRE_SERVER();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_check_revoke, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_last_use_once_a_minute, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_create_validates, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_auth_stays_required, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_list_as_sqlite, pg_setup, pg_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
