/* db/dialect.h: each statement that differs, SQLite's text then PostgreSQL's. */
#include "db/dialect.h"

static const char *const statements[CQ_SQL_COUNT_][2] = {
    [CQ_SQL_KEY_TOUCH] =
        {"UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1 AND coalesce(last_used_at, 0) <= ?2 - 60",
         "UPDATE api_keys SET last_used_at = ?2 WHERE id = (SELECT id FROM api_keys WHERE id = ?1 "
         "AND coalesce(last_used_at, 0) <= ?2 - 60 FOR UPDATE SKIP LOCKED)"},
    [CQ_SQL_SESSION_TOUCH] =
        {"UPDATE sessions SET last_seen_at = ?2, expires_at = ?2 + ?3 WHERE id = ?1 AND last_seen_at <= ?2 - 60",
         "UPDATE sessions SET last_seen_at = ?2, expires_at = ?2 + ?3 WHERE id = (SELECT id FROM sessions WHERE "
         "id = ?1 AND last_seen_at <= ?2 - 60 FOR UPDATE SKIP LOCKED)"},
    [CQ_SQL_VERSION_INSERT] =
        {"INSERT INTO doc_versions(doc_id, kb_id, key, label, promulgated, effective, repealed, by_user, analysed_at) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, FALSE, ?8)",
         "INSERT INTO doc_versions(doc_id, kb_id, key, label, promulgated, effective, repealed, by_user, analysed_at) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, FALSE, ?8) ON CONFLICT (doc_id) DO UPDATE SET kb_id = excluded.kb_id, "
         "key = excluded.key, label = excluded.label, promulgated = excluded.promulgated, "
         "effective = excluded.effective, repealed = excluded.repealed, analysed_at = excluded.analysed_at "
         "WHERE NOT doc_versions.by_user"},
    [CQ_SQL_REPEAL_INSERT] = {"INSERT OR IGNORE INTO doc_repeals(doc_id, kb_id, key) VALUES(?1, ?2, ?3)",
                              "INSERT INTO doc_repeals(doc_id, kb_id, key) VALUES(?1, ?2, ?3) ON CONFLICT DO NOTHING"},
    [CQ_SQL_JOB_REQUEUE] =
        {"UPDATE jobs SET state = 'queued', done = 0, attempts = max(attempts - 1, 0), updated_at = ?2 WHERE id = ?1",
         "UPDATE jobs SET state = 'queued', done = 0, attempts = greatest(attempts - 1, 0), lease_owner = NULL, "
         "lease_until = NULL, updated_at = ?2 WHERE id = ?1"},
    [CQ_SQL_JOB_FINISH] =
        {"UPDATE jobs SET doc_id = ?3, upload_path = NULL, updated_at = ?2 WHERE id = ?1",
         "UPDATE jobs SET doc_id = ?3, upload_path = NULL, lease_until = NULL, updated_at = ?2 WHERE id = ?1"},
    [CQ_SQL_REPLY_ANSWER] = {"json_extract(t.reply, '$.answer')", "(t.reply::json ->> 'answer')"},
    [CQ_SQL_KB_LIST] = {"SELECT " CQ_DIALECT_KB_COLUMNS " FROM kbs k ORDER BY k.name",
                        "SELECT " CQ_DIALECT_KB_COLUMNS " FROM kbs k ORDER BY k.name COLLATE \"C\""},
    [CQ_SQL_CONTENT_IN_USE] = {"SELECT 1 FROM documents WHERE sha256 = ?1 LIMIT 1",
                               "SELECT 1 FROM documents WHERE sha256 = ?1 UNION ALL SELECT 1 FROM jobs "
                               "WHERE upload_sha256 = ?1 AND state IN ('queued', 'running') LIMIT 1"},
    [CQ_SQL_VECTORS_READ_ALL] =
        {"SELECT 0, clause_id, vec FROM clause_vectors WHERE kb_id = ?1 AND model = ?2 ORDER BY clause_id",
         "SELECT NULL::bigint, greatest((SELECT coalesce(max(seq), 0) FROM vector_changes), (SELECT pruned_to FROM "
         "vector_changes_horizon)), NULL::bytea UNION ALL (SELECT 0, clause_id, vec FROM clause_vectors "
         "WHERE kb_id = ?1 AND model = ?2 ORDER BY clause_id)"},
};

const char *cq_db_dialect(const cq_db *db, cq_db_sql which) {
    return (unsigned)which < CQ_SQL_COUNT_ ? statements[which][cq_db_kind_of(db) == CQ_DB_POSTGRESQL] : "";
}
