/* The stored originals: DATA/files/<sha256>.<format>, one file per content (documents of several KBs may share it),
 * written by ingest (app/ingest.c) and read for page images, downloads and backups. Page images rendered from one
 * are cached as DATA/cache/pages/<sha256>-*.
 *
 * On a PostgreSQL store (docs/SCALE.md) the store holds them (store/originals.h: blobs in the originals table), so that every node
 * has every upload: DATA/files/ is then each node's cache of them, filled from the store when a file is missing. */
#ifndef CQ_APP_ORIGINALS_H
#define CQ_APP_ORIGINALS_H

#include <stdbool.h>
#include <stddef.h>

#include "store/store.h"

/* DATA/files/<sha256>.<format> into out; false (out "") when sha256 is not a hash or format not one of the format
 * table's (reader/reader.h). */
bool cq_original_path(const char *data_dir, const char *sha256, const char *format, char *out, size_t cap);

/* Removes the original (from the store too, on PostgreSQL) and its cached page images when no document of any KB
 * (as s sees them) uses it any more. */
void cq_original_remove_unused(cq_store *s, const char *data_dir, const char *sha256, const char *format);

/* Keeps data (whose SHA-256 is sha256) as the original: DATA/files/<sha256>.<format>, and in the store on
 * PostgreSQL. path (cap bytes) receives the file's path. */
cq_status cq_original_keep(cq_store *s, const char *data_dir, const char *sha256, const char *format, const void *data,
                           size_t len, char *path, size_t cap, cq_err *err);

/* cq_original_keep in its two steps, for a batch ingest that reads files on worker threads: the file (no store
 * work), then the store's copy (PostgreSQL; nothing on SQLite) from that file. */
cq_status cq_original_keep_file(const char *data_dir, const char *sha256, const char *format, const void *data,
                                size_t len, char *path, size_t cap, cq_err *err);
cq_status cq_original_keep_in_store(cq_store *s, const char *sha256, const char *path, cq_err *err);

/* The path of the original's file, fetched from the store into DATA/files/ on PostgreSQL when this node has no
 * copy yet. NOT_FOUND when there is none. */
cq_status cq_original_local(cq_store *s, const char *data_dir, const char *sha256, const char *format, char *path,
                            size_t cap, cq_err *err);

#endif
