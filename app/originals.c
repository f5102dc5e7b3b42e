/* The stored originals (app/originals.h). */
#include "app/originals.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "store/originals.h"
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
    if (cq_store_original_delete(s, sha256, &err)) return;
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

cq_status cq_original_keep_file(const char *data_dir, const char *sha256, const char *format, const void *data,
                                size_t len, char *path, size_t cap, cq_err *err) {
    if (!cq_original_path(data_dir, sha256, format, path, cap))
        return cq_err_set(err, CQ_ERR_INVALID, "no original can be kept for format '%s'", format ? format : "");
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/files", data_dir);
    cq_status rc = cq_mkdirs(dir, err);
    if (!rc) rc = cq_file_write_atomic(path, data, len, err);
    return rc;
}

cq_status cq_original_keep_in_store(cq_store *s, const char *sha256, const char *path, cq_err *err) {
    return cq_store_original_put_file(s, sha256, path, err); /* from the file */
}

cq_status cq_original_keep(cq_store *s, const char *data_dir, const char *sha256, const char *format, const void *data,
                           size_t len, char *path, size_t cap, cq_err *err) {
    cq_status rc = cq_original_keep_file(data_dir, sha256, format, data, len, path, cap, err);
    return rc ? rc : cq_original_keep_in_store(s, sha256, path, err);
}

cq_status cq_original_local(cq_store *s, const char *data_dir, const char *sha256, const char *format, char *path,
                            size_t cap, cq_err *err) {
    if (!cq_original_path(data_dir, sha256, format, path, cap))
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "no stored original");
    if (access(path, R_OK) == 0) return CQ_OK;
    if (!cq_store_originals_shared(s)) return cq_err_set(err, CQ_ERR_NOT_FOUND, "the original is missing");
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/files", data_dir);
    cq_status rc = cq_mkdirs(dir, err);
    if (!rc) rc = cq_store_original_get_file(s, sha256, path, err); /* renamed into place: two requests
                                                                               * may fetch it at once */
    return rc;
}
