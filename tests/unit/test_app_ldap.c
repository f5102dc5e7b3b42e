/* app/ldap_auth.h's configuration (the sign-in itself is tested against a real slapd: test_ldap.py): [ldap] keys and
 * $CLAUSEQA_LDAP_* (the environment wins), the group map, and every refusal naming the key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "app/config.h"
#include "app/ldap_auth.h"

static void write_conf(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_ldap_config(void **state) {
    (void)state;
    char path[] = "/tmp/cq-ldap-conf-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    cq_err err = {0};
    cq_ldap_config c;
    /* nothing configured: off */
    assert_int_equal(cq_ldap_config_read(NULL, &c, &err), CQ_OK);
    assert_string_equal(c.url, "");

    write_conf(path, "[ldap]\nurl = ldap://dc.example.com\nuser-dn = \"uid=%u,ou=people,dc=example,dc=com\"\n"
                     "base = dc=example,dc=com\n"
                     "group-map = lawyers => editors | CN=Admins,OU=Groups,DC=example,DC=com => admins ; a comment\n"
                     "timeout-s = 3\nstarttls = true\n");
    cq_config file;
    assert_int_equal(cq_config_load(path, &file, &err), CQ_OK);
    assert_int_equal(cq_ldap_config_read(&file, &c, &err), CQ_OK);
    assert_string_equal(c.url, "ldap://dc.example.com");
    assert_true(c.starttls);
    assert_int_equal(c.timeout_s, 3);
    assert_int_equal(c.n_map, 2);
    assert_string_equal(c.map[0].directory, "lawyers");
    assert_string_equal(c.map[0].group, "editors");
    assert_string_equal(c.map[1].directory, "CN=Admins,OU=Groups,DC=example,DC=com");
    assert_string_equal(c.map[1].group, "admins");
    assert_string_equal(c.group_filter, "(|(member=%d)(uniqueMember=%d)(memberUid=%u))");

    /* the environment wins */
    setenv("CLAUSEQA_LDAP_URL", "ldaps://other.example.com", 1);
    setenv("CLAUSEQA_LDAP_STARTTLS", "false", 1);
    setenv("CLAUSEQA_LDAP_TIMEOUT_S", "9", 1);
    assert_int_equal(cq_ldap_config_read(&file, &c, &err), CQ_OK);
    assert_string_equal(c.url, "ldaps://other.example.com");
    assert_false(c.starttls);
    assert_int_equal(c.timeout_s, 9);

    /* refusals name the key */
    setenv("CLAUSEQA_LDAP_TIMEOUT_S", "0", 1);
    assert_int_equal(cq_ldap_config_read(&file, &c, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "[ldap] timeout-s"));
    unsetenv("CLAUSEQA_LDAP_TIMEOUT_S");
    setenv("CLAUSEQA_LDAP_STARTTLS", "true", 1);
    assert_int_equal(cq_ldap_config_read(&file, &c, &err), CQ_ERR_INVALID); /* StartTLS on ldaps:// */
    assert_non_null(strstr(err.msg, "starttls"));
    unsetenv("CLAUSEQA_LDAP_STARTTLS");
    setenv("CLAUSEQA_LDAP_URL", "http://dc.example.com", 1);
    assert_int_equal(cq_ldap_config_read(&file, &c, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "[ldap] url must start with ldap://"));
    unsetenv("CLAUSEQA_LDAP_URL");
    setenv("CLAUSEQA_LDAP_USER_DN", "uid=someone,dc=example,dc=com", 1);
    assert_int_equal(cq_ldap_config_read(&file, &c, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "%u"));
    unsetenv("CLAUSEQA_LDAP_USER_DN");
    setenv("CLAUSEQA_LDAP_GROUP_MAP", "lawyers editors", 1);
    assert_int_equal(cq_ldap_config_read(&file, &c, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "group-map"));
    setenv("CLAUSEQA_LDAP_GROUP_MAP", "lawyers => bad name", 1);
    assert_int_equal(cq_ldap_config_read(&file, &c, &err), CQ_ERR_INVALID);
    unsetenv("CLAUSEQA_LDAP_GROUP_MAP");
    cq_config_free(&file);

    write_conf(path, "[ldap]\nurl = ldap://dc\nuser-dn = uid=%u\n");
    assert_int_equal(cq_config_load(path, &file, &err), CQ_OK);
    assert_int_equal(cq_ldap_config_read(&file, &c, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "[ldap] base is needed"));
    cq_config_free(&file);
    /* an unknown key of [ldap] is the file's error */
    write_conf(path, "[ldap]\nserver = ldap://dc\n");
    assert_int_equal(cq_config_load(path, &file, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "unknown key 'server' in [ldap]"));
    unlink(path);
}

/* An empty password never reaches the directory (it would be an anonymous bind, which succeeds), nor does a name
 * that could inject into a DN or a filter: both are the one wrong-login answer, at once, with no server at all. */
static void test_ldap_refuses_before_binding(void **state) {
    (void)state;
    cq_ldap_config c = {.timeout_s = 1};
    snprintf(c.url, sizeof c.url, "ldap://127.0.0.1:1");
    snprintf(c.user_dn, sizeof c.user_dn, "uid=%%u,dc=example");
    snprintf(c.base, sizeof c.base, "dc=example");
    char groups[4][64];
    size_t n = 9;
    cq_err err = {0};
    assert_int_equal(cq_ldap_sign_in(&c, "alice", "", groups, 4, &n, &err), CQ_ERR_NOT_FOUND);
    assert_string_equal(err.msg, "wrong user name or password");
    assert_int_equal(n, 0);
    assert_int_equal(cq_ldap_sign_in(&c, "*)(uid=*", "x", groups, 4, &n, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_ldap_sign_in(&c, "a,dc=evil", "x", groups, 4, &n, &err), CQ_ERR_NOT_FOUND);
    /* port 1: nothing listens, a clear BUSY */
    assert_int_equal(cq_ldap_sign_in(&c, "alice", "pw", groups, 4, &n, &err), CQ_ERR_BUSY);
    assert_non_null(strstr(err.msg, "cannot be reached"));
    assert_true(err.retry_after_s > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ldap_config),
        cmocka_unit_test(test_ldap_refuses_before_binding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
