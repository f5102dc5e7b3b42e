/* clauseqa.conf: the configuration file, INI read with libinih.
 *
 *     data = /var/lib/clauseqa            ; keys before any section: options every command takes
 *     models = /usr/share/clauseqa/models
 *     store = postgresql://clauseqa@db.example/clauseqa   ; where the store is (store/store.h; default DATA/clauseqa.db)
 *     log-level = info
 *     [serve]                             ; options of `clauseqa serve`
 *     port = 8080
 *     access-log = /var/log/clauseqa/access.log
 *
 * Every key is the command-line flag of the same name (`port = 8080` is `--port 8080`; a boolean key such as
 * `no-open-mode = true` is the bare flag) and a flag given on the command line wins over the file. Unknown sections
 * and keys, a key set twice, a value of the wrong type and a line that is not `key = value` are errors that name the
 * file and the line. Comments start with ';' or '#'; one pair of double quotes around a value is removed.
 *
 * Which file (app/cli.c): --config FILE, else $CLAUSEQA_CONFIG, else /etc/clauseqa/clauseqa.conf, else
 * DATA/clauseqa.conf; the first of the last two that exists (a file named by --config or $CLAUSEQA_CONFIG must). */
#ifndef CQ_APP_CONFIG_H
#define CQ_APP_CONFIG_H

#include <stddef.h>

#include "core/error.h"

typedef struct {
    char *section; /* "" before any section */
    char *key, *value;
    int line;
} cq_config_entry;

typedef struct {
    char *path;
    cq_config_entry *entries; /* in file order */
    size_t n;
} cq_config;

/* Reads and checks path. Errors (CQ_ERR_INVALID, CQ_ERR_IO when it cannot be read) read "PATH:LINE: what". */
cq_status cq_config_load(const char *path, cq_config *out, cq_err *err);

/* The value of key in section ("" for the top), or NULL. */
const char *cq_config_get(const cq_config *c, const char *section, const char *key);

/* The flags that section `command` gives, in file order: "--key=value", or "--key" for a true boolean (a false one
 * gives none). Returns how many were written to out (at most cap); each is malloc'd (free them). */
size_t cq_config_flags(const cq_config *c, const char *command, char **out, size_t cap);

void cq_config_free(cq_config *c);

#endif
