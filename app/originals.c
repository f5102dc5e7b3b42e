/* The stored originals (app/originals.h). */
#include "app/originals.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reader/reader.h"

static bool is_sha256_hex(const char *s) {
    if (!s || strlen(s) != 64) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

bool cq_original_path(const char *data_dir, const char *sha256, const char *format, char *out, size_t cap) {
    out[0] = 0;
    if (!is_sha256_hex(sha256) || !format || !cq_reader_format_named(format)) return false;
    snprintf(out, cap, "%s/files/%s.%s", data_dir, sha256, format);
    return true;
}

void cq_original_remove_unused(cq_store *s, const char *data_dir, const char *sha256, const char *format) {
    char path[1200];
    bool in_use = true; /* when unsure, it is */
    cq_err err = {0};
    if (!cq_original_path(data_dir, sha256, format, path, sizeof path) ||
        cq_store_content_in_use(s, sha256, &in_use, &err) || in_use)
        return;
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
