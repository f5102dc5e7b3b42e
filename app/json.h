/* The JSON of the REST contract (docs/API.md), in one place: the HTTP service and the CLI's --json / --jsonl
 * print the objects they share (hits, answers) with the same functions, so the two cannot drift apart.
 * Every function returns a new cJSON value (NULL only when out of memory), or adds to the one given. */
#ifndef CQ_APP_JSON_H
#define CQ_APP_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "app/answer.h"
#include "search/compare.h"
#include "store/jobs.h"
#include "search/retrieve.h"
#include "store/store.h"
#include "store/versions.h"

/* Pages below this text quality are warned about (documents, jobs, the ingest command). */
#define CQ_PAGE_QUALITY_WARN 0.8

/* {"doc", "title", "clause", "path", "page", "pages"?, "text", "score", "clause_id", "document_id", "source"} */
cJSON *cq_json_hit(const cq_hit *h);
cJSON *cq_json_hits(const cq_hits *h);
/* {"answer", "abstained", "generated", "notice"?, "confidence"?, "citations": [{"clause_id", "document_id", "doc",
 * "clause", "path", "page", "quote", "version"?}], "version_notice"?, "as_of"?, "compare"?, "timings":
 * {"retrieve_ms", "answer_ms"}}; hits carry "version"? too (cq_json_version) */
cJSON *cq_json_answer(const cq_answer *a);

/* {"name", "documents", "clauses", "created_at"} */
cJSON *cq_json_kb(const cq_kb_info *k);
/* {"id", "kb", "name", "filename", "format", "sha256", "size_bytes", "title", "pages", "clauses", "status",
 * "error", "quality", "quality_reason", "created_at", "original_url"} */
cJSON *cq_json_doc(const cq_doc_info *d, const char *kb);
/* Adds "warnings" (the pages below CQ_PAGE_QUALITY_WARN, the first 20 named) and, with all_pages,
 * "page_quality": [{"page", "quality", "chars", "reason"}] to a document object. */
void cq_json_doc_add_pages(cJSON *doc, const cq_page_info *pages, size_t n, bool all_pages);
/* {"id", "kb", "state", "filename", "size_bytes", "done", "total", "progress", "error", "error_code", "attempts",
 * "document_id", "created_at", "updated_at", "url", "document"?}; doc (taken over) is the job's document object,
 * or NULL. */
cJSON *cq_json_job(const cq_job_info *j, cJSON *doc);
/* A clause for citation chips: {"clause_id", "document_id", "kb", "doc", "title", "format", "clause", "path",
 * "text", "page", "page_last", "doc_pages", "boxes", "page_sizes", "page_warnings", "page_image_url"?}; pages: the document's
 * pages (their sizes and quality), page_images: the format has page images (reader/reader.h). */
cJSON *cq_json_clause(const cq_clause_row *c, const cq_doc_info *d, const char *kb, const cq_page_info *pages,
                      size_t n_pages, bool page_images);
/* The document formats uploads may have (reader/reader.h's table): [{"name", "label", "extensions", "mime",
 * "pages"}]. */
cJSON *cq_json_formats(void);

/* A document's version on a day (store/versions.h): {"status", "on", "status_today"?, "label", "promulgated",
 * "effective", "repealed", "versions", "group", "corrected", "previous"?, "next"?, "current"?}; previous, next and
 * current are {"document_id", "doc", "label", "effective"}. NULL for a document never analysed. */
cJSON *cq_json_version(const cq_version_status *v);

/* Which pairs of a comparison to print. */
typedef struct {
    bool changes_only;      /* leave out the pairs of kind same */
    const char *clause_key; /* only the pairs holding a clause with this label key ("60", "20-1") … */
    int64_t clause_id;      /* … or this clause */
    bool no_pairs;          /* the summary only */
} cq_compare_filter;

/* A comparison (search/compare.h) of document da (the older) with db: {"a": side, "b": side, "summary": {"same",
 * "changed", "added", "removed", "renumbered" (of the same: only the number changed), "renumbered_changed" (of the
 * changed: the number changed too), "clauses_a", "clauses_b"}, "pairs": [{"kind", "similarity",
 * "renumbered", "moved", "a": [clause], "b": [clause], "diff"?: [{"op": "equal"|"removed"|"added", "text"}]}]};
 * a side is {"document_id", "doc", "title", "version"}, a clause {"clause_id", "clause", "key", "path", "text"}. */
cJSON *cq_json_comparison(const cq_comparison *c, const cq_doc_info *da, const cq_doc_info *db,
                          const cq_version_status *va, const cq_version_status *vb, const cq_compare_filter *f);

/* Prints a cJSON value on one line followed by '\n' and frees it. */
void cq_json_print_line(cJSON *v, FILE *f);

#endif
