/* clauseqa backup OUT [--json] and clauseqa restore BACKUP [--force] [--json] (app/backup.h). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "app/backup.h"
#include "app/cli.h"
#include "app/cli_common.h"
#include "db/db.h"
#include "store/store.h"

static void backup_usage(FILE *f) {
    fprintf(f, "usage: clauseqa backup OUT [--data DIR] [--json]\n"
               "Writes a backup of the data directory to the new folder OUT: the database (SQLite's online backup:\n"
               "one consistent snapshot, also while `clauseqa serve` runs and ingests), the originals its documents\n"
               "use, clauseqa.conf, and manifest.json with counts and SHA-256 hashes. Page images and vector indexes\n"
               "are rebuilt after a restore; uploads still waiting for ingestion are not kept (upload them again).\n"
               "Restore with: clauseqa restore OUT --data DIR\n");
}

static void restore_usage(FILE *f) {
    fprintf(f, "usage: clauseqa restore BACKUP --data DIR [--force] [--json]\n"
               "Restores a backup (clauseqa backup) into the data directory after checking every file's hash.\n"
               "A data directory that holds a database or originals is refused unless --force, which replaces them\n"
               "(and clears its page-image cache, vector indexes and waiting uploads). Stop the server first: a\n"
               "database in use is refused. Model files and clauseqa.conf already there are kept.\n");
}

static cJSON *counts_json(const char *key, const char *dir, const cq_backup_counts *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, key, dir);
    cJSON_AddNumberToObject(o, "kbs", (double)c->kbs);
    cJSON_AddNumberToObject(o, "documents", (double)c->documents);
    cJSON_AddNumberToObject(o, "clauses", (double)c->clauses);
    cJSON_AddNumberToObject(o, "files", (double)c->files);
    cJSON_AddNumberToObject(o, "missing_originals", (double)c->missing_originals);
    cJSON_AddNumberToObject(o, "bytes", (double)c->bytes);
    return o;
}

/* The options of both: a folder, --json, --force (restore only), --help. Returns -1 to go on, else the exit code. */
static int parse(const char *cmd, int argc, char **argv, void (*usage)(FILE *), bool allow_force, const char **dir,
                 int *json, bool *force) {
    static const struct option opts[] = {{"json", no_argument, 0, 'j'},
                                         {"force", no_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'j': *json = 1; break;
        case 'f':
            if (!allow_force) return cq_cli_usage_hint(cmd);
            *force = true;
            break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint(cmd);
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "clauseqa %s: give one folder\n", cmd);
        return cq_cli_usage_hint(cmd);
    }
    *dir = argv[optind];
    return -1;
}

/* backup and restore copy a SQLite data folder; a PostgreSQL store is backed up with PostgreSQL's own tools. */
static bool refuse_postgresql(const char *cmd) {
    const char *where = cq_cli_store_where();
    if (!where || cq_db_where_kind(where) != CQ_DB_POSTGRESQL) return false;
    fprintf(stderr,
            "clauseqa %s: the store is PostgreSQL: back it up with PostgreSQL's tools — pg_dump -Fc (and pg_restore), "
            "or pg_basebackup with WAL archiving for point-in-time recovery; the originals are in the database too "
            "(docs/SCALE.md, \"Backups\")\n",
            cmd);
    return true;
}

int cq_cmd_backup(int argc, char **argv) {
    const char *out = NULL;
    int json = 0;
    bool force = false;
    int rc = parse("backup", argc, argv, backup_usage, false, &out, &json, &force);
    if (rc >= 0) return rc;
    if (refuse_postgresql("backup")) return 1;
    cq_backup_counts c;
    cq_err err = {0};
    if (cq_backup_write(cq_cli_data_dir(), out, &c, &err)) {
        fprintf(stderr, "clauseqa backup: %s\n", err.msg);
        return 1;
    }
    if (c.missing_originals)
        fprintf(stderr, "clauseqa backup: warning: %lld documents' originals were missing (deleted while the backup "
                        "ran?); manifest.json lists them\n", (long long)c.missing_originals);
    if (json) cq_json_print_line(counts_json("backup", out, &c), stdout);
    else
        fprintf(stderr, "backup %s: %lld KBs, %lld documents, %lld clauses, %lld originals, %.1f MB\n", out,
                (long long)c.kbs, (long long)c.documents, (long long)c.clauses, (long long)c.files, c.bytes / 1e6);
    return 0;
}

int cq_cmd_restore(int argc, char **argv) {
    const char *backup = NULL;
    int json = 0;
    bool force = false;
    int rc = parse("restore", argc, argv, restore_usage, true, &backup, &json, &force);
    if (rc >= 0) return rc;
    if (refuse_postgresql("restore")) return 1;
    cq_backup_counts c;
    cq_err err = {0};
    const char *data_dir = cq_cli_data_dir();
    if (cq_backup_restore(backup, data_dir, force, &c, &err)) {
        fprintf(stderr, "clauseqa restore: %s\n", err.msg);
        return err.code == CQ_ERR_EXISTS ? 2 : 1;
    }
    if (json) cq_json_print_line(counts_json("data", data_dir, &c), stdout);
    else
        fprintf(stderr, "restored %s into %s: %lld KBs, %lld documents, %lld clauses, %lld originals\n", backup,
                data_dir, (long long)c.kbs, (long long)c.documents, (long long)c.clauses, (long long)c.files);
    return 0;
}
