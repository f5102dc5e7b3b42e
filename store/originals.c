/* The originals' two homes behind store/originals.h: files (SQLite) and blobs (PostgreSQL, on db/db.h). */
#include "store/originals.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db.h"

bool cq_store_originals_shared(cq_store *s) { return cq_db_kind_of(cq_store_conn(s)) == CQ_DB_POSTGRESQL; }

/* ---- files: the node's own DATA/files are the originals (SQLite): put and delete do nothing, get finds nothing;
 * blobs: the originals table, a part at a time (PostgreSQL) ---- */

cq_status cq_store_original_put_file(cq_store *s, const char *sha256, const char *path, cq_err *err) {
    if (!cq_store_originals_shared(s)) return CQ_OK; /* the file is the original */
    cq_db *db = cq_store_conn(s);
    FILE *fp = fopen(path, "rb");
    if (!fp) return cq_err_set(err, CQ_ERR_IO, "store original: cannot open %s: %s", path, strerror(errno));
    unsigned char *buf = malloc(CQ_STORE_ORIGINAL_PART_BYTES);
    /* Content-addressed: whoever stored it first stored the same bytes. Part 0 goes first with ON CONFLICT DO
     * NOTHING: a node storing the same new content meanwhile holds that key until it commits (then nothing is
     * inserted here: the original is there) or rolls back (then this one stores it). An original of one part is
     * that one statement; a longer one needs a transaction, the caller's or its own. */
    cq_status rc = buf ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    bool own = false;
    cq_db_stmt *st = NULL;
    for (int part = 0; !rc; part++) {
        const size_t got = fread(buf, 1, CQ_STORE_ORIGINAL_PART_BYTES, fp);
        if (ferror(fp)) rc = cq_err_set(err, CQ_ERR_IO, "store original: cannot read %s", path);
        else if (part > 0 && got == 0) break; /* an empty file is one empty part (part 0), so that it is found */
        if (!rc && part == 0 && got == CQ_STORE_ORIGINAL_PART_BYTES) rc = cq_db_begin_own(db, &own, err);
        if (!rc && part == 0)
            rc = cq_db_prepare(db,
                               "INSERT INTO originals(sha256, part, bytes) VALUES(?1, ?2, ?3) "
                               "ON CONFLICT (sha256, part) DO NOTHING",
                               &st, err);
        if (rc) break;
        cq_db_reset(st);
        cq_db_bind_text(st, 1, sha256);
        cq_db_bind_int(st, 2, part);
        cq_db_bind_blob(st, 3, buf, got);
        if (cq_db_step(st, "store original", err) < 0) rc = err ? err->code : CQ_ERR_DB;
        else if ((part == 0 && cq_db_changes(db) == 0) || got < CQ_STORE_ORIGINAL_PART_BYTES) break; /* there, or done */
    }
    cq_db_finalize(st);
    fclose(fp);
    free(buf);
    return cq_db_end(db, own, rc, err);
}

cq_status cq_store_original_get_file(cq_store *s, const char *sha256, const char *path, cq_err *err) {
    if (!cq_store_originals_shared(s)) return cq_err_set(err, CQ_ERR_NOT_FOUND, "the original is missing");
    cq_db *db = cq_store_conn(s);
    /* A temporary name of this call's own next to path: two requests of one node may fetch the same original. */
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp)
        return cq_err_set(err, CQ_ERR_INVALID, "read original: the path is too long");
    int fd = mkstemp(tmp);
    if (fd < 0) return cq_err_set(err, CQ_ERR_IO, "read original: cannot write next to %s: %s", path, strerror(errno));
    FILE *fp = fdopen(fd, "wb");
    if (!fp) {
        close(fd);
        unlink(tmp);
        return cq_err_set(err, CQ_ERR_IO, "read original: %s", strerror(errno));
    }
    /* One statement (one snapshot: the parts of one store), its rows read one at a time. */
    cq_db_stmt *st = NULL;
    cq_status rc = cq_db_query(db, "read original", &st, err,
                               "SELECT part, bytes FROM originals WHERE sha256 = ?1 ORDER BY part", "t", sha256);
    int next_part = 0;
    if (!rc) {
        cq_db_stream(st);
        while (cq_db_next(st, "read original", &rc, err)) {
            size_t n = 0;
            const void *bytes = cq_db_col_blob(st, 1, &n);
            if (cq_db_col_int(st, 0) != next_part++)
                rc = cq_err_set(err, CQ_ERR_DB, "the original %.12s… is incomplete in the store", sha256);
            else if (n && fwrite(bytes, 1, n, fp) != n)
                rc = cq_err_set(err, CQ_ERR_IO, "read original: cannot write %s", tmp);
        }
    }
    cq_db_finalize(st); /* reads what is left of the rows after a failure */
    if (!rc && next_part == 0)
        rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "the original %.12s… is not in the store", sha256);
    if (fclose(fp) != 0 && !rc) rc = cq_err_set(err, CQ_ERR_IO, "read original: cannot write %s", tmp);
    if (!rc && rename(tmp, path) != 0)
        rc = cq_err_set(err, CQ_ERR_IO, "read original: cannot rename to %s: %s", path, strerror(errno));
    if (rc) unlink(tmp);
    return rc;
}

cq_status cq_store_original_delete(cq_store *s, const char *sha256, cq_err *err) {
    if (!cq_store_originals_shared(s)) return CQ_OK;
    return cq_db_run(cq_store_conn(s), "delete original", NULL, err, "DELETE FROM originals WHERE sha256 = ?1", "t",
                     sha256);
}
