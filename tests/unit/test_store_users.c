/* store/users and store/audit on SQLite: the conformance bodies of tests/store/users_bodies.h and audit_bodies.h (which tests/pg/test_store_backends_pg.c
 * and groups_bodies.h runs on both stores), and the password rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <argon2.h>

#include "store/store.h"
#include "test_store_util.h"

#define conf_store test_store_of
#define conf_reopen test_store_reopen
#include "tests/store/users_bodies.h"
#include "tests/store/audit_bodies.h"
#include "tests/store/groups_bodies.h"

static void test_passwords(void **state) {
    (void)state;
    cq_err err = {0};
    assert_int_equal(cq_password_check("12345678", &err), CQ_OK);
    assert_int_equal(cq_password_check("1234567", &err), CQ_ERR_INVALID);
    assert_int_equal(cq_password_check("八个汉字组成密码", &err), CQ_OK); /* characters, not bytes */
    assert_int_equal(cq_password_check("七个汉字的密码", &err), CQ_ERR_INVALID);
    assert_int_equal(cq_password_check("tab\tis fine", &err), CQ_OK);
    assert_int_equal(cq_password_check("bell\a is not", &err), CQ_ERR_INVALID);
    assert_int_equal(cq_password_check("bad \xff utf-8 here", &err), CQ_ERR_INVALID);
    char big[CQ_PASSWORD_MAX_BYTES + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    assert_int_equal(cq_password_check(big, &err), CQ_ERR_INVALID);

    /* two hashes of one password differ (the salt), and each verifies it alone */
    char a[CQ_PASSWORD_HASH_BYTES], b[CQ_PASSWORD_HASH_BYTES];
    assert_int_equal(cq_password_hash("correct horse", a, &err), CQ_OK);
    assert_int_equal(cq_password_hash("correct horse", b, &err), CQ_OK);
    assert_string_not_equal(a, b);
    assert_true(cq_password_verify(a, "correct horse"));
    assert_true(cq_password_verify(b, "correct horse"));
    assert_false(cq_password_verify(a, "correct horsf"));
    assert_false(cq_password_verify(a, ""));
    assert_false(cq_password_verify("$argon2i$v=19$m=16,t=2,p=1$c2FsdHNhbHQ$aGFzaA", "correct horse"));
    assert_false(cq_password_verify("not a hash", "correct horse"));
    assert_false(cq_password_verify(NULL, "correct horse"));
    /* a hash made with other parameters still verifies (its own are in it) */
    char weak[CQ_PASSWORD_HASH_BYTES];
    unsigned char salt[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    assert_int_equal(argon2id_hash_encoded(1, 64, 1, "password", 8, salt, sizeof salt, 32, weak, sizeof weak), 0);
    assert_true(cq_password_verify(weak, "password"));

    assert_true(cq_user_name_valid("alice"));
    assert_true(cq_user_name_valid("王芳"));
    assert_true(cq_user_name_valid("a.b-c_d@office"));
    assert_false(cq_user_name_valid(""));
    assert_false(cq_user_name_valid("a b"));
    assert_false(cq_user_name_valid("a,b"));
    assert_false(cq_user_name_valid("a/b"));
    char long_name[CQ_USER_NAME_BYTES + 1];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    assert_false(cq_user_name_valid(long_name));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(conf_users_add_verify, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_users_sessions, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_users_conversations, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_audit_add_list, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_groups, test_store_setup, test_store_teardown),
        cmocka_unit_test(test_passwords),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
