/* The store's schema (issue 28): one migration list with each dialect's DDL side by side (store/schema.c), run
 * when a store opens. A SQLite database keeps its version in PRAGMA user_version, a PostgreSQL one in
 * clauseqa_schema(version); each counts the steps of its own dialect. */
#ifndef CQ_STORE_SCHEMA_H
#define CQ_STORE_SCHEMA_H

#include "core/error.h"
#include "db/db.h"

/* The newest versions (tests check them against the list: cq_store_schema_target). */
#define CQ_STORE_SCHEMA_VERSION 14    /* SQLite */
#define CQ_STORE_PG_SCHEMA_VERSION 11 /* PostgreSQL */

/* The number of steps of kind's dialect in the list: the version a migrated database has. */
int cq_store_schema_target(cq_db_kind kind);
/* The database's version (0: a fresh database). */
cq_status cq_store_schema_version(cq_db *db, int *version, cq_err *err);
/* Brings the database to the newest version, one step per transaction under a lock (two processes or nodes opening
 * a fresh database at once run each step once). CQ_ERR_UNSUPPORTED when its schema is newer than this program. */
cq_status cq_store_migrate(cq_db *db, cq_err *err);

#endif
