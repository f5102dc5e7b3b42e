/* Backups of a data directory, and restoring them.
 *
 * A backup is a folder:
 *   clauseqa.db     the database, copied with SQLite's online backup API in one step: one consistent snapshot
 *                   even while a server writes (WAL readers do not wait for writers, nor they for it)
 *   files/          the originals the snapshot's documents use (DATA/files/<sha256>.<ext>), each checked against
 *                   its hash while copied
 *   clauseqa.conf   the data directory's configuration file, when it has one
 *   manifest.json   {"format": "clauseqa-backup-1", "created_at", "version", "schema_version", "source",
 *                    "counts": {"kbs", "documents", "clauses", "files"}, "kbs": [{"name", "documents", "clauses"}],
 *                    "database": {"path", "bytes", "sha256"}, "config": {...} (when there is one),
 *                    "files": [{"path", "bytes", "sha256"}], "missing_originals": [...]}
 * Left out, because they are rebuilt: cache/ (page images), vectors/ (FAISS, rebuilt from the vectors in SQLite),
 * uploads/ (uploads still waiting for their job: in the backup those jobs are marked failed, "upload it again").
 * The folder is written under a temporary name and renamed when complete, so a backup that exists is whole.
 *
 * Restoring verifies every hash, refuses a data directory that holds a database or originals unless forced, and
 * refuses while another process (a running server) has the database open. It restores into a staging folder in the
 * data directory first and checks everything there (hashes, PRAGMA integrity_check, the schema version, the counts
 * against the manifest); the target changes only after every check passed, and a single rename of the database is
 * the commit: a failure leaves the target as it was. Files are written 0600, folders 0700. */
#ifndef CQ_APP_BACKUP_H
#define CQ_APP_BACKUP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

#define CQ_BACKUP_FORMAT "clauseqa-backup-1"

typedef struct {
    int64_t kbs, documents, clauses;
    int64_t files;             /* originals copied */
    int64_t missing_originals; /* documents whose original was not there (deleted while the backup ran?) */
    int64_t bytes;             /* database + originals */
} cq_backup_counts;

/* Backs data_dir up into out_dir, which must not exist or be an empty folder. */
cq_status cq_backup_write(const char *data_dir, const char *out_dir, cq_backup_counts *counts, cq_err *err);

/* Restores backup_dir into data_dir (created when absent). force: replace the database and originals data_dir has
 * (the page-image cache, vector indexes and waiting uploads go too); without it such a data_dir is CQ_ERR_EXISTS. */
cq_status cq_backup_restore(const char *backup_dir, const char *data_dir, bool force, cq_backup_counts *counts,
                            cq_err *err);

#endif
