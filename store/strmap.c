/* Strings with their indexes (store/strmap.h). */
#include "store/strmap.h"

#include <stdlib.h>
#include <string.h>

#include "core/grow.h"

static uint32_t hash_bytes(const char *s, size_t len) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

long cq_strmap_find(cq_strmap *m, const char *key, size_t len, bool add) {
    if (add && 2 * (m->n + 1) > m->n_slots) {
        size_t n_slots = m->n_slots ? m->n_slots * 2 : 256;
        uint32_t *slots = calloc(n_slots, sizeof *slots);
        if (!slots) return -1;
        for (size_t i = 0; i < m->n; i++) {
            size_t k = hash_bytes(m->keys[i], strlen(m->keys[i])) & (n_slots - 1);
            while (slots[k]) k = (k + 1) & (n_slots - 1);
            slots[k] = (uint32_t)i + 1;
        }
        free(m->slots);
        m->slots = slots;
        m->n_slots = n_slots;
    }
    if (!m->n_slots) return -1;
    size_t k = hash_bytes(key, len) & (m->n_slots - 1);
    for (; m->slots[k]; k = (k + 1) & (m->n_slots - 1)) {
        const char *x = m->keys[m->slots[k] - 1];
        if (!strncmp(x, key, len) && x[len] == 0) return (long)m->slots[k] - 1;
    }
    if (!add || !cq_grow((void **)&m->keys, &m->cap, m->n + 1, sizeof *m->keys)) return -1;
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, key, len);
    copy[len] = 0;
    m->keys[m->n] = copy;
    m->slots[k] = (uint32_t)++m->n;
    return (long)m->n - 1;
}

void cq_strmap_free(cq_strmap *m, bool keep_keys) {
    if (!keep_keys)
        for (size_t i = 0; i < m->n; i++) free(m->keys[i]);
    free(m->keys);
    free(m->slots);
    memset(m, 0, sizeof *m);
}
