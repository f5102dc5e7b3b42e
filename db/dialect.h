/* The statements that really differ between SQLite and PostgreSQL (issue 28): everything else is written once in
 * the store modules (store/) and runs on both through db/db.h. A new entry needs a real difference — a lock clause,
 * an upsert form, a type — not a taste; the two texts sit side by side in dialect.c. */
#ifndef CQ_DB_DIALECT_H
#define CQ_DB_DIALECT_H

#include "db/db.h"

/* A KB's columns as store/documents.c reads them (kbs k): id, name, created_at, its documents, its clauses. */
#define CQ_DIALECT_KB_COLUMNS                                                                                       \
    "k.id, k.name, k.created_at, (SELECT count(*) FROM documents d WHERE d.kb_id = k.id), "                        \
    "(SELECT coalesce(sum(n_clauses), 0) FROM documents d WHERE d.kb_id = k.id)"

typedef enum {
    /* store/keys.c: record a key's use, at most once a minute, never waiting for a lock (?1 id, ?2 now). SQLite
     * does not wait because of cq_db_nowait; PostgreSQL skips a row another request is writing. */
    CQ_SQL_KEY_TOUCH,
    /* store/versions.c: a document's automatic version row (?1 doc, ?2 kb, ?3 key, ?4 label, ?5 promulgated,
     * ?6 effective, ?7 repealed, ?8 now). SQLite: a plain INSERT (an upsert opens a statement journal, and FTS5
     * writes a segment at every savepoint); PostgreSQL: an upsert that leaves a person's row alone (another node may
     * insert first). */
    CQ_SQL_VERSION_INSERT,
    /* store/versions.c: one key a document repeals, once (?1 doc, ?2 kb, ?3 key). */
    CQ_SQL_REPEAL_INSERT,
    /* store/jobs.c: a stopped job queued again, its start not counted (?1 id, ?2 now); PostgreSQL drops its lease
     * (the attempt, the fencing counter, stays: store/job_claim.h). SQLite's table has no lease. */
    CQ_SQL_JOB_REQUEUE,
    /* store/jobs.c: a job linked to its document, its upload gone (?1 id, ?2 now, ?3 document or NULL); PostgreSQL
     * ends its lease's time but keeps its owner, so an old owner stays fenced out. */
    CQ_SQL_JOB_FINISH,
    /* store/conversations.c: the answer text of a stored turn's reply (JSON text in t.reply), as an expression. */
    CQ_SQL_REPLY_ANSWER,
    /* store/users.c: a session's sliding expiry, at most once a minute, never waiting for a lock (?1 id, ?2 now,
     * ?3 seconds idle before it expires): as CQ_SQL_KEY_TOUCH. */
    CQ_SQL_SESSION_TOUCH,
    /* store/documents.c: the KBs with their counts, by name in byte order (SQLite's BINARY; PostgreSQL's "C"
     * collation, not the database's locale). */
    CQ_SQL_KB_LIST,
    /* store/documents.c: whether content ?1 (a SHA-256) is still needed: a document of any KB has it, or (PostgreSQL)
     * an unfinished job's upload waits in originals for whichever node claims it. SQLite's uploads are files of the
     * node's own (their jobs have no upload_sha256). A row when in use. */
    CQ_SQL_CONTENT_IN_USE,
    /* store/vectors.c: a KB's vectors of a model (?1 kb, ?2 model) as rows (NULL-or-0, clause_id, vec), ids
     * ascending; PostgreSQL first adds one row (NULL, the change feed's position, NULL) read in the same snapshot. */
    CQ_SQL_VECTORS_READ_ALL,
    CQ_SQL_COUNT_
} cq_db_sql;

/* The statement `which` in db's dialect. */
const char *cq_db_dialect(const cq_db *db, cq_db_sql which);

#endif
