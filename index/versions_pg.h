/* Versions of a regulation in the PostgreSQL store (issue 20): index/versions.h's store functions over the tables
 * doc_versions and doc_repeals of index/store_pg.c, with the same meanings as the SQLite store's (migration 5 of
 * index/store.c). index/versions.c calls these when the store is PostgreSQL (cq_store_pg); the analysis of a
 * document's text, groups and states on a day are shared code (index/versions_internal.h).
 *
 * Nodes may analyse the same document at once: a row is written with INSERT … ON CONFLICT, and an automatic analysis
 * never overwrites a person's correction (the condition is in the statement, so a correction made meanwhile
 * stands). cq_pg_versions_ensure asks the database every call (SQLite keeps a per-connection note): another node
 * may have added documents since. */
#ifndef CQ_INDEX_VERSIONS_PG_H
#define CQ_INDEX_VERSIONS_PG_H

#include "index/store_pg.h"
#include "index/versions.h"

cq_status cq_pg_versions_analyse(cq_pg *pg, int64_t doc_id, cq_err *err);
cq_status cq_pg_versions_ensure(cq_pg *pg, int64_t kb_id, bool redo, size_t *n_analysed, cq_err *err);
cq_status cq_pg_versions_group_of(cq_pg *pg, int64_t doc_id, cq_version_group *out, cq_err *err);
cq_status cq_pg_versions_status(cq_pg *pg, int64_t doc_id, cq_date on, cq_version_status *out, cq_err *err);
cq_status cq_pg_versions_set(cq_pg *pg, int64_t doc_id, const cq_version_edit *e, cq_err *err);
cq_status cq_pg_versions_reset(cq_pg *pg, int64_t doc_id, cq_err *err);
cq_status cq_pg_versions_statuses(cq_pg *pg, int64_t kb_id, cq_date on, cq_version_status **out, size_t *n,
                                  cq_err *err);
cq_status cq_pg_versions_list(cq_pg *pg, int64_t kb_id, cq_version_group **out, size_t *n, cq_err *err);

#endif
