/* The ingest pipeline: file → stored original → text and clauses (reader/reader.h, by the format table) → store.
 *
 * One document is written in one transaction: it is either there with all its clauses, or marked failed with
 * the reason (so a person sees why), never half there. The same content uploaded again into a KB is reported as a
 * duplicate and not ingested twice. A different file with the name of an existing document is refused unless
 * replace is set, in which case the old document is removed once the new one is in. */
#ifndef CQ_APP_INGEST_H
#define CQ_APP_INGEST_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "index/store.h"

typedef struct {
    int64_t doc_id;
    bool duplicate;       /* identical content was already in the KB: nothing was done */
    int n_pages, n_clauses;
    double quality;
    char quality_reason[160];
    char format[8];       /* the format's name (reader/reader.h): pdf | md | txt */
    double seconds;       /* wall time of the whole ingest */
} cq_ingest_result;

typedef struct cq_dense cq_dense; /* index/vectors.h */

typedef struct {
    bool replace;          /* replace a document of the same name */
    const char *filename;  /* name as uploaded (default: base name of path) */
    /* Called after each PDF page is read (pages_read of n_pages), before anything is written; may be NULL. */
    void (*progress)(void *user, int pages_read, int n_pages);
    void *progress_user;
    cq_dense *dense;       /* the dense retriever (index/vectors.h): encode the clauses into its index of the KB, and
                              take replaced documents' vectors out; NULL: no vectors (borrowed) */
} cq_ingest_options;

/* Largest file accepted, bytes. */
#define CQ_INGEST_MAX_BYTES (512u * 1024u * 1024u)

/* Ingests the file at path into KB kb_id; data_dir holds the originals (data_dir/files/<sha256>.<ext>). */
cq_status cq_ingest_file(cq_store *s, const char *data_dir, int64_t kb_id, const char *path,
                         const cq_ingest_options *opt, cq_ingest_result *res, cq_err *err);

#endif
