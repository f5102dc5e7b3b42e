/* The names of the states the store keeps (store/jobs.h cq_job_state, store/store.h cq_doc_state): the words the
 * database holds and the API's JSON says. The one table of each; the store maps them at its boundary and callers
 * compare enums. */
#include <string.h>

#include "store/jobs.h"

static const char *const job_names[] = {
    [CQ_JOB_QUEUED] = "queued", [CQ_JOB_RUNNING] = "running",     [CQ_JOB_READY] = "ready",
    [CQ_JOB_FAILED] = "failed", [CQ_JOB_DUPLICATE] = "duplicate", [CQ_JOB_CANCELLED] = "cancelled",
};
static const char *const doc_names[] = {
    [CQ_DOC_PROCESSING] = "processing", [CQ_DOC_READY] = "ready", [CQ_DOC_FAILED] = "failed"};
#define COUNT(a) (sizeof a / sizeof *a)

static const char *name_of(const char *const *names, size_t n, unsigned v) { return v < n ? names[v] : "unknown"; }

/* name's index in names, or -1 */
static int find(const char *const *names, size_t n, const char *name) {
    for (size_t i = 0; name && i < n; i++)
        if (!strcmp(name, names[i])) return (int)i;
    return -1;
}

const char *cq_job_state_name(cq_job_state state) { return name_of(job_names, COUNT(job_names), (unsigned)state); }
const char *cq_doc_state_name(cq_doc_state state) { return name_of(doc_names, COUNT(doc_names), (unsigned)state); }

bool cq_job_state_parse(const char *name, cq_job_state *out) {
    const int v = find(job_names, COUNT(job_names), name);
    if (v >= 0) *out = (cq_job_state)v;
    return v >= 0;
}

bool cq_doc_state_parse(const char *name, cq_doc_state *out) {
    const int v = find(doc_names, COUNT(doc_names), name);
    if (v >= 0) *out = (cq_doc_state)v;
    return v >= 0;
}
