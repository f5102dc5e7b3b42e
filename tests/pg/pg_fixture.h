/* What the PostgreSQL tests of jobs, keys and conversations share: a fresh database per test (cmocka setup and
 * teardown), more connections to it, and one-line SQL helpers. Included by one test program each. */
#ifndef CQ_TESTS_PG_FIXTURE_H
#define CQ_TESTS_PG_FIXTURE_H

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "index/store_pg.h"

static const char *conninfo; /* CLAUSEQA_PG, from tests/pg/cluster.sh */

static int64_t pg_count(cq_pg *pg, const char *sql) {
    PGresult *r = PQexec(cq_pg_conn(pg), sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("%s: %s", sql, PQerrorMessage(cq_pg_conn(pg)));
    int64_t n = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

static void pg_exec(cq_pg *pg, const char *sql) {
    PGresult *r = PQexec(cq_pg_conn(pg), sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(cq_pg_conn(pg)));
    PQclear(r);
}

/* Another connection to pg's database. */
static cq_pg *pg_connect_again(cq_pg *pg) {
    char info[512];
    snprintf(info, sizeof info, "%s dbname=%s", conninfo, PQdb(cq_pg_conn(pg)));
    cq_pg *again = NULL;
    cq_err err = {0};
    if (cq_pg_open(info, &again, &err)) fail_msg("%s", err.msg);
    return again;
}

/* A fresh database per test: every test starts from an empty schema. The tables another branch's migration adds
 * (pgstore: pages, originals, settings), made here in its shape when they are not there. */
static int pg_setup(void **state) {
    static int n;
    char name[64], sql[128];
    snprintf(name, sizeof name, "t%d_%d", (int)getpid(), ++n);
    PGconn *admin = PQconnectdb(conninfo);
    if (PQstatus(admin) != CONNECTION_OK) return -1;
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
    PGresult *r = PQexec(admin, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    PQfinish(admin);
    if (!ok) return -1;
    char info[512];
    snprintf(info, sizeof info, "%s dbname=%s", conninfo, name);
    cq_pg *pg = NULL;
    cq_err err = {0};
    if (cq_pg_open(info, &pg, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    r = PQexec(cq_pg_conn(pg),
               "SET client_min_messages = warning;"
               "CREATE TABLE IF NOT EXISTS pages(doc_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE, "
               "page_no integer NOT NULL, width real NOT NULL, height real NOT NULL, n_chars integer NOT NULL, "
               "quality double precision NOT NULL, quality_reason text NOT NULL DEFAULT '', "
               "PRIMARY KEY(doc_id, page_no));"
               "CREATE TABLE IF NOT EXISTS originals(sha256 text NOT NULL, part integer NOT NULL, bytes bytea NOT NULL, "
               "PRIMARY KEY(sha256, part));"
               "CREATE TABLE IF NOT EXISTS settings(name text PRIMARY KEY, value text NOT NULL, "
               "updated_at bigint NOT NULL);");
    ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) {
        cq_pg_close(pg);
        return -1;
    }
    *state = pg;
    return 0;
}

static int pg_teardown(void **state) {
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
