/* app/config.c (clauseqa.conf) and app/models.c (where the model files are found). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "app/config.h"
#include "app/models.h"

static char dir[64];

static int make_dir(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/cq_config_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

/* Writes text to DIR/name and loads it; returns the status, err filled. */
static cq_status load(const char *text, cq_config *c, cq_err *err) {
    char path[128];
    snprintf(path, sizeof path, "%s/clauseqa.conf", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    memset(err, 0, sizeof *err);
    return cq_config_load(path, c, err);
}

static void test_config_reads_keys_and_flags(void **state) {
    (void)state;
    cq_config c;
    cq_err err;
    assert_int_equal(load("; a comment\n# another\ndata = /var/lib/clauseqa\nmodels = \"/opt/m\"\n"
                          "store = postgresql://qa@db/clauseqa\n\n[serve]\n"
                          "port = 9000   ; inline comment\nno-open-mode = yes\nexact = off\nhost=0.0.0.0\n",
                          &c, &err),
                     CQ_OK);
    assert_string_equal(cq_config_get(&c, "", "data"), "/var/lib/clauseqa");
    assert_string_equal(cq_config_get(&c, "", "models"), "/opt/m"); /* the quotes are the writer's */
    assert_string_equal(cq_config_get(&c, "", "store"), "postgresql://qa@db/clauseqa");
    assert_string_equal(cq_config_get(&c, "serve", "port"), "9000");
    assert_null(cq_config_get(&c, "", "port")); /* a key belongs to its section */
    assert_null(cq_config_get(&c, "serve", "threads"));
    char *flags[8];
    size_t n = cq_config_flags(&c, "serve", flags, 8);
    assert_int_equal(n, 3); /* exact = off gives no flag */
    assert_string_equal(flags[0], "--port=9000");
    assert_string_equal(flags[1], "--no-open-mode");
    assert_string_equal(flags[2], "--host=0.0.0.0");
    for (size_t i = 0; i < n; i++) free(flags[i]);
    assert_int_equal(cq_config_flags(&c, "ask", flags, 8), 0);
    cq_config_free(&c);
    /* every serve option is a key */
    assert_int_equal(load("[serve]\nport-file = /run/clauseqa.port\nadapter = none\nocr = off\n", &c, &err), CQ_OK);
    n = cq_config_flags(&c, "serve", flags, 8);
    assert_int_equal(n, 3);
    assert_string_equal(flags[2], "--ocr=off");
    for (size_t i = 0; i < n; i++) free(flags[i]);
    cq_config_free(&c);
}

/* The security and robustness options of issue 16 are keys too: the lists as one value (cli_serve.c splits them at
 * commas), the limits as numbers. */
static void test_config_security_keys(void **state) {
    (void)state;
    cq_config c;
    cq_err err;
    assert_int_equal(load("[serve]\nallow-host = qa.example.org, qa.internal\n"
                          "cors-origin = https://portal.example.com\nrequest-timeout-s = 20\n"
                          "max-client-connections = 0\nmax-pages = 10000\ndoc-memory-mb = 256\n",
                          &c, &err),
                     CQ_OK);
    char *flags[8];
    size_t n = cq_config_flags(&c, "serve", flags, 8);
    assert_int_equal(n, 6);
    assert_string_equal(flags[0], "--allow-host=qa.example.org, qa.internal");
    assert_string_equal(flags[1], "--cors-origin=https://portal.example.com");
    assert_string_equal(flags[5], "--doc-memory-mb=256");
    for (size_t i = 0; i < n; i++) free(flags[i]);
    cq_config_free(&c);
    assert_int_equal(load("[serve]\nmax-pages = all\n", &c, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "max-pages needs a whole number"));
    assert_null(c.entries);
}

static void test_config_errors_name_the_line(void **state) {
    (void)state;
    static const struct {
        const char *text, *message;
    } cases[] = {
        {"data = x\n[serve]\nprot = 80\n", "clauseqa.conf:3: unknown key 'prot' in [serve] (known: host, port"},
        {"port = 80\n", "clauseqa.conf:1: unknown key 'port' (known: data, models, store, log-level)"},
        {"\n[server]\nport = 80\n", "clauseqa.conf:3: unknown section [server]"},
        {"[serve]\nport = 80\nport = 81\n", "clauseqa.conf:3: 'port' is set twice (first on line 2)"},
        {"[serve]\n\nthreads = many\n", "clauseqa.conf:3: threads needs a whole number, not 'many'"},
        {"[serve]\nno-open-mode = perhaps\n", "clauseqa.conf:2: no-open-mode is true or false, not 'perhaps'"},
        {"data = x\njust words\n", "clauseqa.conf:2: not a `key = value` line or a [section]"},
        {"models =\n", "clauseqa.conf:1: models is empty"},
        {"just words\n[serve]\nprot = 1\n", "clauseqa.conf:1: not a `key = value` line"}, /* the first problem */
        {"[serve]\nprot = 1\njust words\n", "clauseqa.conf:2: unknown key 'prot'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cq_config c;
        cq_err err;
        assert_int_equal(load(cases[i].text, &c, &err), CQ_ERR_INVALID);
        if (!strstr(err.msg, cases[i].message)) fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, cases[i].message);
        assert_null(c.entries);
    }
    char long_line[600] = "data = ";
    memset(long_line + 7, 'x', 500);
    strcpy(long_line + 507, "\n");
    cq_config c;
    cq_err err;
    assert_int_equal(load(long_line, &c, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, ":1: the line is too long"));
    char missing[128];
    snprintf(missing, sizeof missing, "%s/none.conf", dir);
    assert_int_equal(cq_config_load(missing, &c, &err), CQ_ERR_IO);
}

static void touch(const char *path) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

static void test_models_first_folder_wins_per_file(void **state) {
    (void)state;
    char explicit_dir[128], data[128], shared[128], path[256];
    snprintf(explicit_dir, sizeof explicit_dir, "%s/mine", dir);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(shared, sizeof shared, "%s/share", dir);
    mkdir(explicit_dir, 0755);
    mkdir(data, 0755);
    snprintf(path, sizeof path, "%s/models", data);
    mkdir(path, 0755);
    mkdir(shared, 0755);
    snprintf(path, sizeof path, "%s/ssm", shared);
    mkdir(path, 0755);

    /* Nothing anywhere: both missing, three folders searched in order. */
    cq_models m;
    cq_models_find(explicit_dir, "--models", data, shared, "install", &m);
    assert_int_equal(m.n_dirs, 3);
    assert_string_equal(m.dirs[0].origin, "--models");
    assert_string_equal(m.dirs[1].origin, "data directory");
    assert_string_equal(m.dirs[2].dir, shared);
    assert_null(m.decoder_origin);
    assert_null(m.encoder_origin);
    char searched[1024];
    cq_models_searched(&m, searched, sizeof searched);
    assert_non_null(strstr(searched, "/mine (--models), "));
    assert_non_null(strstr(searched, "/share (install)"));

    /* The encoder only in the shared folder, the decoder in DATA/models and in the explicit folder. */
    snprintf(path, sizeof path, "%s/ssm/ssm.json", shared);
    touch(path);
    snprintf(path, sizeof path, "%s/models/gemma-3-270m-q4_k_m.gguf", data);
    touch(path);
    cq_models_find(NULL, NULL, data, shared, "install", &m);
    assert_int_equal(m.n_dirs, 2);
    assert_string_equal(m.decoder_origin, "data directory");
    assert_string_equal(m.decoder, path);
    assert_string_equal(m.encoder_origin, "install");
    snprintf(path, sizeof path, "%s/ssm", shared);
    assert_string_equal(m.encoder, path);
    snprintf(path, sizeof path, "%s/gemma-3-270m-q4_k_m.gguf", explicit_dir);
    touch(path);
    cq_models_find(explicit_dir, "$CLAUSEQA_MODELS", data, NULL, NULL, &m);
    assert_string_equal(m.decoder_origin, "$CLAUSEQA_MODELS");
    assert_string_equal(m.decoder, path);
    assert_null(m.encoder_origin); /* no shared folder given */

    /* The GPU's reader: found like the decoder; the reader on the GPU, the decoder's on the CPU; --model over both;
     * none when CLAUSEQA_DECODER_FILE chose one reader for both or CLAUSEQA_DECODER_GPU_FILE says none. */
    char gpu[1100];
    snprintf(gpu, sizeof gpu, "%s/models/" CQ_DECODER_GPU_FILE, data);
    touch(gpu);
    cq_models_find(explicit_dir, "--models", data, NULL, NULL, &m);
    assert_string_equal(m.decoder_gpu, gpu);
    assert_string_equal(m.decoder_gpu_origin, "data directory");
    assert_string_equal(cq_models_reader(&m, NULL, CQ_DEVICE_CUDA), gpu);
    assert_string_equal(cq_models_reader(&m, NULL, CQ_DEVICE_CPU), path);
    assert_string_equal(cq_models_reader(&m, "/x/given.gguf", CQ_DEVICE_CUDA), "/x/given.gguf");
    assert_string_equal(cq_models_reader(&m, NULL, CQ_DEVICE_AUTO), cq_decoder_cuda_available() ? gpu : path);
    setenv("CLAUSEQA_DECODER_GPU_FILE", "none", 1);
    cq_models_find(explicit_dir, "--models", data, NULL, NULL, &m);
    assert_null(m.decoder_gpu_origin);
    assert_string_equal(cq_models_reader(&m, NULL, CQ_DEVICE_CUDA), path);
    unsetenv("CLAUSEQA_DECODER_GPU_FILE");
    setenv("CLAUSEQA_DECODER_FILE", "gemma-3-270m-q4_k_m.gguf", 1);
    cq_models_find(explicit_dir, "--models", data, NULL, NULL, &m);
    assert_null(m.decoder_gpu_origin);
    unsetenv("CLAUSEQA_DECODER_FILE");
    cq_models empty;
    cq_models_find(NULL, NULL, explicit_dir, NULL, NULL, &empty); /* EXPLICIT/models: nothing */
    assert_null(cq_models_reader(&empty, NULL, CQ_DEVICE_CUDA));

    /* The running binary's shared folder: <prefix>/share/clauseqa/models beside a bin/, else none (this test
     * program is neither in a bin/ folder nor the build tree's clauseqa). */
    char out[1024];
    const char *origin = NULL;
    if (cq_models_shared_dir(out, sizeof out, &origin)) assert_non_null(strstr(out, "models"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_reads_keys_and_flags),
        cmocka_unit_test(test_config_security_keys),
        cmocka_unit_test(test_config_errors_name_the_line),
        cmocka_unit_test(test_models_first_folder_wins_per_file),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
