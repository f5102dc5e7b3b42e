/* Where the uploaded originals live (issue 28: one of the store's small interfaces, two homes, chosen by
 * the store's database):
 *
 *   files (SQLite)      the node's own DATA/files/<sha256>.<format> (app/originals.h) are the originals: the store
 *                       holds nothing, put and delete do nothing, get finds nothing
 *   blobs (PostgreSQL)  the originals table, by SHA-256 in parts of CQ_STORE_ORIGINAL_PART_BYTES (TOAST keeps them
 *                       out of line), so that every node has every upload; DATA/files/ is each node's cache of them
 *
 * Both directions move a part at a time: an original of hundreds of MB never sits in memory whole. */
#ifndef CQ_STORE_ORIGINALS_H
#define CQ_STORE_ORIGINALS_H

#include <stdbool.h>

#include "core/error.h"
#include "store/store.h"

#define CQ_STORE_ORIGINAL_PART_BYTES (1u << 20)

/* Whether the store holds the originals (blobs), rather than the node's files alone. */
bool cq_store_originals_shared(cq_store *s);
/* Stores the file at path under sha256 unless it is there already (the same hash: the same bytes), inside the
 * caller's transaction when one is open. CQ_ERR_IO when the file cannot be read. Files: nothing to do. */
cq_status cq_store_original_put_file(cq_store *s, const char *sha256, const char *path, cq_err *err);
/* Writes the stored original to path (through a temporary file of its own, renamed: concurrent fetches of one
 * original are safe). NOT_FOUND when the store has no such original (files: never). */
cq_status cq_store_original_get_file(cq_store *s, const char *sha256, const char *path, cq_err *err);
/* Forgets the stored original (files: nothing to do; the caller removes its file). */
cq_status cq_store_original_delete(cq_store *s, const char *sha256, cq_err *err);

#endif
