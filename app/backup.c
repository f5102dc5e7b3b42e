/* Backups and restores of a data directory (app/backup.h). */
#include "app/backup.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app/originals.h"
#include "core/fileio.h"
#include "core/json.h"
#include "core/sha256.h"
#include "db/db.h"
#include "store/jobs.h"
#include "store/store.h"

#define PATH_CAP 1400

/* dir/name into out (PATH_CAP bytes); "" when it does not fit, which no file operation accepts. */
static void join(char *out, const char *dir, const char *name) {
    if (snprintf(out, PATH_CAP, "%s/%s", dir, name) >= PATH_CAP) out[0] = 0;
}

/* Copies src to dst (a temporary file renamed at the end: dst is whole or absent), hashing what it copies. */
static cq_status copy_hashing(const char *src, const char *dst, mode_t mode, char sha[65], int64_t *bytes,
                              cq_err *err) {
    int in = open(src, O_RDONLY);
    if (in < 0) return cq_err_set(err, errno == ENOENT ? CQ_ERR_NOT_FOUND : CQ_ERR_IO, "cannot read %s: %s", src,
                                  strerror(errno));
    char tmp[PATH_CAP + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", dst);
    int out = mkstemp(tmp);
    if (out < 0) {
        close(in);
        return cq_err_set(err, CQ_ERR_IO, "cannot write %s: %s", dst, strerror(errno));
    }
    fchmod(out, mode);
    cq_sha256 h;
    cq_sha256_init(&h);
    char buf[1 << 16];
    ssize_t n;
    int64_t total = 0;
    cq_status rc = CQ_OK;
    while ((n = read(in, buf, sizeof buf)) > 0) {
        cq_sha256_update(&h, buf, (size_t)n);
        total += n;
        for (ssize_t done = 0; done < n && !rc;) {
            ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w < 0) rc = cq_err_set(err, CQ_ERR_IO, "cannot write %s: %s", dst, strerror(errno));
            else done += w;
        }
        if (rc) break;
    }
    if (n < 0 && !rc) rc = cq_err_set(err, CQ_ERR_IO, "cannot read %s: %s", src, strerror(errno));
    if (!rc && fsync(out) != 0) rc = cq_err_set(err, CQ_ERR_IO, "cannot write %s: %s", dst, strerror(errno));
    close(in);
    if (close(out) != 0 && !rc) rc = cq_err_set(err, CQ_ERR_IO, "cannot write %s", dst);
    if (!rc && rename(tmp, dst) != 0) rc = cq_err_set(err, CQ_ERR_IO, "cannot write %s: %s", dst, strerror(errno));
    if (rc) {
        unlink(tmp);
        return rc;
    }
    uint8_t digest[32];
    cq_sha256_final(&h, digest);
    for (int i = 0; i < 32; i++) snprintf(sha + 2 * i, 3, "%02x", digest[i]);
    *bytes = total;
    return CQ_OK;
}

/* Regular files of dir, removed (not recursive); keep: a name to leave (NULL: none). */
static void remove_files_in(const char *dir, const char *keep) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[PATH_CAP];
    struct stat st;
    while ((e = readdir(d))) {
        join(path, dir, e->d_name);
        if ((!keep || strcmp(e->d_name, keep)) && lstat(path, &st) == 0 && S_ISREG(st.st_mode)) unlink(path);
    }
    closedir(d);
}

/* Entries of dir besides "." and ".."; -1 when it cannot be read (absent: 0). */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* The summary manifest.json keeps: counts and the KBs, as the store reads them through s. */
static cq_status read_counts(cq_store *s, cq_backup_counts *c, cJSON *kbs_out, cq_err *err) {
    cq_kb_info *kbs;
    size_t n;
    cq_status rc = cq_store_kb_list(s, &kbs, &n, err);
    if (rc) return rc;
    c->kbs = (int64_t)n;
    c->documents = c->clauses = 0;
    for (size_t i = 0; i < n; i++) {
        c->documents += kbs[i].n_documents;
        c->clauses += kbs[i].n_clauses;
        if (!kbs_out) continue;
        cJSON *k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "name", kbs[i].name);
        cJSON_AddNumberToObject(k, "documents", (double)kbs[i].n_documents);
        cJSON_AddNumberToObject(k, "clauses", (double)kbs[i].n_clauses);
        cJSON_AddItemToArray(kbs_out, k);
    }
    free(kbs);
    return CQ_OK;
}

/* The snapshot: the live database copied page by page in one step (one read transaction: consistent). */
static cq_status snapshot(const char *db_path, const char *copy_path, cq_err *err) {
    sqlite3 *src = NULL, *dst = NULL;
    cq_status rc = CQ_OK;
    if (sqlite3_open_v2(db_path, &src, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
        rc = cq_err_set(err, CQ_ERR_DB, "cannot open %s: %s", db_path, sqlite3_errmsg(src));
    else if (sqlite3_open_v2(copy_path, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
        rc = cq_err_set(err, CQ_ERR_DB, "cannot create %s: %s", copy_path, sqlite3_errmsg(dst));
    if (!rc) {
        sqlite3_busy_timeout(src, CQ_DB_BUSY_TIMEOUT_MS);
        sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
        int step = SQLITE_BUSY;
        for (int tries = 0; b && (step == SQLITE_BUSY || step == SQLITE_LOCKED) && tries < 100; tries++) {
            step = sqlite3_backup_step(b, -1);
            if (step == SQLITE_BUSY || step == SQLITE_LOCKED) sqlite3_sleep(100);
        }
        if (!b || sqlite3_backup_finish(b) != SQLITE_OK || step != SQLITE_DONE)
            rc = cq_err_set(err, CQ_ERR_DB, "the database could not be copied: %s", sqlite3_errmsg(dst));
    }
    sqlite3_close(src);
    sqlite3_close(dst);
    return rc;
}

/* In the copy: jobs that had not ended are failed (their uploads are not in the backup); counts and documents. */
static cq_status settle_copy(const char *copy_path, cq_backup_counts *c, cJSON *kbs_json, cq_doc_info **docs,
                             size_t *n_docs, cq_err *err) {
    cq_store *s = NULL;
    cq_status rc = cq_store_open(copy_path, &s, err);
    cq_job_info *jobs = NULL;
    size_t n_jobs = 0;
    if (!rc) rc = cq_store_job_unfinished(s, &jobs, &n_jobs, err);
    for (size_t i = 0; !rc && i < n_jobs; i++) {
        rc = cq_store_job_update(s, jobs[i].id, CQ_JOB_FAILED, jobs[i].done, jobs[i].total,
                                 "the upload was still waiting when the backup was taken: upload it again", err);
        if (!rc) rc = cq_store_job_finish(s, jobs[i].id, 0, err);
    }
    cq_job_info_free_array(jobs, n_jobs);
    if (!rc) rc = read_counts(s, c, kbs_json, err);
    /* every document of every KB (the originals to copy) */
    cq_kb_info *kbs = NULL;
    size_t n_kbs = 0;
    if (!rc) rc = cq_store_kb_list(s, &kbs, &n_kbs, err);
    for (size_t i = 0; !rc && i < n_kbs; i++) {
        cq_doc_info *d;
        size_t n;
        if ((rc = cq_store_doc_list(s, kbs[i].id, &d, &n, err))) break;
        cq_doc_info *grown = realloc(*docs, (*n_docs + n + 1) * sizeof *grown);
        if (!grown) {
            cq_doc_info_free_array(d, n);
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        *docs = grown;
        memcpy(grown + *n_docs, d, n * sizeof *d);
        *n_docs += n;
        free(d); /* the rows moved into *docs */
    }
    free(kbs);
    /* one file, not a WAL pair: the backup is self-contained */
    if (s && sqlite3_exec(cq_store_db(s), "PRAGMA journal_mode=DELETE", NULL, NULL, NULL) != SQLITE_OK && !rc)
        rc = cq_err_set(err, CQ_ERR_DB, "cannot finish the database copy: %s", sqlite3_errmsg(cq_store_db(s)));
    cq_store_close(s);
    return rc;
}

static cJSON *file_entry(const char *path, int64_t bytes, const char *sha) {
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "path", path);
    cJSON_AddNumberToObject(f, "bytes", (double)bytes);
    cJSON_AddStringToObject(f, "sha256", sha);
    return f;
}

static int by_sha256(const void *a, const void *b) {
    return strcmp(((const cq_doc_info *)a)->sha256, ((const cq_doc_info *)b)->sha256);
}

/* Removes what a failed backup wrote into its temporary folder. */
static void remove_partial(const char *tmp) {
    char path[PATH_CAP];
    join(path, tmp, "files");
    remove_files_in(path, NULL);
    rmdir(path);
    remove_files_in(tmp, NULL);
    rmdir(tmp);
}

cq_status cq_backup_write(const char *data_dir, const char *out_dir, cq_backup_counts *counts, cq_err *err) {
    memset(counts, 0, sizeof *counts);
    char db[PATH_CAP], tmp[PATH_CAP], path[PATH_CAP], src[PATH_CAP], sha[65];
    join(db, data_dir, "clauseqa.db");
    if (access(db, R_OK) != 0)
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "%s holds no database (clauseqa.db): nothing to back up", data_dir);
    int entries = count_entries(out_dir);
    if (entries != 0)
        return cq_err_set(err, CQ_ERR_EXISTS, "%s %s: give a new folder", out_dir,
                          entries < 0 ? "cannot be read" : "exists and is not empty");
    snprintf(path, sizeof path, "%s", out_dir);
    cq_status rc = cq_mkdirs(dirname(path), err);
    if (rc) return rc;
    snprintf(tmp, sizeof tmp, "%s.partial-XXXXXX", out_dir);
    if (!mkdtemp(tmp)) return cq_err_set(err, CQ_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    join(path, tmp, "files");
    if (mkdir(path, 0700) != 0) rc = cq_err_set(err, CQ_ERR_IO, "cannot create %s: %s", path, strerror(errno));

    cJSON *m = cJSON_CreateObject(), *kbs = cJSON_CreateArray(), *files = cJSON_CreateArray(),
          *missing = cJSON_CreateArray();
    cq_doc_info *docs = NULL;
    size_t n_docs = 0;
    char copy[PATH_CAP];
    join(copy, tmp, "clauseqa.db");
    if (!rc) rc = snapshot(db, copy, err);
    if (!rc) chmod(copy, 0600); /* keys (hashed) and every document: for its owner only, like the folder */
    if (!rc) rc = settle_copy(copy, counts, kbs, &docs, &n_docs, err);
    if (n_docs) qsort(docs, n_docs, sizeof *docs, by_sha256);
    for (size_t i = 0; !rc && i < n_docs; i++) {
        const cq_doc_info *d = &docs[i];
        if (!cq_original_path(data_dir, d->sha256, d->format, src, sizeof src)) continue; /* failed: none kept */
        if (i && !strcmp(docs[i - 1].sha256, d->sha256)) continue; /* documents of several KBs share one original */
        char name[100], rel[120];
        snprintf(name, sizeof name, "%s.%s", d->sha256, d->format);
        snprintf(rel, sizeof rel, "files/%s", name);
        join(path, tmp, rel);
        int64_t bytes = 0;
        rc = copy_hashing(src, path, 0600, sha, &bytes, err);
        if (rc == CQ_ERR_NOT_FOUND) { /* deleted after the snapshot, or lost before it */
            cq_err_clear(err);
            rc = CQ_OK;
            cJSON_AddItemToArray(missing, cJSON_CreateString(rel));
            counts->missing_originals++;
            continue;
        }
        if (!rc && strcmp(sha, d->sha256))
            rc = cq_err_set(err, CQ_ERR_IO, "%s is damaged: its content hashes to %s, not to its name", src, sha);
        if (!rc) {
            cJSON_AddItemToArray(files, file_entry(rel, bytes, sha));
            counts->files++;
            counts->bytes += bytes;
        }
    }
    cq_doc_info_free_array(docs, n_docs);
    int64_t db_bytes = 0;
    if (!rc) rc = cq_sha256_file_hex(copy, sha, err);
    struct stat st;
    if (!rc && stat(copy, &st) == 0) db_bytes = st.st_size;
    counts->bytes += db_bytes;
    join(src, data_dir, "clauseqa.conf");
    join(path, tmp, "clauseqa.conf");
    int64_t conf_bytes = 0;
    char conf_sha[65] = "";
    if (!rc && access(src, R_OK) == 0) rc = copy_hashing(src, path, 0600, conf_sha, &conf_bytes, err);

    if (!rc) {
        char abs_data[PATH_CAP];
        cJSON_AddStringToObject(m, "format", CQ_BACKUP_FORMAT);
        cJSON_AddNumberToObject(m, "created_at", (double)time(NULL));
        cJSON_AddStringToObject(m, "version", "0.1.0");
        cJSON_AddNumberToObject(m, "schema_version", CQ_STORE_SCHEMA_VERSION);
        cJSON_AddStringToObject(m, "source", realpath(data_dir, abs_data) ? abs_data : data_dir);
        cJSON *c = cJSON_AddObjectToObject(m, "counts");
        cJSON_AddNumberToObject(c, "kbs", (double)counts->kbs);
        cJSON_AddNumberToObject(c, "documents", (double)counts->documents);
        cJSON_AddNumberToObject(c, "clauses", (double)counts->clauses);
        cJSON_AddNumberToObject(c, "files", (double)counts->files);
        cJSON_AddItemToObject(m, "kbs", kbs);
        cJSON_AddItemToObject(m, "database", file_entry("clauseqa.db", db_bytes, sha));
        if (conf_sha[0]) cJSON_AddItemToObject(m, "config", file_entry("clauseqa.conf", conf_bytes, conf_sha));
        cJSON_AddItemToObject(m, "files", files);
        cJSON_AddItemToObject(m, "missing_originals", missing);
        kbs = files = missing = NULL;
        char *text = cq_json_print_formatted(m, NULL);
        join(path, tmp, "manifest.json");
        rc = text ? cq_file_write_atomic(path, text, strlen(text), err)
                  : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        free(text);
    }
    cJSON_Delete(m);
    cJSON_Delete(kbs);
    cJSON_Delete(files);
    cJSON_Delete(missing);
    if (!rc && rename(tmp, out_dir) != 0)
        rc = cq_err_set(err, CQ_ERR_IO, "cannot rename %s to %s: %s", tmp, out_dir, strerror(errno));
    if (rc) remove_partial(tmp);
    return rc;
}

/* ---- restore ----------------------------------------------------------------------------------------------------- */

/* Reads and checks manifest.json; every listed file must hash as recorded. */
static cq_status verify(const char *backup_dir, cJSON **manifest, cq_err *err) {
    char path[PATH_CAP], sha[65];
    join(path, backup_dir, "manifest.json");
    char *text;
    size_t len;
    cq_status rc = cq_file_read(path, 64u << 20, &text, &len, err);
    if (rc) return cq_err_set(err, rc, "%s is not a clauseqa backup (no readable manifest.json)", backup_dir);
    cJSON *m = cJSON_Parse(text);
    free(text);
    const cJSON *format = cJSON_GetObjectItem(m, "format"), *db = cJSON_GetObjectItem(m, "database"),
                *files = cJSON_GetObjectItem(m, "files");
    if (!cJSON_IsString(format) || strcmp(format->valuestring, CQ_BACKUP_FORMAT) || !cJSON_IsObject(db) ||
        !cJSON_IsArray(files)) {
        cJSON_Delete(m);
        return cq_err_set(err, CQ_ERR_FORMAT, "%s/manifest.json is not a %s manifest", backup_dir, CQ_BACKUP_FORMAT);
    }
    const cJSON *config = cJSON_GetObjectItem(m, "config"), *entry;
    for (int i = -2; !rc; i++) {
        entry = i == -2 ? db : i == -1 ? config : cJSON_GetArrayItem(files, i);
        if (i >= 0 && !entry) break;
        if (!entry) continue; /* no clauseqa.conf */
        const cJSON *rel = cJSON_GetObjectItem(entry, "path"), *want = cJSON_GetObjectItem(entry, "sha256");
        if (!cJSON_IsString(rel) || !cJSON_IsString(want) || strstr(rel->valuestring, "..") ||
            rel->valuestring[0] == '/') {
            rc = cq_err_set(err, CQ_ERR_FORMAT, "%s/manifest.json: a file entry is malformed", backup_dir);
            break;
        }
        join(path, backup_dir, rel->valuestring);
        if ((rc = cq_sha256_file_hex(path, sha, err))) break;
        if (strcmp(sha, want->valuestring))
            rc = cq_err_set(err, CQ_ERR_IO, "%s is damaged: its content hashes to %s, the manifest says %s", path, sha,
                            want->valuestring);
    }
    if (rc) cJSON_Delete(m);
    else *manifest = m;
    return rc;
}

/* Takes the database at path out of use: fails while another connection (a running server) has it open, since a
 * WAL database returns to rollback journaling only when no one else uses it (and then nothing is changed). */
static cq_status take_database(const char *path, cq_err *err) {
    if (access(path, F_OK) != 0) return CQ_OK;
    sqlite3 *db = NULL;
    cq_status rc = CQ_OK;
    sqlite3_stmt *st = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "PRAGMA journal_mode=DELETE", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW || strcmp((const char *)sqlite3_column_text(st, 0), "delete"))
        rc = cq_err_set(err, CQ_ERR_EXISTS, "%s is in use (is `clauseqa serve` running on this data directory? stop "
                        "it first)", path);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc;
}

/* The first integer column of a one-row statement (PRAGMA user_version), -1 when it gives none. */
static int pragma_int(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st = NULL;
    int v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The staged database before the store opens it: its schema version is one this program knows and the manifest's,
 * and PRAGMA integrity_check answers exactly one row, "ok" (its rows are read: SQLite reports damage as rows of an
 * otherwise successful statement, not as an error). */
static cq_status check_staged_database(const char *path, const cJSON *manifest, cq_err *err) {
    sqlite3 *db = NULL;
    cq_status rc = CQ_OK;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        rc = cq_err_set(err, CQ_ERR_DB, "the backup's database cannot be opened: %s",
                        db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return rc;
    }
    int version = pragma_int(db, "PRAGMA user_version");
    const cJSON *want = cJSON_GetObjectItem(manifest, "schema_version");
    if (version < 1 || version > CQ_STORE_SCHEMA_VERSION)
        rc = cq_err_set(err, CQ_ERR_UNSUPPORTED,
                        "the backup's database has schema version %d; this program reads versions 1 to %d%s", version,
                        CQ_STORE_SCHEMA_VERSION, version > CQ_STORE_SCHEMA_VERSION ? " (upgrade clauseqa)" : "");
    else if (cJSON_IsNumber(want) && (int)want->valuedouble != version)
        rc = cq_err_set(err, CQ_ERR_FORMAT, "the backup's database has schema version %d; its manifest says %d",
                        version, (int)want->valuedouble);
    sqlite3_stmt *st = NULL;
    if (!rc && sqlite3_prepare_v2(db, "PRAGMA integrity_check(20)", -1, &st, NULL) != SQLITE_OK)
        rc = cq_err_set(err, CQ_ERR_DB, "the backup's database cannot be checked: %s", sqlite3_errmsg(db));
    int rows = 0, step = SQLITE_DONE;
    char first[300] = "";
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *row = (const char *)sqlite3_column_text(st, 0);
        if (rows++ == 0 || !strcmp(first, "ok")) snprintf(first, sizeof first, "%s", row ? row : "(null)");
    }
    if (!rc && step != SQLITE_DONE)
        rc = cq_err_set(err, CQ_ERR_DB, "the backup's database is damaged: %s", sqlite3_errmsg(db));
    else if (!rc && (rows != 1 || strcmp(first, "ok")))
        rc = cq_err_set(err, CQ_ERR_DB, "the backup's database is damaged: its integrity check reports %s%s",
                        rows ? first : "nothing", rows > 1 ? " (and more)" : "");
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc;
}

/* The staged database as the server will see it (opened by the store, migrating a backup of an older version):
 * what it holds is what the manifest says, in all and KB by KB; then back to one file (no WAL beside it). */
static cq_status check_staged_counts(const char *path, const cJSON *manifest, cq_backup_counts *counts, cq_err *err) {
    cq_store *s = NULL;
    cJSON *kbs = cJSON_CreateArray();
    cq_status rc = cq_store_open(path, &s, err);
    if (!rc) rc = read_counts(s, counts, kbs, err);
    if (!rc && sqlite3_exec(cq_store_db(s), "PRAGMA journal_mode=DELETE", NULL, NULL, NULL) != SQLITE_OK)
        rc = cq_err_set(err, CQ_ERR_DB, "the restored database cannot be finished: %s", sqlite3_errmsg(cq_store_db(s)));
    cq_store_close(s);
    const cJSON *want = cJSON_GetObjectItem(manifest, "counts"), *want_kbs = cJSON_GetObjectItem(manifest, "kbs");
    const cJSON *n_kbs = cJSON_GetObjectItem(want, "kbs"), *n_docs = cJSON_GetObjectItem(want, "documents"),
                *n_clauses = cJSON_GetObjectItem(want, "clauses");
    if (!rc && (!cJSON_IsNumber(n_kbs) || !cJSON_IsNumber(n_docs) || !cJSON_IsNumber(n_clauses)))
        rc = cq_err_set(err, CQ_ERR_FORMAT, "the manifest has no counts of KBs, documents and clauses");
    if (!rc && (counts->kbs != (int64_t)n_kbs->valuedouble || counts->documents != (int64_t)n_docs->valuedouble ||
                counts->clauses != (int64_t)n_clauses->valuedouble))
        rc = cq_err_set(err, CQ_ERR_FORMAT,
                        "the backup's database holds %lld KBs, %lld documents, %lld clauses; the manifest says %lld, "
                        "%lld, %lld",
                        (long long)counts->kbs, (long long)counts->documents, (long long)counts->clauses,
                        (long long)n_kbs->valuedouble, (long long)n_docs->valuedouble,
                        (long long)n_clauses->valuedouble);
    if (!rc && cJSON_IsArray(want_kbs)) { /* KB by KB */
        const cJSON *k;
        cJSON_ArrayForEach(k, want_kbs) {
            const cJSON *name = cJSON_GetObjectItem(k, "name");
            const cJSON *got = NULL, *g;
            cJSON_ArrayForEach(g, kbs) if (cJSON_IsString(name) &&
                                           !strcmp(cJSON_GetObjectItem(g, "name")->valuestring, name->valuestring)) got = g;
            if (!got || cJSON_GetNumberValue(cJSON_GetObjectItem(got, "documents")) !=
                            cJSON_GetNumberValue(cJSON_GetObjectItem(k, "documents")) ||
                cJSON_GetNumberValue(cJSON_GetObjectItem(got, "clauses")) !=
                    cJSON_GetNumberValue(cJSON_GetObjectItem(k, "clauses"))) {
                rc = cq_err_set(err, CQ_ERR_FORMAT, "the backup's database does not hold KB '%s' as its manifest says",
                                cJSON_IsString(name) ? name->valuestring : "?");
                break;
            }
        }
    }
    cJSON_Delete(kbs);
    return rc;
}

/* Removes the staging folder and what is in it (files/, vectors.old/: one level of folders). */
static void remove_stage(const char *stage) {
    static const char *const subdirs[] = {"files", "vectors.old"};
    char path[PATH_CAP];
    for (size_t i = 0; i < 2; i++) {
        join(path, stage, subdirs[i]);
        remove_files_in(path, NULL);
        rmdir(path);
    }
    remove_files_in(stage, NULL);
    rmdir(stage);
}

static void sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* A restore is staged in full in a temporary folder beside the target's database (DATA/.restore-XXXXXX, the same
 * file system) and checked there: every file against its hash, the database's integrity check, its schema version,
 * its counts against the manifest. Only then is the target changed, in an order where every moment is a whole
 * data directory: the restored originals join DATA/files (named by their content, so the old database loses
 * nothing), the vector indexes move aside, and one rename puts the restored database in place (the commit);
 * after it, what belonged only to the old database goes. A failure before the commit leaves the target as it was. */
cq_status cq_backup_restore(const char *backup_dir, const char *data_dir, bool force, cq_backup_counts *counts,
                            cq_err *err) {
    memset(counts, 0, sizeof *counts);
    cJSON *m = NULL;
    cq_status rc = verify(backup_dir, &m, err);
    if (rc) return rc;
    char db[PATH_CAP], files_dir[PATH_CAP], path[PATH_CAP], src[PATH_CAP], sha[65], stage[PATH_CAP],
        staged_db[PATH_CAP], staged_files[PATH_CAP], vectors[PATH_CAP], vectors_aside[PATH_CAP];
    join(db, data_dir, "clauseqa.db");
    join(files_dir, data_dir, "files");
    join(vectors, data_dir, "vectors");
    int originals = count_entries(files_dir);
    bool has_db = access(db, F_OK) == 0;
    if ((has_db || originals) && !force) {
        cJSON_Delete(m);
        return cq_err_set(err, CQ_ERR_EXISTS, "%s holds %s%s%s: restore refuses to replace them without --force",
                          data_dir, has_db ? "a database" : "", has_db && originals ? " and " : "",
                          originals ? "stored originals" : "");
    }
    rc = cq_mkdirs(files_dir, err);
    join(stage, data_dir, ".restore-XXXXXX");
    if (!rc && !mkdtemp(stage)) rc = cq_err_set(err, CQ_ERR_IO, "cannot create %s: %s", stage, strerror(errno));
    if (rc) {
        cJSON_Delete(m);
        return rc;
    }
    join(staged_db, stage, "clauseqa.db");
    join(staged_files, stage, "files");
    join(vectors_aside, stage, "vectors.old");
    if (mkdir(staged_files, 0700) != 0) rc = cq_err_set(err, CQ_ERR_IO, "cannot create %s: %s", staged_files,
                                                      strerror(errno));

    /* 1. Everything into the stage, each file checked against its hash as it is copied. */
    const cJSON *files = cJSON_GetObjectItem(m, "files"), *f;
    cJSON_ArrayForEach(f, files) {
        if (rc) break;
        const char *rel = cJSON_GetObjectItem(f, "path")->valuestring;
        if (strncmp(rel, "files/", 6) || !rel[6] || strchr(rel + 6, '/')) { /* an original, nothing else */
            rc = cq_err_set(err, CQ_ERR_FORMAT, "%s/manifest.json lists '%.100s', which is not an original (files/NAME)",
                            backup_dir, rel);
            break;
        }
        join(src, backup_dir, rel);
        join(path, stage, rel);
        int64_t bytes;
        rc = copy_hashing(src, path, 0600, sha, &bytes, err);
        if (!rc && strcmp(sha, cJSON_GetObjectItem(f, "sha256")->valuestring))
            rc = cq_err_set(err, CQ_ERR_IO, "%s changed while it was restored", src);
        counts->files++;
        counts->bytes += bytes;
    }
    int64_t bytes = 0;
    join(src, backup_dir, "clauseqa.db");
    if (!rc) rc = copy_hashing(src, staged_db, 0600, sha, &bytes, err);
    if (!rc && strcmp(sha, cJSON_GetObjectItem(cJSON_GetObjectItem(m, "database"), "sha256")->valuestring))
        rc = cq_err_set(err, CQ_ERR_IO, "%s changed while it was restored", src);
    counts->bytes += bytes;

    /* 2. The staged database checked: integrity, schema version, counts. */
    int64_t n_files = counts->files, n_bytes = counts->bytes;
    if (!rc) rc = check_staged_database(staged_db, m, err);
    if (!rc) rc = check_staged_counts(staged_db, m, counts, err);
    counts->files = n_files;
    counts->bytes = n_bytes;

    /* 3. The target, last: not in use; the originals join DATA/files; the vector indexes move aside. */
    if (!rc && force) rc = take_database(db, err);
    char **added = NULL; /* originals the target did not have: removed again when the commit fails */
    size_t n_added = 0;
    cJSON_ArrayForEach(f, files) {
        if (rc) break;
        const char *rel = cJSON_GetObjectItem(f, "path")->valuestring;
        const char *want = cJSON_GetObjectItem(f, "sha256")->valuestring;
        join(src, stage, rel);
        join(path, data_dir, rel);
        cq_err e2 = {0};
        bool there = access(path, F_OK) == 0;
        if (there && cq_sha256_file_hex(path, sha, &e2) == CQ_OK && !strcmp(sha, want)) continue; /* the same */
        char **grown = there ? added : realloc(added, (n_added + 1) * sizeof *added);
        if (!grown || (!there && !(grown[n_added] = strdup(path)))) {
            if (grown) added = grown;
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        added = grown;
        if (rename(src, path) != 0) {
            rc = cq_err_set(err, CQ_ERR_IO, "cannot move %s to %s: %s", src, path, strerror(errno));
            if (!there) free(added[n_added]);
            break;
        }
        if (!there) n_added++;
    }
    bool vectors_moved = false;
    if (!rc && access(vectors, F_OK) == 0) { /* derived: rebuilt from the vectors in the database */
        if (rename(vectors, vectors_aside) != 0)
            rc = cq_err_set(err, CQ_ERR_IO, "cannot move %s aside: %s", vectors, strerror(errno));
        else vectors_moved = true;
    }
    if (!rc) {
        sync_dir(files_dir);
        static const char *const sidecars[] = {"clauseqa.db-wal", "clauseqa.db-shm", "clauseqa.db-journal"};
        for (size_t i = 0; i < 3; i++) { /* none after take_database; a stale one must never meet the new file */
            join(path, data_dir, sidecars[i]);
            unlink(path);
        }
        /* 4. The commit: one rename. */
        if (rename(staged_db, db) != 0) rc = cq_err_set(err, CQ_ERR_IO, "cannot move %s to %s: %s", staged_db, db,
                                                       strerror(errno));
        else sync_dir(data_dir);
    }
    if (rc) { /* the target as it was */
        for (size_t i = 0; i < n_added; i++) unlink(added[i]);
        if (vectors_moved) rename(vectors_aside, vectors);
    } else {
        /* 5. What belonged only to the old database: originals the restored one does not use, page images,
         * uploads, vector indexes; and the backup's clauseqa.conf when the target has none. */
        DIR *d = opendir(files_dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            bool listed = false;
            cJSON_ArrayForEach(f, files) {
                const char *rel = cJSON_GetObjectItem(f, "path")->valuestring;
                if (!strncmp(rel, "files/", 6) && !strcmp(rel + 6, e->d_name)) listed = true;
            }
            struct stat sb;
            join(path, files_dir, e->d_name);
            if (!listed && lstat(path, &sb) == 0 && S_ISREG(sb.st_mode)) unlink(path);
        }
        if (d) closedir(d);
        const char *derived[] = {"cache/pages", "uploads", "uploads/spool"};
        for (size_t i = 0; i < sizeof derived / sizeof derived[0]; i++) {
            join(path, data_dir, derived[i]);
            remove_files_in(path, NULL);
        }
        join(src, backup_dir, "clauseqa.conf");
        join(path, data_dir, "clauseqa.conf");
        int64_t conf_bytes;
        cq_err e2 = {0};
        if (access(src, R_OK) == 0 && access(path, F_OK) != 0) copy_hashing(src, path, 0600, sha, &conf_bytes, &e2);
    }
    for (size_t i = 0; i < n_added; i++) free(added[i]);
    free(added);
    remove_stage(stage);
    cJSON_Delete(m);
    return rc;
}
