/* db/dialect.h: each statement that differs, SQLite's text then PostgreSQL's. */
#include "db/dialect.h"

static const char *const statements[CQ_SQL_COUNT_][2] = {
    [CQ_SQL_KEY_TOUCH] =
        {"UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1 AND coalesce(last_used_at, 0) <= ?2 - 60",
         "UPDATE api_keys SET last_used_at = ?2 WHERE id = (SELECT id FROM api_keys WHERE id = ?1 "
         "AND coalesce(last_used_at, 0) <= ?2 - 60 FOR UPDATE SKIP LOCKED)"},
};

const char *cq_db_dialect_of(cq_db_kind kind, cq_db_sql which) {
    if ((unsigned)which >= CQ_SQL_COUNT_) return "";
    return statements[which][kind == CQ_DB_POSTGRESQL];
}

const char *cq_db_dialect(const cq_db *db, cq_db_sql which) { return cq_db_dialect_of(cq_db_kind_of(db), which); }
