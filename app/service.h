/* The service behind the HTTP server: app/'s implementation of web/server.h's cq_web_service.
 *
 *   - a pool of store connections (a cq_store is one SQLite connection, used by one thread at a time);
 *   - the ingestion queue: uploads wait under DATA/uploads/ as jobs (index/jobs.h) that one worker thread runs
 *     through cq_ingest_file with its own connection; jobs left queued or running by a stop or a crash run again
 *     at the next start;
 *   - documents, KBs, page images (MuPDF, cached under DATA/cache/pages/), retrieval and answers (with follow-up
 *     questions resolved against the previous turns, app/followup.h);
 *   - API keys (index/keys.h). Open mode: while no key exists and open mode is allowed (the server listens on a
 *     loopback address), every request is treated as an admin's, so the page works at once on a developer's
 *     machine; the first key created turns authentication on.
 * Files it serves are always under the data directory: originals by content hash, cached page images. */
#ifndef CQ_APP_SERVICE_H
#define CQ_APP_SERVICE_H

#include <stdbool.h>

#include "app/models.h"
#include "attention/decoder.h"
#include "core/error.h"
#include "web/server.h"

typedef struct {
    const char *data_dir;
    bool allow_open;  /* open mode while no key exists (only for loopback servers) */
    int max_connections; /* store connections kept open (default 16) */
    cq_decoder *decoder; /* writes answers (app/generate_answer.h); NULL: extractive answers. Borrowed: it must
                            outlive the service */
    const cq_models *models; /* where the decoder and the encoder were found (health says it); the encoder is
                                loaded from there. Borrowed; NULL: none */
} cq_service_config;

typedef struct cq_service cq_service;

/* Opens the store, prepares DATA/uploads, DATA/cache/pages and the spool directory, and starts the ingestion
 * worker, which first re-queues the jobs a previous run left unfinished. */
cq_status cq_service_open(const cq_service_config *config, cq_service **out, cq_err *err);

/* The function table for cq_web_start; valid while the service is open. */
void cq_service_web(cq_service *svc, cq_web_service *out);

/* Where the web server spools uploads (DATA/uploads/spool). */
const char *cq_service_spool_dir(const cq_service *svc);

/* True while open mode is on (no key exists and it is allowed). */
bool cq_service_open_mode(cq_service *svc);

/* Stops the worker after the job it is running (queued jobs stay queued for the next start) and closes. */
void cq_service_close(cq_service *svc);

#endif
