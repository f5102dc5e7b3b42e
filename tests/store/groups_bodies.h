/* store/groups.h's conformance bodies (tests/store/conformance.h): the same on SQLite and PostgreSQL. */
#ifndef CQ_TESTS_STORE_GROUPS_BODIES_H
#define CQ_TESTS_STORE_GROUPS_BODIES_H

#include <stdio.h>

#include "store/groups.h"
#include "store/keys.h"
#include "store/users.h"
#include "tests/store/conformance.h"

/* Groups: add, list, refusals with nothing changed; membership; effective rights = own ∪ groups' (highest role),
 * following a group's change, removal and a KB's deletion; a disabled user; directory memberships synced. */
static void conf_groups(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t laws, contracts, hr;
    assert_int_equal(cq_store_kb_create(s, "laws", &laws, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "合同", &contracts, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "hr", &hr, &err), CQ_OK);
    cq_user_info u, got;
    CONF_EXPECT(cq_store_user_add(s, "alice", "correct horse", CQ_ROLE_READER, "laws", &u, &err), CQ_OK);

    cq_group_info g;
    CONF_EXPECT(cq_store_group_add(s, "lawyers", CQ_ROLE_EDITOR, "合同,laws", &g, &err), CQ_OK);
    assert_true(g.id > 0);
    CONF_EXPECT(cq_store_group_add(s, "人事", CQ_ROLE_READER, "hr", &g, &err), CQ_OK);
    /* refused, nothing changed */
    CONF_EXPECT(cq_store_group_add(s, "lawyers", CQ_ROLE_READER, "laws", &g, &err), CQ_ERR_EXISTS);
    assert_non_null(strstr(err.msg, "a group named 'lawyers' exists already"));
    CONF_EXPECT(cq_store_group_add(s, "x", CQ_ROLE_READER, "missing", &g, &err), CQ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no knowledge base named 'missing'"));
    CONF_EXPECT(cq_store_group_add(s, "x y", CQ_ROLE_READER, "laws", &g, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_group_add(s, "x", CQ_ROLE_ADMIN, "laws", &g, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_group_add(s, "x", CQ_ROLE_READER, NULL, &g, &err), CQ_ERR_INVALID);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM groups"), 2);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM kb_grants WHERE subject = 'group'"), 3);

    /* alone, alice reads laws */
    CONF_EXPECT(cq_store_user_verify(s, "alice", "correct horse", &got, &err), CQ_OK);
    assert_int_equal(got.role, CQ_ROLE_READER);
    assert_string_equal(got.kb, "laws");

    CONF_EXPECT(cq_store_group_member_add(s, "lawyers", "alice", &err), CQ_OK);
    CONF_EXPECT(cq_store_group_member_add(s, "人事", "alice", &err), CQ_OK);
    CONF_EXPECT(cq_store_group_member_add(s, "lawyers", "alice", &err), CQ_ERR_EXISTS);
    CONF_EXPECT(cq_store_group_member_add(s, "nogroup", "alice", &err), CQ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no group named 'nogroup'"));
    CONF_EXPECT(cq_store_group_member_add(s, "lawyers", "nobody", &err), CQ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no user named 'nobody'"));
    assert_int_equal(conf_count(s, "SELECT count(*) FROM group_members"), 2);

    /* own ∪ groups', the highest role; a session sees the same */
    CONF_EXPECT(cq_store_user_verify(s, "alice", "correct horse", &got, &err), CQ_OK);
    assert_int_equal(got.role, CQ_ROLE_EDITOR);
    assert_string_equal(got.kb, "laws,合同,hr");
    char token[CQ_SESSION_TOKEN_BYTES];
    int64_t sid;
    CONF_EXPECT(cq_store_session_create(s, u.id, 3600, token, &sid, &err), CQ_OK);
    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, NULL, &err), CQ_OK);
    assert_int_equal(got.role, CQ_ROLE_EDITOR);
    assert_string_equal(got.kb, "laws,合同,hr");
    char names[256];
    CONF_EXPECT(cq_store_user_groups(s, u.id, names, sizeof names, &err), CQ_OK);
    assert_true(!strcmp(names, "lawyers,人事") || !strcmp(names, "人事,lawyers")); /* collations differ */

    /* the list, with members; the members of one */
    cq_group_info *list;
    size_t n;
    CONF_EXPECT(cq_store_group_list(s, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].name, "lawyers");
    assert_int_equal(list[0].role, CQ_ROLE_EDITOR);
    assert_string_equal(list[0].kb, "laws,合同"); /* sorted by name, as every grant reads back */
    assert_int_equal(list[0].members, 1);
    free(list);
    cq_group_member *m;
    CONF_EXPECT(cq_store_group_members(s, "lawyers", &m, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_string_equal(m[0].user, "alice");
    assert_string_equal(m[0].source, "local");
    free(m);

    /* a group made admin makes its members admins; every KB ("*") wins over names */
    CONF_EXPECT(cq_store_group_set(s, "人事", CQ_ROLE_READER, "*", &err), CQ_OK);
    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, NULL, &err), CQ_OK);
    assert_string_equal(got.kb, "*");
    CONF_EXPECT(cq_store_group_set(s, "lawyers", CQ_ROLE_ADMIN, NULL, &err), CQ_OK);
    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, NULL, &err), CQ_OK);
    assert_int_equal(got.role, CQ_ROLE_ADMIN);
    assert_string_equal(got.kb, "");
    CONF_EXPECT(cq_store_group_set(s, "lawyers", CQ_ROLE_EDITOR, "合同", &err), CQ_OK);
    CONF_EXPECT(cq_store_group_set(s, "人事", CQ_ROLE_READER, "hr", &err), CQ_OK);

    /* a deleted KB reaches nothing through a group either */
    CONF_EXPECT(cq_store_kb_delete(s, hr, &err), CQ_OK);
    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, NULL, &err), CQ_OK);
    assert_string_equal(got.kb, "laws,合同");

    /* out of a group, and a group removed: the rights go at the next request */
    CONF_EXPECT(cq_store_group_member_remove(s, "lawyers", "alice", &err), CQ_OK);
    CONF_EXPECT(cq_store_group_member_remove(s, "lawyers", "alice", &err), CQ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "alice is not in group 'lawyers'"));
    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, NULL, &err), CQ_OK);
    assert_int_equal(got.role, CQ_ROLE_READER);
    assert_string_equal(got.kb, "laws");
    CONF_EXPECT(cq_store_group_member_add(s, "lawyers", "alice", &err), CQ_OK);
    CONF_EXPECT(cq_store_group_remove(s, "lawyers", &err), CQ_OK);
    CONF_EXPECT(cq_store_group_remove(s, "lawyers", &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, NULL, &err), CQ_OK);
    assert_int_equal(got.role, CQ_ROLE_READER);
    assert_string_equal(got.kb, "laws");
    assert_int_equal(conf_count(s, "SELECT count(*) FROM kb_grants WHERE subject = 'group'"), 1);

    /* disabled: no sign-in (the right password says so), no session; enabled again */
    CONF_EXPECT(cq_store_user_disable(s, "alice", true, &err), CQ_OK);
    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, NULL, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_user_verify(s, "alice", "wrong horse!", &got, &err), CQ_ERR_NOT_FOUND);
    assert_string_equal(err.msg, "wrong user name or password");
    CONF_EXPECT(cq_store_user_verify(s, "alice", "correct horse", &got, &err), CQ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "disabled"));
    CONF_EXPECT(cq_store_user_disable(s, "nobody", true, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_user_disable(s, "alice", false, &err), CQ_OK);
    CONF_EXPECT(cq_store_user_verify(s, "alice", "correct horse", &got, &err), CQ_OK);
    CONF_EXPECT(cq_store_session_check(s, token, 3600, &got, NULL, &err), CQ_ERR_NOT_FOUND); /* ended for good */

    /* a directory user: made once, role none, rights from the synced groups only; local memberships stay */
    CONF_EXPECT(cq_store_group_add(s, "dir-editors", CQ_ROLE_EDITOR, "laws", &g, &err), CQ_OK);
    cq_user_info d;
    CONF_EXPECT(cq_store_user_directory(s, "carol", &d, &err), CQ_OK);
    assert_string_equal(d.source, "ldap");
    assert_int_equal(d.role, CQ_ROLE_NONE);
    CONF_EXPECT(cq_store_user_directory(s, "alice", &got, &err), CQ_ERR_EXISTS); /* a local name is not taken over */
    CONF_EXPECT(cq_store_user_verify(s, "carol", "!", &got, &err), CQ_ERR_NOT_FOUND); /* no password here */
    const char *dir_groups[] = {"dir-editors", "not-here"};
    size_t missing = 0;
    CONF_EXPECT(cq_store_group_sync(s, d.id, dir_groups, 2, &missing, &err), CQ_OK);
    assert_int_equal(missing, 1);
    CONF_EXPECT(cq_store_group_member_add(s, "人事", "carol", &err), CQ_OK);
    const char *with_local[] = {"dir-editors", "人事"}; /* a local membership of a directory group stays local */
    CONF_EXPECT(cq_store_group_sync(s, d.id, with_local, 2, NULL, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM group_members m JOIN users u ON u.id = m.user_id "
                                   "WHERE u.name = 'carol' AND m.source = 'local'"), 1);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM group_members m JOIN users u ON u.id = m.user_id "
                                   "WHERE u.name = 'carol'"), 2);
    CONF_EXPECT(cq_store_user_rights(s, &d, &err), CQ_OK);
    assert_int_equal(d.role, CQ_ROLE_EDITOR);
    assert_string_equal(d.kb, "laws");
    CONF_EXPECT(cq_store_group_sync(s, d.id, NULL, 0, NULL, &err), CQ_OK); /* the directory dropped it */
    CONF_EXPECT(cq_store_user_rights(s, &d, &err), CQ_OK);
    assert_int_equal(d.role, CQ_ROLE_READER);
    assert_string_equal(d.kb, ""); /* 人事's only KB was deleted */
    assert_int_equal(conf_count(s, "SELECT count(*) FROM group_members WHERE source = 'ldap'"), 0);
    CONF_EXPECT(cq_store_user_passwd(s, "carol", "a new password", &err), CQ_ERR_INVALID);
    /* removing a user removes the memberships */
    CONF_EXPECT(cq_store_user_remove(s, "carol", &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM group_members"), 1);
}

#endif
