/* store/keys on SQLite: the conformance bodies of tests/store/keys_bodies.h (which tests/pg/test_store_backends_pg.c
 * runs on both stores) and cq_key_allows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "store/store.h"
#include "test_store_util.h"

#define conf_store test_store_of
#define conf_reopen test_store_reopen
#include "tests/store/keys_bodies.h"

static void test_allows(void **state) {
    (void)state;
    cq_key_info admin = {.role = CQ_ROLE_ADMIN}, editor = {.role = CQ_ROLE_EDITOR}, reader = {.role = CQ_ROLE_READER},
                every = {.role = CQ_ROLE_READER};
    strcpy(editor.kb, "laws");
    strcpy(reader.kb, "laws");
    strcpy(every.kb, "*");
    assert_true(cq_key_allows(&admin, CQ_ROLE_ADMIN, NULL));
    assert_true(cq_key_allows(&admin, CQ_ROLE_EDITOR, "anything"));
    assert_true(cq_key_allows(&editor, CQ_ROLE_EDITOR, "laws"));
    assert_true(cq_key_allows(&editor, CQ_ROLE_READER, "laws"));
    assert_false(cq_key_allows(&editor, CQ_ROLE_EDITOR, "contracts"));
    assert_false(cq_key_allows(&editor, CQ_ROLE_ADMIN, NULL));
    assert_false(cq_key_allows(&editor, CQ_ROLE_READER, NULL));
    assert_true(cq_key_allows(&reader, CQ_ROLE_READER, "laws"));
    assert_false(cq_key_allows(&reader, CQ_ROLE_EDITOR, "laws"));
    assert_true(cq_key_allows(&every, CQ_ROLE_READER, "contracts"));
    assert_false(cq_key_allows(&every, CQ_ROLE_EDITOR, "contracts"));
    assert_false(cq_key_allows(NULL, CQ_ROLE_READER, "laws"));
    /* a key whose KB was deleted reaches nothing, whatever its role */
    reader.kb_gone = true;
    assert_false(cq_key_allows(&reader, CQ_ROLE_READER, "laws"));
    cq_key_info nameless = {.role = CQ_ROLE_EDITOR};
    assert_false(cq_key_allows(&nameless, CQ_ROLE_READER, ""));
    /* several KBs: each one, never a part of a name nor the list itself */
    cq_key_info two = {.role = CQ_ROLE_READER};
    strcpy(two.kb, "laws,合同");
    assert_true(cq_key_allows(&two, CQ_ROLE_READER, "laws"));
    assert_true(cq_key_allows(&two, CQ_ROLE_READER, "合同"));
    assert_false(cq_key_allows(&two, CQ_ROLE_READER, "law"));
    assert_false(cq_key_allows(&two, CQ_ROLE_READER, "laws,合同"));
    assert_false(cq_key_allows(&two, CQ_ROLE_EDITOR, "laws"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(conf_keys_create_check_revoke, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_keys_create_validates, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_keys_bound_to_kb_id, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_keys_several_kbs, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_keys_last_use_once_a_minute, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_keys_auth_stays_required, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_keys_revoke_race, test_store_setup, test_store_teardown),
        cmocka_unit_test(test_allows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
