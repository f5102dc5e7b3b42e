#include "core/json.h"

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
    return v;
}
