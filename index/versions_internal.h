/* What index/versions.c (SQLite) and index/versions_pg.c (PostgreSQL) share: the parts of versions.h's store
 * functions that do no database work. Not part of the public API. */
#ifndef CQ_INDEX_VERSIONS_INTERNAL_H
#define CQ_INDEX_VERSIONS_INTERNAL_H

#include <stdbool.h>

#include "core/strbuf.h"
#include "index/versions.h"

#define CQ_VERSION_HEADER_MAX_BYTES 6000 /* the header (preamble clauses) read for dates */
#define CQ_VERSION_TAIL_CLAUSES 3        /* the last articles read for 施行 and 废止 */

/* Feeds a document's clauses in order (kind: clauses.kind) into its header: the clauses before the first article;
 * a document without articles: its first paragraph. Returns false once the header is complete (stop feeding). */
bool cq_version_header_take(cq_strbuf *header, int kind, const char *text, bool *first);

/* Orders a group's versions and settles the regulation's repeal: another document repeals it (repealed_by, 0:
 * none), or its newest version says it was repealed. */
void cq_version_group_finish(cq_version_group *g, cq_date repealed_by);

/* A group loaded for a document whose key is empty groups nothing: only that document is kept. */
void cq_version_group_alone(cq_version_group *g, int64_t doc_id);
/* A document's status on a day from its group as read by either store (rc: the read's status; NOT_FOUND, a document
 * in no group, gives the empty status without an error); frees the group it was given. */
cq_status cq_version_status_from_group(cq_status rc, cq_version_group *g, int64_t doc_id, cq_date on,
                                       cq_version_status *out, cq_err *err);

/* The key a person's correction gives (cq_version_edit.key normalized as names are; "" puts it alone). */
void cq_version_edit_key(const char *edit_key, int64_t doc_id, char key[CQ_VERSION_KEY_MAX]);
/* CQ_ERR_INVALID unless the edit's dates are real days (or -1 / 0). */
cq_status cq_version_edit_check(const cq_version_edit *e, cq_err *err);

/* A KB's version rows with their keys (an empty key stands alone), and the days regulations are repealed by other
 * documents (key, e.repealed): every ready document's status on `on`, ordered by document id. rows is sorted in
 * place. */
typedef struct {
    char key[CQ_VERSION_KEY_MAX];
    cq_version_entry e;
} cq_version_keyed;
cq_status cq_versions_statuses_from(cq_version_keyed *rows, size_t n_rows, const cq_version_keyed *repeals,
                                    size_t n_repeals, cq_date on, cq_version_status **out, size_t *n, cq_err *err);

#endif
