/* The HTTP server: CivetWeb, JSON REST under /api/v1, server-sent events, the OpenAI-compatible
 * /v1/chat/completions, Prometheus /metrics and the page (web/static, compiled into the binary).
 *
 * The server knows no pipeline. app/ implements the service below (ingest, jobs, documents, retrieval, answers,
 * page images, keys) and hands it over at start; the server parses requests, checks keys and roles through the
 * service, maps status codes to HTTP and writes JSON or event streams. Every route, its role and its answers are
 * documented in docs/API.md.
 *
 * Errors are {"error": {"code": "...", "message": "..."}} with the HTTP status of the cq_status (see
 * cq_web_http_status) or of the HTTP problem itself (400, 401, 403, 405, 408, 411, 413, 429 ...), those CivetWeb
 * answers itself included.
 *
 * Before a handler: the Host header must name the server (DNS rebinding), a request that changes something must
 * come from the server's own origin or an allowed one (cross-site requests), the URL holds no encoded NUL, and a
 * client address holds a bounded number of connections (web/guard.c).
 *
 * Threads: CivetWeb's threads hold the connections (config.connections, and CQ_WEB_RESERVED_SLOTS more that answer
 * only health, metrics and the job routes, for when slow clients hold the others) and receive request bodies, so
 * that a slow client holds its own connection only; the requests run on a bounded pool of worker threads
 * (config.threads), and health and metrics on one more of their own. Every service function may be called from several of them at once
 * and must be thread-safe. */
#ifndef CQ_WEB_SERVER_H
#define CQ_WEB_SERVER_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"

/* What a request needs on a KB; roles are ordered (admin > editor > reader). */
/* Search inside a document (GET /api/v1/documents/{id}/search?q=): q's bytes, and the clauses it answers at most. */
#define CQ_WEB_DOC_SEARCH_Q_MAX 200
#define CQ_WEB_DOC_SEARCH_MAX 50

typedef enum { CQ_WEB_NONE = 0, CQ_WEB_READ = 1, CQ_WEB_EDIT = 2, CQ_WEB_ADMIN = 3 } cq_web_role;

#define CQ_WEB_SESSION_TOKEN_BYTES 69 /* store/users.h: CQ_SESSION_TOKEN_BYTES */
#define CQ_WEB_SESSION_COOKIE "cq_session"

/* Who is asking: filled by the service from the Bearer key or the session cookie. */
typedef struct {
    int64_t key_id;   /* 0 in open (development) mode and for a signed-in user */
    int64_t user_id;  /* the signed-in user (0: a key, or open mode) */
    int64_t session_id;
    cq_web_role role;
    char kb[1024];    /* the KBs it may reach (store/grants.h: CQ_GRANT_BYTES): "*" for every KB, "" for admins, else
                         names joined by ',' */
    char name[64];    /* the key's or the user's name */
    const char *via;  /* "key", "session" or "open" */
} cq_web_principal;

/* A file to send: a path the service vouches for (inside its data directory), a MIME type and, for downloads, the
 * name the client should save it under. */
typedef struct {
    char path[1024];
    char mime[64];
    char download_name[256]; /* "" for inline content */
} cq_web_file;

/* A question, as the retrieve / ask / chat endpoints parsed it. */
typedef struct {
    const char *question;
    const cJSON *history; /* previous turns, [{"role": "user"|"assistant", "content": ..., "citations": [...]}] or
                             NULL; borrowed. An ask that continues a conversation reads its stored turns instead */
    int k;                /* clauses to retrieve; 0 = default */
    const char *mode;     /* retrieval modes ("hybrid", "router,bm25" ...) or NULL */
    const char *fusion;   /* "rrf", "keep" or "weights" (search/fusion.h), or NULL: what the encoder's weights say */
    const char *as_of;    /* "YYYY-MM-DD": answer from the versions in force that day (store/versions.h), or NULL */
    /* ask only: conversations kept by the service, per key (docs/API.md) */
    int64_t conversation_id; /* continue this conversation of the asker's; 0: none named */
    bool keep;               /* keep the turn: in conversation_id, or in a new conversation when that is 0 */
    bool regenerate;         /* the turn replaces the conversation's last one */
} cq_web_question;

/* Which pairs of a comparison of two documents to send (GET /api/v1/documents/{a}/compare/{b}?clause=&changed=). */
typedef struct {
    const char *clause;   /* an article of either side: "60", "第六十条", "20-1"; NULL: all */
    int64_t clause_id;    /* a clause of either side; 0: all */
    bool changes_only;    /* leave out the clauses that did not change */
} cq_web_compare;

/* Streaming an answer. on_token gets every piece of answer text; on_event (may be NULL) the events before and
 * between them: "conversation" {"conversation_id", "title"} first, then "stage" {"stage": "resolving" |
 * "retrieving" | "comparing" | "generating" | "answering", ...the timings so far}. data is borrowed. Both return 0
 * to go on, non-zero when the client is gone. */
typedef int (*cq_web_token_fn)(void *user, const char *text, size_t len);
typedef struct {
    cq_web_token_fn on_token;
    int (*on_event)(void *user, const char *event, const cJSON *data);
    void *user;
} cq_web_stream;

/* The admin API's requests (web/admin.c, docs/API.md "User management"). */
typedef enum {
    CQ_ADMIN_USERS_LIST,   /* GET    /api/v1/users */
    CQ_ADMIN_USER_CREATE,  /* POST   /api/v1/users                {"name","password","role","kbs"} */
    CQ_ADMIN_USER_GET,     /* GET    /api/v1/users/{name} */
    CQ_ADMIN_USER_CHANGE,  /* PATCH  /api/v1/users/{name}         {"role","kbs","disabled"} */
    CQ_ADMIN_USER_DELETE,  /* DELETE /api/v1/users/{name} */
    CQ_ADMIN_USER_PASSWORD, /* PUT   /api/v1/users/{name}/password {"password"} */
    CQ_ADMIN_GROUPS_LIST,  /* GET    /api/v1/groups */
    CQ_ADMIN_GROUP_CREATE, /* POST   /api/v1/groups               {"name","role","kbs"} */
    CQ_ADMIN_GROUP_GET,    /* GET    /api/v1/groups/{name}        with its members */
    CQ_ADMIN_GROUP_CHANGE, /* PATCH  /api/v1/groups/{name}        {"role","kbs"} */
    CQ_ADMIN_GROUP_DELETE, /* DELETE /api/v1/groups/{name} */
    CQ_ADMIN_MEMBER_ADD,   /* PUT    /api/v1/groups/{name}/members/{user} */
    CQ_ADMIN_MEMBER_REMOVE, /* DELETE /api/v1/groups/{name}/members/{user} */
    CQ_ADMIN_KEYS_LIST,    /* GET    /api/v1/keys */
    CQ_ADMIN_KEY_CREATE,   /* POST   /api/v1/keys                 {"name","role","kbs"}: the secret, shown once */
    CQ_ADMIN_KEY_REVOKE,   /* DELETE /api/v1/keys/{id} */
    CQ_ADMIN_GRANTS_LIST,  /* GET    /api/v1/kbs/{kb}/grants      who reaches the KB */
    CQ_ADMIN_GRANT_ADD,    /* PUT    /api/v1/kbs/{kb}/grants/{user|group}/{name} */
    CQ_ADMIN_GRANT_REMOVE, /* DELETE /api/v1/kbs/{kb}/grants/{user|group}/{name} */
} cq_web_admin_op;

typedef struct cq_web_admin_request {
    cq_web_admin_op op;
    const char *name;    /* the user, group, key id or KB of the path; NULL for a collection */
    const char *subject; /* MEMBER_*: the user; GRANT_*: "user" or "group" */
    const char *subject_name; /* GRANT_*: the user's or group's name */
    const cJSON *body;   /* POST, PATCH, PUT: the JSON object sent; NULL otherwise */
} cq_web_admin_request;

typedef struct cq_web_admin_audit {
    char action[32], kb[128], target[192];
} cq_web_admin_audit;

typedef struct {
    void *ctx; /* passed to every function */

    /* ---- keys and sign-in ---- */
    /* bearer: the token of "Authorization: Bearer ...", NULL when absent; session: the session cookie's token, NULL
     * when absent (a bearer key, when given, is used instead). NOT_FOUND (→ 401) when the request carries no valid
     * key or session and the service is not in open development mode. */
    cq_status (*authenticate)(void *ctx, const char *bearer, const char *session, cq_web_principal *who,
                              cq_err *err);
    /* Signs a user in (POST /api/v1/login): the new session's token (CQ_WEB_SESSION_TOKEN_BYTES with its NUL) and
     * who. client is the client's address (the sign-ins a client may fail are limited). NOT_FOUND (→ 401) with one
     * message for a wrong name or password alike; BUSY with retry_after_s (→ 429) while sign-ins of this name or
     * from this client are held back. */
    cq_status (*login)(void *ctx, const char *user, const char *password, const char *client, char *token,
                       cq_web_principal *who, cq_err *err);
    /* Ends the session of token (POST /api/v1/logout); NOT_FOUND when it is not live. */
    cq_status (*logout)(void *ctx, const char *token, cq_err *err);
    /* Records in the audit trail that who (from client) did action (store/audit.h) on kb (NULL: none) and target
     * (NULL: none), after it succeeded. Best effort: a failure is logged, the request stands. May be NULL. */
    void (*audit)(void *ctx, const cq_web_principal *who, const char *client, const char *action, const char *kb,
                  const char *target);
    /* GET /api/v1/audit: {"entries": [...], "next_before"}, newest first, ids below before (0: from the newest), at
     * most limit, of one action (NULL: any). */
    cq_status (*audit_list)(void *ctx, int64_t before, int limit, const char *action, cJSON **out, cq_err *err);
    /* Does who have `need` on kb (NULL: a request that concerns no KB)? */
    bool (*allows)(void *ctx, const cq_web_principal *who, cq_web_role need, const char *kb);

    /* ---- user management (issue 30; web/admin.c, app/service_admin.c): admins only ---- */
    /* One request of the admin API (cq_web_admin_request): out is the answer's body, *status its HTTP status (200
     * or 201), and audit what to record (action "" for nothing). Errors: INVALID (400), NOT_FOUND (404), EXISTS
     * (409). May be NULL (404 for the routes). */
    cq_status (*admin)(void *ctx, const cq_web_principal *who, const struct cq_web_admin_request *q, cJSON **out,
                       int *status, struct cq_web_admin_audit *audit, cq_err *err);

    /* ---- service state ---- */
    cq_status (*health)(void *ctx, cJSON **out, cq_err *err);
    void (*metrics)(void *ctx, cq_strbuf *out); /* appends its own Prometheus families */

    /* ---- knowledge bases ---- */
    cq_status (*kb_list)(void *ctx, cJSON **out, cq_err *err); /* array of {name, documents, clauses, created_at} */
    cq_status (*kb_get)(void *ctx, const char *kb, cJSON **out, cq_err *err);
    cq_status (*kb_create)(void *ctx, const char *kb, cJSON **out, cq_err *err); /* EXISTS, INVALID */
    cq_status (*kb_delete)(void *ctx, const char *kb, cq_err *err);

    /* ---- documents and jobs ---- */
    cq_status (*doc_list)(void *ctx, const char *kb, cJSON **out, cq_err *err);
    cq_status (*doc_get)(void *ctx, int64_t doc_id, cJSON **out, cq_err *err); /* with pages and quality */
    cq_status (*doc_kb)(void *ctx, int64_t doc_id, char kb[128], cq_err *err);  /* the KB a document is in */
    cq_status (*doc_delete)(void *ctx, int64_t doc_id, cq_err *err);
    cq_status (*doc_original)(void *ctx, int64_t doc_id, cq_web_file *file, cq_err *err);
    /* The page as PNG, width pixels wide, with the clause's boxes highlighted (clause_id 0: none). */
    cq_status (*page_image)(void *ctx, int64_t doc_id, int page_no, int64_t clause_id, int width, cq_web_file *file,
                            cq_err *err);
    /* A document's version of a regulation (store/versions.h): {"document_id", "doc", "version", "version_list"}.
     * edit (PUT's body: "group", "label", "promulgated", "effective", "repealed", "status") is a person's correction
     * applied first; reset (DELETE) goes back to the automatic analysis. INVALID for a malformed edit. */
    cq_status (*doc_version)(void *ctx, int64_t doc_id, const cJSON *edit, bool reset, cJSON **out, cq_err *err);
    /* Documents a (the older) and b compared clause by clause (search/compare.h). */
    cq_status (*doc_compare)(void *ctx, int64_t doc_a, int64_t doc_b, const cq_web_compare *q, cJSON **out,
                             cq_err *err);
    /* A clause with its document, heading path, pages and boxes (for citation chips). */
    cq_status (*clause_get)(void *ctx, int64_t clause_id, cJSON **out, char kb[128], cq_err *err);
    /* The clauses of a document whose text holds q, in its order: {"document_id", "q", "clauses": [{"clause_id",
     * "clause", "path", "page", "page_last"}], "more"} with at most CQ_WEB_DOC_SEARCH_MAX clauses. */
    cq_status (*doc_search)(void *ctx, int64_t doc_id, const char *q, cJSON **out, cq_err *err);

    /* Takes over the spooled upload at path (the service moves or deletes it). *accepted = true: a job was queued
     * (HTTP 202; out has "job"); false: the content was in the KB already (HTTP 200, out has "duplicate": true).
     * ocr: the upload's "ocr" parameter as sent (off | auto | force), NULL when absent (INVALID otherwise). */
    cq_status (*upload)(void *ctx, const char *kb, const char *filename, const char *path, bool replace,
                        const char *ocr, cJSON **out, bool *accepted, cq_err *err);
    cq_status (*job_get)(void *ctx, int64_t job_id, cJSON **out, char kb[128], cq_err *err);
    /* Cancels a job that has not ended: a queued one at once, a running one between two pages (nothing of its
     * document is kept). out: the job as it is then. EXISTS (→ 409) when it has ended already. */
    cq_status (*job_cancel)(void *ctx, int64_t job_id, cJSON **out, cq_err *err);
    cq_status (*job_list)(void *ctx, const char *kb, cJSON **out, cq_err *err);

    /* ---- questions ---- */
    cq_status (*retrieve)(void *ctx, const char *kb, const cq_web_question *q, cJSON **out, cq_err *err);
    /* out: {"answer", "abstained", "citations", "timings", "question", "resolved_question"?, "conversation_id"?}.
     * stream (may be NULL) receives the answer as it is produced, before ask returns. who owns the conversation:
     * one that is not theirs is NOT_FOUND (admins may continue any). */
    cq_status (*ask)(void *ctx, const cq_web_principal *who, const char *kb, const cq_web_question *q,
                     const cq_web_stream *stream, cJSON **out, cq_err *err);

    /* ---- conversations: a key sees its own (admins any, and every owner's with all) ---- */
    /* {"conversations": [...]}, newest first; kb NULL: of every KB */
    cq_status (*conversation_list)(void *ctx, const cq_web_principal *who, const char *kb, bool all, cJSON **out,
                                   cq_err *err);
    cq_status (*conversation_get)(void *ctx, const cq_web_principal *who, int64_t id, cJSON **out, cq_err *err);
    cq_status (*conversation_rename)(void *ctx, const cq_web_principal *who, int64_t id, const char *title,
                                     cJSON **out, cq_err *err);
    cq_status (*conversation_delete)(void *ctx, const cq_web_principal *who, int64_t id, cq_err *err);

    /* ---- feedback, exports, search, quality (issue 30; web/office.c, app/service_feedback.c) ---- */
    /* Rates turn `turn` (1-based) of conversation id: rating "up" / "down", comment NULL or at most 2,000
     * characters; reset: takes the rating back. out: {"conversation_id", "turn", "rating", "comment"}. */
    cq_status (*conversation_feedback)(void *ctx, const cq_web_principal *who, int64_t id, int turn,
                                       const char *rating, const char *comment, bool reset, cJSON **out,
                                       cq_err *err);
    /* The conversation as format "md" or "pdf": *body malloc'd (len bytes), its MIME type and file name. */
    cq_status (*conversation_export)(void *ctx, const cq_web_principal *who, int64_t id, const char *format,
                                     char **body, size_t *len, char mime[64], char filename[256], cq_err *err);
    /* As conversation_list, those whose title, questions or answers hold q. */
    cq_status (*conversation_search)(void *ctx, const cq_web_principal *who, const char *kb, bool all,
                                     const char *q, cJSON **out, cq_err *err);
    /* Admins: the quality log per KB (NULL: every KB) and day, the last `days` days. */
    cq_status (*quality)(void *ctx, const char *kb, int days, cJSON **out, cq_err *err);
    /* Admins: the rated answers of kb (NULL: every KB) as JSONL (app/office_export.h). */
    cq_status (*feedback_export)(void *ctx, const char *kb, char **body, size_t *len, cq_err *err);
} cq_web_service;

typedef struct {
    const char *host;            /* default 127.0.0.1 */
    int port;                    /* 0: any free port (see cq_web_port) */
    int threads;                 /* worker threads: requests handled at once (default 16) */
    int connections;             /* connections held open at once, keep-alive ones included (default 128); 2 more
                                    are reserved for health, metrics and jobs (web/http.h) */
    size_t max_json_bytes;       /* request bodies other than uploads (default 1 MiB) */
    size_t max_upload_bytes;     /* uploads (default 64 MiB) */
    int request_timeout_ms;      /* request headers, and each socket read and write (default 30000); a body must
                                    arrive within it plus its size at 16 KiB/s */
    int max_client_connections;  /* connections one client address may hold (default 32; -1: no limit) */
    const char *const *cors_origins;  /* NULL-terminated origins ("https://portal.example.com") whose pages may call
                                         the API; NULL: same origin only */
    const char *const *allowed_hosts; /* NULL-terminated Host names accepted besides IP addresses and localhost
                                         ("*": any); NULL: none */
    const char *spool_dir;       /* where uploads are received before the service takes them (must exist) */
    const char *access_log;      /* one line a request to this file, "-" for stdout, NULL for none */
    bool access_log_json;        /* JSON lines instead of text (web/access_log.c shows both) */
} cq_web_config;

typedef struct cq_web_server cq_web_server;

cq_status cq_web_start(const cq_web_config *config, const cq_web_service *service, cq_web_server **out,
                       cq_err *err);
int cq_web_port(const cq_web_server *server); /* the port listened on */
/* Whether host:port can be listened on (web/listen.c), asked by cq_web_start before CivetWeb (whose error says only
 * "Failed to setup server ports") and by a caller that wants to know before loading models: CQ_ERR_EXISTS when
 * another program listens there, CQ_ERR_INVALID for an address that is not this machine's, CQ_ERR_IO for the rest;
 * each with a message that says what to do. */
cq_status cq_web_listen_check(const char *host, int port, cq_err *err);
/* Opens the access log file again (after log rotation moved it away). */
cq_status cq_web_reopen_logs(cq_web_server *server, cq_err *err);
/* Stops accepting, lets the requests in flight finish, frees the server. */
void cq_web_stop(cq_web_server *server);

/* The HTTP status of a service error. */
int cq_web_http_status(cq_status code);

#endif
