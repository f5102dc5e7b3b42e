/* The service behind the HTTP server: app/'s implementation of web/server.h's cq_web_service.
 *
 *   - a pool of store connections (a cq_store is one SQLite connection, used by one thread at a time);
 *   - the ingestion queue: uploads wait under DATA/uploads/ as jobs (store/jobs.h) that one worker thread runs
 *     through cq_ingest_file with its own connection, within a page limit and a memory budget; a job can be
 *     cancelled (between two pages: nothing of it is kept); a stop interrupts the running job between two pages
 *     and queues it again; jobs left queued or running by a stop or a crash run again at the next start (a job
 *     whose starts all ended in crashes fails after CQ_JOB_MAX_ATTEMPTS);
 *   - documents, KBs, page images (MuPDF, cached under DATA/cache/pages/), retrieval and answers (with follow-up
 *     questions resolved against the previous turns, app/followup.h);
 *   - API keys (store/keys.h). Open mode: while no key has been made and open mode is allowed (the server listens
 *     on a loopback address), every request is treated as an admin's, so the page works at once on a developer's
 *     machine; the first key created turns authentication on until `clauseqa keys open-mode on` (logged).
 * Files it serves are always under the data directory: originals by content hash, cached page images. */
#ifndef CQ_APP_SERVICE_H
#define CQ_APP_SERVICE_H

#include <stdbool.h>

#include "app/models.h"
#include "decoder/decoder.h"
#include "core/error.h"
#include "reader/reader.h"
#include "web/server.h"

typedef struct {
    const char *data_dir;
    const char *store;   /* where the store is (store/store.h cq_store_open_uri); NULL: DATA/clauseqa.db */
    bool allow_open;  /* open mode while no key exists (only for loopback servers) */
    int max_connections; /* store connections kept open (default 16) */
    cq_decoder *decoder; /* writes answers (app/generate_answer.h); NULL: extractive answers. Borrowed: it must
                            outlive the service */
    int max_pages;       /* pages a document may have (0: CQ_READER_DEFAULT_MAX_PAGES, < 0: no limit) */
    int doc_memory_mb;   /* memory budget of one document's reading (0: CQ_READER_DEFAULT_MAX_MB, < 0: none) */
    const cq_models *models; /* where the decoder and the encoder were found (health says it); the encoder is
                                loaded from there. Borrowed; NULL: none */
    cq_reader_ocr ocr;   /* OCR of scanned PDF pages for uploads that do not choose (reader/reader.h; zero: auto) */
    int max_asks;        /* asks answered at once (app/admission.h; 0: CQ_ADMISSION_DEFAULT_ACTIVE) */
    int max_waiting_asks; /* asks waiting their turn beyond those (0: CQ_ADMISSION_DEFAULT_WAITING, < 0: none) */
    double ask_wait_s;   /* how long an ask may wait (0: CQ_ADMISSION_DEFAULT_WAIT_S) */
    const struct cq_ldap_config_s *ldap; /* LDAP sign-in (app/ldap_auth.h), copied; NULL or no url: off */
} cq_service_config;

typedef struct cq_service cq_service;

/* Opens the store, prepares DATA/uploads, DATA/cache/pages and the spool directory, and starts the ingestion
 * worker, which first re-queues the jobs a previous run left unfinished. */
cq_status cq_service_open(const cq_service_config *config, cq_service **out, cq_err *err);

/* The function table for cq_web_start; valid while the service is open. */
void cq_service_web(cq_service *svc, cq_web_service *out);

/* Where the web server spools uploads (DATA/uploads/spool). */
const char *cq_service_spool_dir(const cq_service *svc);

/* True while open mode is on (allowed, no key active, authentication not required: store/keys.h). */
bool cq_service_open_mode(cq_service *svc);

/* The first step of a stop, at once: the running ingestion job stops between two pages (it is queued again) and no
 * job starts. The web server may then drain its requests; cq_service_close does the rest. */
void cq_service_interrupt_jobs(cq_service *svc);

/* Stops the worker (the job it is running is interrupted between two pages and queued again; queued jobs stay
 * queued for the next start) and closes. */
void cq_service_close(cq_service *svc);

#endif
