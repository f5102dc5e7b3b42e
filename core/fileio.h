/* Whole-file reading and writing, and directory helpers. */
#ifndef CQ_CORE_FILEIO_H
#define CQ_CORE_FILEIO_H

#include <stddef.h>

#include "core/error.h"

/* Reads the whole file into a malloc'd buffer (NUL-terminated, *len excludes the NUL). Refuses files over
 * max_bytes (0 = no limit) with CQ_ERR_INVALID. */
cq_status cq_file_read(const char *path, size_t max_bytes, char **data, size_t *len, cq_err *err);

/* Writes data to path atomically (a temporary file of its own, flushed to disk, then renamed): safe when several
 * threads write the same path; readers see the old file or the new one, never a part. The file is its owner's only
 * (0600), whatever the umask: originals, page images and vector indexes are the documents' contents. */
cq_status cq_file_write_atomic(const char *path, const void *data, size_t len, cq_err *err);

/* Removes the temporary files (NAME.tmp.PID.XXXXXX) that writers killed before their rename left in dir: those no
 * writer holds whose process has exited, or that are at least min_age_s seconds old. Returns how many. */
int cq_remove_stale_temp_files(const char *dir, int min_age_s);
/* The age past which a temporary file no writer holds is a crashed write's, whoever its writer was. */
#define CQ_TEMP_STALE_AGE_S 10

/* Copies src to dst atomically. */
cq_status cq_file_copy(const char *src, const char *dst, cq_err *err);

/* mkdir -p; the folders it creates are their owner's only (0700), whatever the umask (folders already there
 * keep their mode). */
cq_status cq_mkdirs(const char *path, cq_err *err);

/* The final path component without directory and without its last extension ("a/b/民法典.md" → "民法典"),
 * and the extension lower-cased without the dot ("md"; "" when none). Both malloc'd. */
char *cq_path_stem(const char *path);
char *cq_path_ext_lower(const char *path);

#endif
