#include "core/fault.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cq_fault_point(const char *point) {
    const char *armed = getenv("CLAUSEQA_FAULT");
    if (armed && !strcmp(armed, point)) _exit(86);
}

void cq_fault_delay(const char *point) {
    const char *armed = getenv("CLAUSEQA_FAULT_DELAY");
    size_t n = strlen(point);
    if (!armed || strncmp(armed, point, n) || armed[n] != ':') return;
    long ms = strtol(armed + n + 1, NULL, 10);
    if (ms > 0) usleep((useconds_t)(ms > 60000 ? 60000 : ms) * 1000);
}
