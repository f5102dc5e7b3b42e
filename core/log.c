#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_level = -1;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

int cq_log_level_parse(const char *name) {
    static const char *const names[] = {"debug", "info", "warn", "error", "off"};
    for (int i = 0; name && i < 5; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

static int level_from_env(void) {
    int level = cq_log_level_parse(getenv("CLAUSEQA_LOG"));
    return level < 0 ? CQ_LOG_INFO : level;
}

void cq_log_set_level(cq_log_level level) { g_level = (int)level; }

cq_log_level cq_log_get_level(void) {
    if (g_level < 0) g_level = level_from_env();
    return (cq_log_level)g_level;
}

void cq_log(cq_log_level level, const char *fmt, ...) {
    if ((int)level < (int)cq_log_get_level()) return;
    static const char *names[] = {"debug", "info", "warn", "error"};
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    pthread_mutex_lock(&g_lock);
    fprintf(stderr, "%s %-5s ", stamp, names[level]);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    pthread_mutex_unlock(&g_lock);
}
