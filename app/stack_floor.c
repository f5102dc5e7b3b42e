/* A floor under the stacks of CivetWeb's threads, and of no other.
 *
 * CivetWeb as Debian builds it starts its threads (the listener, the connection workers, mg_start_thread's) with a
 * fixed 100 KB stack and no option to change it. glibc places a thread's static TLS inside its stack, and once
 * cuBLAS is linked (libcublasLt alone has 92 KB of static TLS, OpenBLAS 60 KB) such a thread cannot even be
 * created: pthread_create fails with EINVAL and `serve` cannot listen. The threads this program starts itself take
 * the default stack (RLIMIT_STACK's size, 8 MB as a rule: the readers' deep recursion runs on them; reader/ocr.c asks
 * for its own 8 MB), so only
 * CivetWeb's need more, and they cannot be given an attribute of ours: defined in the executable and exported (see
 * app/CMakeLists.txt), this pthread_attr_setstacksize takes the place of glibc's, raises a request made from
 * CivetWeb's library to the floor, and passes every other request on unchanged. */
#define _GNU_SOURCE
#include <civetweb.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#define CQ_STACK_FLOOR_BYTES (1024u * 1024u)

/* Whether code at address `at` belongs to the shared object that holds CivetWeb (found through mg_start_thread). */
static int in_civetweb(const void *at) {
    static const void *base;
    Dl_info self, caller;
    if (!base && dladdr((const void *)(size_t)mg_start_thread, &self)) base = self.dli_fbase;
    return base && dladdr(at, &caller) && caller.dli_fbase == base;
}

int pthread_attr_setstacksize(pthread_attr_t *attr, size_t size) {
    static int (*next)(pthread_attr_t *, size_t);
    if (!next) next = (int (*)(pthread_attr_t *, size_t))dlsym(RTLD_NEXT, "pthread_attr_setstacksize");
    if (!next) return 22; /* EINVAL: cannot happen with glibc */
    if (size < CQ_STACK_FLOOR_BYTES && in_civetweb(__builtin_return_address(0))) size = CQ_STACK_FLOOR_BYTES;
    return next(attr, size);
}
