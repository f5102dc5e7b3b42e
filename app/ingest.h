/* The ingest pipeline: file → stored original → text and clauses (reader/reader.h, by the format table) → store.
 *
 * One document is written in one transaction: it is either there with all its clauses, or marked failed with
 * the reason (so a person sees why), never half there. The same content uploaded again into a KB is reported as a
 * duplicate and not ingested twice. A different file with the name of an existing document is refused unless
 * replace is set, in which case the old document is removed once the new one is in.
 *
 * Limits (opt->limits, reader/reader.h): a document over its page limit or memory budget fails as "document too
 * large" (CQ_ERR_TOO_LARGE, recorded as a failed document like any other permanent failure); a cancel flag set by
 * another thread stops the reading between pages, or the pipeline before its transaction or before its commit
 * (CQ_ERR_CANCELLED): then nothing of the document stays, not even its stored original when no document uses it. */
#ifndef CQ_APP_INGEST_H
#define CQ_APP_INGEST_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"
#include "reader/reader.h"

typedef struct {
    int64_t doc_id;
    bool duplicate;       /* identical content was already in the KB: nothing was done */
    int n_pages, n_clauses;
    double quality;
    char quality_reason[160];
    char format[8];       /* the format's name (reader/reader.h): pdf | docx | html | md | txt */
    char sha256[65];      /* the content's hash, failed or not ("" when the file could not be read) */
    double seconds;       /* wall time of the whole ingest */
} cq_ingest_result;

typedef struct cq_dense cq_dense; /* search/vectors.h */

/* An upload as the service received it (app/service_jobs.c): what was found out about the file once, when it came,
 * handed to the ingest whole, so that nothing is detected, hashed or read back from a file name again. */
typedef struct {
    const cq_reader_format *format; /* detected from the name and the first bytes */
    char sha256[65];                /* of the content */
    cq_reader_ocr ocr;              /* as the upload asked (or the service's default) */
    int64_t size;                   /* bytes */
    char name[256];                 /* as uploaded, made safe to keep and show: the document's name is its stem */
} cq_upload;

typedef struct {
    bool replace;          /* replace a document of the same name */
    const char *filename;  /* name as uploaded (default: base name of path) */
    const cq_upload *upload; /* the upload at path, as received (its name, format, hash and OCR mode are used instead
                                of filename, detection, hashing and ocr; not when the file's size differs); NULL:
                                found out here */
    /* Called after each PDF page is read (pages_read of n_pages; pages read by OCR last, as they finish), before
     * anything is written; may be NULL. */
    void (*progress)(void *user, int pages_read, int n_pages);
    void *progress_user;
    cq_reader_ocr ocr;     /* OCR of scanned PDF pages (reader/reader.h); the zero value is auto */
    cq_dense *dense;       /* the dense retriever (search/vectors.h): encode the clauses into its index of the KB, and
                              take replaced documents' vectors out; NULL: no vectors (borrowed) */
    cq_reader_limits limits; /* pages, memory budget, cancel flag; the zero value: none (the CLI and the service
                                give CQ_READER_DEFAULT_MAX_PAGES / _MAX_MB unless told otherwise) */
    /* Called inside the document's transaction, just before its commit, with the new document's id: what must
     * change with the document or not at all (the service's job end, so that a crash between the two cannot
     * leave a job to be run again). An error rolls the document back. May be NULL. */
    cq_status (*before_commit)(void *user, cq_store *s, int64_t doc_id, cq_err *err);
    void *before_commit_user;
} cq_ingest_options;

/* Largest file accepted, bytes. */
#define CQ_INGEST_MAX_BYTES (512u * 1024u * 1024u)

/* Ingests the file at path into KB kb_id; data_dir holds the originals (data_dir/files/<sha256>.<ext>). */
cq_status cq_ingest_file(cq_store *s, const char *data_dir, int64_t kb_id, const char *path,
                         const cq_ingest_options *opt, cq_ingest_result *res, cq_err *err);

/* Many files, as cq_ingest_file would ingest them one after the other into KB kb_id — the same documents, clauses,
 * ids, vectors, failures and messages — but faster: worker threads read and parse the files (and tokenize them for
 * the encoder) while the calling thread alone writes the store, a group of consecutive files a transaction (when a
 * document fails part way, the group is rolled back and written again one document a transaction), and on a GPU
 * encodes a group's documents in one call. opt as for cq_ingest_file, without filename, upload, before_commit and
 * progress (cq_ingest_batch_options.pages instead). A group is cut by the number of files and their bytes only, so the result does not
 * depend on the number of workers. A file is reported once its group is committed: a crash loses at most the
 * group being written (the files reported before it are in). */
typedef struct {
    int n_workers; /* threads that read and parse; 0: one per online CPU */
    /* Called on the calling thread for every file, in order, once its outcome is final (its group committed):
     * rc, err and res as cq_ingest_file gives them. May be NULL. */
    void (*done)(void *user, size_t index, const char *path, cq_status rc, const cq_err *err,
                 const cq_ingest_result *res);
    /* Called on a worker thread after each PDF page of file index is read (as cq_ingest_options.progress). May be
     * NULL. Calls of pages and done never overlap. */
    void (*pages)(void *user, size_t index, int pages_read, int n_pages);
    void *user;
} cq_ingest_batch_options;

/* CQ_OK once every file was tried (each file's outcome goes to done); an error only when the batch could not run
 * at all (no thread could start, out of memory). */
cq_status cq_ingest_files(cq_store *s, const char *data_dir, int64_t kb_id, const char *const *paths, size_t n,
                          const cq_ingest_options *opt, const cq_ingest_batch_options *bo, cq_err *err);

#endif
