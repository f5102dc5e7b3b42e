/* A floor under thread stack sizes, for the whole process.
 *
 * CivetWeb as Debian builds it starts its connection threads with a fixed 100 KB stack. glibc places a thread's
 * static TLS inside its stack, and once cuBLAS is linked (libcublasLt alone has 92 KB of static TLS, OpenBLAS 60 KB)
 * such a thread cannot even be created: pthread_create fails with EINVAL and `serve` cannot listen. Defined in the
 * executable and exported (see app/CMakeLists.txt), this pthread_attr_setstacksize takes the place of glibc's for
 * every library in the process: it raises requests below the floor and passes the rest on unchanged. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#define CQ_STACK_FLOOR_BYTES (1024u * 1024u)

int pthread_attr_setstacksize(pthread_attr_t *attr, size_t size) {
    static int (*next)(pthread_attr_t *, size_t);
    if (!next) next = (int (*)(pthread_attr_t *, size_t))dlsym(RTLD_NEXT, "pthread_attr_setstacksize");
    if (!next) return 22; /* EINVAL: cannot happen with glibc */
    return next(attr, size < CQ_STACK_FLOOR_BYTES ? CQ_STACK_FLOOR_BYTES : size);
}
