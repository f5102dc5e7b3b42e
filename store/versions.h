/* Versions of a regulation: which documents of a KB are versions of one law, when each took effect, which one was in
 * force on a given day, and what a question's date ("2020年时", "as of 1 March 2020") asks for.
 *
 *   公司法(2018-10-26).md   key 公司法   2018年修正   promulgated 2018-10-26   effective 2018-10-26
 *   公司法(2023-12-29).md   key 公司法   2023年修订   promulgated 2023-12-29   effective 2024-07-01 (本法自…起施行)
 *
 * A version group is the documents of a KB that share a key: the regulation's name without its dates and version
 * words (core/versions_text.c: 中华人民共和国 and 《》 dropped, "(2018-10-26)", "（2018年修正）", "Amended and
 * Restated", years removed). An amendment act (修正案, 关于修改…的决定, Amendment No. 2) is an instrument of its own,
 * never a version of the law it amends. The dates come from the text — the 通过/修正/修订/公布 lines of the header
 * (the latest is the version's own date), 本法自…起施行 in the last articles — and the file name's date.
 *
 * Status on a day D, within its group ordered by effective date (versions with the same date are copies):
 *   in_force            took effect on or before D, and no later version had by D
 *   superseded          a later version took effect on or before D (successor, from that day)
 *   repealed            the regulation was repealed (废止) on or before D: the document says so of itself
 *                       (（已废止）, 决定废止), another document of the KB says so (《X》同时废止), or a person said so
 *   not_yet_in_force    takes effect after D
 *
 * Stored in doc_versions (store.c migration 5), one row per analysed document, and doc_repeals (the titles a
 * document repeals); on the PostgreSQL store the same tables, the same code (db/db.h). Documents are analysed at ingest; documents ingested before versions existed are analysed the
 * first time their KB is asked about (cq_versions_ensure) or by `clauseqa reindex`. A person's correction
 * (cq_versions_set: group, dates, label, repeal) is kept over any later analysis until reset to automatic. */
#ifndef CQ_STORE_VERSIONS_H
#define CQ_STORE_VERSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/versions_text.h"
#include "store/store.h"

/* ---- versions in the store (store/versions.c) -------------------------------------------------------------- */

typedef enum {
    CQ_VERSION_UNKNOWN = 0, /* not analysed */
    CQ_VERSION_IN_FORCE,
    CQ_VERSION_SUPERSEDED,
    CQ_VERSION_REPEALED,
    CQ_VERSION_NOT_YET,
} cq_version_state;

/* "in_force", "superseded", "repealed", "not_yet_in_force", "unknown" (as JSON and the CLI print them). */
const char *cq_version_state_name(cq_version_state s);

/* One version of a group, as the group lists it. */
typedef struct {
    int64_t doc_id;
    char name[256];                   /* document name */
    char label[CQ_VERSION_LABEL_MAX];
    cq_date promulgated, effective, repealed; /* repealed: the regulation's repeal as it applies to this version */
    bool by_user;                     /* corrected by a person */
} cq_version_entry;

/* A document's version on a day. */
typedef struct {
    int64_t doc_id;
    cq_version_state state;
    cq_date on;                       /* the day the state is for */
    cq_version_state state_today;     /* and its state today (the same when on is today) */
    char key[CQ_VERSION_KEY_MAX];
    char label[CQ_VERSION_LABEL_MAX];
    cq_date promulgated, effective, repealed;
    bool by_user;
    int n_versions;                   /* versions in its group, itself included (1: the only one) */
    int index;                        /* its place among them, oldest first (0-based) */
    cq_version_entry previous;        /* the version before it (doc_id 0: none) */
    cq_version_entry next;            /* the version after it: what superseded it, from next.effective */
    cq_version_entry current;         /* the version in force on `on` (doc_id 0: none; itself when in force) */
} cq_version_status;

/* The versions of a group, oldest first (same effective day: lower id first), with the day each stopped. */
typedef struct {
    char key[CQ_VERSION_KEY_MAX];
    cq_version_entry *v;
    size_t n;
    cq_date repealed;                 /* the regulation's repeal (the earliest known), 0 none */
} cq_version_group;

void cq_version_group_free(cq_version_group *g);

/* Analyses the document's version (name, title, header and last clauses as stored) and writes its row. A row a
 * person corrected is kept as it is (cq_versions_reset goes back to the analysis); what the text repeals is always
 * refreshed. */
cq_status cq_versions_analyse(cq_store *s, int64_t doc_id, cq_err *err);

/* A clause as the analysis reads it: its kind (cq_clause_kind's value) and text. */
typedef struct {
    int kind;
    const char *text;
} cq_version_clause;

/* The same from the document's clauses in order (clauses[0..n)) as the caller holds them (ingest, which has just
 * written them): their header and last clauses are not read back from the store. */
cq_status cq_versions_analyse_clauses(cq_store *s, int64_t doc_id, const cq_version_clause *clauses, size_t n,
                                      cq_err *err);

/* Analyses the ready documents of the KB that have no row yet (all of them with redo, corrections kept), in one
 * transaction of its own when none is open. *n_analysed (may be NULL) says how many. */
cq_status cq_versions_ensure(cq_store *s, int64_t kb_id, bool redo, size_t *n_analysed, cq_err *err);

/* The group of a document (NOT_FOUND when the document has no row: not analysed, or not ready). */
cq_status cq_versions_group_of(cq_store *s, int64_t doc_id, cq_version_group *out, cq_err *err);

/* The status of a document on day `on` (0: today). A document without a row: state CQ_VERSION_UNKNOWN. */
cq_status cq_versions_status(cq_store *s, int64_t doc_id, cq_date on, cq_version_status *out, cq_err *err);
/* The same from its group (no database work). */
void cq_version_status_in(const cq_version_group *g, int64_t doc_id, cq_date on, cq_version_status *out);

/* The version of the group meant for day `on`: the one in force then; else the last one that had taken effect by
 * then (the regulation was repealed, or versions are missing); else none. With version_year, the version of that
 * year (promulgated, else effective, in that year; the latest of them). Returns its index, or -1. */
int cq_version_group_pick(const cq_version_group *g, cq_date on, int version_year);

/* Is doc_id (a copy of) the version of the group meant for `on` / version_year (cq_version_group_pick)? True as
 * well when none is meant (no version had taken effect by then) and for a document not in the group. */
bool cq_version_group_prefers(const cq_version_group *g, int64_t doc_id, cq_date on, int version_year);

/* A person's correction of a document's version. Fields left NULL / negative are kept as they are. */
typedef struct {
    const char *key;          /* group: another document's key joins it to that group; "" puts it alone */
    const char *label;
    cq_date promulgated, effective; /* -1: keep; 0: unknown */
    cq_date repealed;         /* -1: keep; 0: not repealed */
} cq_version_edit;
cq_status cq_versions_set(cq_store *s, int64_t doc_id, const cq_version_edit *e, cq_err *err);
/* Back to the automatic analysis. */
cq_status cq_versions_reset(cq_store *s, int64_t doc_id, cq_err *err);

/* The status on day `on` (0: today) of every analysed ready document of a KB, ordered by document id (for
 * document lists; cq_versions_find looks one up). */
cq_status cq_versions_statuses(cq_store *s, int64_t kb_id, cq_date on, cq_version_status **out, size_t *n,
                               cq_err *err);
const cq_version_status *cq_versions_find(const cq_version_status *v, size_t n, int64_t doc_id);

/* The groups of a KB with more than one version, ordered by key (for `clauseqa versions`). */
cq_status cq_versions_list(cq_store *s, int64_t kb_id, cq_version_group **out, size_t *n, cq_err *err);

#endif
