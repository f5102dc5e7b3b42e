/* Deadlines for the transfers CivetWeb cannot bound: a read of n bytes returns only when n bytes came or none came
 * for the request timeout, so a client that sends a byte every few seconds keeps one read going for hours; a write
 * waits the same way on a client that reads a byte now and then. Each body read and each large response is watched
 * here; past its deadline the watchdog shuts the connection's socket down (reads then end at once, and the handler
 * answers 408, or gives up on a write), which is the only way to reach a transfer CivetWeb is blocked in.
 *
 * CivetWeb does not give out a connection's socket, so the watchdog finds it among the process's descriptors by its
 * addresses (the client's address and port, the server's port); it does so only for a transfer past its deadline,
 * and only while the transfer is registered, that is while its handler runs and the socket cannot have closed. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "web/http.h"

#define WATCHDOG_PERIOD_MS 200

/* The descriptor of the TCP connection from addr:port to our local_port, or -1. */
static int find_socket(const char *addr, int port, int local_port) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int found = -1;
    struct dirent *e;
    while (found < 0 && (e = readdir(d))) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || fd < 0 || fd == dirfd(d)) continue;
        struct sockaddr_storage peer, local;
        socklen_t plen = sizeof peer, llen = sizeof local;
        if (getpeername((int)fd, (struct sockaddr *)&peer, &plen) || getsockname((int)fd, (struct sockaddr *)&local, &llen))
            continue;
        char text[INET6_ADDRSTRLEN] = "";
        int pport = -1, lport = -1;
        if (peer.ss_family == AF_INET) {
            const struct sockaddr_in *p = (const struct sockaddr_in *)&peer;
            inet_ntop(AF_INET, &p->sin_addr, text, sizeof text);
            pport = ntohs(p->sin_port);
            lport = ntohs(((const struct sockaddr_in *)&local)->sin_port);
        } else if (peer.ss_family == AF_INET6) {
            const struct sockaddr_in6 *p = (const struct sockaddr_in6 *)&peer;
            inet_ntop(AF_INET6, &p->sin6_addr, text, sizeof text);
            pport = ntohs(p->sin6_port);
            lport = ntohs(((const struct sockaddr_in6 *)&local)->sin6_port);
        }
        if (pport == port && lport == local_port && !strcmp(text, addr)) found = (int)fd;
    }
    closedir(d);
    return found;
}

static void *watchdog_main(void *arg) {
    cq_web_watchdog *w = arg;
    pthread_mutex_lock(&w->lock);
    while (!w->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += WATCHDOG_PERIOD_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&w->cond, &w->lock, &until);
        double now = cq_clock_seconds();
        for (cq_web_watch *x = w->head; x; x = x->next) {
            if (x->fired || now <= x->deadline) continue;
            x->fired = true;
            int fd = find_socket(x->addr, x->port, x->local_port);
            /* A read ends at once when the reading side is shut; the answer (408) can still be written. */
            if (fd >= 0) shutdown(fd, x->writing ? SHUT_RDWR : SHUT_RD);
            CQ_INFO("http: %s:%d too slow %s: connection cut", x->addr, x->port,
                    x->writing ? "reading the answer" : "sending the request body");
        }
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

cq_status cq_web_watchdog_start(cq_web_watchdog *w, cq_err *err) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    if (pthread_create(&w->thread, NULL, watchdog_main, w) != 0)
        return cq_err_set(err, CQ_ERR_INTERNAL, "cannot start the watchdog thread");
    w->started = true;
    return CQ_OK;
}

void cq_web_watchdog_stop(cq_web_watchdog *w) {
    if (!w->started) return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    w->started = false;
}

void cq_web_watch_begin(cq_web_req *r, bool writing, double deadline) {
    cq_web_watchdog *w = &r->server->watchdog;
    cq_web_watch *x = &r->watch;
    memset(x, 0, sizeof *x);
    snprintf(x->addr, sizeof x->addr, "%s", r->ri->remote_addr);
    x->port = r->ri->remote_port;
    x->local_port = r->ri->server_port;
    x->writing = writing;
    x->deadline = deadline;
    pthread_mutex_lock(&w->lock);
    x->next = w->head;
    if (w->head) w->head->prev = x;
    w->head = x;
    x->registered = true;
    pthread_mutex_unlock(&w->lock);
}

void cq_web_watch_move(cq_web_req *r, double deadline) {
    pthread_mutex_lock(&r->server->watchdog.lock);
    r->watch.deadline = deadline;
    pthread_mutex_unlock(&r->server->watchdog.lock);
}

bool cq_web_watch_end(cq_web_req *r) {
    cq_web_watchdog *w = &r->server->watchdog;
    cq_web_watch *x = &r->watch;
    if (!x->registered) return x->fired;
    pthread_mutex_lock(&w->lock);
    if (x->prev) x->prev->next = x->next;
    else w->head = x->next;
    if (x->next) x->next->prev = x->prev;
    x->registered = false;
    bool fired = x->fired;
    pthread_mutex_unlock(&w->lock);
    return fired;
}
