/* A failed document's reason in plain words. The PDF reader's messages carry MuPDF's own diagnostics ("the PDF has
 * no pages (damaged or truncated: MuPDF rebuilt it and found none) [MuPDF: cannot load object (2 0 R) into cache]",
 * "damaged PDF, MuPDF cannot read it (…)"): useful in the log, meaningless to the person who uploaded the file. What
 * is stored and shown is the plain reason ("the PDF is damaged and cannot be read"; web/messages.h gives each a code
 * for the page's Chinese); the full text goes to the log where it is stored (store/documents.c, store/jobs.c). */
#ifndef CQ_CORE_PLAIN_REASON_H
#define CQ_CORE_PLAIN_REASON_H

#include <stdbool.h>
#include <stddef.h>

/* The plain reason for why into out (cap bytes) and true, when why holds the reader's internals; false (out
 * untouched) when why is plain already. */
bool cq_plain_reason(const char *why, char *out, size_t cap);

/* The reason to store for a failure of `what` id: the plain one in out (why logged whole as a warning), or why
 * itself when it is plain already (or NULL). */
const char *cq_plain_reason_stored(const char *what, long long id, const char *why, char *out, size_t cap);

#endif
