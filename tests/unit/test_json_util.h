/* Reading a JSON fixture in a cmocka test (include after <cmocka.h> and <cjson/cJSON.h>): the parsed document, or
 * the test fails with the reason. */
#ifndef CQ_TEST_JSON_UTIL_H
#define CQ_TEST_JSON_UTIL_H

#include <stdlib.h>

#include "core/fileio.h"

static inline cJSON *test_read_json(const char *path) {
    char *text = NULL;
    size_t len = 0;
    cq_err err = {0};
    if (cq_file_read(path, 0, &text, &len, &err)) fail_msg("%s", err.msg);
    cJSON *j = cJSON_Parse(text);
    free(text);
    assert_non_null(j);
    return j;
}

#endif
