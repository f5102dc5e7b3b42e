/* The server's messages by code: every error message a client can get over HTTP has a stable code, so that a page
 * shows it in its own language (web/static/messages.js holds the Chinese; the English is the message itself).
 *
 *   {"error": {"code": "not_found", "message": "no clause with id 419",
 *              "message_code": "no_clause_with_id", "message_args": ["419"]}}
 *
 * "code" says what kind of failure it is (core/error.h names, or the web layer's own: "forbidden", ...);
 * "message_code" which message, and "message_args" the values its placeholders took, in order. A message the
 * catalog does not know has no "message_code" (the page then shows the English message). The catalog lists the
 * printf formats the server writes its messages with; a message is matched against them (each conversion matches
 * what printf would write for it). tests/integration/test_messages.py checks that every format of web/ and
 * app/service_<name>.c is in it and that the page has its Chinese. */
#ifndef CQ_WEB_MESSAGES_H
#define CQ_WEB_MESSAGES_H

#include <stddef.h>

#include "core/json.h"

typedef struct {
    const char *code;   /* "no_clause_with_id" */
    const char *format; /* "no clause with id %lld" */
} cq_web_message;

extern const cq_web_message cq_web_messages[];
extern const size_t cq_web_n_messages;

/* The code of message (a catalog entry's), with the values of its placeholders appended to args (strings) when args
 * is not NULL; NULL when no entry matches (args unchanged). */
const char *cq_web_message_code(const char *message, cJSON *args);

#endif
