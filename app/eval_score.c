#include "app/eval_score.h"

#include <stdlib.h>
#include <string.h>

#include "core/text_norm.h"
#include "core/utf8.h"

static int cmp_cp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Code points of a normalized string, sorted, for multiset intersection. */
static size_t sorted_cps(const char *s, uint32_t **out) {
    size_t n = strlen(s), count = 0, i = 0;
    uint32_t *v = malloc((n + 1) * sizeof *v);
    if (!v) {
        *out = NULL;
        return 0;
    }
    while (i < n) {
        size_t len;
        v[count++] = cq_utf8_decode(s + i, n - i, &len);
        i += len;
    }
    qsort(v, count, sizeof *v, cmp_cp);
    *out = v;
    return count;
}

static double f1_of_norms(const char *na, const char *nb) {
    uint32_t *a, *b;
    size_t la = sorted_cps(na, &a), lb = sorted_cps(nb, &b);
    double f1 = 0;
    if (la && lb) {
        size_t i = 0, j = 0, common = 0;
        while (i < la && j < lb) {
            if (a[i] == b[j]) {
                common++;
                i++;
                j++;
            } else if (a[i] < b[j]) {
                i++;
            } else {
                j++;
            }
        }
        if (common) {
            double p = (double)common / (double)la, r = (double)common / (double)lb;
            f1 = 2 * p * r / (p + r);
        }
    }
    free(a);
    free(b);
    return f1;
}

double cq_eval_char_f1(const char *a, const char *b) {
    char *na = cq_text_norm_key(a, strlen(a)), *nb = cq_text_norm_key(b, strlen(b));
    double f1 = (na && nb) ? f1_of_norms(na, nb) : 0;
    free(na);
    free(nb);
    return f1;
}

bool cq_eval_exact(const char *prediction, const char *answer) {
    char *a = cq_text_norm_key(prediction, strlen(prediction)), *b = cq_text_norm_key(answer, strlen(answer));
    bool eq = a && b && !strcmp(a, b);
    free(a);
    free(b);
    return eq;
}

bool cq_eval_is_hit(const cq_eval_passage *r, const cq_eval_gold *g) {
    if (!r->doc || !g->doc || strcmp(r->doc, g->doc) != 0) return false;
    if (!g->text) return g->page == 0 || (r->page_first <= g->page && g->page <= (r->page_last ? r->page_last : r->page_first));
    char *nr = cq_text_norm_key(r->text, strlen(r->text)), *ng = cq_text_norm_key(g->text, strlen(g->text));
    bool hit = false;
    if (nr && ng) {
        if (strstr(nr, ng)) hit = true;
        else if (strstr(ng, nr) && cq_utf8_count(nr, strlen(nr)) >= 20) hit = true;
        else hit = f1_of_norms(nr, ng) >= 0.5;
    }
    free(nr);
    free(ng);
    return hit;
}
