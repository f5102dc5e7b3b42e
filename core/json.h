/* JSON in and out, strictly: what the HTTP server and the command line write and read.
 *
 * Out: every JSON document written is valid JSON. cJSON copies a string's bytes as they are, so one name or text
 * holding invalid UTF-8 (a percent-decoded path segment, a file name, a plain-text document) would make the whole
 * document invalid; cq_json_print replaces each invalid sequence with U+FFFD. Every JSON text the program writes
 * (HTTP answers and events, the CLI's --json, the access log, a backup's manifest, stored conversation turns) comes
 * from here.
 *
 * In: RFC 8259 JSON and nothing else. cJSON alone accepts more, and some of it changes meaning: "\u0000" ends the
 * decoded string there ("laws\u0000x" would name "laws"), raw control characters and invalid UTF-8 pass through
 * into names and questions, anything may follow the value ({"name": "a"}garbage), and a name may appear twice in
 * one object ({"kb": "a", "kb": "b"}: which one counts differs from parser to parser). */
#ifndef CQ_CORE_JSON_H
#define CQ_CORE_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* The compact text of v (no new line), malloc'd, valid UTF-8; NULL when out of memory. *len (may be NULL) gets its
 * length. */
char *cq_json_print(const cJSON *v, size_t *len);
/* The same, indented on several lines for people to read (files such as a backup's manifest). */
char *cq_json_print_formatted(const cJSON *v, size_t *len);

/* Parses text[0..len) as one JSON value. NULL when it is not strict JSON, with the reason and the byte offset in
 * why ("invalid UTF-8 at byte 12"). */
cJSON *cq_json_parse_strict(const char *text, size_t len, char *why, size_t why_cap);

/* Whether v is a finite number in lo..hi (hi INFINITY: no upper bound), and a whole one when whole is set: the range
 * checks of settings read from JSON (fusion, document routing). */
bool cq_json_number_in(const cJSON *v, double lo, double hi, bool whole);

#endif
