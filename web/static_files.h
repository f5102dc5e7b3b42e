/* The page (the files of web/static), compiled into the binary by web/embed_static.cmake. */
#ifndef CQ_WEB_STATIC_FILES_H
#define CQ_WEB_STATIC_FILES_H

#include <stddef.h>

typedef struct {
    const char *path; /* "/index.html", "/app.js" ... */
    const char *mime;
    const unsigned char *data;
    size_t len;
} cq_web_static_file;

extern const cq_web_static_file cq_web_static_files[];
extern const size_t cq_web_n_static_files;

#endif
