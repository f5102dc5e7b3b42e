/* The statements that really differ between SQLite and PostgreSQL (issue 28): everything else is written once in
 * the store modules (store/) and runs on both through db/db.h. A new entry needs a real difference — a lock clause,
 * an upsert form, a type — not a taste; the two texts sit side by side in dialect.c. */
#ifndef CQ_DB_DIALECT_H
#define CQ_DB_DIALECT_H

#include "db/db.h"

typedef enum {
    /* store/keys.c: record a key's use, at most once a minute, never waiting for a lock (?1 id, ?2 now). SQLite
     * does not wait because of cq_db_nowait; PostgreSQL skips a row another request is writing. */
    CQ_SQL_KEY_TOUCH,
    /* index/versions.c: a document's automatic version row (?1 doc, ?2 kb, ?3 key, ?4 label, ?5 promulgated,
     * ?6 effective, ?7 repealed, ?8 now). SQLite: a plain INSERT (an upsert opens a statement journal, and FTS5
     * writes a segment at every savepoint); PostgreSQL: an upsert that leaves a person's row alone (another node may
     * insert first). */
    CQ_SQL_VERSION_INSERT,
    /* index/versions.c: one key a document repeals, once (?1 doc, ?2 kb, ?3 key). */
    CQ_SQL_REPEAL_INSERT,
    /* store/users.c: a session's sliding expiry, at most once a minute, never waiting for a lock (?1 id, ?2 now,
     * ?3 seconds idle before it expires): as CQ_SQL_KEY_TOUCH. */
    CQ_SQL_SESSION_TOUCH,
    CQ_SQL_COUNT_
} cq_db_sql;

/* The statement `which` in db's dialect. */
const char *cq_db_dialect(const cq_db *db, cq_db_sql which);
/* The same for a kind of database (migrations, before a connection exists). */
const char *cq_db_dialect_of(cq_db_kind kind, cq_db_sql which);

#endif
