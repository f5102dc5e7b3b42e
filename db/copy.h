/* PostgreSQL COPY text-format fields, for the writers that build COPY data themselves (db/db_pg.c's bulk insert,
 * store/postings.c's clauses and postings). */
#ifndef CQ_DB_COPY_H
#define CQ_DB_COPY_H

#include <stddef.h>

#include "core/strbuf.h"

/* s with backslash, tab, newline and carriage return escaped; NULL is \N. */
void cq_db_copy_text(cq_strbuf *b, const char *s);
/* A bytea field: \x and hex digits, the backslash doubled for COPY. */
void cq_db_copy_bytea(cq_strbuf *b, const unsigned char *p, size_t n);

#endif
