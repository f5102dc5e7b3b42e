/* The store's schema: one migration list, each dialect's DDL side by side (issue 28), and the runner that brings a
 * database to the newest version. */
#include "store/schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"

#include "db/db.h"

/* One step of the schema: what it does on SQLite and on PostgreSQL, either NULL where that database needs nothing.
 * Their histories differ: PostgreSQL came later, and its steps 1-5 built in another grouping what SQLite's steps 1-8
 * had built, with its own additions (the keyword postings, originals, job leases, the vector change feed); from
 * SQLite's 9 and PostgreSQL's 6 on, every step is one text for both (BOTH). A database's version counts the steps of
 * its own dialect it has run: SQLite's PRAGMA user_version, PostgreSQL's clauseqa_schema.version. Only ever append; a
 * new table or column is one entry, BOTH. The texts name the column types where the dialects differ as {words}
 * (word_types: INTEGER / bigint, BLOB / bytea, REAL / double precision, AUTOINCREMENT / bigserial, PostgreSQL's "C"
 * collation for keys that must sort as bytes, SQLite's WITHOUT ROWID); each database runs them with its own words
 * substituted, so a SQLite database gets the very text it always got. The tables both histories made are written
 * once (the macros below), SQLite's table rebuilds (migration 6) included. */
typedef struct {
    const char *sqlite, *pg;
} migration;

#define BOTH(text) .sqlite = text, .pg = text

static const struct {
    const char *word, *sqlite, *pg;
} word_types[] = {
    {"{rowid}", "INTEGER PRIMARY KEY", "bigserial PRIMARY KEY"}, /* SQLite's ids before migration 6 */
    {"{id}", "INTEGER PRIMARY KEY AUTOINCREMENT", "bigserial PRIMARY KEY"},
    {"{int}", "INTEGER", "bigint"},
    {"{int32}", "INTEGER", "integer"},
    {"{real}", "REAL", "double precision"},
    {"{float}", "REAL", "real"},
    {"{text}", "TEXT", "text"},
    {"{key}", "TEXT", "text COLLATE \"C\""},
    {"{blob}", "BLOB", "bytea"},
    {"{flag}", "INTEGER NOT NULL DEFAULT 0", "boolean NOT NULL DEFAULT false"},
    {"{norowid}", " WITHOUT ROWID", ""},
};

/* Tables as the first steps of both histories made them: t the table's name, id its id column's type. */
#define KBS(t, id) "CREATE TABLE " t "(\n  id " id ",\n  name {text} NOT NULL UNIQUE,\n  created_at {int} NOT NULL);\n"
#define DOCUMENTS(t, id, more)                                                                                      \
    "CREATE TABLE " t "(\n"                                                                                         \
    "  id " id ",\n"                                                                                                \
    "  kb_id {int} NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"                                                \
    "  name {text} NOT NULL,\n"                                                                                     \
    "  filename {text} NOT NULL,\n"                                                                                 \
    "  format {text} NOT NULL,\n"                                                                                   \
    "  sha256 {text} NOT NULL,\n"                                                                                   \
    "  size_bytes {int} NOT NULL,\n"                                                                                \
    "  title {text},\n"                                                                                             \
    "  n_pages {int32} NOT NULL DEFAULT 0,\n"                                                                       \
    "  n_clauses {int32} NOT NULL DEFAULT 0,\n"                                                                     \
    "  status {text} NOT NULL DEFAULT 'processing',\n"                                                              \
    "  error {text},\n"                                                                                             \
    "  quality {real} NOT NULL DEFAULT 1,\n"                                                                        \
    "  quality_reason {text} NOT NULL DEFAULT '',\n"                                                                \
    "  created_at {int} NOT NULL" more ");\n"
#define DOCUMENTS_INDEXES                                                                                           \
    "CREATE UNIQUE INDEX documents_kb_hash ON documents(kb_id, sha256);\n"                                          \
    "CREATE INDEX documents_kb_name ON documents(kb_id, name);\n"
#define PAGES                                                                                                       \
    "CREATE TABLE pages(\n"                                                                                         \
    "  doc_id {int} NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"                                         \
    "  page_no {int32} NOT NULL,\n"                                                                                 \
    "  width {float} NOT NULL, height {float} NOT NULL,\n"                                                          \
    "  n_chars {int32} NOT NULL,\n"                                                                                 \
    "  quality {real} NOT NULL,\n"                                                                                  \
    "  quality_reason {text} NOT NULL DEFAULT '',\n"                                                                \
    "  PRIMARY KEY(doc_id, page_no)){norowid};\n"
#define CLAUSES(t, id)                                                                                              \
    "CREATE TABLE " t "(\n"                                                                                         \
    "  id " id ",\n"                                                                                                \
    "  doc_id {int} NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"                                         \
    "  ord {int32} NOT NULL,\n"                                                                                     \
    "  kind {int32} NOT NULL,\n"                                                                                    \
    "  label {text}, label_key {text},\n"                                                                           \
    "  path {text} NOT NULL DEFAULT '',\n"                                                                          \
    "  text {text} NOT NULL,\n"                                                                                     \
    "  page_first {int32} NOT NULL DEFAULT 0, page_last {int32} NOT NULL DEFAULT 0,\n"                              \
    "  start_off {int} NOT NULL, end_off {int} NOT NULL,\n"                                                         \
    "  boxes {blob});\n"
#define CLAUSES_INDEXES                                                                                             \
    "CREATE INDEX clauses_doc ON clauses(doc_id, ord);\n"                                                           \
    "CREATE INDEX clauses_label ON clauses(doc_id, label_key);\n"
#define CLAUSES_LABEL_KEY "CREATE INDEX clauses_label_key ON clauses(label_key) WHERE label_key IS NOT NULL;\n"
#define JOBS(t, id, more)                                                                                           \
    "CREATE TABLE " t "(\n"                                                                                         \
    "  id " id ",\n"                                                                                                \
    "  kb_id {int} NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"                                                \
    "  doc_id {int} REFERENCES documents(id) ON DELETE CASCADE,\n"                                                  \
    "  state {text} NOT NULL,\n"                                                                                    \
    "  done {int32} NOT NULL DEFAULT 0, total {int32} NOT NULL DEFAULT 0,\n"                                        \
    "  error {text},\n"                                                                                             \
    "  created_at {int} NOT NULL, updated_at {int} NOT NULL" more ");\n"
#define API_KEYS(t, id)                                                                                             \
    "CREATE TABLE " t "(\n"                                                                                         \
    "  id " id ",\n"                                                                                                \
    "  name {text} NOT NULL,\n"                                                                                     \
    "  prefix {text} NOT NULL,\n"                                                                                   \
    "  hash {text} NOT NULL UNIQUE,\n"                                                                              \
    "  role {text} NOT NULL,\n"                                                                                     \
    "  kb {text},\n"                                                                                                \
    "  created_at {int} NOT NULL, last_used_at {int}, revoked_at {int});\n"
#define CONVERSATIONS(t, id)                                                                                        \
    "CREATE TABLE " t "(\n"                                                                                         \
    "  id " id ",\n"                                                                                                \
    "  owner_key_id {int} NOT NULL,\n"                                                                              \
    "  kb_id {int} NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"                                                \
    "  title {text} NOT NULL,\n"                                                                                    \
    "  created_at {int} NOT NULL, updated_at {int} NOT NULL);\n"
#define CONVERSATIONS_INDEXES                                                                                       \
    "CREATE INDEX conversations_owner ON conversations(owner_key_id, updated_at);\n"                                \
    "CREATE INDEX conversations_kb ON conversations(kb_id);\n"
#define TURNS(t, id)                                                                                                \
    "CREATE TABLE " t "(\n"                                                                                         \
    "  id " id ",\n"                                                                                                \
    "  conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,\n"                            \
    "  question {text} NOT NULL,\n"                                                                                 \
    "  reply {text} NOT NULL,\n"                                                                                    \
    "  created_at {int} NOT NULL);\n"
#define TURNS_INDEX "CREATE INDEX conversation_turns_conversation ON conversation_turns(conversation_id, id);\n"
#define SETTINGS                                                                                                    \
    "CREATE TABLE settings(\n  name {text} PRIMARY KEY,\n  value {text} NOT NULL,\n  updated_at {int} NOT NULL);\n"
#define VERSIONS                                                                                                    \
    "CREATE TABLE doc_versions(\n"                                                                                  \
    "  doc_id {int} PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,\n"                                      \
    "  kb_id {int} NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"                                                \
    "  key {key} NOT NULL,\n"                                                                                       \
    "  label {text} NOT NULL DEFAULT '',\n"                                                                         \
    "  promulgated {int32} NOT NULL DEFAULT 0,\n"                                                                   \
    "  effective {int32} NOT NULL DEFAULT 0,\n"                                                                     \
    "  repealed {int32} NOT NULL DEFAULT 0,\n"                                                                      \
    "  by_user {flag},\n"                                                                                           \
    "  analysed_at {int} NOT NULL);\n"                                                                              \
    "CREATE INDEX doc_versions_key ON doc_versions(kb_id, key);\n"                                                  \
    "CREATE TABLE doc_repeals(\n"                                                                                   \
    "  doc_id {int} NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"                                         \
    "  kb_id {int} NOT NULL,\n"                                                                                     \
    "  key {key} NOT NULL,\n"                                                                                       \
    "  PRIMARY KEY(doc_id, key)){norowid};\n"                                                                       \
    "CREATE INDEX doc_repeals_key ON doc_repeals(kb_id, key);\n"
#define DOC_STATES                                                                                                  \
    "CREATE TABLE doc_states(\n"                                                                                    \
    "  doc_id {int} PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,\n"                                      \
    "  model {text} NOT NULL,\n"                                                                                    \
    "  n_tokens {int} NOT NULL,\n"                                                                                  \
    "  state {blob} NOT NULL);\n"
/* The documents' vectors (SQLite 14, PostgreSQL 11); kb_ref: the foreign key to the KB, which only SQLite's has. */
#define DOC_VECTORS(kb_ref)                                                                                         \
    "CREATE TABLE doc_vectors(\n"                                                                                   \
    "  doc_id {int} PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,\n"                                      \
    "  kb_id {int} NOT NULL" kb_ref ",\n"                                                                           \
    "  model {text} NOT NULL,\n"                                                                                    \
    "  head {text} NOT NULL,\n"                                                                                     \
    "  vec {blob} NOT NULL);\n"                                                                                     \
    "CREATE INDEX doc_vectors_kb ON doc_vectors(kb_id, model, head);\n"                                             \
    "DROP TABLE doc_states;\n"
/* SQLite's rebuild of table t as t_v6 (migration 6): its rows copied with the columns cols, the old table dropped. */
#define REBUILD(t, cols)                                                                                            \
    "INSERT INTO " t "_v6(" cols ") SELECT " cols " FROM " t ";\n"                                               \
    "DROP TABLE " t ";\nALTER TABLE " t "_v6 RENAME TO " t ";\n"

static const migration migrations[] = {
    {
        /* SQLite 1: KBs, documents, pages, clauses, jobs */
        .sqlite = KBS("kbs", "{rowid}") DOCUMENTS("documents", "{rowid}", "") DOCUMENTS_INDEXES PAGES
            CLAUSES("clauses", "{rowid}") CLAUSES_INDEXES CLAUSES_LABEL_KEY JOBS("jobs", "{rowid}", ""),
        /* PostgreSQL 1: KBs, documents, pages, clauses, the keyword postings. Tokens compare as bytes (COLLATE "C"):
         * equality is all a search asks (keyword_postings.h), and a locale's collation would only make the b-tree
         * slower. */
        .pg = KBS("kbs", "{rowid}") DOCUMENTS("documents", "{rowid}",
                                              ",\n  keyword_clauses bigint NOT NULL DEFAULT 0,\n"
                                              "  keyword_positions bigint NOT NULL DEFAULT 0")
            DOCUMENTS_INDEXES CLAUSES("clauses", "{rowid}") CLAUSES_INDEXES
        "CREATE TABLE keyword_postings(\n"
        "  kb_id bigint NOT NULL,\n"
        "  token text COLLATE \"C\" NOT NULL,\n"
        "  doc_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
        "  n_clauses integer NOT NULL,\n"
        "  postings bytea NOT NULL,\n"
        "  PRIMARY KEY(kb_id, token, doc_id));\n"
        "CREATE INDEX keyword_postings_doc ON keyword_postings(doc_id);\n",
    },
    {
        .sqlite =
        /* 2: SSM encoder output (search/vectors.h): clause vectors and document states, each naming its model */
        "CREATE TABLE clause_vectors(\n"
        "  clause_id INTEGER PRIMARY KEY REFERENCES clauses(id) ON DELETE CASCADE,\n"
        "  kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
        "  model TEXT NOT NULL,\n"
        "  vec BLOB NOT NULL);\n"
        "CREATE INDEX clause_vectors_kb ON clause_vectors(kb_id, model);\n" DOC_STATES,
    },
    {
        .sqlite =
        /* 3: API keys (store/keys.h) and what an ingestion job needs to resume after a restart (store/jobs.h) */
        API_KEYS("api_keys", "{rowid}")
        "ALTER TABLE jobs ADD COLUMN filename TEXT;\n"
        "ALTER TABLE jobs ADD COLUMN upload_path TEXT;\n"
        "ALTER TABLE jobs ADD COLUMN size_bytes INTEGER NOT NULL DEFAULT 0;\n"
        "ALTER TABLE jobs ADD COLUMN replace_doc INTEGER NOT NULL DEFAULT 0;\n"
        "CREATE INDEX jobs_state ON jobs(state);\n",
    },
    {
        .sqlite =
        /* 4: conversations (store/conversations.h): a key's questions and answers in one KB; the code of a job's
         * failure (cq_status_name), so that clients can say it in their own language */
        CONVERSATIONS("conversations", "{rowid}") CONVERSATIONS_INDEXES TURNS("conversation_turns", "{rowid}")
            TURNS_INDEX "ALTER TABLE jobs ADD COLUMN error_code TEXT;\n",
    },
    {
        .sqlite =
        /* 5: versions of a regulation (store/versions.h): each document's version — its group key, label, dates as
         * yyyymmdd (0 unknown), whether a person corrected it — and the regulations its text repeals (同时废止).
         * Documents ingested before this migration get their rows when their KB is first asked about, or by
         * `clauseqa reindex`. */
        VERSIONS,
    },
    {
        .sqlite =
        /* 6: ids are never used twice. Without AUTOINCREMENT SQLite gives a new row the largest id + 1, so deleting the
         * newest KB, document, clause, job, key or conversation handed its id to the next one: an old clause id opened
         * another KB's clause, a KB's FAISS files (named by id) could meet a new KB, a new key could inherit a revoked
         * key's conversations (owner_key_id). Each table is rebuilt (the SQLite way: new table, copy, drop, rename;
         * foreign keys are off during migrations) keeping every id and every column the migrations before this one
         * added, so every reference and every FTS rowid stays as it was. The tables keyed by another table's id
         * (pages, clause_vectors, doc_states, doc_versions, doc_repeals) need no rebuild. */
        KBS("kbs_v6", "{id}") REBUILD("kbs", "id, name, created_at")
        DOCUMENTS("documents_v6", "{id}", "")
        REBUILD("documents", "id, kb_id, name, filename, format, sha256, size_bytes, title, n_pages, n_clauses, "
                             "status, error, quality, quality_reason, created_at")
        DOCUMENTS_INDEXES CLAUSES("clauses_v6", "{id}")
        REBUILD("clauses", "id, doc_id, ord, kind, label, label_key, path, text, page_first, page_last, start_off, "
                           "end_off, boxes")
        CLAUSES_INDEXES CLAUSES_LABEL_KEY
        JOBS("jobs_v6", "{id}",
             ",\n  filename TEXT,\n  upload_path TEXT,\n  size_bytes INTEGER NOT NULL DEFAULT 0,\n"
             "  replace_doc INTEGER NOT NULL DEFAULT 0,\n  error_code TEXT")
        REBUILD("jobs", "id, kb_id, doc_id, state, done, total, error, created_at, updated_at, filename, upload_path, "
                        "size_bytes, replace_doc, error_code")
        "CREATE INDEX jobs_state ON jobs(state);\n"
        API_KEYS("api_keys_v6", "{id}")
        REBUILD("api_keys", "id, name, prefix, hash, role, kb, created_at, last_used_at, revoked_at")
        CONVERSATIONS("conversations_v6", "{id}")
        REBUILD("conversations", "id, owner_key_id, kb_id, title, created_at, updated_at")
        CONVERSATIONS_INDEXES TURNS("conversation_turns_v6", "{id}")
        REBUILD("conversation_turns", "id, conversation_id, question, reply, created_at") TURNS_INDEX,
    },
    {
        .sqlite =
        /* 7: settings of the installation (store/keys.h: once a key has existed, authentication stays on until an
         * admin turns open mode on again). A database that has had a key has authentication on. */
        SETTINGS
        "INSERT INTO settings(name, value, updated_at) SELECT 'auth_required', '1', CAST(strftime('%s', 'now') AS INTEGER) "
        "WHERE EXISTS (SELECT 1 FROM api_keys);\n",
    },
    {
        .sqlite =
        /* 8: how many times a job has been started (store/jobs.h). A job found running at a start was cut off by a
         * crash (a shutdown puts its job back in the queue uncounted); after CQ_JOB_MAX_ATTEMPTS such starts it fails
         * for good instead of taking the server down at every start. */
        "ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;\n",
    },
    {
        .pg =
        /* 2: the rest of store/store.h's tables (pgstore): pages, the label lookups' index, the originals (uploaded
         * files, app/originals.h) in parts of CQ_PG_ORIGINAL_PART_BYTES (TOAST keeps them out of line), settings. */
        PAGES CLAUSES_LABEL_KEY
        "CREATE INDEX documents_sha256 ON documents(sha256);\n"
        "CREATE TABLE originals(\n"
        "  sha256 text COLLATE \"C\" NOT NULL,\n"
        "  part integer NOT NULL,\n"
        "  bytes bytea NOT NULL,\n"
        "  PRIMARY KEY(sha256, part));\n" SETTINGS,
    },
    {
        .pg =
        /* 3 (pgjobs): ingestion jobs with a lease (store/job_claim.h), API keys (store/keys.h; their "authentication
         * required" row is in settings, which pgstore's migration adds), conversations (store/conversations.h): the
         * SQLite store's columns, plus what several nodes need to share the job queue — the upload by content
         * (upload_sha256: the bytes are in originals), the lease (lease_owner, lease_until, on the server's clock) and
         * the fencing token's attempt, and a cancel request another node's worker sees. */
        JOBS("jobs", "{rowid}",
             ",\n"
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
             "  cancel_requested boolean NOT NULL DEFAULT false")
        "CREATE INDEX jobs_unfinished ON jobs(id) WHERE state IN ('queued', 'running');\n"
        "CREATE INDEX jobs_kb ON jobs(kb_id, id);\n"
        "CREATE INDEX jobs_doc ON jobs(doc_id);\n"
        API_KEYS("api_keys", "{rowid}") CONVERSATIONS("conversations", "{rowid}") CONVERSATIONS_INDEXES
            TURNS("conversation_turns", "{rowid}") TURNS_INDEX,
    },
    {
        .pg =
        /* 4 (pgvec): versions of a regulation (store/versions.h), as SQLite's migration 5; keys compare as bytes,
         * so groups list in SQLite's order. Clause vectors and SSM document states as bytea (store/vectors.h: the
         * truth; each node's FAISS index is a cache of them), and the change feed that keeps those caches current:
         * statement triggers on clause_vectors append one vector_changes row per (KB, document) a statement added or
         * deleted vectors of, and NOTIFY clauseqa_vectors, in the writer's transaction (a document or KB deleted by
         * cascade feeds it too). The writers of the feed are serialised by a transaction advisory lock, so seq order is
         * commit order and a reader that has seen seq s has seen every change before it. vector_changes_horizon: the
         * last seq pruned (a node that has not applied it rebuilds). */
        VERSIONS
        "CREATE TABLE clause_vectors(\n"
        "  clause_id bigint PRIMARY KEY,\n"
        "  doc_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
        "  kb_id bigint NOT NULL,\n"
        "  model text NOT NULL,\n"
        "  vec bytea NOT NULL);\n"
        "CREATE INDEX clause_vectors_kb ON clause_vectors(kb_id, model);\n"
        "CREATE INDEX clause_vectors_doc ON clause_vectors(doc_id);\n" DOC_STATES
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
    },
    {
        .pg =
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
    },
    {
        /* SQLite 9, PostgreSQL 6: a key's grant names its KB by id (issue 29 item 10): a KB deleted and made again
         * under the same name is a new KB, which the old keys must not reach. Keys made before are bound to the KB of
         * their name now; one whose KB does not exist any more reaches nothing (store/keys.h). */
        BOTH("ALTER TABLE api_keys ADD COLUMN kb_id {int};\n"
             "UPDATE api_keys SET kb_id = (SELECT id FROM kbs WHERE kbs.name = api_keys.kb) "
             "WHERE kb IS NOT NULL AND kb <> '*';\n"),
    },
    {
        /* SQLite 10, PostgreSQL 7: feedback on answers and the quality log (store/feedback.h, issue 30 items 5 and
         * 6): a turn's thumbs up or down with a comment (one a turn, gone with the turn: a regenerated answer starts
         * unrated), and one row an answer with what /metrics and GET /api/v1/quality count per KB and day, and the
         * documents it cited (kept without a foreign key: a cited document deleted since is what is counted). */
        BOTH("CREATE TABLE turn_feedback(\n"
             "  turn_id {int} PRIMARY KEY REFERENCES conversation_turns(id) ON DELETE CASCADE,\n"
             "  conversation_id {int} NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,\n"
             "  kb_id {int} NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
             "  rating {int32} NOT NULL CHECK (rating IN (-1, 1)),\n"
             "  comment {text} NOT NULL DEFAULT '',\n"
             "  day {key} NOT NULL,\n"
             "  created_at {int} NOT NULL, updated_at {int} NOT NULL);\n"
             "CREATE INDEX turn_feedback_kb ON turn_feedback(kb_id, day);\n"
             "CREATE INDEX turn_feedback_conversation ON turn_feedback(conversation_id);\n"
             "CREATE TABLE answer_log(\n"
             "  id {id},\n"
             "  kb_id {int} NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
             "  day {key} NOT NULL,\n"
             "  created_at {int} NOT NULL,\n"
             "  abstained {int32} NOT NULL, fallback {int32} NOT NULL, low_confidence {int32} NOT NULL,\n"
             "  confidence {real} NOT NULL);\n"
             "CREATE INDEX answer_log_kb_day ON answer_log(kb_id, day);\n"
             "CREATE TABLE answer_log_docs(\n"
             "  answer_id {int} NOT NULL REFERENCES answer_log(id) ON DELETE CASCADE,\n"
             "  doc_id {int} NOT NULL,\n"
             "  PRIMARY KEY(answer_id, doc_id)){norowid};\n"),
    },
    {
        /* SQLite 11, PostgreSQL 8: accounts (issue 30): KB grants of keys and users, many KBs each (store/grants.h; a
         * key's one-KB grant of the migration before moves there), local users with argon2id password hashes and
         * their sign-in sessions (store/users.h; only a session token's SHA-256 is kept), the user a conversation
         * belongs to (store/conversations.h), and the audit trail (store/audit.h). */
        BOTH("CREATE TABLE kb_grants(\n"
             "  subject {text} NOT NULL,\n"
             "  subject_id {int} NOT NULL,\n"
             "  kb_id {int} NOT NULL,\n"
             "  kb {text} NOT NULL,\n"
             "  PRIMARY KEY(subject, subject_id, kb_id));\n"
             "INSERT INTO kb_grants(subject, subject_id, kb_id, kb) SELECT 'key', id, kb_id, kb FROM api_keys "
             "WHERE kb_id IS NOT NULL AND kb IS NOT NULL AND kb <> '*';\n"
             "CREATE TABLE users(\n"
             "  id {id},\n"
             "  name {text} NOT NULL UNIQUE,\n"
             "  password_hash {text} NOT NULL,\n"
             "  role {text} NOT NULL,\n"
             "  kb {text},\n"
             "  created_at {int} NOT NULL, updated_at {int} NOT NULL, last_login_at {int});\n"
             "CREATE TABLE sessions(\n"
             "  id {id},\n"
             "  user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,\n"
             "  hash {text} NOT NULL UNIQUE,\n"
             "  created_at {int} NOT NULL, last_seen_at {int} NOT NULL, expires_at {int} NOT NULL,\n"
             "  revoked_at {int});\n"
             "CREATE INDEX sessions_user ON sessions(user_id);\n"
             "ALTER TABLE conversations ADD COLUMN owner_user_id {int};\n"
             "CREATE TABLE audit(\n"
             "  id {id},\n"
             "  at {int} NOT NULL,\n"
             "  actor_kind {text} NOT NULL, actor_id {int} NOT NULL DEFAULT 0, actor_name {text} NOT NULL DEFAULT '',\n"
             "  action {text} NOT NULL, kb {text} NOT NULL DEFAULT '', target {text} NOT NULL DEFAULT '',\n"
             "  client {text} NOT NULL DEFAULT '');\n"
             "CREATE INDEX audit_action ON audit(action, id);\n"),
    },
    {
        /* SQLite 12, PostgreSQL 9: groups of users with KB grants of their own (store/groups.h), membership (source
         * 'local', or 'ldap': replaced from the directory at each sign-in), and what a user is: a local account or one
         * of the directory (app/ldap_auth.h), and disabled or not (issue 30). */
        BOTH("CREATE TABLE groups(\n"
             "  id {id},\n"
             "  name {text} NOT NULL UNIQUE,\n"
             "  role {text} NOT NULL,\n"
             "  kb {text},\n"
             "  created_at {int} NOT NULL, updated_at {int} NOT NULL);\n"
             "CREATE TABLE group_members(\n"
             "  group_id {int} NOT NULL REFERENCES groups(id) ON DELETE CASCADE,\n"
             "  user_id {int} NOT NULL REFERENCES users(id) ON DELETE CASCADE,\n"
             "  source {text} NOT NULL DEFAULT 'local',\n"
             "  PRIMARY KEY(group_id, user_id));\n"
             "CREATE INDEX group_members_user ON group_members(user_id);\n"
             "ALTER TABLE users ADD COLUMN source {text} NOT NULL DEFAULT 'local';\n"
             "ALTER TABLE users ADD COLUMN disabled_at {int};\n"),
    },
    {
        /* SQLite 13, PostgreSQL 10: the OCR mode an upload asked for, kept with its job (store/jobs.h) instead of in
         * the upload's file name (issue 28 item 4); NULL on the rows of before, whose names still say it. */
        BOTH("ALTER TABLE jobs ADD COLUMN ocr {text};\n"),
    },
    {
        /* SQLite 14, PostgreSQL 11: a document's vector from the encoder's document head (store/vectors.h, document
         * routing, issue 27), naming the weights and the head that made it; the documents' full encoder states go:
         * nothing read them (docs/SSM.md, "State: save and resume"), and they were most of a law corpus's vectors. */
        .sqlite = DOC_VECTORS(" REFERENCES kbs(id) ON DELETE CASCADE"),
        .pg = DOC_VECTORS(""),
    },
};

#define N_MIGRATIONS (sizeof migrations / sizeof migrations[0])

static const char *text_of(const migration *m, cq_db_kind kind) { return kind == CQ_DB_POSTGRESQL ? m->pg : m->sqlite; }

int cq_store_schema_target(cq_db_kind kind) {
    int n = 0;
    for (size_t i = 0; i < N_MIGRATIONS; i++) n += text_of(&migrations[i], kind) != NULL;
    return n;
}

/* The text of the dialect's step number `version` + 1 (from 1) with the dialect's words (word_types): *out,
 * malloc'd. */
static cq_status step_text(cq_db_kind kind, int version, char **out, cq_err *err) {
    const char *t = NULL;
    for (size_t i = 0, n = 0; i < N_MIGRATIONS && !t; i++)
        if (text_of(&migrations[i], kind) && n++ == (size_t)version) t = text_of(&migrations[i], kind);
    if (!t) return cq_err_set(err, CQ_ERR_INTERNAL, "no schema step %d", version + 1);
    cq_strbuf b = {0};
    for (const char *open; (open = strchr(t, '{')); t = strchr(open, '}') + 1) {
        size_t w = 0, n_words = sizeof word_types / sizeof word_types[0];
        while (w < n_words && strncmp(open, word_types[w].word, strlen(word_types[w].word))) w++;
        if (w == n_words) {
            cq_strbuf_free(&b);
            return cq_err_set(err, CQ_ERR_INTERNAL, "schema step %d: unknown word %.20s", version + 1, open);
        }
        cq_strbuf_append(&b, t, (size_t)(open - t));
        cq_strbuf_puts(&b, kind == CQ_DB_POSTGRESQL ? word_types[w].pg : word_types[w].sqlite);
    }
    cq_strbuf_puts(&b, t);
    *out = cq_strbuf_finish(&b);
    return *out ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
}

cq_status cq_store_schema_version(cq_db *db, int *version, cq_err *err) {
    const char *what = "read the schema version"; /* each statement gives one row */
    int64_t v = 0, exists = 0;
    cq_status rc;
    if (cq_db_kind_of(db) == CQ_DB_SQLITE) rc = cq_db_int(db, what, &v, err, "PRAGMA user_version", "");
    else if (!(rc = cq_db_int(db, what, &exists, err, "SELECT to_regclass('clauseqa_schema') IS NOT NULL", "")) && exists)
        rc = cq_db_int(db, what, &v, err, "SELECT coalesce(max(version), 0) FROM clauseqa_schema", "");
    *version = (int)v;
    return rc;
}

/* Serialises migrations between PostgreSQL nodes that start together (pg_advisory_xact_lock key: "clauseqa" in
 * ASCII). */
#define MIGRATION_LOCK "7164892001163731297"

/* One step under the write lock, the version read again: two processes or nodes opening a fresh database at once
 * must not both run a migration. SQLite takes its write lock with BEGIN IMMEDIATE; PostgreSQL an advisory lock, in a
 * transaction that also creates the version table (DDL is transactional there: a failed step leaves nothing). */
static cq_status migrate_step(cq_db *db, int target, cq_err *err) {
    const cq_db_kind kind = cq_db_kind_of(db);
    cq_status rc = kind == CQ_DB_SQLITE
                       ? cq_db_begin(db, err)
                       : cq_db_exec(db,
                                    "BEGIN; SELECT pg_advisory_xact_lock(" MIGRATION_LOCK ");\n"
                                    "CREATE TABLE IF NOT EXISTS clauseqa_schema(version integer NOT NULL);\n"
                                    "INSERT INTO clauseqa_schema SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM clauseqa_schema);",
                                    err);
    int version = 0;
    if (!rc) rc = cq_store_schema_version(db, &version, err);
    if (!rc && version < target) {
        char bump[64];
        if (kind == CQ_DB_SQLITE) snprintf(bump, sizeof bump, "PRAGMA user_version = %d", version + 1);
        else snprintf(bump, sizeof bump, "UPDATE clauseqa_schema SET version = version + 1");
        char *text = NULL;
        rc = step_text(kind, version, &text, err);
        if (!rc) rc = cq_db_exec(db, text, err);
        free(text);
        if (!rc) rc = cq_db_exec(db, bump, err);
        if (rc) cq_err_prefix(err, "schema migration %d: ", version + 1);
    }
    return cq_db_end(db, true, rc, err);
}

static cq_status migrate_steps(cq_db *db, int target, cq_err *err) {
    for (;;) {
        int version;
        if (cq_store_schema_version(db, &version, err)) return err->code;
        if (version > target)
            return cq_err_set(err, CQ_ERR_UNSUPPORTED,
                              "database schema version %d is newer than this program (%d): upgrade clauseqa", version,
                              target);
        if (version == target) return CQ_OK;
        cq_status rc = migrate_step(db, target, err);
        if (rc) return rc;
    }
}

cq_status cq_store_migrate(cq_db *db, cq_err *err) {
    const int target = cq_store_schema_target(cq_db_kind_of(db));
    if (cq_db_kind_of(db) != CQ_DB_SQLITE) return migrate_steps(db, target, err);
    /* SQLite: foreign keys off while migrations run (a table rebuild drops a table others refer to; SQLite ignores
     * the pragma inside a transaction, so it is set around them) */
    int version;
    if (cq_store_schema_version(db, &version, err)) return err->code;
    if (version >= target) return migrate_steps(db, target, err);
    if (cq_db_exec(db, "PRAGMA foreign_keys=OFF", err)) return err->code;
    cq_status rc = migrate_steps(db, target, err);
    cq_err ignored = {0};
    if (cq_db_exec(db, "PRAGMA foreign_keys=ON", rc ? &ignored : err) && !rc) rc = CQ_ERR_DB;
    return rc;
}
