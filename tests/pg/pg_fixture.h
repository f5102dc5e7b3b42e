/* What the PostgreSQL tests (tests/pg/test_*.c) share: a fresh database per test (cmocka setup and teardown), more
 * connections to it, and one-line SQL helpers. Included by one test program each; a program uses what it needs. */
#ifndef CQ_TESTS_PG_FIXTURE_H
#define CQ_TESTS_PG_FIXTURE_H

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "pg_handle.h"

#define PG_FIXTURE_MAYBE_UNUSED __attribute__((unused))

static const char *conninfo; /* CLAUSEQA_PG, from tests/pg/cluster.sh */

PG_FIXTURE_MAYBE_UNUSED static int64_t pg_count(cq_pg *pg, const char *sql) {
    PGresult *r = PQexec(cq_pg_conn(pg), sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("%s: %s", sql, PQerrorMessage(cq_pg_conn(pg)));
    int64_t n = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

PG_FIXTURE_MAYBE_UNUSED static void pg_exec(cq_pg *pg, const char *sql) {
    PGresult *r = PQexec(cq_pg_conn(pg), sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(cq_pg_conn(pg)));
    PQclear(r);
}

/* Another connection to pg's database. */
PG_FIXTURE_MAYBE_UNUSED static cq_pg *pg_connect_again(cq_pg *pg) {
    char info[512];
    snprintf(info, sizeof info, "%s dbname=%s", conninfo, PQdb(cq_pg_conn(pg)));
    cq_pg *again = NULL;
    cq_err err = {0};
    if (cq_pg_open(info, &again, &err)) fail_msg("%s", err.msg);
    return again;
}

/* A store (store/store.h) on pg's database, on a connection of its own: the KBs, documents and clauses of
 * store/documents.c (written once for both databases) for the tests that hold a bare cq_pg. One at a time, kept
 * until pg_store_close (pg_teardown calls it); its writes are committed, so pg sees them. */
static cq_store *pg_store_open_;
static cq_pg *pg_store_of_;
PG_FIXTURE_MAYBE_UNUSED static void pg_store_close(void) {
    cq_store_close(pg_store_open_);
    pg_store_open_ = NULL;
    pg_store_of_ = NULL;
}
PG_FIXTURE_MAYBE_UNUSED static cq_store *pg_store(cq_pg *pg) {
    if (pg_store_open_ && pg_store_of_ == pg) return pg_store_open_;
    pg_store_close();
    char info[512];
    snprintf(info, sizeof info, "%s dbname=%s", conninfo, PQdb(cq_pg_conn(pg)));
    cq_err err = {0};
    if (cq_store_open_uri(info, &pg_store_open_, &err)) fail_msg("%s", err.msg);
    pg_store_of_ = pg;
    return pg_store_open_;
}

/* Creates a new, empty database on the test cluster (prefix + pid + a counter) and writes its connection string into
 * info: -1 when the server refuses. */
PG_FIXTURE_MAYBE_UNUSED static int pg_fresh_database(const char *prefix, char *info, size_t cap) {
    static int n;
    char name[64], sql[128];
    snprintf(name, sizeof name, "%s%d_%d", prefix, (int)getpid(), ++n);
    PGconn *admin = PQconnectdb(conninfo);
    if (PQstatus(admin) != CONNECTION_OK) {
        fprintf(stderr, "%s\n", PQerrorMessage(admin));
        PQfinish(admin);
        return -1;
    }
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
    PGresult *r = PQexec(admin, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) fprintf(stderr, "%s: %s\n", sql, PQerrorMessage(admin));
    PQclear(r);
    PQfinish(admin);
    if (!ok) return -1;
    snprintf(info, cap, "%s dbname=%s", conninfo, name);
    return 0;
}

/* cmocka setup: a fresh database per test, so every test starts from an empty schema; *state is its cq_pg. */
PG_FIXTURE_MAYBE_UNUSED static int pg_setup(void **state) {
    char info[512];
    if (pg_fresh_database("t", info, sizeof info)) return -1;
    cq_pg *pg = NULL;
    cq_err err = {0};
    if (cq_pg_open(info, &pg, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    *state = pg;
    return 0;
}

PG_FIXTURE_MAYBE_UNUSED static int pg_teardown(void **state) {
    pg_store_close();
    cq_pg_close(*state);
    return 0;
}

/* main's first lines: 77 (skipped) outside cluster.sh. */
#define PG_FIXTURE_REQUIRE_SERVER()                                                                                \
    do {                                                                                                           \
        conninfo = getenv("CLAUSEQA_PG");                                                                          \
        if (!conninfo || !*conninfo) {                                                                             \
            fprintf(stderr, "SKIP: CLAUSEQA_PG is not set: run through tests/pg/cluster.sh (ctest does)\n");       \
            return 77;                                                                                             \
        }                                                                                                          \
    } while (0)

#endif
