/* Error codes and messages shared by every module.
 *
 * Library code never exits: it returns a cq_status and, where the caller passed a cq_err, fills a message that a
 * person can act on ("page 3: no text layer (scanned?)", not "error -5"). Only app/ turns errors into exit codes. */
#ifndef CQ_CORE_ERROR_H
#define CQ_CORE_ERROR_H

#include <stddef.h>

typedef enum {
    CQ_OK = 0,
    CQ_ERR_INVALID = 1,   /* bad argument or malformed input */
    CQ_ERR_IO = 2,        /* file or socket I/O failed */
    CQ_ERR_NOMEM = 3,     /* allocation failed */
    CQ_ERR_FORMAT = 4,    /* input is not in the format it claims (not a PDF, broken GGUF ...) */
    CQ_ERR_NOT_FOUND = 5, /* a named thing does not exist */
    CQ_ERR_EXISTS = 6,    /* a thing with that identity exists already (duplicate upload) */
    CQ_ERR_DB = 7,        /* SQLite failed */
    CQ_ERR_EMPTY = 8,     /* input yields no usable content (no text layer, empty file) */
    CQ_ERR_UNSUPPORTED = 9, /* encrypted PDF, unknown format, missing feature */
    CQ_ERR_DEVICE = 10,   /* CUDA / cuBLAS failure */
    CQ_ERR_INTERNAL = 11, /* a bug: an invariant did not hold */
    CQ_ERR_TOO_LARGE = 12, /* over a configured limit (a document's pages or memory budget): retrying cannot help */
    CQ_ERR_CANCELLED = 13, /* stopped on request (a job cancelled, the server stopping) */
    CQ_ERR_BUSY = 14,     /* at capacity now: try again later (retry_after_s says when; HTTP 503 + Retry-After) */
} cq_status;

typedef struct {
    cq_status code;
    char msg[512];
    /* Where the code says too little for a person to act on, a finer stable name of what went wrong ("too_large":
     * a zip bomb; "ocr_off": a scan while OCR is off …): a static string, NULL otherwise. A client that says errors
     * in its own language (the page) maps it as it maps the codes. */
    const char *reason;
    int retry_after_s; /* with CQ_ERR_BUSY: seconds after which trying again is likely to succeed; 0 otherwise */
} cq_err;

/* Records code and a printf-style message in err (which may be NULL), without a reason; returns code so callers
 * can `return cq_err_set(err, CQ_ERR_IO, "cannot open %s", path);`. */
cq_status cq_err_set(cq_err *err, cq_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with a reason (a static string: see cq_err). */
cq_status cq_err_set_reason(cq_err *err, cq_status code, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* What a client is told went wrong: err's reason when it has one, else cq_status_name of its code. */
const char *cq_err_name(const cq_err *err);

/* Prefixes an existing message with context: "ingest a.pdf: " + old message. Returns err->code. */
cq_status cq_err_prefix(cq_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void cq_err_clear(cq_err *err);

/* Stable lower-case name of a code ("invalid", "not_found" ...), used as the REST error code. */
const char *cq_status_name(cq_status code);

#endif
