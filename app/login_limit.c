/* Failed sign-ins held back (app/login_limit.h). */
#include "app/login_limit.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cq_login_entry {
    char key[200]; /* "u:NAME" or "a:ADDRESS" */
    int failures;
    double last, blocked_until;
};

void cq_login_limit_init(cq_login_limit *l) {
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->lock, NULL);
}

void cq_login_limit_destroy(cq_login_limit *l) {
    free(l->items);
    pthread_mutex_destroy(&l->lock);
}

static void make_key(char *out, size_t cap, char kind, const char *what) {
    snprintf(out, cap, "%c:%s", kind, what);
}

/* The entry of key, or NULL. Under the lock. */
static struct cq_login_entry *find(cq_login_limit *l, const char *key, double now) {
    for (size_t i = 0; i < l->n; i++) {
        struct cq_login_entry *e = &l->items[i];
        if (strcmp(e->key, key)) continue;
        if (now - e->last > CQ_LOGIN_FORGET_S && now >= e->blocked_until) e->failures = 0, e->blocked_until = 0;
        return e;
    }
    return NULL;
}

/* A new entry for key: a free slot, else a stale one's, else the oldest one's. NULL when out of memory. */
static struct cq_login_entry *add(cq_login_limit *l, const char *key, double now) {
    if (!l->items) {
        l->items = calloc(CQ_LOGIN_TRACKED, sizeof *l->items);
        if (!l->items) return NULL;
    }
    struct cq_login_entry *e = NULL;
    if (l->n < CQ_LOGIN_TRACKED) {
        e = &l->items[l->n++];
    } else {
        e = &l->items[0];
        for (size_t i = 0; i < l->n; i++) {
            struct cq_login_entry *c = &l->items[i];
            bool stale = now - c->last > CQ_LOGIN_FORGET_S && now >= c->blocked_until;
            if (stale) {
                e = c;
                break;
            }
            if (c->last < e->last) e = c;
        }
    }
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    return e;
}

static int wait_of(struct cq_login_entry *e, double now) {
    if (!e || e->blocked_until <= now) return 0;
    return (int)ceil(e->blocked_until - now);
}

int cq_login_limit_wait(cq_login_limit *l, const char *user, const char *addr, double now) {
    char key[200];
    int wait = 0;
    pthread_mutex_lock(&l->lock);
    if (user && *user) {
        make_key(key, sizeof key, 'u', user);
        wait = wait_of(find(l, key, now), now);
    }
    if (addr && *addr) {
        make_key(key, sizeof key, 'a', addr);
        int w = wait_of(find(l, key, now), now);
        if (w > wait) wait = w;
    }
    pthread_mutex_unlock(&l->lock);
    return wait;
}

static void count_failure(cq_login_limit *l, const char *key, int threshold, double now) {
    struct cq_login_entry *e = find(l, key, now);
    if (!e) e = add(l, key, now);
    if (!e) return;
    e->failures++;
    e->last = now;
    if (e->failures >= threshold) {
        int over = e->failures - threshold;
        double wait = over >= 20 ? CQ_LOGIN_BACKOFF_MAX_S : (double)CQ_LOGIN_BACKOFF_FIRST_S * (double)(1 << over);
        if (wait > CQ_LOGIN_BACKOFF_MAX_S) wait = CQ_LOGIN_BACKOFF_MAX_S;
        e->blocked_until = now + wait;
    }
}

void cq_login_limit_failed(cq_login_limit *l, const char *user, const char *addr, double now) {
    char key[200];
    pthread_mutex_lock(&l->lock);
    if (user && *user) {
        make_key(key, sizeof key, 'u', user);
        count_failure(l, key, CQ_LOGIN_USER_FAILURES, now);
    }
    if (addr && *addr) {
        make_key(key, sizeof key, 'a', addr);
        count_failure(l, key, CQ_LOGIN_ADDR_FAILURES, now);
    }
    pthread_mutex_unlock(&l->lock);
}

void cq_login_limit_succeeded(cq_login_limit *l, const char *user) {
    if (!user || !*user) return;
    char key[200];
    make_key(key, sizeof key, 'u', user);
    pthread_mutex_lock(&l->lock);
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->items[i].key, key)) l->items[i] = l->items[--l->n];
    pthread_mutex_unlock(&l->lock);
}
