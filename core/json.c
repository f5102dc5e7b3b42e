#include "core/json.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"

/* s (cJSON's text, taken over) with every invalid UTF-8 sequence replaced by U+FFFD. */
static char *valid_text(char *s, size_t *len) {
    if (!s) return NULL;
    size_t n = strlen(s), valid = cq_utf8_valid_prefix(s, n);
    if (valid == n) {
        if (len) *len = n;
        return s;
    }
    /* Invalid bytes are all >= 0x80, so they sit inside strings (cJSON escapes control characters and quotes):
     * replacing each with U+FFFD (3 bytes) keeps the structure. */
    char *out = malloc(valid + (n - valid) * 3 + 1);
    if (!out) {
        free(s);
        return NULL;
    }
    memcpy(out, s, valid);
    size_t o = valid, i = valid;
    while (i < n) {
        memcpy(out + o, "\xEF\xBF\xBD", 3);
        o += 3;
        i++;
        size_t run = cq_utf8_valid_prefix(s + i, n - i);
        memcpy(out + o, s + i, run);
        o += run;
        i += run;
    }
    out[o] = 0;
    free(s);
    if (len) *len = o;
    return out;
}

char *cq_json_print(const cJSON *v, size_t *len) { return valid_text(cJSON_PrintUnformatted(v), len); }

char *cq_json_print_formatted(const cJSON *v, size_t *len) { return valid_text(cJSON_Print(v), len); }

static bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int by_name(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* The first name that some object of v holds twice (as decoded: "a" and "\u0061" are one name), or NULL; *oom is
 * set when the names could not be sorted. Sorting keeps it O(n log n) for an object of n members (comparing every
 * pair would make a body of 100,000 members cost 10^10 comparisons). cJSON's nesting limit bounds the recursion. */
static const char *duplicate_name(const cJSON *v, bool *oom) {
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) return NULL;
    size_t n = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        const char *d = duplicate_name(c, oom);
        if (d || *oom) return d;
        n++;
    }
    if (!cJSON_IsObject(v) || n < 2) return NULL;
    const cJSON **names = malloc(n * sizeof *names);
    if (!names) {
        *oom = true;
        return NULL;
    }
    size_t i = 0;
    for (const cJSON *c = v->child; c; c = c->next) names[i++] = c;
    qsort(names, n, sizeof *names, by_name);
    const char *d = NULL;
    for (i = 1; i < n && !d; i++)
        if (!strcmp(names[i - 1]->string, names[i]->string)) d = names[i]->string;
    free(names);
    return d;
}

cJSON *cq_json_parse_strict(const char *text, size_t len, char *why, size_t why_cap) {
    size_t bad = cq_utf8_valid_prefix(text, len);
    if (bad < len) {
        snprintf(why, why_cap, "invalid UTF-8 at byte %zu", bad);
        return NULL;
    }
    /* What cJSON lets through inside strings: raw control characters and \u0000. */
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (!in_string) {
            if (c == '"') in_string = true;
            else if (c == 0) {
                snprintf(why, why_cap, "a NUL byte at byte %zu", i);
                return NULL;
            }
        } else if (c == '"') {
            in_string = false;
        } else if (c < 0x20) {
            snprintf(why, why_cap, "a control character inside a string at byte %zu", i);
            return NULL;
        } else if (c == '\\') {
            if (i + 5 < len && text[i + 1] == 'u' && !memcmp(text + i + 2, "0000", 4)) {
                snprintf(why, why_cap, "\\u0000 (a NUL character) inside a string at byte %zu", i);
                return NULL;
            }
            i++; /* the escaped character cannot end the string */
        }
    }
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!v) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        snprintf(why, why_cap, "not valid JSON (near byte %zu)", at);
        return NULL;
    }
    size_t at = (size_t)(end - text);
    while (at < len && is_json_space(text[at])) at++;
    if (at < len) {
        cJSON_Delete(v);
        snprintf(why, why_cap, "unexpected data after the JSON value at byte %zu", at);
        return NULL;
    }
    /* A name given twice: which one counts differs between parsers (cJSON finds the first, others keep the last),
     * so a proxy or a client library and this server could read two different requests from one body. */
    bool oom = false;
    const char *dup = duplicate_name(v, &oom);
    if (dup || oom) {
        if (oom) snprintf(why, why_cap, "out of memory");
        else snprintf(why, why_cap, "the name \"%.60s\" appears twice in one object", dup);
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

bool cq_json_number_in(const cJSON *v, double lo, double hi, bool whole) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return false;
    const double x = v->valuedouble;
    return x >= lo && x <= hi && (!whole || x == floor(x));
}
