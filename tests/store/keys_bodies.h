/* store/keys.h's conformance bodies (tests/store/conformance.h): the same on SQLite and PostgreSQL. */
#ifndef CQ_TESTS_STORE_KEYS_BODIES_H
#define CQ_TESTS_STORE_KEYS_BODIES_H

#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "core/clock.h"
#include "core/sha256.h"
#include "store/keys.h"
#include "tests/store/conformance.h"

/* The id of the one KB subject_id's grant names (0: none; fails when several). */
CONF_MAYBE_UNUSED static int64_t conf_grant_kb(cq_store *s, const char *subject, int64_t id) {
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM kb_grants WHERE subject = '%s' AND subject_id = %lld", subject,
             (long long)id);
    int64_t n = conf_count(s, sql);
    if (n == 0) return 0;
    assert_int_equal(n, 1);
    snprintf(sql, sizeof sql, "SELECT kb_id FROM kb_grants WHERE subject = '%s' AND subject_id = %lld", subject,
             (long long)id);
    return conf_count(s, sql);
}

static void conf_keys_create_check_revoke(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    char secret[CQ_KEY_SECRET_BYTES];
    cq_key_info k, got;
    int64_t n;
    assert_int_equal(cq_store_key_count_active(s, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    CONF_EXPECT(cq_store_key_create(s, "ops", CQ_ROLE_ADMIN, NULL, secret, &k, &err), CQ_OK);
    assert_int_equal(strlen(secret), CQ_KEY_SECRET_BYTES - 1);
    assert_memory_equal(secret, "cq_", 3);
    assert_string_equal(k.name, "ops");
    assert_memory_equal(k.prefix, secret, strlen(k.prefix));
    assert_int_equal(strlen(k.prefix), CQ_KEY_PREFIX_CHARS);
    assert_int_equal(k.role, CQ_ROLE_ADMIN);
    assert_string_equal(k.kb, "");

    /* only the hash is stored */
    char hash[65], sql[200];
    cq_sha256_hex(secret, strlen(secret), hash);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM api_keys WHERE hash = '%s' AND kb IS NULL AND kb_id IS NULL", hash);
    assert_int_equal(conf_count(s, sql), 1);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM api_keys WHERE name || prefix || hash LIKE '%%%s%%'", secret);
    assert_int_equal(conf_count(s, sql), 0);

    assert_int_equal(cq_store_key_check(s, secret, &got, &err), CQ_OK);
    assert_int_equal(got.id, k.id);
    assert_string_equal(got.name, "ops");
    assert_int_equal(got.role, CQ_ROLE_ADMIN);
    assert_false(got.kb_gone);
    assert_true(got.last_used_at > 0);
    char wrong[CQ_KEY_SECRET_BYTES];
    memcpy(wrong, secret, sizeof wrong);
    wrong[10] = wrong[10] == 'a' ? 'b' : 'a';
    assert_int_equal(cq_store_key_check(s, wrong, &got, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_key_check(s, "cq_short", &got, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_key_check(s, "", &got, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_key_check(s, NULL, &got, &err), CQ_ERR_NOT_FOUND);

    assert_int_equal(cq_store_key_count_active(s, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(cq_store_key_revoke(s, k.id, &err), CQ_OK);
    assert_int_equal(cq_store_key_revoke(s, k.id, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "revoked already"));
    assert_int_equal(cq_store_key_revoke(s, 999, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_key_check(s, secret, &got, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_key_count_active(s, &n, &err), CQ_OK);
    assert_int_equal(n, 0);

    cq_key_info *list;
    size_t count;
    assert_int_equal(cq_store_key_list(s, &list, &count, &err), CQ_OK);
    assert_int_equal(count, 1);
    assert_true(list[0].revoked_at > 0);
    assert_true(list[0].last_used_at > 0);
    free(list);
}

static void conf_keys_create_validates(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    char secret[CQ_KEY_SECRET_BYTES], other[CQ_KEY_SECRET_BYTES];
    cq_key_info k;
    int64_t kb;
    assert_int_equal(cq_store_kb_create(s, "kb", &kb, &err), CQ_OK);
    CONF_EXPECT(cq_store_key_create(s, "x", CQ_ROLE_NONE, NULL, secret, &k, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_key_create(s, "x", CQ_ROLE_ADMIN, "kb", secret, &k, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_key_create(s, "x", CQ_ROLE_READER, NULL, secret, &k, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_key_create(s, "x", CQ_ROLE_EDITOR, "../etc", secret, &k, &err), CQ_ERR_INVALID);
    char long_name[80];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    CONF_EXPECT(cq_store_key_create(s, long_name, CQ_ROLE_ADMIN, NULL, secret, &k, &err), CQ_ERR_INVALID);
    /* a KB that does not exist (issue 29 item 10): refused, with what to do */
    CONF_EXPECT(cq_store_key_create(s, "x", CQ_ROLE_READER, "does-not-exist", secret, &k, &err), CQ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no knowledge base named 'does-not-exist'"));
    assert_int_equal(conf_count(s, "SELECT count(*) FROM api_keys"), 0);
    /* refused keys did not require authentication either */
    bool required = true;
    assert_int_equal(cq_store_auth_required(s, &required, NULL, &err), CQ_OK);
    assert_false(required);
    /* no name: the role's; two keys, two secrets */
    CONF_EXPECT(cq_store_key_create(s, "", CQ_ROLE_EDITOR, "*", secret, &k, &err), CQ_OK);
    assert_string_equal(k.name, "editor");
    assert_string_equal(k.kb, "*");
    assert_int_equal(conf_count(s, "SELECT count(*) FROM kb_grants"), 0); /* "*" needs no row */
    CONF_EXPECT(cq_store_key_create(s, NULL, CQ_ROLE_READER, "kb", other, &k, &err), CQ_OK);
    assert_int_equal(conf_grant_kb(s, "key", k.id), kb);
    assert_string_not_equal(secret, other);
    cq_key_info got;
    assert_int_equal(cq_store_key_check(s, secret, &got, &err), CQ_OK);
    assert_true(cq_key_allows(&got, CQ_ROLE_READER, "any"));
    assert_false(cq_key_allows(&got, CQ_ROLE_ADMIN, "any"));
}

/* Issue 29 item 10: a grant is bound to the KB's id. Delete KB B, create a new B: the old keys of B reach nothing,
 * a key made for the new B reaches it, and keys for every KB are not affected. */
static void conf_keys_bound_to_kb_id(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t b1, b2, other;
    char old_secret[CQ_KEY_SECRET_BYTES], new_secret[CQ_KEY_SECRET_BYTES], every_secret[CQ_KEY_SECRET_BYTES];
    cq_key_info k, got;
    assert_int_equal(cq_store_kb_create(s, "B", &b1, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "other", &other, &err), CQ_OK);
    CONF_EXPECT(cq_store_key_create(s, "old", CQ_ROLE_EDITOR, "B", old_secret, &k, &err), CQ_OK);
    assert_int_equal(conf_grant_kb(s, "key", k.id), b1);
    CONF_EXPECT(cq_store_key_create(s, "every", CQ_ROLE_READER, "*", every_secret, &k, &err), CQ_OK);
    assert_int_equal(cq_store_key_check(s, old_secret, &got, &err), CQ_OK);
    assert_string_equal(got.kb, "B");
    assert_false(got.kb_gone);
    assert_true(cq_key_allows(&got, CQ_ROLE_EDITOR, "B"));
    assert_false(cq_key_allows(&got, CQ_ROLE_READER, "other"));

    assert_int_equal(cq_store_kb_delete(s, b1, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "B", &b2, &err), CQ_OK);
    assert_true(b2 != b1);
    assert_int_equal(cq_store_key_check(s, old_secret, &got, &err), CQ_OK); /* the key is still valid ... */
    assert_true(got.kb_gone);                                                /* ... for a KB that is gone */
    assert_string_equal(got.kb, "");
    assert_false(cq_key_allows(&got, CQ_ROLE_READER, "B"));
    assert_false(cq_key_allows(&got, CQ_ROLE_READER, ""));
    assert_false(cq_key_allows(&got, CQ_ROLE_READER, "other"));
    /* what the HTTP layer rebuilds from the principal: the name alone, "" for a gone KB */
    cq_key_info rebuilt = {.role = got.role};
    snprintf(rebuilt.kb, sizeof rebuilt.kb, "%s", got.kb);
    assert_false(cq_key_allows(&rebuilt, CQ_ROLE_READER, "B"));

    CONF_EXPECT(cq_store_key_create(s, "new", CQ_ROLE_READER, "B", new_secret, &k, &err), CQ_OK);
    assert_int_equal(conf_grant_kb(s, "key", k.id), b2);
    assert_int_equal(cq_store_key_check(s, new_secret, &got, &err), CQ_OK);
    assert_true(cq_key_allows(&got, CQ_ROLE_READER, "B"));
    assert_int_equal(cq_store_key_check(s, every_secret, &got, &err), CQ_OK);
    assert_true(cq_key_allows(&got, CQ_ROLE_READER, "B"));

    /* the list still names the old key's KB as it was, flagged gone */
    cq_key_info *list;
    size_t n;
    assert_int_equal(cq_store_key_list(s, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 3);
    assert_string_equal(list[0].kb, "B");
    assert_true(list[0].kb_gone);
    assert_false(list[1].kb_gone);
    assert_false(list[2].kb_gone);
    free(list);

    /* keys made before grants had ids: bound by the migrations to the KB of their name then; one whose KB did not
     * exist has no grant row and reaches nothing, even once a KB of that name is made */
    conf_sql(s, "DELETE FROM kb_grants WHERE subject_id = (SELECT id FROM api_keys WHERE name = 'new')");
    conf_sql(s, "UPDATE api_keys SET kb = 'later' WHERE name = 'new'");
    assert_int_equal(cq_store_kb_create(s, "later", &b1, &err), CQ_OK);
    assert_int_equal(cq_store_key_check(s, new_secret, &got, &err), CQ_OK);
    assert_true(got.kb_gone);
    assert_false(cq_key_allows(&got, CQ_ROLE_READER, "later"));
}

/* Issue 30: a key may cover several KBs (`keys create --kb A --kb B` kept only B). Each is bound by id; one deleted
 * leaves the others; every one deleted, the key reaches nothing. A name given twice counts once; "*" does not mix
 * with names; a missing KB among them refuses the whole key. */
static void conf_keys_several_kbs(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t a, b, c;
    assert_int_equal(cq_store_kb_create(s, "A", &a, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "合同", &b, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "C", &c, &err), CQ_OK);
    char secret[CQ_KEY_SECRET_BYTES];
    cq_key_info k, got;
    CONF_EXPECT(cq_store_key_create(s, "two", CQ_ROLE_EDITOR, "A,合同,A", secret, &k, &err), CQ_OK);
    assert_string_equal(k.kb, "A,合同");
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM kb_grants WHERE subject = 'key' AND subject_id = %lld",
             (long long)k.id);
    assert_int_equal(conf_count(s, sql), 2);
    assert_int_equal(cq_store_key_check(s, secret, &got, &err), CQ_OK);
    assert_true(cq_key_allows(&got, CQ_ROLE_EDITOR, "A"));
    assert_true(cq_key_allows(&got, CQ_ROLE_EDITOR, "合同"));
    assert_false(cq_key_allows(&got, CQ_ROLE_READER, "C"));
    assert_false(cq_key_allows(&got, CQ_ROLE_READER, "A,合同")); /* a name, never a list */
    assert_false(cq_key_allows(&got, CQ_ROLE_ADMIN, NULL));

    /* refused, and nothing made: a missing KB among them, "*" with names, too many */
    char refused[CQ_KEY_SECRET_BYTES];
    CONF_EXPECT(cq_store_key_create(s, "x", CQ_ROLE_READER, "A,missing", refused, &k, &err), CQ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no knowledge base named 'missing'"));
    CONF_EXPECT(cq_store_key_create(s, "x", CQ_ROLE_READER, "A,*", refused, &k, &err), CQ_ERR_INVALID);
    char many[CQ_GRANT_BYTES] = "";
    for (int i = 0; i <= CQ_GRANT_MAX_KBS; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%skb%d", i ? "," : "", i);
    CONF_EXPECT(cq_store_key_create(s, "x", CQ_ROLE_READER, many, refused, &k, &err), CQ_ERR_INVALID);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM api_keys"), 1);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM kb_grants"), 2);

    /* one KB deleted: the other stays reachable, and the list shows both as granted */
    assert_int_equal(cq_store_kb_delete(s, a, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "A", &a, &err), CQ_OK); /* a new A is not the key's */
    assert_int_equal(cq_store_key_check(s, secret, &got, &err), CQ_OK);
    assert_false(got.kb_gone);
    assert_string_equal(got.kb, "合同");
    assert_false(cq_key_allows(&got, CQ_ROLE_READER, "A"));
    assert_true(cq_key_allows(&got, CQ_ROLE_EDITOR, "合同"));
    cq_key_info *list;
    size_t n;
    assert_int_equal(cq_store_key_list(s, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].kb, "A,合同");
    assert_false(list[0].kb_gone);
    free(list);
    /* every KB deleted: nothing */
    assert_int_equal(cq_store_kb_delete(s, b, &err), CQ_OK);
    assert_int_equal(cq_store_key_check(s, secret, &got, &err), CQ_OK);
    assert_true(got.kb_gone);
    assert_string_equal(got.kb, "");
    assert_false(cq_key_allows(&got, CQ_ROLE_READER, "合同"));
    assert_false(cq_key_allows(&got, CQ_ROLE_READER, "C"));
}

static void conf_keys_last_use_once_a_minute(void **state) {
    cq_store *s = conf_store(state);
    int64_t kb;
    cq_err err = {0};
    assert_int_equal(cq_store_kb_create(s, "合同", &kb, &err), CQ_OK);
    char secret[CQ_KEY_SECRET_BYTES];
    cq_key_info k, got;
    CONF_EXPECT(cq_store_key_create(s, "r", CQ_ROLE_READER, "合同", secret, &k, &err), CQ_OK);
    assert_int_equal(k.last_used_at, 0);
    assert_int_equal(cq_store_key_check(s, secret, &got, &err), CQ_OK);
    assert_string_equal(got.kb, "合同");
    assert_int_equal(got.role, CQ_ROLE_READER);
    int64_t first = got.last_used_at;
    assert_true(first > 0);
    /* within the minute the row is not written again */
    conf_sql(s, "UPDATE api_keys SET last_used_at = last_used_at - 30");
    assert_int_equal(cq_store_key_check(s, secret, &got, &err), CQ_OK);
    assert_int_equal(got.last_used_at, first - 30);
    /* after it, it is */
    conf_sql(s, "UPDATE api_keys SET last_used_at = last_used_at - 60");
    assert_int_equal(cq_store_key_check(s, secret, &got, &err), CQ_OK);
    assert_true(got.last_used_at >= first);
    char sql[120];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM api_keys WHERE last_used_at >= %lld", (long long)time(NULL) - 5);
    assert_int_equal(conf_count(s, sql), 1);
    /* a row (SQLite: a database) another connection is writing is skipped, not waited for: the check succeeds at
     * once, the use unrecorded */
    conf_sql(s, "UPDATE api_keys SET last_used_at = 0");
    cq_store *other = conf_reopen(state);
    assert_int_equal(cq_store_begin(other, &err), CQ_OK);
    conf_sql(other, "UPDATE api_keys SET name = 'busy'");
    double t0 = cq_clock_seconds();
    assert_int_equal(cq_store_key_check(s, secret, &got, &err), CQ_OK);
    assert_true(cq_clock_seconds() - t0 < 2.0);
    assert_int_equal(got.last_used_at, 0);
    cq_store_rollback(other);
    cq_store_close(other);
    /* and the connection waits for locks again afterwards (SQLite's busy timeout is back) */
    assert_int_equal(cq_store_key_check(s, secret, &got, &err), CQ_OK);
    assert_true(got.last_used_at > 0);
}

static void conf_keys_auth_stays_required(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    bool required, open;
    int64_t since, active;
    assert_int_equal(cq_store_auth_open(s, &open, &err), CQ_OK);
    assert_true(open);
    assert_int_equal(cq_store_auth_required(s, &required, &since, &err), CQ_OK);
    assert_false(required);
    assert_int_equal(since, 0);
    assert_int_equal(cq_store_auth_set_required(s, false, &err), CQ_OK); /* nothing written */
    assert_int_equal(conf_count(s, "SELECT count(*) FROM settings"), 0);

    char secret[CQ_KEY_SECRET_BYTES];
    cq_key_info k;
    CONF_EXPECT(cq_store_key_create(s, "ops", CQ_ROLE_ADMIN, NULL, secret, &k, &err), CQ_OK);
    assert_int_equal(cq_store_auth_open(s, &open, &err), CQ_OK);
    assert_false(open);
    assert_int_equal(cq_store_key_revoke(s, k.id, &err), CQ_OK);
    assert_int_equal(cq_store_key_count_active(s, &active, &err), CQ_OK);
    assert_int_equal(active, 0);
    assert_int_equal(cq_store_auth_open(s, &open, &err), CQ_OK);
    assert_false(open); /* every key revoked: still closed */
    assert_int_equal(cq_store_auth_required(s, &required, &since, &err), CQ_OK);
    assert_true(required);
    assert_true(since > 0);
    /* setting it again keeps the time it was set */
    conf_sql(s, "UPDATE settings SET updated_at = 1000");
    assert_int_equal(cq_store_auth_set_required(s, true, &err), CQ_OK);
    assert_int_equal(cq_store_auth_required(s, &required, &since, &err), CQ_OK);
    assert_int_equal(since, 1000);

    assert_int_equal(cq_store_auth_set_required(s, false, &err), CQ_OK);
    assert_int_equal(cq_store_auth_required(s, &required, &since, &err), CQ_OK);
    assert_false(required);
    assert_int_equal(since, 0);
    assert_int_equal(cq_store_auth_open(s, &open, &err), CQ_OK);
    assert_true(open);
    assert_int_equal(cq_store_auth_set_required(s, true, &err), CQ_OK); /* keys required before any exists */
    assert_int_equal(cq_store_auth_required(s, &required, &since, &err), CQ_OK);
    assert_true(required);
    assert_true(since > 1000);

    /* the key and the setting come together, also inside a caller's transaction */
    assert_int_equal(cq_store_auth_set_required(s, false, &err), CQ_OK);
    assert_int_equal(cq_store_begin(s, &err), CQ_OK);
    CONF_EXPECT(cq_store_key_create(s, "r", CQ_ROLE_READER, "*", secret, &k, &err), CQ_OK);
    cq_store_rollback(s);
    assert_int_equal(cq_store_auth_required(s, &required, NULL, &err), CQ_OK);
    assert_false(required);
    assert_int_equal(cq_store_key_check(s, secret, &k, &err), CQ_ERR_NOT_FOUND);
}

typedef struct {
    cq_store *s;
    int64_t id;
    pthread_barrier_t *go;
    cq_status rc;
} conf_revoker;

static void *conf_revoke(void *arg) {
    conf_revoker *r = arg;
    cq_err err = {0};
    pthread_barrier_wait(r->go);
    r->rc = cq_store_key_revoke(r->s, r->id, &err);
    return NULL;
}

/* Two admins revoking one key at once (two connections): one succeeds, the other is told it is revoked already —
 * one guarded UPDATE on both stores (SQLite's was a SELECT then an UPDATE). */
static void conf_keys_revoke_race(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    char secret[CQ_KEY_SECRET_BYTES];
    cq_key_info k;
    for (int round = 0; round < 10; round++) {
        CONF_EXPECT(cq_store_key_create(s, "r", CQ_ROLE_READER, "*", secret, &k, &err), CQ_OK);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        conf_revoker r[2] = {{s, k.id, &go, CQ_OK}, {conf_reopen(state), k.id, &go, CQ_OK}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, conf_revoke, &r[i]), 0);
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        cq_store_close(r[1].s);
        pthread_barrier_destroy(&go);
        assert_true((r[0].rc == CQ_OK && r[1].rc == CQ_ERR_INVALID) || (r[0].rc == CQ_ERR_INVALID && r[1].rc == CQ_OK));
    }
}

#endif
