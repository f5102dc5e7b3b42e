/* The stored originals (app/originals.h). */
#include "app/originals.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool is_sha256_hex(const char *s) {
    if (!s || strlen(s) != 64) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

bool cq_original_path(const char *data_dir, const char *sha256, const char *format, char *out, size_t cap) {
    out[0] = 0;
    if (!is_sha256_hex(sha256) || !format || (strcmp(format, "pdf") && strcmp(format, "md") && strcmp(format, "txt")))
        return false;
    snprintf(out, cap, "%s/files/%s.%s", data_dir, sha256, format);
    return true;
}

/* Is content sha256 still used by a document of any KB? When unsure, it is. */
static bool in_use(cq_store *s, const char *sha256) {
    cq_kb_info *kbs;
    size_t n;
    cq_err err = {0};
    if (cq_store_kb_list(s, &kbs, &n, &err)) return true;
    bool used = false;
    for (size_t i = 0; i < n && !used; i++) {
        cq_doc_info d;
        cq_status rc = cq_store_doc_by_hash(s, kbs[i].id, sha256, &d, &err);
        if (rc == CQ_OK) cq_doc_info_free(&d);
        used = rc != CQ_ERR_NOT_FOUND;
    }
    free(kbs);
    return used;
}

void cq_original_remove_unused(cq_store *s, const char *data_dir, const char *sha256, const char *format) {
    char path[1200];
    if (!cq_original_path(data_dir, sha256, format, path, sizeof path) || in_use(s, sha256)) return;
    unlink(path);
    char cache[1100];
    snprintf(cache, sizeof cache, "%s/cache/pages", data_dir);
    DIR *d = opendir(cache);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, sha256, 64) && e->d_name[64] == '-') {
            if (snprintf(path, sizeof path, "%s/%s", cache, e->d_name) < (int)sizeof path) unlink(path);
        }
    closedir(d);
}
