/* store/audit.h's conformance bodies (tests/store/conformance.h): the same on SQLite and PostgreSQL. */
#ifndef CQ_TESTS_STORE_AUDIT_BODIES_H
#define CQ_TESTS_STORE_AUDIT_BODIES_H

#include <stdio.h>
#include <time.h>

#include "store/audit.h"
#include "tests/store/conformance.h"

/* Entries come back newest first, by pages (before_id) and by action, every field as written; text too long for an
 * entry's buffer is cut, not refused. */
static void conf_audit_add_list(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t t0 = (int64_t)time(NULL);
    const char *actions[] = {"sign_in", "upload", "document_delete", "upload", "kb_delete"};
    for (int i = 0; i < 5; i++) {
        cq_audit_entry e = {0};
        snprintf(e.actor_kind, sizeof e.actor_kind, "%s", i == 4 ? "cli" : "user");
        e.actor_id = i == 4 ? 0 : 7;
        snprintf(e.actor_name, sizeof e.actor_name, "%s", i == 4 ? "root" : "王芳");
        snprintf(e.action, sizeof e.action, "%s", actions[i]);
        snprintf(e.kb, sizeof e.kb, "%s", i ? "劳动法" : "");
        snprintf(e.target, sizeof e.target, "document %d", i);
        snprintf(e.client, sizeof e.client, "%s", i == 4 ? "" : "192.0.2.1");
        CONF_EXPECT(cq_store_audit_add(s, &e, &err), CQ_OK);
    }
    cq_audit_entry *list;
    size_t n;
    CONF_EXPECT(cq_store_audit_list(s, 0, 10, NULL, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 5);
    assert_string_equal(list[0].action, "kb_delete");
    assert_string_equal(list[0].actor_kind, "cli");
    assert_string_equal(list[0].client, "");
    assert_string_equal(list[4].action, "sign_in");
    assert_string_equal(list[4].actor_name, "王芳");
    assert_int_equal(list[4].actor_id, 7);
    assert_string_equal(list[4].kb, "");
    assert_string_equal(list[3].kb, "劳动法");
    assert_string_equal(list[3].target, "document 1");
    assert_string_equal(list[3].client, "192.0.2.1");
    assert_true(list[0].at >= t0 && list[0].at <= t0 + 60);
    assert_true(list[0].id > list[1].id);
    int64_t second = list[1].id;
    free(list);
    /* a page: below an id */
    CONF_EXPECT(cq_store_audit_list(s, second, 2, NULL, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].action, "document_delete");
    free(list);
    /* one action */
    CONF_EXPECT(cq_store_audit_list(s, 0, 10, "upload", &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].target, "document 3");
    free(list);
    CONF_EXPECT(cq_store_audit_list(s, 0, 10, "nothing", &list, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    free(list);
}

#endif
