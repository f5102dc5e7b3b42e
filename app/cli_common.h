/* Pieces every CLI command uses: opening the data directory, finding a KB, JSON of hits and answers. */
#ifndef CQ_APP_CLI_COMMON_H
#define CQ_APP_CLI_COMMON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "app/answer.h"
#include "index/retrieve.h"
#include "index/store.h"

/* Opens DATA/clauseqa.db (creating the directory). Prints the error and returns NULL on failure. */
cq_store *cq_cli_open_store(const char *data_dir);

/* Finds KB name (create: make it when absent). Prints the error and returns 0 on failure. */
int64_t cq_cli_kb(cq_store *s, const char *name, bool create);

/* One retrieval result as the CLI/REST JSON contract has it (see ARCHITECTURE.md). */
cJSON *cq_json_hit(const cq_hit *h);
cJSON *cq_json_hits(const cq_hits *h);
cJSON *cq_json_answer(const cq_answer *a);

/* Prints a cJSON value on one line followed by '\n' and frees it. */
void cq_json_print_line(cJSON *v, FILE *f);

/* Reads one line from f (any length); returns NULL at EOF. Caller frees. */
char *cq_read_line(FILE *f);

/* Parses a positive integer option value; prints an error and returns -1 when invalid. */
long cq_cli_positive(const char *opt, const char *value);

#endif
