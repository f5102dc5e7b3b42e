/* The stored originals: DATA/files/<sha256>.<format>, one file per content (documents of several KBs may share it),
 * written by ingest (app/ingest.c) and read for page images, downloads and backups. Page images rendered from one
 * are cached as DATA/cache/pages/<sha256>-*. */
#ifndef CQ_APP_ORIGINALS_H
#define CQ_APP_ORIGINALS_H

#include <stdbool.h>
#include <stddef.h>

#include "index/store.h"

/* DATA/files/<sha256>.<format> into out; false (out "") when sha256 is not a hash or format not one of the format
 * table's (reader/reader.h). */
bool cq_original_path(const char *data_dir, const char *sha256, const char *format, char *out, size_t cap);

/* Removes the original and its cached page images when no document of any KB (as s sees them) uses it any more. */
void cq_original_remove_unused(cq_store *s, const char *data_dir, const char *sha256, const char *format);

#endif
