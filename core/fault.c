#include "core/fault.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cq_fault_point(const char *point) {
    const char *armed = getenv("CLAUSEQA_FAULT");
    if (armed && !strcmp(armed, point)) _exit(86);
}
