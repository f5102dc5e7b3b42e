/* core/json (strict input, output always valid UTF-8) and core/fileio: the removal of crashed writes' temp files, and
 * files and folders private to their owner whatever the umask. */
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>
#include <cmocka.h>

#include "core/fileio.h"
#include "core/json.h"
#include "core/utf8.h"

static void test_print_repairs_utf8(void **state) {
    (void)state;
    /* bytes a percent-decoded path or a plain-text document may hold: a lone continuation byte, a truncated
     * sequence before a quote, an overlong '/', a surrogate, a code point past U+10FFFF, 0xFF */
    static const char *const bad[] = {"\x80", "ab\xE4\xB8", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                                      "x\xFFy", "法\xE6\xB3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", bad[i]);
        size_t n;
        char *s = cq_json_print(o, &n);
        assert_non_null(s);
        assert_int_equal(n, strlen(s));
        assert_true(cq_utf8_valid(s, n));
        char why[128];
        cJSON *back = cq_json_parse_strict(s, n, why, sizeof why);
        assert_non_null(back);
        assert_true(cJSON_IsString(cJSON_GetObjectItem(back, "name")));
        assert_non_null(strstr(s, "\xEF\xBF\xBD")); /* U+FFFD where the bad bytes were */
        cJSON_Delete(back);
        cJSON_Delete(o);
        free(s);
    }
    /* the indented form for files people read (a backup's manifest) is repaired the same way */
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "source", "/data/\xFF");
    size_t n;
    char *f = cq_json_print_formatted(m, &n);
    assert_true(cq_utf8_valid(f, n));
    assert_non_null(strchr(f, '\n'));
    assert_non_null(strstr(f, "/data/\xEF\xBF\xBD"));
    free(f);
    cJSON_Delete(m);
    /* valid text is left as it is */
    cJSON *o = cJSON_CreateString("《劳动法》第四十四条 \"quoted\"\n");
    char *s = cq_json_print(o, NULL);
    assert_string_equal(s, "\"《劳动法》第四十四条 \\\"quoted\\\"\\n\"");
    free(s);
    cJSON_Delete(o);
}

static void test_parse_strict(void **state) {
    (void)state;
    static const struct {
        const char *text;
        size_t len; /* 0: strlen */
        const char *why; /* NULL: accepted */
    } cases[] = {
        {"{\"name\": \"laws\"}", 0, NULL},
        {"  {\"a\": [1, 2, {\"b\": null}]}\r\n\t ", 0, NULL},
        {"{\"q\": \"a\\\\u0000\"}", 0, NULL},           /* an escaped backslash, then the text u0000 */
        {"{\"q\": \"\\u00e9\\u6cd5\"}", 0, NULL},
        {"{\"name\": \"laws\\u0000x\"}", 0, "\\u0000"}, /* would name \"laws\" */
        {"{\"name\": \"a\tb\"}", 0, "control character"},
        {"{\"name\": \"\xFF\"}", 0, "invalid UTF-8 at byte 10"},
        {"{\"name\": \"a\"}x", 0, "unexpected data after the JSON value at byte 13"},
        {"{\"name\": \"a\"} {\"name\": \"b\"}", 0, "unexpected data"},
        {"{\"name\": \"a\"}\0trailing", 22, "NUL byte"},
        {"{\"name\": \"a\"", 0, "not valid JSON"},
        {"", 0, "not valid JSON"},
        {"{\"q\": \"\\ud800\"}", 0, "not valid JSON"}, /* a lone surrogate */
        /* a name twice in one object: parsers disagree on which counts (issue 29) */
        {"{\"kb\": \"a\", \"kb\": \"b\"}", 0, "\"kb\" appears twice"},
        {"{\"kb\": \"a\", \"k\\u0062\": \"b\"}", 0, "\"kb\" appears twice"}, /* the same name, escaped */
        {"[{\"x\": 1}, {\"a\": {\"z\": 1, \"y\": 2, \"z\": 3}}]", 0, "\"z\" appears twice"},
        {"{\"a\": {\"x\": 1}, \"b\": {\"x\": 1}, \"x\": 2}", 0, NULL}, /* one name in three objects */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char why[128] = "";
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].text);
        cJSON *v = cq_json_parse_strict(cases[i].text, len, why, sizeof why);
        if (!cases[i].why) {
            if (!v) fail_msg("case %zu refused: %s", i, why);
        } else {
            if (v) fail_msg("case %zu accepted", i);
            if (!strstr(why, cases[i].why)) fail_msg("case %zu: '%s' does not say '%s'", i, why, cases[i].why);
        }
        cJSON_Delete(v);
    }
}

static void test_stale_temp_files(void **state) {
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/cq_test_tmpfiles_%d", (int)getpid());
    mkdir(dir, 0700);
    pid_t dead = fork(); /* a process that has exited: its temp files are a killed writer's */
    if (dead == 0) _exit(0);
    assert_true(dead > 0);
    waitpid(dead, NULL, 0);
    char kept_fresh[128], kept_mine[128], kept_locked[128], stale[128], dead_fresh[128], other[128];
    snprintf(kept_fresh, sizeof kept_fresh, "%s/a.pdf.tmp.AAAAAA", dir);
    snprintf(kept_mine, sizeof kept_mine, "%s/b.pdf.tmp.%d.BBBBBB", dir, (int)getpid());
    snprintf(dead_fresh, sizeof dead_fresh, "%s/c.pdf.tmp.%d.CCCCCC", dir, (int)dead);
    snprintf(kept_locked, sizeof kept_locked, "%s/d.pdf.tmp.DDDDDD", dir);
    snprintf(stale, sizeof stale, "%s/e.pdf.tmp.EEEEEE", dir);
    snprintf(other, sizeof other, "%s/f.pdf", dir);
    const char *all[] = {kept_fresh, kept_mine, dead_fresh, kept_locked, stale, other};
    struct utimbuf old = {time(NULL) - 120, time(NULL) - 120};
    for (int i = 0; i < 6; i++) {
        FILE *f = fopen(all[i], "w");
        assert_non_null(f);
        fputs("x", f);
        fclose(f);
        if (i > 2) utime(all[i], &old);
    }
    int fd = open(kept_locked, O_RDONLY); /* a writer still at work holds its file locked */
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0);
    assert_int_equal(cq_remove_stale_temp_files(dir, 60), 2);
    assert_int_equal(access(stale, F_OK), -1);
    assert_int_equal(access(dead_fresh, F_OK), -1);
    assert_int_equal(access(kept_fresh, F_OK), 0);
    assert_int_equal(access(kept_mine, F_OK), 0);
    assert_int_equal(access(kept_locked, F_OK), 0);
    assert_int_equal(access(other, F_OK), 0);
    close(fd);
    assert_int_equal(cq_remove_stale_temp_files(dir, 60), 1); /* the writer is gone */
    assert_int_equal(cq_remove_stale_temp_files("/nonexistent-dir", 0), 0);

    /* cq_file_write_atomic leaves no temporary file behind */
    char path[128];
    snprintf(path, sizeof path, "%s/e.bin", dir);
    cq_err err = {0};
    assert_int_equal(cq_file_write_atomic(path, "data", 4, &err), CQ_OK);
    /* min_age 0 takes every unlocked file, even one stamped ahead of time(NULL) (file clocks are finer than
     * time()'s: a file written just now can read a second in the future; CI saw it) */
    struct utimbuf ahead = {time(NULL) + 5, time(NULL) + 5};
    assert_int_equal(utime(kept_fresh, &ahead), 0);
    assert_int_equal(cq_remove_stale_temp_files(dir, 0), 2); /* only kept_fresh and kept_mine are left */
    for (int i = 0; i < 6; i++) unlink(all[i]);
    unlink(path);
    assert_int_equal(rmdir(dir), 0);
}

/* Duplicate names are found by sorting: an object of 200,000 names (20 million pairs to compare one by one) parses in
 * well under a second, and the duplicate at its end is still found. */
static void test_parse_many_names(void **state) {
    (void)state;
    const size_t n = 200000;
    char *text = malloc(n * 24 + 64);
    assert_non_null(text);
    size_t o = 0;
    text[o++] = '{';
    for (size_t i = 0; i < n; i++) o += (size_t)sprintf(text + o, "%s\"k%zu\": %zu", i ? ", " : "", i, i);
    size_t open_len = o;
    strcpy(text + o, "}");
    char why[128] = "";
    cJSON *v = cq_json_parse_strict(text, open_len + 1, why, sizeof why);
    if (!v) fail_msg("refused: %s", why);
    assert_int_equal(cJSON_GetArraySize(v), (int)n);
    cJSON_Delete(v);
    strcpy(text + open_len, ", \"k17\": 0}");
    v = cq_json_parse_strict(text, strlen(text), why, sizeof why);
    assert_null(v);
    assert_non_null(strstr(why, "\"k17\" appears twice"));
    free(text);
}

/* What cq_file_write_atomic and cq_mkdirs make is their owner's only, even under umask 0 (issue 29: originals and
 * page images were written 0644, their folders 0755). */
static void test_private_files(void **state) {
    (void)state;
    char dir[96], sub[128], path[160];
    snprintf(dir, sizeof dir, "/tmp/cq_test_private_%d", (int)getpid());
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    snprintf(path, sizeof path, "%s/file.png", sub);
    mode_t old = umask(0);
    cq_err err = {0};
    assert_int_equal(cq_mkdirs(sub, &err), CQ_OK);
    assert_int_equal(cq_file_write_atomic(path, "png", 3, &err), CQ_OK);
    umask(old);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    const char *dirs[] = {dir, sub};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(stat(dirs[i], &st), 0);
        assert_int_equal(st.st_mode & 07777, 0700);
    }
    unlink(path);
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/a", dir);
    rmdir(sub);
    assert_int_equal(rmdir(dir), 0);
}

/* The settings' range check: finite numbers in lo..hi, whole when asked; anything else is not one. */
static void test_number_in(void **state) {
    (void)state;
    const char *yes[][2] = {{"0", "w"}, {"200", "w"}, {"3.0", "w"}, {"0.5", ""}, {"1e300", "i"}};
    const char *no[][2] = {{"-1", "w"}, {"201", "w"}, {"2.5", "w"}, {"\"3\"", ""}, {"null", ""}, {"true", ""},
                           {"-0.001", "i"}, {"1.5", ""}};
    for (size_t k = 0; k < sizeof yes / sizeof *yes; k++) {
        cJSON *v = cJSON_Parse(yes[k][0]);
        assert_true(cq_json_number_in(v, 0, yes[k][1][0] == 'i' ? INFINITY : 200, yes[k][1][0] == 'w'));
        cJSON_Delete(v);
    }
    for (size_t k = 0; k < sizeof no / sizeof *no; k++) {
        cJSON *v = cJSON_Parse(no[k][0]);
        const double hi = no[k][1][0] == 'i' ? INFINITY : no[k][1][0] == 'w' ? 200 : 1;
        assert_false(cq_json_number_in(v, 0, hi, no[k][1][0] == 'w'));
        cJSON_Delete(v);
    }
    assert_false(cq_json_number_in(NULL, 0, 1, false));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_number_in),
        cmocka_unit_test(test_print_repairs_utf8),
        cmocka_unit_test(test_parse_strict),
        cmocka_unit_test(test_stale_temp_files),
        cmocka_unit_test(test_parse_many_names),
        cmocka_unit_test(test_private_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
