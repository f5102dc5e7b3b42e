/* Reading a LoRA adapter (clauseqa-lora-v1, docs/ANSWERS.md); see lora.h. */
#include "decoder/lora.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileio.h"
#include "core/safetensors.h"
#include "core/sha256.h"

#define MAX_JSON_BYTES (1u << 20)
#define MAX_WEIGHTS_BYTES ((size_t)1 << 30)
#define MAX_RANK 1024

static const char *const PROJ_NAMES[CQ_N_PROJ] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                                  "ffn_gate", "ffn_up", "ffn_down"};

const char *cq_proj_name(cq_proj p) { return p < CQ_N_PROJ ? PROJ_NAMES[p] : "?"; }

const cq_wmat *cq_proj_weight(const cq_gemma_layer *L, cq_proj p) {
    switch (p) {
    case CQ_PROJ_Q: return &L->wq;
    case CQ_PROJ_K: return &L->wk;
    case CQ_PROJ_V: return &L->wv;
    case CQ_PROJ_O: return &L->wo;
    case CQ_PROJ_GATE: return &L->wgate;
    case CQ_PROJ_UP: return &L->wup;
    default: return &L->wdown;
    }
}

void cq_lora_free(cq_lora *l) {
    if (!l) return;
    for (int32_t i = 0; l->layers && i < l->n_layer; i++)
        for (int p = 0; p < CQ_N_PROJ; p++) free(l->layers[i].a[p]), free(l->layers[i].b[p]);
    free(l->layers);
    free(l);
}

static bool is_hex64(const char *s) {
    if (strlen(s) != 64) return false;
    for (int i = 0; i < 64; i++)
        if (!isxdigit((unsigned char)s[i])) return false;
    return true;
}

/* A per-language setting of adapter.json: one number for every question, or one per question language ({"zh": x,
 * "en": x}, either may be left out: the runtime's default then). "refusal_min_p" (the refusal threshold) is each in
 * (0, 2], above 1: never refuse; "min_confidence" (the confidence floor) each in (0, 1). */
typedef struct {
    const char *key;
    double max;          /* the largest value allowed */
    bool max_inclusive;
    const char *what;    /* the error: what the value must be */
} per_language_field;

static const per_language_field refusal_field = {
    "refusal_min_p", 2, true,
    "\"refusal_min_p\" must be a number above 0 and at most 2 (above 1: never refuse), or {\"zh\": number, \"en\": number}"};
static const per_language_field floor_field = {
    "min_confidence", 1, false,
    "\"min_confidence\" must be a number above 0 and below 1, or {\"zh\": number, \"en\": number}"};

static bool per_language_ok(const cJSON *v, const per_language_field *f) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0)) return false;
    return f->max_inclusive ? v->valuedouble <= f->max : v->valuedouble < f->max;
}

/* The field's value r (when adapter.json names it) into *zh and *en. */
static cq_status per_language(const cJSON *r, const per_language_field *f, double *zh, double *en, cq_err *err) {
    if (!r) return CQ_OK;
    if (cJSON_IsNumber(r)) {
        if (!per_language_ok(r, f)) return cq_err_set(err, CQ_ERR_FORMAT, "%s", f->what);
        *zh = r->valuedouble;
        *en = r->valuedouble;
        return CQ_OK;
    }
    if (!cJSON_IsObject(r) || !r->child) return cq_err_set(err, CQ_ERR_FORMAT, "%s", f->what);
    for (const cJSON *c = r->child; c; c = c->next) {
        const bool is_zh = !strcmp(c->string, "zh");
        if (!is_zh && strcmp(c->string, "en"))
            return cq_err_set(err, CQ_ERR_FORMAT, "\"%s\": \"%s\" is not a language it knows (zh, en)", f->key,
                              c->string);
        if (!per_language_ok(c, f)) return cq_err_set(err, CQ_ERR_FORMAT, "%s", f->what);
        *(is_zh ? zh : en) = c->valuedouble;
    }
    return CQ_OK;
}

/* adapter.json into l->info and l->scale. */
static cq_status parse_manifest(const char *text, const char *dir, cq_lora *l, cq_err *err) {
    cJSON *root = cJSON_Parse(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return cq_err_set(err, CQ_ERR_FORMAT, "not a JSON object");
    }
    cq_adapter_info *i = &l->info;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *rank = cJSON_GetObjectItemCaseSensitive(root, "rank");
    const cJSON *alpha = cJSON_GetObjectItemCaseSensitive(root, "alpha");
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(root, "prompt_format");
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(root, "base");
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(base, "sha256");
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(base, "file");
    const cJSON *man = cJSON_GetObjectItemCaseSensitive(root, "manifest");
    const cJSON *refusal = cJSON_GetObjectItemCaseSensitive(root, refusal_field.key);
    const cJSON *min_conf = cJSON_GetObjectItemCaseSensitive(root, floor_field.key);
    cq_status rc = CQ_OK;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "clauseqa-lora-v1"))
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"format\" must be \"clauseqa-lora-v1\"");
    else if (!cJSON_IsNumber(rank) || rank->valuedouble != floor(rank->valuedouble) || rank->valuedouble < 1 ||
             rank->valuedouble > MAX_RANK)
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"rank\" must be an integer in 1..%d", MAX_RANK);
    else if (!cJSON_IsNumber(alpha) || !(alpha->valuedouble > 0) || !isfinite(alpha->valuedouble))
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"alpha\" must be a positive number");
    else if (!cJSON_IsString(prompt))
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"prompt_format\" must be a string");
    else if (strcmp(prompt->valuestring, "cq-prompt-v1"))
        rc = cq_err_set(err, CQ_ERR_UNSUPPORTED, "prompt format \"%s\" is not one this build knows (cq-prompt-v1)",
                        prompt->valuestring);
    else if (!cJSON_IsString(sha) || !is_hex64(sha->valuestring))
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"base\": {\"sha256\"} must be the base model file's SHA-256 (64 hex digits)");
    else if (man && !cJSON_IsObject(man))
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"manifest\" must be an object");
    else
        rc = per_language(refusal, &refusal_field, &i->refusal_min_p, &i->refusal_min_p_en, err);
    if (!rc) rc = per_language(min_conf, &floor_field, &i->min_confidence, &i->min_confidence_en, err);
    if (!rc) {
        i->rank = (int32_t)rank->valuedouble;
        i->alpha = (float)alpha->valuedouble;
        l->scale = i->alpha / (float)i->rank;
        snprintf(i->prompt_format, sizeof i->prompt_format, "%s", prompt->valuestring);
        for (int k = 0; k < 64; k++) i->base_sha256[k] = (char)tolower((unsigned char)sha->valuestring[k]);
        snprintf(i->base_file, sizeof i->base_file, "%s", cJSON_IsString(file) ? file->valuestring : "");
        snprintf(i->dir, sizeof i->dir, "%s", dir);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(man, "name");
        const cJSON *steps = cJSON_GetObjectItemCaseSensitive(man, "steps");
        if (cJSON_IsString(name) && *name->valuestring) {
            snprintf(i->name, sizeof i->name, "%s", name->valuestring);
        } else { /* the folder's name */
            size_t n = strlen(dir);
            while (n > 1 && dir[n - 1] == '/') n--;
            size_t s = n;
            while (s > 0 && dir[s - 1] != '/') s--;
            snprintf(i->name, sizeof i->name, "%.*s", (int)(n - s), dir + s);
        }
        i->steps = cJSON_IsNumber(steps) && steps->valuedouble >= 0 ? (int64_t)steps->valuedouble : -1;
    }
    cJSON_Delete(root);
    return rc;
}

/* "blk.{l}.{proj}.lora_a|lora_b" (or the same with ".scale": an int8 factor's scales, *is_scale) into its parts;
 * false for any other name. */
static bool parse_name(const char *name, int32_t *layer, cq_proj *proj, bool *is_b, bool *is_scale) {
    if (strncmp(name, "blk.", 4)) return false;
    char *end;
    errno = 0;
    long l = strtol(name + 4, &end, 10);
    if (end == name + 4 || errno || l < 0 || l > (1 << 20) || *end != '.') return false;
    const char *p = end + 1;
    for (int k = 0; k < CQ_N_PROJ; k++) {
        size_t n = strlen(PROJ_NAMES[k]);
        if (strncmp(p, PROJ_NAMES[k], n) || p[n] != '.') continue;
        const char *f = p + n + 1;
        *is_scale = !strcmp(f, "lora_a.scale") || !strcmp(f, "lora_b.scale");
        if (!strcmp(f, "lora_a") || !strcmp(f, "lora_a.scale")) *is_b = false;
        else if (!strcmp(f, "lora_b") || !strcmp(f, "lora_b.scale")) *is_b = true;
        else return false;
        *layer = (int32_t)l;
        *proj = (cq_proj)k;
        return true;
    }
    return false;
}

static cq_status read_factors(const cq_safetensors *st, const cq_gemma *m, cq_lora *l, cq_err *err) {
    const int64_t r = l->info.rank;
    for (size_t k = 0; k < st->n; k++) {
        const cq_st_tensor *t = &st->tensors[k];
        int32_t layer;
        cq_proj p;
        bool is_b, is_scale;
        if (!parse_name(t->name, &layer, &p, &is_b, &is_scale))
            return cq_err_set(err, CQ_ERR_FORMAT, "unknown tensor %s (expected blk.{layer}.{attn_q|attn_k|attn_v|"
                              "attn_output|ffn_gate|ffn_up|ffn_down}.lora_a|lora_b)", t->name);
        if (is_scale) { /* read with its matrix, which must be an int8 one */
            char matrix[256];
            snprintf(matrix, sizeof matrix, "%.*s", (int)(strlen(t->name) - strlen(".scale")), t->name);
            const cq_st_tensor *q = cq_safetensors_find(st, matrix);
            if (!q || q->dtype != CQ_ST_I8)
                return cq_err_set(err, CQ_ERR_FORMAT, "tensor %s: scales for %s, which is %s", t->name, matrix,
                                  q ? "not an I8 tensor" : "not there");
            continue;
        }
        if (layer >= m->n_layer)
            return cq_err_set(err, CQ_ERR_FORMAT, "tensor %s: the model has %d layers", t->name, m->n_layer);
        const cq_wmat *w = cq_proj_weight(&m->layers[layer], p);
        const int64_t want[2] = {is_b ? w->rows : r, is_b ? r : w->cols};
        if (t->ndim != 2 || t->shape[0] != want[0] || t->shape[1] != want[1]) {
            char have[96], need[96];
            cq_st_shape_str(have, sizeof have, t->ndim, t->shape);
            cq_st_shape_str(need, sizeof need, 2, want);
            return cq_err_set(err, CQ_ERR_FORMAT, "tensor %s: shape %s; rank %lld and the model's %lld x %lld weight "
                              "need %s", t->name, have, (long long)r, (long long)w->rows, (long long)w->cols, need);
        }
        float **slot = is_b ? &l->layers[layer].b[p] : &l->layers[layer].a[p];
        if (!(*slot = malloc(t->numel * sizeof(float)))) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        cq_status rc;
        if (t->dtype == CQ_ST_I8) { /* stored as int8 with one scale a row (tools/decoder_train/adapter_int8.py) */
            char name[256];
            snprintf(name, sizeof name, "%s.scale", t->name);
            const cq_st_tensor *scale = cq_safetensors_find(st, name);
            rc = scale ? cq_st_rows_i8_to_f32(t, scale, *slot, err)
                       : cq_err_set(err, CQ_ERR_FORMAT, "tensor %s is I8 but %s is not there", t->name, name);
        } else {
            rc = cq_st_to_f32(t, *slot, err);
        }
        if (rc) return rc;
    }
    int n = 0;
    for (int32_t i = 0; i < l->n_layer; i++)
        for (int p = 0; p < CQ_N_PROJ; p++) {
            const cq_lora_layer *L = &l->layers[i];
            if (!L->a[p] != !L->b[p])
                return cq_err_set(err, CQ_ERR_FORMAT, "blk.%d.%s has lora_%s but not lora_%s", i, PROJ_NAMES[p],
                                  L->a[p] ? "a" : "b", L->a[p] ? "b" : "a");
            n += L->a[p] != NULL;
        }
    if (!n) return cq_err_set(err, CQ_ERR_FORMAT, "no adapted projection");
    l->info.n_adapted = n;
    return CQ_OK;
}

cq_status cq_lora_load(const char *dir, const cq_gemma *m, const char *base_sha256, cq_lora **out, cq_err *err) {
    *out = NULL;
    cq_lora *l = calloc(1, sizeof *l);
    if (!l) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    l->n_layer = m->n_layer;
    l->layers = calloc((size_t)m->n_layer, sizeof *l->layers);
    char path[4096];
    char *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/adapter.json", dir);
    cq_status rc = l->layers ? cq_file_read(path, MAX_JSON_BYTES, &text, &len, err)
                             : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc) {
        rc = parse_manifest(text, dir, l, err);
        if (rc) cq_err_prefix(err, "%s: ", path);
    }
    free(text);
    text = NULL;
    if (!rc && base_sha256 && strcmp(base_sha256, l->info.base_sha256))
        rc = cq_err_set(err, CQ_ERR_INVALID, "%s was trained on base model %s (sha256 %.12s...), not on this one "
                        "(sha256 %.12s...)", dir, *l->info.base_file ? l->info.base_file : "?", l->info.base_sha256,
                        base_sha256);
    if (!rc) {
        snprintf(path, sizeof path, "%s/adapter.safetensors", dir);
        rc = cq_file_read(path, MAX_WEIGHTS_BYTES, &text, &len, err);
        cq_safetensors st;
        if (!rc && !(rc = cq_safetensors_parse(text, len, &st, err))) {
            rc = read_factors(&st, m, l, err);
            cq_safetensors_free(&st);
        }
        if (rc && text) cq_err_prefix(err, "%s: ", path);
        free(text);
    }
    if (rc) {
        cq_err_prefix(err, "adapter: ");
        cq_lora_free(l);
        return rc;
    }
    *out = l;
    return CQ_OK;
}

cq_status cq_model_file_sha256(const char *path, char out[65], cq_err *err) {
    struct stat sb;
    if (stat(path, &sb)) return cq_err_set(err, CQ_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
    const long long size = (long long)sb.st_size,
                    mtime = (long long)sb.st_mtim.tv_sec * 1000000000LL + (long long)sb.st_mtim.tv_nsec;
    char cache[4096];
    snprintf(cache, sizeof cache, "%s.sha256-cache", path);
    FILE *f = fopen(cache, "r");
    if (f) {
        char hex[65];
        long long csize, cmtime;
        int ok = fscanf(f, "%64s %lld %lld", hex, &csize, &cmtime) == 3 && is_hex64(hex) && csize == size &&
                 cmtime == mtime;
        fclose(f);
        if (ok) {
            memcpy(out, hex, 65);
            return CQ_OK;
        }
    }
    cq_status rc = cq_sha256_file_hex(path, out, err);
    if (rc) return rc;
    char line[128];
    int n = snprintf(line, sizeof line, "%s %lld %lld\n", out, size, mtime);
    cq_file_write_atomic(cache, line, (size_t)n, NULL); /* best effort: see lora.h */
    return CQ_OK;
}
