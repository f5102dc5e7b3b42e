/* Failed sign-ins held back (issue 30): per user name and per client address, in the memory of one server.
 *
 * After CQ_LOGIN_USER_FAILURES failed sign-ins of one name (whichever address they came from), or
 * CQ_LOGIN_ADDR_FAILURES from one address (whichever names they tried: an office behind one address makes many
 * honest mistakes, so its limit is higher), every further sign-in of that name, or from that address, is refused
 * for CQ_LOGIN_BACKOFF_FIRST_S seconds, doubling with each further failure up to CQ_LOGIN_BACKOFF_MAX_S — the right
 * password included, so that the wait cannot be used to test passwords. A successful sign-in forgets the name's
 * failures; failures are forgotten CQ_LOGIN_FORGET_S after the last one. Names that do not exist are counted as the
 * others are (no user enumeration). At most CQ_LOGIN_TRACKED entries are kept: when full, the stale ones go first,
 * then the oldest.
 *
 * The clock is the caller's (seconds, monotonic), so that the tests can move it. Thread-safe. */
#ifndef CQ_APP_LOGIN_LIMIT_H
#define CQ_APP_LOGIN_LIMIT_H

#include <pthread.h>
#include <stddef.h>

#define CQ_LOGIN_USER_FAILURES 5
#define CQ_LOGIN_ADDR_FAILURES 20
#define CQ_LOGIN_BACKOFF_FIRST_S 2
#define CQ_LOGIN_BACKOFF_MAX_S 900
#define CQ_LOGIN_FORGET_S 3600
#define CQ_LOGIN_TRACKED 4096

typedef struct {
    pthread_mutex_t lock;
    struct cq_login_entry *items;
    size_t n;
} cq_login_limit;

void cq_login_limit_init(cq_login_limit *l);
void cq_login_limit_destroy(cq_login_limit *l);
/* Seconds (rounded up) before a sign-in of user from addr may be tried; 0: now. Either may be NULL or "". */
int cq_login_limit_wait(cq_login_limit *l, const char *user, const char *addr, double now);
/* A failed sign-in of user from addr. */
void cq_login_limit_failed(cq_login_limit *l, const char *user, const char *addr, double now);
/* A successful one: user's failures are forgotten (the address's are not). */
void cq_login_limit_succeeded(cq_login_limit *l, const char *user);

#endif
