/* store/users.h's conformance bodies (tests/store/conformance.h): the same on SQLite and PostgreSQL. */
#ifndef CQ_TESTS_STORE_USERS_BODIES_H
#define CQ_TESTS_STORE_USERS_BODIES_H

#include <stdio.h>
#include <time.h>

#include "core/clock.h"
#include "core/sha256.h"
#include "store/conversations.h"
#include "store/keys.h"
#include "store/users.h"
#include "tests/store/conformance.h"

/* Add, list, verify, and what is refused with nothing changed: a short or empty password, a taken name, a missing
 * KB, a bad role or name. Only an argon2id hash is stored. */
static void conf_users_add_verify(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t laws, contracts;
    assert_int_equal(cq_store_kb_create(s, "laws", &laws, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "合同", &contracts, &err), CQ_OK);
    bool open = false;
    assert_int_equal(cq_store_auth_open(s, &open, &err), CQ_OK);
    assert_true(open);

    cq_user_info u, got;
    CONF_EXPECT(cq_store_user_add(s, "alice", "correct horse", CQ_ROLE_EDITOR, "laws,合同", &u, &err), CQ_OK);
    assert_true(u.id > 0);
    assert_string_equal(u.kb, "laws,合同");
    assert_int_equal(conf_count(s, "SELECT count(*) FROM users WHERE password_hash LIKE '$argon2id$v=19$m=19456,t=2,p=1$%'"),
                     1);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM users WHERE password_hash LIKE '%correct horse%'"), 0);
    /* a user turns authentication on, as a key does */
    assert_int_equal(cq_store_auth_open(s, &open, &err), CQ_OK);
    assert_false(open);
    bool required = false;
    assert_int_equal(cq_store_auth_required(s, &required, NULL, &err), CQ_OK);
    assert_true(required);

    double t0 = cq_clock_seconds();
    CONF_EXPECT(cq_store_user_verify(s, "alice", "correct horse", &got, &err), CQ_OK);
    double hash_s = cq_clock_seconds() - t0;
    assert_true(hash_s < 2.0); /* 79 ms on the loaded dev box; sanitizers and a busy CI stay far below this */
    assert_int_equal(got.id, u.id);
    assert_int_equal(got.role, CQ_ROLE_EDITOR);
    assert_string_equal(got.kb, "laws,合同");
    assert_true(got.last_login_at > 0);

    /* a wrong password and an unknown name: one answer, nothing recorded */
    conf_sql(s, "UPDATE users SET last_login_at = NULL");
    CONF_EXPECT(cq_store_user_verify(s, "alice", "wrong horse!", &got, &err), CQ_ERR_NOT_FOUND);
    char wrong[sizeof err.msg];
    snprintf(wrong, sizeof wrong, "%s", err.msg);
    assert_string_equal(wrong, "wrong user name or password");
    assert_int_equal(got.id, 0);
    CONF_EXPECT(cq_store_user_verify(s, "nobody", "correct horse", &got, &err), CQ_ERR_NOT_FOUND);
    assert_string_equal(err.msg, wrong);
    CONF_EXPECT(cq_store_user_verify(s, "bad name!", "correct horse", &got, &err), CQ_ERR_NOT_FOUND);
    assert_string_equal(err.msg, wrong);
    CONF_EXPECT(cq_store_user_verify(s, "alice", "", &got, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_user_verify(s, "alice", NULL, &got, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM users WHERE last_login_at IS NOT NULL"), 0);

    /* refused, nothing changed */
    CONF_EXPECT(cq_store_user_add(s, "bob", "", CQ_ROLE_READER, "laws", &u, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "empty"));
    CONF_EXPECT(cq_store_user_add(s, "bob", "short", CQ_ROLE_READER, "laws", &u, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "too short"));
    CONF_EXPECT(cq_store_user_add(s, "bob", "七个汉字的密码", CQ_ROLE_READER, "laws", &u, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_user_add(s, "bob", "line\nbreak!", CQ_ROLE_READER, "laws", &u, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_user_add(s, "alice", "another password", CQ_ROLE_READER, "laws", &u, &err), CQ_ERR_EXISTS);
    assert_non_null(strstr(err.msg, "a user named 'alice' exists already"));
    CONF_EXPECT(cq_store_user_add(s, "bob", "a fine password", CQ_ROLE_READER, "laws,missing", &u, &err),
                CQ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no knowledge base named 'missing'"));
    CONF_EXPECT(cq_store_user_add(s, "bob", "a fine password", CQ_ROLE_READER, NULL, &u, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_user_add(s, "bob", "a fine password", CQ_ROLE_ADMIN, "laws", &u, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_user_add(s, "bob", "a fine password", CQ_ROLE_NONE, "laws", &u, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_user_add(s, "bo b", "a fine password", CQ_ROLE_READER, "laws", &u, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_user_add(s, "", "a fine password", CQ_ROLE_READER, "laws", &u, &err), CQ_ERR_INVALID);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM users"), 1);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM kb_grants WHERE subject = 'user'"), 2);

    /* a Chinese name, an admin, every KB; the list, oldest first */
    CONF_EXPECT(cq_store_user_add(s, "王芳", "八个汉字组成密码", CQ_ROLE_ADMIN, NULL, &u, &err), CQ_OK);
    CONF_EXPECT(cq_store_user_add(s, "r@office", "reader password", CQ_ROLE_READER, "*", &u, &err), CQ_OK);
    cq_user_info *list;
    size_t n;
    assert_int_equal(cq_store_user_list(s, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 3);
    assert_string_equal(list[0].name, "alice");
    assert_string_equal(list[1].name, "王芳");
    assert_int_equal(list[1].role, CQ_ROLE_ADMIN);
    assert_string_equal(list[1].kb, "");
    assert_string_equal(list[2].kb, "*");
    free(list);
    int64_t count;
    assert_int_equal(cq_store_user_count(s, &count, &err), CQ_OK);
    assert_int_equal(count, 3);
    CONF_EXPECT(cq_store_user_verify(s, "王芳", "八个汉字组成密码", &got, &err), CQ_OK);
    assert_int_equal(got.role, CQ_ROLE_ADMIN);
}

/* Sessions: only the token's hash is kept; check, slide, sign out; a new password or the user's removal ends them;
 * an expired one is refused; the KBs follow a grant's change and a KB's deletion. */
static void conf_users_sessions(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t laws, other;
    assert_int_equal(cq_store_kb_create(s, "laws", &laws, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "other", &other, &err), CQ_OK);
    cq_user_info u, got;
    CONF_EXPECT(cq_store_user_add(s, "alice", "correct horse", CQ_ROLE_READER, "laws", &u, &err), CQ_OK);
    char token[CQ_SESSION_TOKEN_BYTES], second[CQ_SESSION_TOKEN_BYTES];
    int64_t sid = 0, sid2 = 0, checked = 0;
    CONF_EXPECT(cq_store_session_create(s, u.id, 3600, token, &sid, &err), CQ_OK);
    assert_int_equal(strlen(token), CQ_SESSION_TOKEN_BYTES - 1);
    assert_memory_equal(token, "cqs_", 4);
    char hash[65], sql[300];
    cq_sha256_hex(token, strlen(token), hash);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM sessions WHERE hash = '%s'", hash);
    assert_int_equal(conf_count(s, sql), 1);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM sessions WHERE hash LIKE '%%%s%%'", token + 4);
    assert_int_equal(conf_count(s, sql), 0);

    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, &checked, &err), CQ_OK);
    assert_int_equal(checked, sid);
    assert_string_equal(got.name, "alice");
    assert_string_equal(got.kb, "laws");
    cq_key_info as_key = {.role = got.role};
    snprintf(as_key.kb, sizeof as_key.kb, "%s", got.kb);
    assert_true(cq_key_allows(&as_key, CQ_ROLE_READER, "laws"));
    assert_false(cq_key_allows(&as_key, CQ_ROLE_EDITOR, "laws"));
    assert_false(cq_key_allows(&as_key, CQ_ROLE_READER, "other"));

    /* malformed and unknown tokens */
    CONF_EXPECT(cq_store_session_check(s, "", 3600, &got, &checked, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_session_check(s, NULL, 3600, &got, &checked, &err), CQ_ERR_NOT_FOUND);
    char forged[CQ_SESSION_TOKEN_BYTES];
    memcpy(forged, token, sizeof forged);
    forged[20] = forged[20] == 'a' ? 'b' : 'a';
    CONF_EXPECT(cq_store_session_check(s, forged, 3600, &got, &checked, &err), CQ_ERR_NOT_FOUND);

    /* sliding: a use after a minute pushes the expiry; an idle one expires */
    conf_sql(s, "UPDATE sessions SET last_seen_at = last_seen_at - 120, expires_at = expires_at - 120");
    int64_t now = (int64_t)time(NULL);
    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, &checked, &err), CQ_OK);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM sessions WHERE id = %lld AND expires_at >= %lld", (long long)sid,
             (long long)now + 3600);
    assert_int_equal(conf_count(s, sql), 1);
    conf_sql(s, "UPDATE sessions SET expires_at = 1000");
    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, &checked, &err), CQ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "sign in again"));
    /* and one older than the longest a session lives, however busy */
    conf_sql(s, "UPDATE sessions SET expires_at = 9000000000, created_at = 1000");
    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, &checked, &err), CQ_ERR_NOT_FOUND);

    /* signing out ends that session only */
    CONF_EXPECT(cq_store_session_create(s, u.id, 3600, token, &sid, &err), CQ_OK);
    CONF_EXPECT(cq_store_session_create(s, u.id, 3600, second, &sid2, &err), CQ_OK);
    assert_true(sid2 != sid);
    CONF_EXPECT(cq_store_session_revoke(s, token, &err), CQ_OK);
    CONF_EXPECT(cq_store_session_revoke(s, token, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, &checked, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_session_check(s, second, 3600, &got, &checked, &err), CQ_OK);

    /* the grant changes: the session follows; the KB deleted: it reaches nothing */
    CONF_EXPECT(cq_store_user_grant(s, "alice", CQ_ROLE_EDITOR, "laws,other", &err), CQ_OK);
    CONF_EXPECT(cq_store_session_check(s, second, 3600, &got, &checked, &err), CQ_OK);
    assert_int_equal(got.role, CQ_ROLE_EDITOR);
    assert_string_equal(got.kb, "laws,other");
    CONF_EXPECT(cq_store_user_grant(s, "alice", CQ_ROLE_EDITOR, "missing", &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_user_grant(s, "nobody", CQ_ROLE_EDITOR, "laws", &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_session_check(s, second, 3600, &got, &checked, &err), CQ_OK);
    assert_string_equal(got.kb, "laws,other"); /* the refused change changed nothing */
    assert_int_equal(cq_store_kb_delete(s, laws, &err), CQ_OK);
    assert_int_equal(cq_store_kb_delete(s, other, &err), CQ_OK);
    CONF_EXPECT(cq_store_session_check(s, second, 3600, &got, &checked, &err), CQ_OK);
    assert_true(got.kb_gone);
    assert_string_equal(got.kb, "");

    /* a new password ends every session, and the old password no longer signs in */
    CONF_EXPECT(cq_store_user_passwd(s, "alice", "short", &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_session_check(s, second, 3600, &got, &checked, &err), CQ_OK); /* refused: nothing ended */
    CONF_EXPECT(cq_store_user_passwd(s, "nobody", "a new password", &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_user_passwd(s, "alice", "a new password", &err), CQ_OK);
    CONF_EXPECT(cq_store_session_check(s, second, 3600, &got, &checked, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_user_verify(s, "alice", "correct horse", &got, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_user_verify(s, "alice", "a new password", &got, &err), CQ_OK);

    /* removal: the user, the sessions and the grants go; the name can be taken again, by a new id */
    CONF_EXPECT(cq_store_session_create(s, u.id, 3600, token, &sid, &err), CQ_OK);
    CONF_EXPECT(cq_store_user_remove(s, "alice", &err), CQ_OK);
    CONF_EXPECT(cq_store_user_remove(s, "alice", &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, &checked, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM sessions"), 0);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM kb_grants WHERE subject = 'user'"), 0);
    cq_user_info again;
    CONF_EXPECT(cq_store_user_add(s, "alice", "correct horse", CQ_ROLE_ADMIN, NULL, &again, &err), CQ_OK);
    assert_true(again.id > u.id);
    CONF_EXPECT(cq_store_user_get(s, "alice", &got, &err), CQ_OK);
    assert_int_equal(got.role, CQ_ROLE_ADMIN);
    CONF_EXPECT(cq_store_user_get(s, "nobody", &got, &err), CQ_ERR_NOT_FOUND);
}

/* A user's conversations are the user's: not a key's (open mode's 0 included), not another user's; every owner's
 * list has them. */
static void conf_users_conversations(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, mine, theirs, keys, open_mode;
    assert_int_equal(cq_store_kb_create(s, "laws", &kb, &err), CQ_OK);
    cq_user_info a, b;
    CONF_EXPECT(cq_store_user_add(s, "alice", "correct horse", CQ_ROLE_READER, "laws", &a, &err), CQ_OK);
    CONF_EXPECT(cq_store_user_add(s, "bob", "correct horse", CQ_ROLE_READER, "laws", &b, &err), CQ_OK);
    CONF_EXPECT(cq_store_conversation_create_for_user(s, a.id, kb, "alice's", &mine, &err), CQ_OK);
    CONF_EXPECT(cq_store_conversation_create_for_user(s, b.id, kb, "bob's", &theirs, &err), CQ_OK);
    CONF_EXPECT(cq_store_conversation_create(s, a.id, kb, "key's, same number", &keys, &err), CQ_OK);
    CONF_EXPECT(cq_store_conversation_create(s, 0, kb, "open mode's", &open_mode, &err), CQ_OK);
    cq_conversation *list;
    size_t n;
    CONF_EXPECT(cq_store_conversation_list_owned(s, 0, a.id, false, 0, 10, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(list[0].id, mine);
    assert_int_equal(list[0].owner_user_id, a.id);
    assert_int_equal(list[0].owner_key_id, 0);
    cq_conversation_free_array(list, n);
    CONF_EXPECT(cq_store_conversation_list(s, a.id, 0, 10, &list, &n, &err), CQ_OK); /* the key with alice's id */
    assert_int_equal(n, 1);
    assert_int_equal(list[0].id, keys);
    cq_conversation_free_array(list, n);
    CONF_EXPECT(cq_store_conversation_list(s, 0, 0, 10, &list, &n, &err), CQ_OK); /* open mode: not the users' */
    assert_int_equal(n, 1);
    assert_int_equal(list[0].id, open_mode);
    cq_conversation_free_array(list, n);
    CONF_EXPECT(cq_store_conversation_list(s, -1, 0, 10, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 4);
    cq_conversation_free_array(list, n);
    /* an admin's own list keeps open mode's (made before sign-in was turned on), not the others' */
    CONF_EXPECT(cq_store_conversation_list_owned(s, 0, a.id, true, 0, 10, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_true((list[0].id == mine && list[1].id == open_mode) || (list[0].id == open_mode && list[1].id == mine));
    cq_conversation_free_array(list, n);
    CONF_EXPECT(cq_store_conversation_list_owned(s, a.id, 0, true, 0, 10, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2); /* a key: its own and open mode's */
    cq_conversation_free_array(list, n);
    cq_conversation c;
    CONF_EXPECT(cq_store_conversation_get(s, theirs, &c, &err), CQ_OK);
    assert_int_equal(c.owner_user_id, b.id);
    cq_conversation_free(&c);
}

#endif
