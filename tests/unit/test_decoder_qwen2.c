#define _GNU_SOURCE /* memmem */
/* The Qwen2 path of the decoder (decoder/decoder.h): a tiny random qwen2 GGUF (tests/data/decoder/qwen2_tiny.gguf:
 * GQA 4:2, Q/K/V biases, SwiGLU, untied output, F32/F16/Q8_0/Q5_0 weights, a byte-level BPE vocabulary) against
 * an independent numpy forward (tools/decoder_ref/qwen2_ref.py tiny), on the CPU in the exact and default modes,
 * fed whole, in chunks and token by token; its tokenizer (merges by rank, specials only when parsed, no BOS,
 * byte round trip) and chat format; a LoRA adapter on it against the float merge. Then, when data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf is present
 * (tools/fetch_model.sh fetches it; skipped otherwise, at once): the tokenizer against transformers' GGUF tokenizer
 * on Chinese/English/mixed/digit/whitespace/emoji strings (tests/data/decoder/qwen2_tokenizer_ids.json) and the
 * logits against the numpy reference on zh/en/ChatML prompts (tests/data/decoder/qwen2_logits_ref.json; greedy
 * tokens too where a fixture has them, as transformers' from the GPU box do). An external mode (test_external) checks any qwen2 GGUF on the CPU or CUDA against logits from
 * transformers (tools/decoder_ref/qwen2_hf_logits.py; the GPU box, tools/device_qwen.sh).
 *
 * Tolerances: tiny model, NMSE of the checked logits (sum of squared differences / sum of squares of the reference)
 * below 1e-8 exact and 1e-5 default (float32 against float64; int16 activations); real model, every top-16 logit
 * within LOGIT_TOL (the same as the Gemma test) and the argmax wherever the top two differ by more. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "decoder/decoder.h"
#include "decoder/forward_cpu.h"
#include "decoder/gguf.h"
#include "decoder/lora.h"
#include "decoder/model.h"
#include "test_adapter_util.h"

#define LOGIT_TOL 0.02f
#define REAL_MODEL "data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

static char *source_path(const char *rel) {
    static char buf[4][4096];
    static int k;
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", root ? root : ".", rel);
    return buf[k];
}

static cJSON *read_json(const char *rel) {
    FILE *f = fopen(source_path(rel), "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cJSON *j = NULL;
    if (s && fread(s, 1, (size_t)n, f) == (size_t)n) {
        s[n] = 0;
        j = cJSON_Parse(s);
    }
    free(s);
    fclose(f);
    return j;
}

static int32_t *json_ids(cJSON *arr, int *n) {
    *n = cJSON_GetArraySize(arr);
    int32_t *out = malloc((size_t)(*n ? *n : 1) * sizeof *out);
    for (int i = 0; i < *n; i++) out[i] = cJSON_GetArrayItem(arr, i)->valueint;
    return out;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static cq_decoder *open_model(const char *rel, bool exact) {
    cq_decoder_options opt = {CQ_DEVICE_CPU, 2, exact};
    cq_decoder *d = NULL;
    cq_err err = {0};
    cq_status st = cq_decoder_open(source_path(rel), &opt, &d, &err);
    if (st) fprintf(stderr, "%s: %s\n", rel, err.msg);
    assert_int_equal(st, CQ_OK);
    return d;
}

/* ---- the tiny model ------------------------------------------------------------------------------------------- */

/* The reference's positions of each case, fed in the given way: 0 whole prompt with all logits, 1 pieces up to each
 * checked position then that token alone (decode steps), 2 token by token throughout. NMSE over them. */
static double tiny_nmse(cq_decoder *d, cJSON *ref, int way) {
    const int V = cq_decoder_get_info(d)->n_vocab;
    double num = 0, den = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases")) {
        int n, np;
        int32_t *ids = json_ids(cJSON_GetObjectItem(c, "ids"), &n), *pos = json_ids(cJSON_GetObjectItem(c, "positions"), &np);
        cJSON *rows = cJSON_GetObjectItem(c, "logits");
        float *all = malloc((size_t)n * V * sizeof *all);
        cq_decoder_seq *s;
        cq_err err = {0};
        assert_int_equal(cq_decoder_seq_new(d, n, &s, &err), CQ_OK);
        if (way == 0) {
            assert_int_equal(cq_decoder_eval(s, ids, (size_t)n, all, true, &err), CQ_OK);
        } else {
            int fed = 0;
            for (int k = 0; k < np; k++) {
                int p = pos[k];
                if (way == 1) {
                    assert_int_equal(cq_decoder_eval(s, ids + fed, (size_t)(p - fed), NULL, false, &err), CQ_OK);
                } else {
                    for (int t = fed; t < p; t++) assert_int_equal(cq_decoder_eval(s, ids + t, 1, NULL, false, &err), CQ_OK);
                }
                assert_int_equal(cq_decoder_eval(s, ids + p, 1, all + (size_t)p * V, false, &err), CQ_OK);
                fed = p + 1;
            }
        }
        for (int k = 0; k < np; k++) {
            cJSON *row = cJSON_GetArrayItem(rows, k);
            assert_int_equal(cJSON_GetArraySize(row), V);
            for (int i = 0; i < V; i++) {
                double want = cJSON_GetArrayItem(row, i)->valuedouble, got = all[(size_t)pos[k] * V + i];
                num += (got - want) * (got - want), den += want * want;
            }
        }
        cq_decoder_seq_free(s);
        free(all), free(ids), free(pos);
    }
    return num / den;
}

static void test_tiny_logits(void **state) {
    (void)state;
    cJSON *ref = read_json("tests/data/decoder/qwen2_tiny_logits.json");
    assert_non_null(ref);
    cq_decoder *exact = open_model("tests/data/decoder/qwen2_tiny.gguf", true);
    cq_decoder *fast = open_model("tests/data/decoder/qwen2_tiny.gguf", false);
    const cq_decoder_info *info = cq_decoder_get_info(exact);
    assert_string_equal(info->architecture, "qwen2");
    assert_int_equal(info->n_head, 4);
    assert_int_equal(info->n_head_kv, 2);
    assert_int_equal(info->n_layer, 2);
    assert_int_equal(info->n_global_layers, 2);
    for (int way = 0; way < 3; way++) {
        double e = tiny_nmse(exact, ref, way), f = way ? tiny_nmse(fast, ref, way) : 0;
        fprintf(stderr, "  tiny qwen2, fed %s: NMSE exact %.2e, default %.2e\n",
                way == 0 ? "whole" : way == 1 ? "in pieces" : "token by token", e, f);
        assert_true(e < 1e-8);
        assert_true(f < 1e-5);
    }
    cq_decoder_close(exact);
    cq_decoder_close(fast);
    cJSON_Delete(ref);
}

static void test_tiny_tokenizer_and_chat(void **state) {
    (void)state;
    cq_decoder *d = open_model("tests/data/decoder/qwen2_tiny.gguf", false);
    const cq_tokenizer *t = cq_decoder_tokenizer(d);
    assert_true(cq_tokenizer_is_gpt2(t));
    assert_false(cq_tokenizer_adds_bos(t));
    int32_t the = cq_tokenizer_find(t, "\xc4\xa0the"), of = cq_tokenizer_find(t, "\xc4\xa0of"), start = cq_tokenizer_find(t, "<|im_start|>");
    assert_true(the >= 0 && of >= 0 && start >= 0);
    assert_int_equal(cq_tokenizer_eos(t), cq_tokenizer_find(t, "<|im_end|>"));
    assert_int_equal(cq_tokenizer_eot(t), cq_tokenizer_find(t, "<|im_end|>"));
    int32_t *ids;
    size_t n;
    cq_err err = {0};
    /* merges apply: " the of" is two tokens; no BOS even when asked (add_bos_token false) */
    assert_int_equal(cq_tokenizer_encode(t, " the of", 7, CQ_TOK_ADD_BOS, &ids, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], the);
    assert_int_equal(ids[1], of);
    free(ids);
    /* a control token is one id only when parsed */
    const char *chat = "<|im_start|>user";
    assert_int_equal(cq_tokenizer_encode(t, chat, strlen(chat), CQ_TOK_PARSE_SPECIAL, &ids, &n, &err), CQ_OK);
    assert_int_equal(ids[0], start);
    free(ids);
    assert_int_equal(cq_tokenizer_encode(t, chat, strlen(chat), 0, &ids, &n, &err), CQ_OK);
    assert_true(n > 3);
    for (size_t i = 0; i < n; i++) assert_int_not_equal(ids[i], start);
    char *back;
    size_t len;
    assert_int_equal(cq_tokenizer_decode(t, ids, n, false, &back, &len, &err), CQ_OK);
    assert_string_equal(back, chat);
    free(back), free(ids);
    /* any bytes round-trip, invalid UTF-8 included */
    const char bytes[] = "a\xff\xfe b\x80\t\n\n  \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 x'll 12";
    assert_int_equal(cq_tokenizer_encode(t, bytes, sizeof bytes - 1, 0, &ids, &n, &err), CQ_OK);
    assert_int_equal(cq_tokenizer_decode(t, ids, n, false, &back, &len, &err), CQ_OK);
    assert_int_equal(len, sizeof bytes - 1);
    assert_memory_equal(back, bytes, len);
    free(back), free(ids);
    /* ChatML from the chat template */
    assert_int_equal(cq_decoder_get_info(d)->chat_format, CQ_CHAT_CHATML);
    char *wrapped = cq_decoder_chat_user(d, "你好");
    assert_string_equal(wrapped, "<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n");
    free(wrapped);
    cq_decoder_close(d);
}

/* A qwen2 file that lacks a bias is refused with the tensor's name. */
static void test_missing_bias(void **state) {
    (void)state;
    /* the tiny file with "attn_q.bias" of layer 1 renamed (same length) */
    FILE *f = fopen(source_path("tests/data/decoder/qwen2_tiny.gguf"), "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    char *hit = memmem(buf, (size_t)n, "blk.1.attn_q.bias", 17);
    assert_non_null(hit);
    memcpy(hit, "blk.1.attn_q.bxas", 17);
    char path[] = "/tmp/cq_qwen2_nobias_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, (size_t)n), n);
    close(fd);
    cq_decoder_options opt = {CQ_DEVICE_CPU, 1, false};
    cq_decoder *d = NULL;
    cq_err err = {0};
    assert_int_equal(cq_decoder_open(path, &opt, &d, &err), CQ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "blk.1.attn_q.bias"));
    unlink(path);
    free(buf);
}

/* A LoRA adapter on the tiny qwen2 model (every projection of every layer, the K/V factors of its 2 KV heads'
 * width): the CPU's side product against the weights merged in float and run by the exact forward, all logits. */
static void test_tiny_adapter(void **state) {
    (void)state;
    const char *gguf = source_path("tests/data/decoder/qwen2_tiny.gguf");
    cq_decoder *d = open_model("tests/data/decoder/qwen2_tiny.gguf", true);
    const cq_decoder_info *info = cq_decoder_get_info(d);
    char sha[65], dir[] = "/tmp/cq_qwen2_lora_XXXXXX";
    cq_err err = {0};
    assert_int_equal(cq_model_file_sha256(gguf, sha, &err), CQ_OK);
    assert_non_null(mkdtemp(dir));
    test_adapter ta;
    test_adapter_spec spec = {.rank = 4, .alpha = 8, .base_sha256 = sha, .seed = 11};
    assert_int_equal(test_write_adapter(dir, info, &spec, &ta), 0);
    const int V = info->n_vocab, n = 23;
    int32_t ids[23];
    for (int i = 0; i < n; i++) ids[i] = (i * 37 + 5) % (V - 3);
    float *base = malloc((size_t)n * V * sizeof *base), *got = malloc((size_t)n * V * sizeof *got),
          *want = malloc((size_t)n * V * sizeof *want);
    cq_decoder_seq *s;
    assert_int_equal(cq_decoder_seq_new(d, n, &s, &err), CQ_OK);
    assert_int_equal(cq_decoder_eval(s, ids, (size_t)n, base, true, &err), CQ_OK);
    if (cq_decoder_load_adapter(d, dir, &err)) fail_msg("%s", err.msg);
    assert_int_equal(cq_decoder_adapter(d)->n_adapted, info->n_layer * 7);
    cq_decoder_seq_reset(s);
    assert_int_equal(cq_decoder_eval(s, ids, (size_t)n, got, true, &err), CQ_OK);
    cq_decoder_seq_free(s);
    /* the reference: merged in float */
    cq_gguf *g;
    cq_gemma m;
    assert_int_equal(cq_gguf_open(gguf, &g, &err), CQ_OK);
    assert_int_equal(cq_gemma_load(g, &m, &err), CQ_OK);
    float *merged[64] = {0};
    for (int32_t l = 0; l < m.n_layer; l++)
        for (int p = 0; p < TEST_N_PROJ; p++) {
            cq_wmat *w = (cq_wmat *)cq_proj_weight(&m.layers[l], (cq_proj)p);
            float *f = malloc((size_t)w->rows * w->cols * sizeof *f);
            cq_op_lora_merge_ref(w, ta.a[l * TEST_N_PROJ + p], ta.b[l * TEST_N_PROJ + p], ta.rank, ta.scale, f);
            merged[l * TEST_N_PROJ + p] = f;
            *w = (cq_wmat){f, CQ_QTYPE_F32, w->rows, w->cols, (size_t)w->cols * sizeof(float)};
        }
    cq_cpu_model *cm;
    cq_cpu_seq *cs;
    assert_int_equal(cq_cpu_model_new(&m, 1, true, &cm, &err), CQ_OK);
    assert_int_equal(cq_cpu_seq_new(cm, n, &cs, &err), CQ_OK);
    assert_int_equal(cq_cpu_eval(cs, ids, (size_t)n, 0, want, true, &err), CQ_OK);
    cq_cpu_seq_free(cs);
    cq_cpu_model_free(cm);
    double num = 0, den = 0, moved = 0;
    for (size_t i = 0; i < (size_t)n * V; i++) {
        num += (double)(got[i] - want[i]) * (got[i] - want[i]), den += (double)want[i] * want[i];
        moved += (double)(base[i] - want[i]) * (base[i] - want[i]);
    }
    fprintf(stderr, "  tiny qwen2 + rank-4 adapter: NMSE vs the float merge %.2e (the adapter moved them by %.2e)\n",
            num / den, moved / den);
    assert_true(num / den < 1e-9);
    assert_true(moved / den > 1e-4);
    for (int i = 0; i < 64; i++) free(merged[i]);
    cq_gemma_free(&m);
    cq_gguf_close(g);
    test_adapter_free(&ta);
    test_rm_adapter(dir);
    free(base), free(got), free(want);
    cq_decoder_close(d);
}

/* ---- the real model ------------------------------------------------------------------------------------------- */

static bool have_real(void) {
    if (access(source_path(REAL_MODEL), R_OK) == 0) return true;
    fprintf(stderr, "  skipped: %s is not there (tools/fetch_model.sh fetches it)\n", REAL_MODEL);
    return false;
}

static void test_real_tokenizer(void **state) {
    (void)state;
    if (!have_real()) skip();
    cJSON *ref = read_json("tests/data/decoder/qwen2_tokenizer_ids.json");
    assert_non_null(ref);
    /* the tokenizer alone (the weights are not read) */
    cq_gguf *g;
    cq_tokenizer *t;
    cq_err e0 = {0};
    assert_int_equal(cq_gguf_open(source_path(REAL_MODEL), &g, &e0), CQ_OK);
    assert_int_equal(cq_tokenizer_from_gguf(g, &t, &e0), CQ_OK);
    cq_gguf_close(g);
    assert_false(cq_tokenizer_adds_bos(t));
    assert_int_equal(cq_tokenizer_eos(t), 151645);
    int n_cases = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases")) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        for (int parse = 0; parse < 2; parse++) {
            int nw;
            int32_t *want = json_ids(cJSON_GetObjectItem(c, parse ? "ids" : "plain_ids"), &nw), *ids;
            size_t n;
            cq_err err = {0};
            assert_int_equal(cq_tokenizer_encode(t, text, strlen(text), CQ_TOK_ADD_BOS | (parse ? CQ_TOK_PARSE_SPECIAL : 0),
                                                 &ids, &n, &err), CQ_OK);
            bool same = n == (size_t)nw && (n == 0 || !memcmp(ids, want, n * sizeof *ids));
            if (!same) {
                fprintf(stderr, "  %s (parse %d): %zu ids, reference %d:", text, parse, n, nw);
                for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
                fprintf(stderr, "\n   reference:");
                for (int i = 0; i < nw; i++) fprintf(stderr, " %d", want[i]);
                fprintf(stderr, "\n");
            }
            assert_true(same);
            char *back;
            size_t len;
            assert_int_equal(cq_tokenizer_decode(t, ids, n, true, &back, &len, &err), CQ_OK);
            assert_string_equal(back, text);
            free(back), free(ids), free(want);
        }
        n_cases++;
    }
    fprintf(stderr, "  %d strings tokenized as transformers does (parsed and plain)\n", n_cases);
    assert_true(n_cases >= 15);
    cq_tokenizer_free(t);
    cJSON_Delete(ref);
}

/* tol: every top-16 logit within it; < 0: bf16 (CUDA), NMSE of the top-16 logits below NMSE_BF16 instead, the
 * argmax where the reference's top two differ by more than BF16_GAP, greedy tokens printed but not required */
#define NMSE_BF16 2e-3
#define BF16_GAP 0.5f
static void check_real_logits(cq_decoder *d, cJSON *ref, const char *mode, float tol) {
    const int V = cq_decoder_get_info(d)->n_vocab;
    float *logits = malloc((size_t)V * sizeof *logits);
    cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases")) {
        int n;
        int32_t *ids = json_ids(cJSON_GetObjectItem(c, "ids"), &n);
        cq_decoder_seq *s;
        cq_err err = {0};
        assert_int_equal(cq_decoder_seq_new(d, n + 8, &s, &err), CQ_OK);
        int fed = 0;
        float worst = 0;
        cJSON *pos;
        cJSON_ArrayForEach(pos, cJSON_GetObjectItem(c, "positions")) {
            int p = cJSON_GetObjectItem(pos, "pos")->valueint;
            assert_int_equal(cq_decoder_eval(s, ids + fed, (size_t)(p - fed), NULL, false, &err), CQ_OK);
            assert_int_equal(cq_decoder_eval(s, ids + p, 1, logits, false, &err), CQ_OK);
            fed = p + 1;
            cJSON *top_ids = cJSON_GetObjectItem(pos, "top_ids"), *top = cJSON_GetObjectItem(pos, "top_logits");
            double num = 0, den = 0;
            for (int k = 0; k < cJSON_GetArraySize(top_ids); k++) {
                int id = cJSON_GetArrayItem(top_ids, k)->valueint;
                float want = (float)cJSON_GetArrayItem(top, k)->valuedouble, diff = fabsf(logits[id] - want);
                num += (double)diff * diff, den += (double)want * want;
                if (diff > worst) worst = diff;
                if (tol > 0 && diff > tol)
                    fprintf(stderr, "%s pos %d token %d: logit %.5f, reference %.5f\n",
                            cJSON_GetObjectItem(c, "name")->valuestring, p, id, logits[id], want);
                if (tol > 0) assert_true(diff <= tol);
            }
            if (tol < 0) {
                fprintf(stderr, "  %s pos %d: NMSE of the top-16 %.2e\n", cJSON_GetObjectItem(c, "name")->valuestring, p,
                        num / den);
                assert_true(num / den < NMSE_BF16);
            }
            float gap = (float)(cJSON_GetArrayItem(top, 0)->valuedouble - cJSON_GetArrayItem(top, 1)->valuedouble);
            if (gap > (tol > 0 ? tol : BF16_GAP))
                assert_int_equal(argmax(logits, V), cJSON_GetObjectItem(pos, "argmax")->valueint);
        }
        /* greedy continuation */
        cJSON *greedy = cJSON_GetObjectItem(c, "greedy");
        int32_t next = argmax(logits, V);
        int same = 0;
        for (int i = 0; i < cJSON_GetArraySize(greedy); i++) {
            if (tol > 0) assert_int_equal(next, cJSON_GetArrayItem(greedy, i)->valueint);
            if (next != cJSON_GetArrayItem(greedy, i)->valueint) break;
            same++;
            assert_int_equal(cq_decoder_eval(s, &next, 1, logits, false, &err), CQ_OK);
            next = argmax(logits, V);
        }
        fprintf(stderr, "  %-7s %-8s %3d tokens: max |logit - reference| %.2e over the top-16; greedy %d of %d same\n",
                mode, cJSON_GetObjectItem(c, "name")->valuestring, n, worst, same, cJSON_GetArraySize(greedy));
        cq_decoder_seq_free(s);
        free(ids);
    }
    free(logits);
}

static void test_real_logits(void **state) {
    (void)state;
    if (!have_real()) skip();
    cJSON *ref = read_json("tests/data/decoder/qwen2_logits_ref.json");
    assert_non_null(ref);
    cq_decoder *d = open_model(REAL_MODEL, true);
    check_real_logits(d, ref, "exact", LOGIT_TOL);
    cq_decoder_close(d);
    d = open_model(REAL_MODEL, false);
    check_real_logits(d, ref, "default", LOGIT_TOL);
    cq_decoder_close(d);
    cJSON_Delete(ref);
}

/* External mode, for the GPU box (tools/device_qwen.sh): CLAUSEQA_QWEN2_MODEL (a GGUF path) against
 * CLAUSEQA_QWEN2_REF (logits in qwen2_logits_ref.json's format, e.g. from tools/decoder_ref/qwen2_hf_logits.py) on
 * CLAUSEQA_QWEN2_DEVICE (cpu: LOGIT_TOL; cuda: the bf16 thresholds). Skipped when not set. */
static void test_external(void **state) {
    (void)state;
    const char *model = getenv("CLAUSEQA_QWEN2_MODEL"), *refp = getenv("CLAUSEQA_QWEN2_REF"),
               *dev = getenv("CLAUSEQA_QWEN2_DEVICE");
    if (!model || !refp) skip();
    FILE *f = fopen(refp, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = 0;
    fclose(f);
    cJSON *ref = cJSON_Parse(text);
    free(text);
    assert_non_null(ref);
    const bool cuda = dev && !strcmp(dev, "cuda");
    cq_decoder_options opt = {cuda ? CQ_DEVICE_CUDA : CQ_DEVICE_CPU, 0, !cuda};
    cq_decoder *d = NULL;
    cq_err err = {0};
    if (cq_decoder_open(model, &opt, &d, &err)) fail_msg("%s: %s", model, err.msg);
    check_real_logits(d, ref, cuda ? "cuda" : "cpu", cuda ? -1.0f : LOGIT_TOL);
    cq_decoder_close(d);
    cJSON_Delete(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_logits),
        cmocka_unit_test(test_tiny_tokenizer_and_chat),
        cmocka_unit_test(test_missing_bias),
        cmocka_unit_test(test_tiny_adapter),
        cmocka_unit_test(test_real_tokenizer),
        cmocka_unit_test(test_real_logits),
        cmocka_unit_test(test_external),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
