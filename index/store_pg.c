/* The PostgreSQL store: connection, schema migrations, KBs, documents, clauses and the keyword index (store_pg.h).
 *
 * Statements send their parameters as text and read results in binary (integers in network order, text and bytea
 * as their bytes). A document's clauses and postings go in with COPY: one document of laws-zh is ~50 clauses and
 * ~2,000 postings rows, which row-by-row INSERTs would make ~100 times slower. */
#include "index/store_pg.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/strbuf.h"
#include "db/copy.h"
#include "db/db.h"
#include "index/pg_rows.h"

struct cq_pg {
    cq_db *db; /* db/db_pg.c: the connection, re-established when the server dropped it */
};

/* The libpq connection of the moment (db_pg.c replaces it when it reconnects). */
#define CONN(pg) cq_db_pg((pg)->db)

/* Migrations run in order; migration i brings clauseqa_schema.version from i to i + 1. Only ever append. */
static const char *const migrations[] = {
    "CREATE TABLE kbs(\n"
    "  id bigserial PRIMARY KEY,\n"
    "  name text NOT NULL UNIQUE,\n"
    "  created_at bigint NOT NULL);\n"
    "CREATE TABLE documents(\n"
    "  id bigserial PRIMARY KEY,\n"
    "  kb_id bigint NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  name text NOT NULL,\n"
    "  filename text NOT NULL,\n"
    "  format text NOT NULL,\n"
    "  sha256 text NOT NULL,\n"
    "  size_bytes bigint NOT NULL,\n"
    "  title text,\n"
    "  n_pages integer NOT NULL DEFAULT 0,\n"
    "  n_clauses integer NOT NULL DEFAULT 0,\n"
    "  status text NOT NULL DEFAULT 'processing',\n"
    "  error text,\n"
    "  quality double precision NOT NULL DEFAULT 1,\n"
    "  quality_reason text NOT NULL DEFAULT '',\n"
    "  created_at bigint NOT NULL,\n"
    "  keyword_clauses bigint NOT NULL DEFAULT 0,\n"
    "  keyword_positions bigint NOT NULL DEFAULT 0);\n"
    "CREATE UNIQUE INDEX documents_kb_hash ON documents(kb_id, sha256);\n"
    "CREATE INDEX documents_kb_name ON documents(kb_id, name);\n"
    "CREATE TABLE clauses(\n"
    "  id bigserial PRIMARY KEY,\n"
    "  doc_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  ord integer NOT NULL,\n"
    "  kind integer NOT NULL,\n"
    "  label text, label_key text,\n"
    "  path text NOT NULL DEFAULT '',\n"
    "  text text NOT NULL,\n"
    "  page_first integer NOT NULL DEFAULT 0, page_last integer NOT NULL DEFAULT 0,\n"
    "  start_off bigint NOT NULL, end_off bigint NOT NULL,\n"
    "  boxes bytea);\n"
    "CREATE INDEX clauses_doc ON clauses(doc_id, ord);\n"
    "CREATE INDEX clauses_label ON clauses(doc_id, label_key);\n"
    /* The keyword index (keyword_postings.h). Tokens compare as bytes (COLLATE \"C\"): equality is all a search
     * asks, and a locale's collation would only make the b-tree slower. */
    "CREATE TABLE keyword_postings(\n"
    "  kb_id bigint NOT NULL,\n"
    "  token text COLLATE \"C\" NOT NULL,\n"
    "  doc_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  n_clauses integer NOT NULL,\n"
    "  postings bytea NOT NULL,\n"
    "  PRIMARY KEY(kb_id, token, doc_id));\n"
    "CREATE INDEX keyword_postings_doc ON keyword_postings(doc_id);\n",
    /* 2: the rest of index/store.h's tables (pgstore): pages, the label lookups' index, the originals (uploaded
     * files, app/originals.h) in parts of CQ_PG_ORIGINAL_PART_BYTES (TOAST keeps them out of line), settings. */
    "CREATE TABLE pages(\n"
    "  doc_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  page_no integer NOT NULL,\n"
    "  width real NOT NULL, height real NOT NULL,\n"
    "  n_chars integer NOT NULL,\n"
    "  quality double precision NOT NULL,\n"
    "  quality_reason text NOT NULL DEFAULT '',\n"
    "  PRIMARY KEY(doc_id, page_no));\n"
    "CREATE INDEX clauses_label_key ON clauses(label_key) WHERE label_key IS NOT NULL;\n"
    "CREATE INDEX documents_sha256 ON documents(sha256);\n"
    "CREATE TABLE originals(\n"
    "  sha256 text COLLATE \"C\" NOT NULL,\n"
    "  part integer NOT NULL,\n"
    "  bytes bytea NOT NULL,\n"
    "  PRIMARY KEY(sha256, part));\n"
    "CREATE TABLE settings(\n"
    "  name text PRIMARY KEY,\n"
    "  value text NOT NULL,\n"
    "  updated_at bigint NOT NULL);\n",
    /* 3 (pgjobs): ingestion jobs with a lease (store/job_claim.h), API keys (store/keys.h; their "authentication
     * required" row is in settings, which pgstore's migration adds), conversations (store/conversations.h): the
     * SQLite store's columns, plus what several nodes need to share the job queue — the upload by content
     * (upload_sha256: the bytes are in originals), the lease (lease_owner, lease_until, on the server's clock) and
     * the fencing token's attempt, and a cancel request another node's worker sees. */
    "CREATE TABLE jobs(\n"
    "  id bigserial PRIMARY KEY,\n"
    "  kb_id bigint NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  doc_id bigint REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  state text NOT NULL,\n"
    "  done integer NOT NULL DEFAULT 0, total integer NOT NULL DEFAULT 0,\n"
    "  error text,\n"
    "  created_at bigint NOT NULL, updated_at bigint NOT NULL,\n"
    "  filename text,\n"
    "  upload_path text,\n"
    "  upload_sha256 text,\n"
    "  size_bytes bigint NOT NULL DEFAULT 0,\n"
    "  replace_doc integer NOT NULL DEFAULT 0,\n"
    "  error_code text,\n"
    "  attempts integer NOT NULL DEFAULT 0,\n"
    "  lease_owner text,\n"
    "  lease_until timestamptz,\n"
    "  attempt integer NOT NULL DEFAULT 0,\n"
    "  cancel_requested boolean NOT NULL DEFAULT false);\n"
    "CREATE INDEX jobs_unfinished ON jobs(id) WHERE state IN ('queued', 'running');\n"
    "CREATE INDEX jobs_kb ON jobs(kb_id, id);\n"
    "CREATE INDEX jobs_doc ON jobs(doc_id);\n"
    "CREATE TABLE api_keys(\n"
    "  id bigserial PRIMARY KEY,\n"
    "  name text NOT NULL,\n"
    "  prefix text NOT NULL,\n"
    "  hash text NOT NULL UNIQUE,\n"
    "  role text NOT NULL,\n"
    "  kb text,\n"
    "  created_at bigint NOT NULL, last_used_at bigint, revoked_at bigint);\n"
    "CREATE TABLE conversations(\n"
    "  id bigserial PRIMARY KEY,\n"
    "  owner_key_id bigint NOT NULL,\n"
    "  kb_id bigint NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  title text NOT NULL,\n"
    "  created_at bigint NOT NULL, updated_at bigint NOT NULL);\n"
    "CREATE INDEX conversations_owner ON conversations(owner_key_id, updated_at);\n"
    "CREATE INDEX conversations_kb ON conversations(kb_id);\n"
    "CREATE TABLE conversation_turns(\n"
    "  id bigserial PRIMARY KEY,\n"
    "  conversation_id bigint NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,\n"
    "  question text NOT NULL,\n"
    "  reply text NOT NULL,\n"
    "  created_at bigint NOT NULL);\n"
    "CREATE INDEX conversation_turns_conversation ON conversation_turns(conversation_id, id);\n",
    /* 4 (pgvec): versions of a regulation (index/versions.h), as SQLite's migration 5; keys compare as bytes,
     * so groups list in SQLite's order. Clause vectors and SSM document states as bytea (index/vectors_pg.h: the
     * truth; each node's FAISS index is a cache of them), and the change feed that keeps those caches current:
     * statement triggers on clause_vectors append one vector_changes row per (KB, document) a statement added or
     * deleted vectors of, and NOTIFY clauseqa_vectors, in the writer's transaction (a document or KB deleted by
     * cascade feeds it too). The writers of the feed are serialised by a transaction advisory lock, so seq order is
     * commit order and a reader that has seen seq s has seen every change before it. vector_changes_horizon: the
     * last seq pruned (a node that has not applied it rebuilds). */
    "CREATE TABLE doc_versions(\n"
    "  doc_id bigint PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  kb_id bigint NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  key text COLLATE \"C\" NOT NULL,\n"
    "  label text NOT NULL DEFAULT '',\n"
    "  promulgated integer NOT NULL DEFAULT 0,\n"
    "  effective integer NOT NULL DEFAULT 0,\n"
    "  repealed integer NOT NULL DEFAULT 0,\n"
    "  by_user boolean NOT NULL DEFAULT false,\n"
    "  analysed_at bigint NOT NULL);\n"
    "CREATE INDEX doc_versions_key ON doc_versions(kb_id, key);\n"
    "CREATE TABLE doc_repeals(\n"
    "  doc_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  kb_id bigint NOT NULL,\n"
    "  key text COLLATE \"C\" NOT NULL,\n"
    "  PRIMARY KEY(doc_id, key));\n"
    "CREATE INDEX doc_repeals_key ON doc_repeals(kb_id, key);\n"
    "CREATE TABLE clause_vectors(\n"
    "  clause_id bigint PRIMARY KEY,\n"
    "  doc_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  kb_id bigint NOT NULL,\n"
    "  model text NOT NULL,\n"
    "  vec bytea NOT NULL);\n"
    "CREATE INDEX clause_vectors_kb ON clause_vectors(kb_id, model);\n"
    "CREATE INDEX clause_vectors_doc ON clause_vectors(doc_id);\n"
    "CREATE TABLE doc_states(\n"
    "  doc_id bigint PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  model text NOT NULL,\n"
    "  n_tokens bigint NOT NULL,\n"
    "  state bytea NOT NULL);\n"
    "CREATE TABLE vector_changes(\n"
    "  seq bigserial PRIMARY KEY,\n"
    "  kb_id bigint NOT NULL,\n"
    "  doc_id bigint NOT NULL,\n"
    "  op text NOT NULL CHECK (op IN ('add', 'delete')),\n"
    "  clause_ids bigint[] NOT NULL,\n"
    "  created_at bigint NOT NULL);\n"
    "CREATE TABLE vector_changes_horizon(pruned_to bigint NOT NULL);\n"
    "INSERT INTO vector_changes_horizon VALUES(0);\n"
    "CREATE FUNCTION clauseqa_vector_changes() RETURNS trigger LANGUAGE plpgsql AS $f$\n"
    "DECLARE last_seq bigint;\n"
    "BEGIN\n"
    "  IF NOT EXISTS (SELECT 1 FROM changed) THEN RETURN NULL; END IF;\n"
    "  PERFORM pg_advisory_xact_lock(7164892001163731302);\n"
    "  WITH added AS (\n"
    "    INSERT INTO vector_changes(kb_id, doc_id, op, clause_ids, created_at)\n"
    "    SELECT kb_id, doc_id, CASE WHEN TG_OP = 'INSERT' THEN 'add' ELSE 'delete' END,\n"
    "           array_agg(clause_id ORDER BY clause_id), extract(epoch FROM now())::bigint\n"
    "    FROM changed GROUP BY kb_id, doc_id RETURNING seq)\n"
    "  SELECT max(seq) INTO last_seq FROM added;\n"
    "  PERFORM pg_notify('clauseqa_vectors', last_seq::text);\n"
    "  RETURN NULL;\n"
    "END $f$;\n"
    "CREATE TRIGGER clause_vectors_added AFTER INSERT ON clause_vectors REFERENCING NEW TABLE AS changed\n"
    "  FOR EACH STATEMENT EXECUTE FUNCTION clauseqa_vector_changes();\n"
    "CREATE TRIGGER clause_vectors_deleted AFTER DELETE ON clause_vectors REFERENCING OLD TABLE AS changed\n"
    "  FOR EACH STATEMENT EXECUTE FUNCTION clauseqa_vector_changes();\n",
    /* 5 (pgfinish): keyword_postings loses its foreign key to documents. A document's ~1,000 postings rows each
     * cost a referential check (a row lock on the document) inside the COPY: 415,000 checks and ~40 % of the COPY's
     * time for policy-zh-dev's 425 documents (docs/SCALE.md "Ingest speed"). The rows are only ever written by
     * add_clauses, which first locks its document's row FOR UPDATE in the same transaction, so a document deleted
     * meanwhile is waited for or not found; the cascade is kept by a statement trigger (one DELETE per statement
     * that removes documents, a KB's deletion included). */
    "ALTER TABLE keyword_postings DROP CONSTRAINT keyword_postings_doc_id_fkey;\n"
    "CREATE FUNCTION clauseqa_postings_gone() RETURNS trigger LANGUAGE plpgsql AS $f$\n"
    "BEGIN\n"
    "  DELETE FROM keyword_postings p USING gone g WHERE p.doc_id = g.id;\n"
    "  RETURN NULL;\n"
    "END $f$;\n"
    "CREATE TRIGGER documents_postings_gone AFTER DELETE ON documents REFERENCING OLD TABLE AS gone\n"
    "  FOR EACH STATEMENT EXECUTE FUNCTION clauseqa_postings_gone();\n",
    /* 6: a key's grant names its KB by id, as SQLite's migration 9 (store/keys.h, issue 29 item 10). */
    "ALTER TABLE api_keys ADD COLUMN kb_id bigint;\n"
    "UPDATE api_keys SET kb_id = (SELECT id FROM kbs WHERE kbs.name = api_keys.kb) "
    "WHERE kb IS NOT NULL AND kb <> '*';\n",
    /* 7: feedback on answers and the quality log, as SQLite's migration 10 (store/feedback.h, issue 30). */
    "CREATE TABLE turn_feedback(\n"
    "  turn_id bigint PRIMARY KEY REFERENCES conversation_turns(id) ON DELETE CASCADE,\n"
    "  conversation_id bigint NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,\n"
    "  kb_id bigint NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  rating integer NOT NULL CHECK (rating IN (-1, 1)),\n"
    "  comment text NOT NULL DEFAULT '',\n"
    "  day text COLLATE \"C\" NOT NULL,\n"
    "  created_at bigint NOT NULL, updated_at bigint NOT NULL);\n"
    "CREATE INDEX turn_feedback_kb ON turn_feedback(kb_id, day);\n"
    "CREATE INDEX turn_feedback_conversation ON turn_feedback(conversation_id);\n"
    "CREATE TABLE answer_log(\n"
    "  id bigserial PRIMARY KEY,\n"
    "  kb_id bigint NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  day text COLLATE \"C\" NOT NULL,\n"
    "  created_at bigint NOT NULL,\n"
    "  abstained integer NOT NULL, fallback integer NOT NULL, low_confidence integer NOT NULL,\n"
    "  confidence double precision NOT NULL);\n"
    "CREATE INDEX answer_log_kb_day ON answer_log(kb_id, day);\n"
    "CREATE TABLE answer_log_docs(\n"
    "  answer_id bigint NOT NULL REFERENCES answer_log(id) ON DELETE CASCADE,\n"
    "  doc_id bigint NOT NULL,\n"
    "  PRIMARY KEY(answer_id, doc_id));\n",
    /* 8: accounts and the audit trail, as SQLite's migration 11 (store/grants.h, store/users.h, store/audit.h, issue
     * 30). */
    "CREATE TABLE kb_grants(\n"
    "  subject text NOT NULL,\n"
    "  subject_id bigint NOT NULL,\n"
    "  kb_id bigint NOT NULL,\n"
    "  kb text NOT NULL,\n"
    "  PRIMARY KEY(subject, subject_id, kb_id));\n"
    "INSERT INTO kb_grants(subject, subject_id, kb_id, kb) SELECT 'key', id, kb_id, kb FROM api_keys "
    "WHERE kb_id IS NOT NULL AND kb IS NOT NULL AND kb <> '*';\n"
    "CREATE TABLE users(\n"
    "  id bigserial PRIMARY KEY,\n"
    "  name text NOT NULL UNIQUE,\n"
    "  password_hash text NOT NULL,\n"
    "  role text NOT NULL,\n"
    "  kb text,\n"
    "  created_at bigint NOT NULL, updated_at bigint NOT NULL, last_login_at bigint);\n"
    "CREATE TABLE sessions(\n"
    "  id bigserial PRIMARY KEY,\n"
    "  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,\n"
    "  hash text NOT NULL UNIQUE,\n"
    "  created_at bigint NOT NULL, last_seen_at bigint NOT NULL, expires_at bigint NOT NULL,\n"
    "  revoked_at bigint);\n"
    "CREATE INDEX sessions_user ON sessions(user_id);\n"
    "ALTER TABLE conversations ADD COLUMN owner_user_id bigint;\n"
    "CREATE TABLE audit(\n"
    "  id bigserial PRIMARY KEY,\n"
    "  at bigint NOT NULL,\n"
    "  actor_kind text NOT NULL, actor_id bigint NOT NULL DEFAULT 0, actor_name text NOT NULL DEFAULT '',\n"
    "  action text NOT NULL, kb text NOT NULL DEFAULT '', target text NOT NULL DEFAULT '',\n"
    "  client text NOT NULL DEFAULT '');\n"
    "CREATE INDEX audit_action ON audit(action, id);\n",
};

/* Serialises migrations between nodes that start together (pg_advisory_xact_lock key: "clauseqa" in ASCII). */
#define MIGRATION_LOCK "7164892001163731297"

/* The statements and readers are index/pg_rows.h's, on this store's connection. */
static cq_status pg_error(cq_pg *pg, cq_err *err, const char *what) { return cq_pgr_error(CONN(pg), err, what); }

/* Runs sql (several statements allowed, no parameters). */
static cq_status exec(cq_pg *pg, const char *sql, const char *what, cq_err *err) {
    PGresult *r = PQexec(CONN(pg), sql);
    ExecStatusType st = PQresultStatus(r);
    cq_status rc = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? CQ_OK : pg_error(pg, err, what);
    PQclear(r);
    return rc;
}

/* Runs sql with text parameters, binary results; NULL (with err filled) unless it succeeded. */
static PGresult *query(cq_pg *pg, const char *sql, int n_params, const char *const *params, const char *what,
                       cq_err *err) {
    return cq_pgr_query(CONN(pg), sql, n_params, params, what, err);
}

static void rollback(cq_pg *pg) {
    if (PQtransactionStatus(CONN(pg)) != PQTRANS_IDLE) PQclear(PQexec(CONN(pg), "ROLLBACK"));
}

static int64_t get_int64(const PGresult *r, int row, int col) { return cq_pgr_int64(r, row, col); }
static int32_t get_int32(const PGresult *r, int row, int col) { return cq_pgr_int32(r, row, col); }
static char *get_strdup(const PGresult *r, int row, int col) {
    if (PQgetisnull(r, row, col)) return NULL;
    int len = PQgetlength(r, row, col);
    char *s = malloc((size_t)len + 1);
    if (s) {
        memcpy(s, PQgetvalue(r, row, col), (size_t)len);
        s[len] = 0;
    }
    return s;
}

/* ---- connection and schema ------------------------------------------------------------------------------- */

cq_status cq_pg_schema_version(cq_pg *pg, int *version, cq_err *err) {
    *version = 0;
    PGresult *r = query(pg, "SELECT to_regclass('clauseqa_schema') IS NOT NULL", 0, NULL, "read the schema version", err);
    if (!r) return CQ_ERR_DB;
    bool exists = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0];
    PQclear(r);
    if (!exists) return CQ_OK;
    r = query(pg, "SELECT version FROM clauseqa_schema", 0, NULL, "read the schema version", err);
    if (!r) return CQ_ERR_DB;
    if (PQntuples(r) == 1) *version = get_int32(r, 0, 0);
    PQclear(r);
    return CQ_OK;
}

/* Brings the schema to the newest version, one migration per transaction, each under the advisory lock with the
 * version read again: nodes that start together must not both run a migration. DDL is transactional in
 * PostgreSQL, so a migration that fails leaves nothing behind. */
static cq_status migrate(cq_pg *pg, cq_err *err) {
    const int target = (int)(sizeof migrations / sizeof migrations[0]);
    for (;;) {
        int version;
        if (cq_pg_schema_version(pg, &version, err)) return CQ_ERR_DB;
        if (version > target)
            return cq_err_set(err, CQ_ERR_UNSUPPORTED,
                              "database schema version %d is newer than this program (%d): upgrade clauseqa", version,
                              target);
        if (version == target) return CQ_OK;
        cq_status rc = exec(pg,
                            "BEGIN; SELECT pg_advisory_xact_lock(" MIGRATION_LOCK ");\n"
                            "CREATE TABLE IF NOT EXISTS clauseqa_schema(version integer NOT NULL);\n"
                            "INSERT INTO clauseqa_schema SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM clauseqa_schema);",
                            "lock the schema", err);
        if (!rc) rc = cq_pg_schema_version(pg, &version, err);
        if (!rc && version < target) {
            rc = exec(pg, migrations[version], "migrate", err);
            if (!rc) rc = exec(pg, "UPDATE clauseqa_schema SET version = version + 1", "migrate", err);
            if (rc) cq_err_prefix(err, "schema migration %d: ", version + 1);
        }
        if (!rc) rc = exec(pg, "COMMIT", "migrate", err);
        if (rc) {
            rollback(pg);
            return rc;
        }
    }
}

cq_status cq_pg_open(const char *conninfo, cq_pg **out, cq_err *err) {
    *out = NULL;
    cq_pg *pg = calloc(1, sizeof *pg);
    if (!pg) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_status rc = cq_db_pg_open(conninfo, &pg->db, err);
    if (!rc) rc = migrate(pg, err);
    if (rc) {
        cq_pg_close(pg);
        return rc;
    }
    *out = pg;
    return CQ_OK;
}

void cq_pg_close(cq_pg *pg) {
    if (!pg) return;
    cq_db_close(pg->db);
    free(pg);
}

cq_db *cq_pg_db(cq_pg *pg) { return pg->db; }
PGconn *cq_pg_conn(cq_pg *pg) { return CONN(pg); }

/* ---- adding clauses: COPY ------------------------------------------------------------------------------------ */

static cq_status copy_in(cq_pg *pg, const char *sql, const cq_strbuf *data, const char *what, cq_err *err) {
    PGresult *r = PQexec(CONN(pg), sql);
    bool ready = PQresultStatus(r) == PGRES_COPY_IN;
    PQclear(r);
    if (!ready) return pg_error(pg, err, what);
    bool sent = PQputCopyData(CONN(pg), data->data ? data->data : "", (int)data->len) == 1;
    sent = PQputCopyEnd(CONN(pg), sent ? NULL : "clauseqa: sending failed") == 1 && sent;
    cq_status rc = CQ_OK;
    while ((r = PQgetResult(CONN(pg)))) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK && !rc) rc = pg_error(pg, err, what);
        PQclear(r);
    }
    if (!sent && !rc) rc = pg_error(pg, err, what);
    return rc;
}

static int cmp_int64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

cq_status cq_pg_clause_ids_next(cq_pg *pg, size_t n, int64_t *ids, cq_err *err) {
    if (!n) return CQ_OK;
    char count[32];
    snprintf(count, sizeof count, "%zu", n);
    const char *params[] = {count};
    PGresult *r = query(pg, "SELECT nextval('clauses_id_seq') FROM generate_series(1, $1::int)", 1, params,
                        "reserve clause ids", err);
    if (!r) return CQ_ERR_DB;
    cq_status rc = (size_t)PQntuples(r) == n ? CQ_OK : cq_err_set(err, CQ_ERR_DB, "reserve clause ids: short answer");
    for (size_t i = 0; !rc && i < n; i++) ids[i] = get_int64(r, (int)i, 0);
    PQclear(r);
    if (!rc) qsort(ids, n, sizeof *ids, cmp_int64);
    return rc;
}

static cq_status add_clauses(cq_pg *pg, int64_t doc_id, const char *doc_label, const cq_store_clause *c, size_t n,
                             const int64_t *given_ids, int64_t *clause_ids, cq_err *err);

cq_status cq_pg_doc_add_clauses(cq_pg *pg, int64_t doc_id, const char *doc_label, const cq_store_clause *c, size_t n,
                                int64_t *clause_ids, cq_err *err) {
    return add_clauses(pg, doc_id, doc_label, c, n, NULL, clause_ids, err);
}

cq_status cq_pg_doc_add_clauses_as(cq_pg *pg, int64_t doc_id, const char *doc_label, const cq_store_clause *c,
                                   size_t n, const int64_t *clause_ids, cq_err *err) {
    for (size_t i = 1; i < n; i++)
        if (clause_ids[i] <= clause_ids[i - 1])
            return cq_err_set(err, CQ_ERR_INVALID, "add clauses: the clause ids must increase");
    return add_clauses(pg, doc_id, doc_label, c, n, clause_ids, NULL, err);
}

/* The clauses' rows (ids given_ids, or new ones into clause_ids) and their keyword index, in the caller's
 * transaction when one is open, else in one of its own. */
static cq_status add_clauses(cq_pg *pg, int64_t doc_id, const char *doc_label, const cq_store_clause *c, size_t n,
                             const int64_t *given_ids, int64_t *clause_ids, cq_err *err) {
    const bool own_tx = PQtransactionStatus(CONN(pg)) == PQTRANS_IDLE;
    char doc[32];
    snprintf(doc, sizeof doc, "%lld", (long long)doc_id);
    int64_t *ids = calloc(n ? n : 1, sizeof *ids);
    cq_keyword_clause *kc = calloc(n ? n : 1, sizeof *kc);
    cq_keyword_doc index = {0};
    cq_strbuf rows = {0};
    PGresult *r = NULL;
    int64_t kb_id = 0;
    cq_status rc = !ids || !kc ? cq_err_set(err, CQ_ERR_NOMEM, "out of memory")
                   : own_tx       ? exec(pg, "BEGIN", "add clauses", err)
                                  : CQ_OK;
    if (!rc) {
        /* The document's row, locked: its clauses and postings come in one call, once. */
        const char *params[] = {doc};
        r = query(pg, "SELECT kb_id, keyword_clauses FROM documents WHERE id = $1 FOR UPDATE", 1, params,
                  "add clauses", err);
        if (!r) rc = CQ_ERR_DB;
        else if (PQntuples(r) != 1) rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "no such document");
        else if (get_int64(r, 0, 1) > 0) rc = cq_err_set(err, CQ_ERR_EXISTS, "the document's clauses are already there");
        else kb_id = get_int64(r, 0, 0);
        PQclear(r);
    }
    if (!rc && n) {
        if (given_ids) memcpy(ids, given_ids, n * sizeof *ids);
        else rc = cq_pg_clause_ids_next(pg, n, ids, err);
    }
    if (!rc && n) {
        for (size_t i = 0; i < n; i++) {
            const cq_store_clause *x = &c[i];
            cq_strbuf_printf(&rows, "%lld\t%s\t%d\t%d\t", (long long)ids[i], doc, x->ord, x->kind);
            cq_db_copy_text(&rows, x->label);
            cq_strbuf_puts(&rows, "\t");
            cq_db_copy_text(&rows, x->label_key);
            cq_strbuf_puts(&rows, "\t");
            cq_db_copy_text(&rows, x->path ? x->path : "");
            cq_strbuf_puts(&rows, "\t");
            cq_db_copy_text(&rows, x->text ? x->text : "");
            cq_strbuf_printf(&rows, "\t%d\t%d\t%u\t%u\t", x->page_first, x->page_last, x->start_off, x->end_off);
            if (x->n_boxes) cq_db_copy_bytea(&rows, (const unsigned char *)x->boxes, x->n_boxes * sizeof *x->boxes);
            else cq_strbuf_puts(&rows, "\\N");
            cq_strbuf_puts(&rows, "\n");
            kc[i] = (cq_keyword_clause){ids[i], doc_label, x->path, x->text};
        }
        rc = rows.failed ? cq_err_set(err, CQ_ERR_NOMEM, "out of memory")
                         : copy_in(pg,
                                   "COPY clauses(id, doc_id, ord, kind, label, label_key, path, text, page_first, "
                                   "page_last, start_off, end_off, boxes) FROM STDIN",
                                   &rows, "add clauses", err);
    }
    if (!rc) rc = cq_keyword_doc_build(kc, n, &index, err);
    if (!rc && index.n) {
        cq_strbuf_reset(&rows);
        for (size_t i = 0; i < index.n; i++) {
            const cq_keyword_row *x = &index.rows[i];
            cq_strbuf_printf(&rows, "%lld\t", (long long)kb_id);
            cq_db_copy_text(&rows, x->token);
            cq_strbuf_printf(&rows, "\t%s\t%d\t", doc, x->n_clauses);
            cq_db_copy_bytea(&rows, x->postings, x->postings_bytes);
            cq_strbuf_puts(&rows, "\n");
        }
        rc = rows.failed ? cq_err_set(err, CQ_ERR_NOMEM, "out of memory")
                         : copy_in(pg, "COPY keyword_postings(kb_id, token, doc_id, n_clauses, postings) FROM STDIN",
                                   &rows, "index clauses", err);
    }
    if (!rc) {
        char n_clauses[32], n_positions[32];
        snprintf(n_clauses, sizeof n_clauses, "%lld", (long long)index.n_clauses);
        snprintf(n_positions, sizeof n_positions, "%lld", (long long)index.n_positions);
        const char *params[] = {doc, n_clauses, n_positions};
        r = query(pg, "UPDATE documents SET keyword_clauses = $2, keyword_positions = $3 WHERE id = $1", 3, params,
                  "index clauses", err);
        if (!r) rc = CQ_ERR_DB;
        PQclear(r);
    }
    if (!rc && own_tx) rc = exec(pg, "COMMIT", "add clauses", err);
    if (rc && own_tx) rollback(pg);
    else if (!rc && clause_ids) memcpy(clause_ids, ids, n * sizeof *ids);
    cq_keyword_doc_free(&index);
    cq_strbuf_free(&rows);
    free(kc);
    free(ids);
    return rc;
}

/* ---- keyword retrieval ---------------------------------------------------------------------------------------- */

/* A text[] literal: {"a","b"} with '"' and '\' escaped. */
static void array_literal(cq_strbuf *b, const char *const *items, size_t n) {
    cq_strbuf_puts(b, "{");
    for (size_t i = 0; i < n; i++) {
        cq_strbuf_puts(b, i ? ",\"" : "\"");
        for (const char *p = items[i]; *p; p++) {
            if (*p == '"' || *p == '\\') cq_strbuf_puts(b, "\\");
            cq_strbuf_append(b, p, 1);
        }
        cq_strbuf_puts(b, "\"");
    }
    cq_strbuf_puts(b, "}");
}

/* Reads the KB's statistics and every postings row of the search's tokens into s, in one statement (one snapshot,
 * so the statistics are those of the rows read). Every document's rows are read even when the hits are restricted
 * to some documents: a phrase's document frequency is the KB's. */
static cq_status bm25_read(cq_pg *pg, int64_t kb_id, cq_keyword_search *s, int64_t *n_rows, int64_t *n_positions,
                           cq_err *err) {
    *n_rows = *n_positions = 0;
    const char *const *tokens;
    size_t n_tokens = cq_keyword_search_tokens(s, &tokens);
    if (!n_tokens) return CQ_OK;
    char kb[32];
    snprintf(kb, sizeof kb, "%lld", (long long)kb_id);
    cq_strbuf array = {0};
    array_literal(&array, tokens, n_tokens);
    if (array.failed) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    const char *params[] = {kb, array.data};
    PGresult *r = query(pg,
                        "SELECT NULL::text, sum(keyword_clauses)::bigint, sum(keyword_positions)::bigint, NULL::bytea "
                        "FROM documents WHERE kb_id = $1 "
                        "UNION ALL SELECT token, doc_id, 0::bigint, postings FROM keyword_postings "
                        "WHERE kb_id = $1 AND token = ANY($2::text[])",
                        2, params, "keyword search", err);
    cq_strbuf_free(&array);
    if (!r) return CQ_ERR_DB;
    cq_status rc = CQ_OK;
    const int rows = PQntuples(r);
    for (int i = 0; !rc && i < rows; i++) {
        if (PQgetisnull(r, i, 0)) {
            if (!PQgetisnull(r, i, 1)) *n_rows = get_int64(r, i, 1), *n_positions = get_int64(r, i, 2);
            continue;
        }
        rc = cq_keyword_search_add(s, PQgetvalue(r, i, 0), get_int64(r, i, 1),
                                   (const unsigned char *)PQgetvalue(r, i, 3), (size_t)PQgetlength(r, i, 3), err);
    }
    PQclear(r);
    return rc;
}

cq_status cq_pg_bm25(cq_pg *pg, int64_t kb_id, const char *const *terms, size_t n_terms, const int64_t *doc_ids,
                     size_t n_docs, size_t limit, cq_keyword_hit **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_keyword_search *s = NULL;
    cq_status rc = cq_keyword_search_new(terms, n_terms, &s, err);
    if (rc) return rc;
    int64_t n_rows = 0, n_positions = 0;
    rc = bm25_read(pg, kb_id, s, &n_rows, &n_positions, err);
    if (!rc) rc = cq_keyword_search_rank(s, n_rows, n_positions, doc_ids, n_docs, limit, out, n, err);
    cq_keyword_search_free(s);
    return rc;
}

cq_status cq_pg_bm25_each_doc(cq_pg *pg, int64_t kb_id, const char *const *terms, size_t n_terms,
                              const int64_t *doc_ids, size_t n_docs, size_t limit, cq_keyword_hit *out, size_t *n,
                              cq_err *err) {
    *n = 0;
    cq_keyword_search *s = NULL;
    cq_status rc = cq_keyword_search_new(terms, n_terms, &s, err);
    if (rc) return rc;
    int64_t n_rows = 0, n_positions = 0;
    rc = bm25_read(pg, kb_id, s, &n_rows, &n_positions, err);
    for (size_t i = 0; !rc && i < n_docs; i++) {
        cq_keyword_hit *hits = NULL;
        size_t got = 0;
        rc = cq_keyword_search_rank(s, n_rows, n_positions, &doc_ids[i], 1, limit, &hits, &got, err);
        if (!rc) memcpy(out + *n, hits, got * sizeof *hits);
        if (!rc) *n += got;
        free(hits);
    }
    cq_keyword_search_free(s);
    return rc;
}

/* ---- transactions ---------------------------------------------------------------------------------------------- */

cq_status cq_pg_begin(cq_pg *pg, cq_err *err) { return exec(pg, "BEGIN", "begin", err); }

cq_status cq_pg_commit(cq_pg *pg, cq_err *err) {
    /* COMMIT of a transaction that failed rolls it back and says so only in its command tag. */
    PGresult *r = PQexec(CONN(pg), "COMMIT");
    cq_status rc = PQresultStatus(r) == PGRES_COMMAND_OK && !strcmp(PQcmdStatus(r), "COMMIT")
                       ? CQ_OK
                       : cq_err_set(err, CQ_ERR_DB, "commit: the transaction failed and was rolled back");
    PQclear(r);
    return rc;
}

void cq_pg_rollback(cq_pg *pg) { rollback(pg); }

bool cq_pg_in_transaction(cq_pg *pg) { return PQtransactionStatus(CONN(pg)) != PQTRANS_IDLE; }
