/* Inside the service (app/service.h): the state its files share and the helpers they call. One concern a file:
 *   service.c          life cycle, the web function table, store connections, paths under the data directory
 *   service_auth.c     API keys, open mode, users' sign-in and sessions
 *   service_metrics.c  health and the Prometheus text
 *   service_library.c  KBs, documents, originals, page images, clauses; removing files no document uses
 *   service_jobs.c     uploads, the ingestion queue and its worker, jobs
 *   service_ask.c      retrieve and ask: follow-up questions, streaming, stages, keeping the turns
 *   service_conversations.c  conversations: listed, read, renamed, deleted by their owner; turns as history
 *   service_feedback.c ratings of answers, exports, conversation search, the quality report (issue 30)
 *   service_versions.c versions of a regulation (a document's version, corrections) and comparisons
 * Each concern fills its entries of the web table (cq_svc_*_web); the JSON is app/json.h. */
#ifndef CQ_APP_SERVICE_INTERNAL_H
#define CQ_APP_SERVICE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "app/admission.h"
#include "app/answer.h"
#include "app/ingest.h"
#include "app/ldap_auth.h"
#include "app/login_limit.h"
#include "app/rerank.h"
#include "app/service.h"
#include "core/latency.h"
#include "store/conversations.h"
#include "store/jobs.h"
#include "store/job_claim.h"
#include "store/store.h"
#include "search/vectors.h"

/* Phases of an ask as /metrics shows them (clauseqa_ask_phase_seconds, with the decoder's own phases beside them):
 * where an ask's time goes under load. */
typedef enum {
    CQ_ASK_ADMISSION_WAIT = 0, /* waiting for a place (app/admission.h) */
    CQ_ASK_QUESTION,           /* the conversation, parsing, completing a follow-up */
    CQ_ASK_RETRIEVE,           /* retrieval, reranking included (its decoder part: rerank_wait, rerank_run) */
    CQ_ASK_ANSWER,             /* writing the answer (generation: prefill and decode steps), streaming included */
    CQ_ASK_STREAM,             /* of which sending text to the client, and the extractive answer's streaming */
    CQ_ASK_TOTAL,              /* admission to the last byte of the answer */
    CQ_ASK_PHASES
} cq_svc_ask_phase;

typedef struct cq_svc_queued_job {
    int64_t id;
    bool has_upload;
    cq_upload upload; /* the upload as received (has_upload), for the ingest; a job resumed after a start has none */
    struct cq_svc_queued_job *next;
} cq_svc_queued_job;

struct cq_service {
    char *data_dir, *db_path, *files_dir, *uploads_dir, *spool_dir, *cache_dir;
    bool allow_open;
    double started_at;
    cq_dense *dense; /* trained encoder + the KBs' vector indexes, NULL without weights: retrieval and the ingestion
                        worker are given it */
    const cq_models *models; /* where the model files were found (borrowed) */
    cq_decoder *decoder; /* writes the answers (borrowed from the config), NULL: extractive answers */
    cq_reranker reranker; /* retrieval mode rerank: the decoder's relevance judgement (app/rerank.h) */
    cq_reader_ocr ocr;   /* OCR for uploads that do not choose */
    cq_admission asks;   /* service_ask.c: asks answered at once and waiting (app/admission.h) */
    pthread_mutex_t phase_lock; /* service_ask.c: guards phase */
    cq_lat_hist phase[CQ_ASK_PHASES];

    pthread_mutex_t pool_lock; /* service.c */
    cq_store **pool;
    size_t n_pool, max_pool;

    pthread_mutex_t auth_lock; /* service_auth.c */
    double auth_checked_at;
    bool open_now;
    cq_login_limit logins;     /* service_auth.c: failed sign-ins held back */
    pthread_cond_t signin_cond; /* under auth_lock: password checks running at once, bounded (memory) */
    int signins_running;
    cq_ldap_config ldap;       /* service_auth.c: directory sign-in (url[0] == 0: off) */

    pthread_mutex_t queue_lock; /* service_jobs.c */
    pthread_cond_t queue_cond;
    pthread_cond_t job_ended;   /* signalled when the running job ends (a cancel waits for it) */
    cq_svc_queued_job *head, *tail;
    size_t queued;
    int64_t running_job;
    bool stopping, worker_started;
    bool cancel_by_user;        /* the running job's cancel flag was set by a cancel request, not by the stop */
    atomic_bool cancel_running; /* the running job's reader stops before its next page (cq_reader_limits) */
    pthread_t worker;
    /* On PostgreSQL the queue is the shared jobs table (store/job_claim.h): every node's worker claims from it, and
     * the renewer keeps the running job's lease (service_jobs.c). */
    bool shared_queue, renewer_started;
    bool wake;                  /* an upload on this node: claim now rather than at the next poll */
    char node_name[CQ_JOB_OWNER_BYTES];
    cq_job_lease lease;         /* the running job's, when lease_held */
    bool lease_held, lease_lost;
    int lease_s, renew_s;       /* the lease's length and how often it is renewed (CLAUSEQA_JOB_LEASE_S) */
    pthread_t renewer;
    int max_pages;              /* per document, as the reader takes them (cq_reader_limits) */
    size_t doc_memory_bytes;

    /* counters for /metrics */
    atomic_uint_fast64_t jobs_ready, jobs_failed, jobs_duplicate, jobs_cancelled, jobs_interrupted, ingest_pages,
        ingest_ms;
    atomic_uint_fast64_t answers, abstentions, retrievals, chunks_streamed, pages_rendered, page_cache_hits;
    atomic_uint_fast64_t tokens_generated, answers_generated, answers_fallback;
};

/* ---- store connections (service.c) ---- */

/* A connection of the pool (opened when none is free); NULL with err set. */
cq_store *cq_svc_pool_get(cq_service *s, cq_err *err);
/* Back to the pool (rolled back first), or closed when the pool is full; NULL is ignored. */
void cq_svc_pool_put(cq_service *s, cq_store *st);
/* What most handlers start with: a connection and the id of the KB named kb. NULL with err set (the handler
 * returns err->code) when there is no connection or no such KB; the connection then went back already. */
cq_store *cq_svc_open_kb(cq_service *s, const char *kb, int64_t *kb_id, cq_err *err);
/* Every KB with its counts (cq_store_kb_list on a pooled connection). */
cq_status cq_svc_kb_list(cq_service *s, cq_kb_info **kbs, size_t *n, cq_err *err);
/* The name of KB kb_id into kb (NOT_FOUND when it is gone). */
cq_status cq_svc_kb_name(cq_store *st, int64_t kb_id, char kb[128], cq_err *err);
/* A document as JSON (app/json.h) with its page quality warnings, and every page's quality with all_pages. */
cJSON *cq_svc_doc_json(cq_store *st, const cq_doc_info *d, const char *kb, bool all_pages);
/* A document's version of a regulation as JSON (app/json.h's version object with "version_list": the versions of
 * its group, each with its status today), or NULL when it has none (service_versions.c). */
cJSON *cq_svc_version_json(cq_store *st, int64_t doc_id);
/* "a/b", malloc'd. */
char *cq_svc_path_join(const char *a, const char *b);

/* ---- the ingestion queue (service_jobs.c) ---- */

/* Re-queues the jobs a previous run left unfinished, sweeps stray uploads, starts the worker. */
cq_status cq_svc_jobs_start(cq_service *s, cq_err *err);
/* The stop's first step: the running job stops before its next page (queued again), no job starts. */
void cq_svc_jobs_interrupt(cq_service *s);
/* Stops the worker: its running job is interrupted between two pages and queued again (uncounted); queued jobs stay
 * queued in the database. */
void cq_svc_jobs_stop(cq_service *s);
/* Jobs waiting (on PostgreSQL: every node's, from the shared table), and the one running here (0: none). */
size_t cq_svc_queue_depth(cq_service *s, int64_t *running);

/* ---- conversations (service_conversations.c) ---- */

/* Conversation id into *c if who may see it (its owner, or an admin); NOT_FOUND otherwise, as for one that does not
 * exist. c NULL: only the check. */
cq_status cq_svc_conversation_find(cq_store *st, const cq_web_principal *who, int64_t id, cq_conversation *c,
                                   cq_err *err);
/* A new conversation of who's in KB kb_id, titled after the question. */
cq_status cq_svc_conversation_begin(cq_store *st, const cq_web_principal *who, int64_t kb_id, const char *question,
                                    int64_t *id, cq_err *err);
/* The last last_n turns of conversation id (drop_last: those before its last turn) as an ask's history: [{"role":
 * "user", "content"}, {"role": "assistant", "content", "citations"}, ...]. */
cq_status cq_svc_conversation_history(cq_store *st, int64_t id, size_t last_n, bool drop_last, cJSON **history,
                                      cq_err *err);

/* ---- the web table, by concern ---- */
void cq_svc_auth_web(cq_web_service *w);    /* authenticate, allows */
void cq_svc_admin_web(cq_web_service *w);   /* admin: users, groups, keys, KB grants (service_admin.c) */
void cq_svc_metrics_web(cq_web_service *w); /* health, metrics */
void cq_svc_library_web(cq_web_service *w); /* kb_*, doc_*, page_image, clause_get, doc_search */
void cq_svc_jobs_web(cq_web_service *w);    /* upload, job_get, job_list, job_cancel */
void cq_svc_ask_web(cq_web_service *w);     /* retrieve, ask */
void cq_svc_conversations_web(cq_web_service *w); /* conversation_* */
void cq_svc_versions_web(cq_web_service *w);      /* doc_version, doc_compare */
void cq_svc_feedback_web(cq_web_service *w);      /* feedback, export, search, quality (service_feedback.c) */

/* ---- feedback and quality (service_feedback.c) ---- */

/* Logs an answer of KB kb in the quality log (store/feedback.h); a failure is logged, never the ask's. */
void cq_svc_quality_note(cq_service *s, const char *kb, const cq_answer *a);
/* The quality log's families (clauseqa_quality_*{kb,day}) for /metrics. */
void cq_svc_quality_metrics(cq_service *s, cq_strbuf *out);
/* Each rated turn of conversation id (turns: the JSON array of them, in order) gets "feedback" {rating, comment}. */
void cq_svc_feedback_attach(cq_store *st, int64_t id, cJSON *turns);

#endif
