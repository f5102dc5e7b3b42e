/* Can the server listen where it is told to? Asked with a socket of our own before CivetWeb starts, so that a busy
 * port is reported as one rather than as CivetWeb's "Failed to setup server ports". */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "web/http.h"

cq_status cq_web_listen_check(const char *host, int port, cq_err *err) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return cq_err_set(err, CQ_ERR_INVALID, "'%s' is not an IPv4 address (--host takes one, such as 127.0.0.1 or "
                          "0.0.0.0)", host);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return CQ_OK; /* cannot ask: let CivetWeb try */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* as CivetWeb does: TIME_WAIT is no obstacle */
    int rc = bind(fd, (struct sockaddr *)&a, sizeof a) == 0 ? 0 : errno;
    if (!rc && listen(fd, 1) != 0) rc = errno;
    close(fd);
    switch (rc) {
    case 0: return CQ_OK;
    case EADDRINUSE:
        return cq_err_set(err, CQ_ERR_EXISTS, "port %d on %s is in use (another clauseqa, or another program): "
                          "choose a free one with --port N (with make run: make run PORT=N)", port, host);
    case EACCES:
        return cq_err_set(err, CQ_ERR_IO, "port %d needs privileges this process lacks (ports below 1024 do): use "
                          "--port 1024 or above, with nginx in front for 80/443 (deploy/)", port);
    case EADDRNOTAVAIL:
        return cq_err_set(err, CQ_ERR_INVALID, "%s is not an address of this machine (--host)", host);
    default: return cq_err_set(err, CQ_ERR_IO, "cannot listen on %s:%d: %s", host, port, strerror(rc));
    }
}
