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

/* The options `retrieve` and `ask` share: --kb --k --mode --data --json --jsonl --help, and the question. */
typedef struct {
    const char *kb, *data, *mode;
    long k;
    int modes;            /* parsed --mode */
    int json, jsonl;
    const char *question; /* NULL with --jsonl */
} cq_question_cli;

/* Parses them for command cmd; returns -1 when the command should go on, else the exit code to return (0 after
 * --help, 2 for bad usage, with usage printed). */
int cq_cli_parse_question(const char *cmd, int argc, char **argv, void (*usage)(FILE *), cq_question_cli *o);

/* Answers JSON lines {"id", "question"} from stdin: fn turns one question into the output object (or returns NULL
 * with err set, which becomes {"error": ...}); "id" is copied. Returns 0, or 1 when any line failed. */
typedef cJSON *(*cq_jsonl_fn)(void *ctx, const char *question, cq_err *err);
int cq_cli_jsonl(cq_jsonl_fn fn, void *ctx);

#endif
