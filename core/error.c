#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void set_v(cq_err *err, cq_status code, const char *reason, const char *fmt, va_list ap) {
    err->code = code;
    err->reason = reason;
    err->retry_after_s = 0;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
}

cq_status cq_err_set(cq_err *err, cq_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        set_v(err, code, NULL, fmt, ap);
        va_end(ap);
    }
    return code;
}

cq_status cq_err_set_reason(cq_err *err, cq_status code, const char *reason, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        set_v(err, code, reason, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *cq_err_name(const cq_err *err) { return err->reason ? err->reason : cq_status_name(err->code); }

cq_status cq_err_prefix(cq_err *err, const char *fmt, ...) {
    if (!err) return CQ_ERR_INTERNAL;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* Shift the old message right to make room for the prefix; whatever no longer fits is cut off. */
    size_t plen = strlen(prefix), olen = strlen(err->msg), cap = sizeof err->msg - 1;
    if (plen > cap) plen = cap;
    if (plen + olen > cap) olen = cap - plen;
    memmove(err->msg + plen, err->msg, olen);
    memcpy(err->msg, prefix, plen);
    err->msg[plen + olen] = 0;
    return err->code;
}

void cq_err_clear(cq_err *err) {
    if (err) {
        err->code = CQ_OK;
        err->msg[0] = 0;
        err->reason = NULL;
        err->retry_after_s = 0;
    }
}

const char *cq_status_name(cq_status code) {
    switch (code) {
    case CQ_OK: return "ok";
    case CQ_ERR_INVALID: return "invalid";
    case CQ_ERR_IO: return "io";
    case CQ_ERR_NOMEM: return "no_memory";
    case CQ_ERR_FORMAT: return "bad_format";
    case CQ_ERR_NOT_FOUND: return "not_found";
    case CQ_ERR_EXISTS: return "exists";
    case CQ_ERR_DB: return "database";
    case CQ_ERR_EMPTY: return "empty";
    case CQ_ERR_UNSUPPORTED: return "unsupported";
    case CQ_ERR_DEVICE: return "device";
    case CQ_ERR_INTERNAL: return "internal";
    case CQ_ERR_TOO_LARGE: return "too_large";
    case CQ_ERR_CANCELLED: return "cancelled";
    case CQ_ERR_BUSY: return "busy";
    }
    return "unknown";
}
