/* A failed document's reason in plain words (core/plain_reason.h). */
#include "core/plain_reason.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"

bool cq_plain_reason(const char *why, char *out, size_t cap) {
    if (!why || !cap || (!strstr(why, "MuPDF") && !strstr(why, "damaged PDF") && !strstr(why, "truncated PDF")))
        return false;
    int unreadable = 0, pages = 0;
    const char *p = strstr(why, "MuPDF rebuilt it but ");
    if (p && sscanf(p, "MuPDF rebuilt it but %d of %d pages cannot be read", &unreadable, &pages) == 2)
        snprintf(out, cap, "the PDF is damaged: %d of its %d pages cannot be read", unreadable, pages);
    else
        snprintf(out, cap, "the PDF is damaged and cannot be read");
    return true;
}

const char *cq_plain_reason_stored(const char *what, long long id, const char *why, char *out, size_t cap) {
    if (!cq_plain_reason(why, out, cap)) return why;
    CQ_WARN("%s %lld failed: %s", what, id, why);
    return out;
}
