#include "core/fileio.h"

#include <ctype.h>
#include <signal.h>
#include <stdbool.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fault.h"

#define TEMP_MARK ".tmp." /* cq_file_write_atomic's temporary files: PATH.tmp.XXXXXX */

cq_status cq_file_read(const char *path, size_t max_bytes, char **data, size_t *len, cq_err *err) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return cq_err_set(err, CQ_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat stbuf;
    if (fstat(fileno(f), &stbuf) != 0 || !S_ISREG(stbuf.st_mode)) {
        fclose(f);
        return cq_err_set(err, CQ_ERR_IO, "%s is not a regular file", path);
    }
    size_t size = (size_t)stbuf.st_size;
    if (max_bytes && size > max_bytes) {
        fclose(f);
        return cq_err_set(err, CQ_ERR_INVALID, "%s is too large (%zu bytes, limit %zu)", path, size, max_bytes);
    }
    char *buf = malloc(size + 1);
    if (!buf) {
        fclose(f);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory reading %s", path);
    }
    size_t got = fread(buf, 1, size, f);
    fclose(f);
    if (got != size) {
        free(buf);
        return cq_err_set(err, CQ_ERR_IO, "short read on %s", path);
    }
    buf[size] = 0;
    *data = buf;
    *len = size;
    return CQ_OK;
}

cq_status cq_file_write_atomic(const char *path, const void *data, size_t len, cq_err *err) {
    size_t n = strlen(path) + 48;
    char *tmp = malloc(n);
    if (!tmp) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    /* a name of its own (threads may write the same path at once) that says which process writes it */
    snprintf(tmp, n, "%s" TEMP_MARK "%d.XXXXXX", path, (int)getpid());
    int fd = mkstemp(tmp);
    /* Locked while it is written, so that cq_remove_stale_temp_files tells it from a crashed writer's leftover. */
    if (fd >= 0) flock(fd, LOCK_EX);
    FILE *f = fd >= 0 && fchmod(fd, 0600) == 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        cq_err_set(err, CQ_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        return CQ_ERR_IO;
    }
    int bad = fwrite(data, 1, len, f) != len;
    bad |= fflush(f) != 0;
    bad |= fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    cq_fault_point("in-temp-write"); /* the crash tests (core/fault.h) */
    if (bad || rename(tmp, path) != 0) {
        cq_err_set(err, CQ_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return CQ_ERR_IO;
    }
    free(tmp);
    return CQ_OK;
}

/* The writer of a temp file is gone: the process its name names has exited. */
static bool writer_gone(const char *name) {
    const char *p = strstr(name, TEMP_MARK) + strlen(TEMP_MARK);
    char *end;
    long pid = strtol(p, &end, 10);
    return end != p && *end == '.' && pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int cq_remove_stale_temp_files(const char *dir, int min_age_s) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, TEMP_MARK)) continue;
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path) continue;
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st;
        /* A writer at work holds the lock; a young file whose writer lives may be one that has not taken it yet.
         * min_age_s <= 0 takes every unlocked file: a file's mtime can be a second ahead of time(NULL) (the kernel
         * stamps files with a finer clock than time()'s coarse one), so "age >= 0" is not always true. */
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            (min_age_s <= 0 || now - st.st_mtime >= min_age_s || writer_gone(e->d_name)) &&
            flock(fd, LOCK_EX | LOCK_NB) == 0 && unlink(path) == 0)
            removed++;
        close(fd);
    }
    closedir(d);
    return removed;
}

cq_status cq_file_copy(const char *src, const char *dst, cq_err *err) {
    char *data;
    size_t len;
    cq_status rc = cq_file_read(src, 0, &data, &len, err);
    if (rc) return rc;
    rc = cq_file_write_atomic(dst, data, len, err);
    free(data);
    return rc;
}

cq_status cq_mkdirs(const char *path, cq_err *err) {
    char *p = strdup(path);
    if (!p) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            cq_err_set(err, CQ_ERR_IO, "cannot create directory %s: %s", p, strerror(errno));
            free(p);
            return CQ_ERR_IO;
        }
        *s = '/';
    }
    if (mkdir(p, 0700) != 0 && errno != EEXIST) {
        cq_err_set(err, CQ_ERR_IO, "cannot create directory %s: %s", p, strerror(errno));
        free(p);
        return CQ_ERR_IO;
    }
    free(p);
    return CQ_OK;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

char *cq_path_stem(const char *path) {
    const char *b = base_name(path);
    const char *dot = strrchr(b, '.');
    size_t n = (dot && dot != b) ? (size_t)(dot - b) : strlen(b);
    return strndup(b, n);
}

char *cq_path_ext_lower(const char *path) {
    const char *b = base_name(path);
    const char *dot = strrchr(b, '.');
    char *e = strdup((dot && dot != b) ? dot + 1 : "");
    if (e)
        for (char *q = e; *q; q++) *q = (char)tolower((unsigned char)*q);
    return e;
}
