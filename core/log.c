#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_level = -1;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static int level_from_env(void) {
    const char *s = getenv("CLAUSEQA_LOG");
    if (!s) return CQ_LOG_INFO;
    if (!strcmp(s, "debug")) return CQ_LOG_DEBUG;
    if (!strcmp(s, "warn")) return CQ_LOG_WARN;
    if (!strcmp(s, "error")) return CQ_LOG_ERROR;
    if (!strcmp(s, "off")) return CQ_LOG_OFF;
    return CQ_LOG_INFO;
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
