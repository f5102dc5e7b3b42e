/* web/server.c's route table (issue 28 item 5): each route once, every row reachable by its own path and methods, a
 * method the path lacks found as 405 with the path's methods (the Allow header), an unknown path as no route, each
 * row's facts consistent (its params, its body, its scope), and every route in docs/API.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/fileio.h"
#include "web/http.h"

#define ALL_METHODS (CQ_M_GET | CQ_M_HEAD | CQ_M_POST | CQ_M_PUT | CQ_M_PATCH | CQ_M_DELETE)
static const char *const names[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};

/* A path that the pattern names, split into segments: params get a value of their kind. */
typedef struct {
    char buf[512];
    char *seg[16];
    int n;
} path;

static void concrete(const char *pattern, path *p) {
    char copy[512];
    snprintf(copy, sizeof copy, "%s", pattern);
    size_t len = 0;
    p->n = 0;
    char *save = NULL;
    for (char *s = strtok_r(copy, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        const char *v = s;
        if (!strcmp(s, "{kb}")) v = "laws";
        else if (!strcmp(s, "{id}") || !strcmp(s, "{a}") || !strcmp(s, "{b}") || !strcmp(s, "{n}")) v = "7";
        else if (!strcmp(s, "{n}.png")) v = "3.png";
        else if (s[0] == '{') v = "someone";
        assert_true(len + strlen(v) + 1 < sizeof p->buf);
        p->seg[p->n++] = strcpy(p->buf + len, v);
        len += strlen(v) + 1;
    }
}

static unsigned pattern_methods(const cq_web_route_def *t, size_t n, const char *pattern) {
    unsigned m = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].pattern, pattern)) m |= t[i].methods;
    return m;
}

static void test_rows_are_consistent(void **state) {
    (void)state;
    size_t n;
    const cq_web_route_def *t = cq_web_route_table(&n);
    assert_true(n > 40);
    assert_true(n + CQ_LABEL_ROUTES <= CQ_WEB_ROUTE_LABELS);
    for (size_t i = 0; i < n; i++) {
        const cq_web_route_def *d = &t[i];
        if (!d->handler || !d->methods || (d->methods & ~ALL_METHODS) || d->pattern[0] != '/')
            fail_msg("row %zu (%s) is incomplete", i, d->pattern);
        for (size_t k = 0; k < i; k++) {
            if (strcmp(t[k].pattern, d->pattern)) continue;
            /* each (method, path) once, and the rows of a pattern together (the label is the first one's) */
            if (t[k].methods & d->methods) fail_msg("%s is declared twice for one method", d->pattern);
            if (strcmp(t[i - 1].pattern, d->pattern)) fail_msg("the rows of %s are not adjacent", d->pattern);
        }
        /* a body only where the method has one; a safe method never changes anything */
        if (d->body != CQ_BODY_NONE && (d->methods & (CQ_M_GET | CQ_M_HEAD)))
            fail_msg("%s: a GET with a body", d->pattern);
        int ids = 0;
        for (const char *p = d->pattern; (p = strchr(p, '{')); p++)
            ids += !strncmp(p, "{id}", 4) || !strncmp(p, "{a}", 3) || !strncmp(p, "{b}", 3) || !strncmp(p, "{n}/", 4);
        if (ids > 2) fail_msg("%s: more ids than the request holds", d->pattern);
        if (d->scope == CQ_IN_KB && !strstr(d->pattern, "{kb}")) fail_msg("%s: a KB scope without {kb}", d->pattern);
        if ((d->scope == CQ_IN_DOC || d->scope == CQ_IN_JOB || d->scope == CQ_IN_CLAUSE) && !ids)
            fail_msg("%s: a scope that looks up an id the path lacks", d->pattern);
        if (d->scope == CQ_IN_PUBLIC && d->role != CQ_WEB_NONE) fail_msg("%s: a public route with a role", d->pattern);
        if (d->body == CQ_BODY_UPLOAD && d->role < CQ_WEB_EDIT) fail_msg("%s: an upload anyone may send", d->pattern);
    }
}

/* Every row is found by each of its methods on a path of its pattern; every other method of that path is a 405
 * carrying the path's methods; the label names the pattern. */
static void test_every_row_reachable_and_405(void **state) {
    (void)state;
    size_t n;
    const cq_web_route_def *t = cq_web_route_table(&n);
    for (size_t i = 0; i < n; i++) {
        path p;
        concrete(t[i].pattern, &p);
        unsigned allowed = pattern_methods(t, n, t[i].pattern);
        for (unsigned b = 0; b < 6; b++) {
            cq_web_match m = cq_web_route_find(names[b], p.seg, p.n);
            if (strcmp(cq_web_route_name(m.label), t[i].pattern))
                fail_msg("%s %s is labelled %s", names[b], t[i].pattern, cq_web_route_name(m.label));
            if (m.allow != allowed) fail_msg("%s: allow %#x, expected %#x", t[i].pattern, m.allow, allowed);
            if (t[i].methods & (1u << b)) {
                if (m.def != &t[i]) fail_msg("%s %s does not reach its row", names[b], t[i].pattern);
            } else if (!(allowed & (1u << b)) && m.def) {
                fail_msg("%s %s should be 405", names[b], t[i].pattern);
            }
        }
    }
    /* and an unknown method */
    path p;
    concrete("/api/v1/kbs/{kb}", &p);
    cq_web_match m = cq_web_route_find("BREW", p.seg, p.n);
    assert_null(m.def);
    assert_int_equal(m.allow, CQ_M_GET | CQ_M_DELETE);
}

static void test_unknown_paths(void **state) {
    (void)state;
    const char *unknown[] = {"/api/v1/nothing", "/api/v1/kbs/laws/nothing", "/api/v1", "/", "/api/v1/kbs/a/b/c/d",
                             "/api/v1/kbs/laws/grants/robot/x", "/v1/chat"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        path p;
        concrete(unknown[i], &p);
        cq_web_match m = cq_web_route_find("GET", p.seg, p.n);
        if (m.def || m.allow || m.label != CQ_LABEL_OTHER) fail_msg("%s has a route", unknown[i]);
    }
    assert_string_equal(cq_web_route_name(CQ_LABEL_OTHER), "other");
    assert_string_equal(cq_web_route_name(CQ_LABEL_PAGE), "/");
    assert_string_equal(cq_web_route_name(CQ_WEB_ROUTE_LABELS - 1), "other");
}

/* docs/API.md describes every route: each pattern of the table is in it as written. */
static void test_documented(void **state) {
    (void)state;
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/docs/API.md", src ? src : ".");
    char *doc = NULL;
    size_t len = 0;
    cq_err err = {0};
    if (cq_file_read(path, 4u << 20, &doc, &len, &err)) fail_msg("%s", err.msg);
    size_t n;
    const cq_web_route_def *t = cq_web_route_table(&n);
    for (size_t i = 0; i < n; i++)
        if (!strstr(doc, t[i].pattern)) fail_msg("docs/API.md does not name %s", t[i].pattern);
    free(doc);
}

static void test_methods_text(void **state) {
    (void)state;
    char buf[64];
    cq_web_methods_text(CQ_M_DELETE | CQ_M_GET | CQ_M_HEAD, buf, sizeof buf);
    assert_string_equal(buf, "GET, HEAD, DELETE");
    cq_web_methods_text(ALL_METHODS, buf, sizeof buf);
    assert_string_equal(buf, "GET, HEAD, POST, PUT, PATCH, DELETE");
    cq_web_methods_text(0, buf, sizeof buf);
    assert_string_equal(buf, "");
    assert_int_equal(cq_web_method_bit("PATCH"), CQ_M_PATCH);
    assert_int_equal(cq_web_method_bit("get"), 0);
    assert_int_equal(cq_web_method_bit("OPTIONS"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_are_consistent),
        cmocka_unit_test(test_every_row_reachable_and_405),
        cmocka_unit_test(test_unknown_paths),
        cmocka_unit_test(test_documented),
        cmocka_unit_test(test_methods_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
