/* Logging to stderr with a level threshold (CLAUSEQA_LOG=debug|info|warn|error, default info). Thread-safe. */
#ifndef CQ_CORE_LOG_H
#define CQ_CORE_LOG_H

typedef enum { CQ_LOG_DEBUG = 0, CQ_LOG_INFO = 1, CQ_LOG_WARN = 2, CQ_LOG_ERROR = 3, CQ_LOG_OFF = 4 } cq_log_level;

void cq_log_set_level(cq_log_level level);
/* "debug", "info", "warn", "error" or "off" as a cq_log_level; -1 for anything else (NULL included). */
int cq_log_level_parse(const char *name);
cq_log_level cq_log_get_level(void);
void cq_log(cq_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define CQ_DEBUG(...) cq_log(CQ_LOG_DEBUG, __VA_ARGS__)
#define CQ_INFO(...) cq_log(CQ_LOG_INFO, __VA_ARGS__)
#define CQ_WARN(...) cq_log(CQ_LOG_WARN, __VA_ARGS__)
#define CQ_ERROR(...) cq_log(CQ_LOG_ERROR, __VA_ARGS__)

#endif
