/* Pieces every CLI command uses: opening the data directory and the dense retriever, finding a KB, options and
 * JSON lines. The JSON of hits and answers is app/json.h (shared with the HTTP service). */
#ifndef CQ_APP_CLI_COMMON_H
#define CQ_APP_CLI_COMMON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "app/answer.h"
#include "app/json.h"
#include "decoder/decoder.h"
#include "search/retrieve.h"
#include "store/grants.h"
#include "store/store.h"
#include "search/vectors.h"
#include "reader/reader.h"

/* Opens DATA/clauseqa.db (creating the directory). Prints the error and returns NULL on failure. */
cq_store *cq_cli_open_store(const char *data_dir);

/* The dense retriever as CLAUSEQA_DENSE and the models folders' ssm/ configure it (search/vectors.h), or NULL when it is
 * off (a reason is printed only when the weights exist but cannot be used). Close it with cq_dense_close. */
cq_dense *cq_cli_open_dense(const char *data_dir);

/* Finds KB name (create: make it when absent). Prints the error and returns 0 on failure. */
int64_t cq_cli_kb(cq_store *s, const char *name, bool create);

/* Prints s in exactly cols terminal columns: cut by display width (a Chinese character takes two), never inside a
 * character, with "…" where it was cut; padded with spaces when shorter. */
void cq_cli_print_cell(FILE *f, const char *s, int cols);
/* Unix seconds as "2026-11-29 21:40" (UTC); "-" for 0. */
void cq_cli_format_time(int64_t t, char *out, size_t cap);

/* A grant's KBs given on the command line (store/grants.h): appends one --kb value (itself a name or names joined
 * by ',') to list (CQ_GRANT_BYTES). Prints "clauseqa CMD: too many knowledge bases" and returns non-zero when it
 * does not fit. */
int cq_cli_grant_add(char *list, const char *value, const char *cmd);
/* The command line `clauseqa user` and `clauseqa group` share: --role, --kb (repeatable), --json, --help, then an
 * action (argv[optind]) and, for the actions of `named` (a NULL-ended list), one name checked by name_valid;
 * `list` takes no name; the actions of `own` (NULL-ended; may be NULL) check their own arguments. --role and --kb
 * only with add and set (set needs --role); the role defaults to reader; the grant is checked. Returns -1 to go on
 * with *a filled, else the exit status (usage printed for --help: 0; a message on stderr: 2). actions names them in
 * "say …" when none is given. */
typedef struct {
    const char *action, *name;
    cq_key_role role;
    char kbs[CQ_GRANT_BYTES];
    bool json;
} cq_cli_principal_args;
int cq_cli_principal_parse(int argc, char **argv, const char *cmd, const char *actions, const char *const *named,
                           const char *const *own, bool (*name_valid)(const char *), void (*usage)(FILE *),
                           cq_cli_principal_args *a);

/* A grant's KBs as JSON: null for "" (admin), "*", or an array of names. */
cJSON *cq_cli_grant_json(const char *kbs);

/* An entry of the audit trail (store/audit.h) for a change made on the command line: the actor is the system user
 * ($SUDO_USER, else $USER). A failure is printed as a warning; the change stands. */
void cq_cli_audit(cq_store *s, const char *action, const char *kb, const char *target);

/* Reads one line from f (any length); returns NULL at EOF. Caller frees. */
char *cq_read_line(FILE *f);

/* A number >= 0 for option opt (0 usually: no limit), or -1 with a message on stderr. */
long cq_cli_count(const char *opt, const char *value);
/* The document limits of ingest and serve: --max-pages N and --doc-memory-mb N (0: no limit), into a reader's
 * limits (reader/reader.h); the defaults are CQ_READER_DEFAULT_MAX_PAGES and CQ_READER_DEFAULT_MAX_MB. */
#define CQ_CLI_LIMITS_HELP                                                                                         \
    "  --max-pages N       a document with more pages fails as too large (default 5000; 0: no limit)\n"          \
    "  --doc-memory-mb N   memory one document's reading may take; past it the document fails as too large\n"    \
    "                      (default 512; 0: no budget)\n"

/* Parses a positive integer option value; prints an error and returns -1 when invalid. */
long cq_cli_positive(const char *opt, const char *value);
/* Parses --ocr off|auto|force into *ocr; prints "clauseqa CMD: ..." and returns false when invalid. */
bool cq_cli_ocr(const char *cmd, const char *value, cq_reader_ocr *ocr);

/* How answers are made: --answers auto|generate|extractive, --model PATH, --device cpu|cuda|auto, --threads N,
 * --adapter DIR|none. auto generates when the decoder's weights are installed (found in the models folders,
 * app/models.h, or --model) and answers extractively otherwise, with a warning that says how to install them;
 * generate insists on them. The adapter: the folder `answer` next to the model when it is there, unless --adapter
 * says otherwise. */
typedef struct {
    const char *answers, *model, *device;
    long threads;
    bool exact; /* --exact: the CPU decoder's decode steps in float too */
    const char *adapter; /* --adapter DIR, or "none"; NULL: the default folder when present */
} cq_answer_cli;

/* The getopt_long entries for them (val 1000..1005), to append to a command's table; the decoder's own (--model
 * --device --threads --exact --adapter) serve `generate` and `perplexity` too. */
#define CQ_CLI_DECODER_OPTIONS                                                                                        \
    {"model", required_argument, 0, 1001}, {"device", required_argument, 0, 1002},                                  \
        {"threads", required_argument, 0, 1003}, {"exact", no_argument, 0, 1004},                                   \
        {"adapter", required_argument, 0, 1005}
#define CQ_CLI_ANSWER_OPTIONS {"answers", required_argument, 0, 1000}, CQ_CLI_DECODER_OPTIONS
#define CQ_CLI_ANSWER_USAGE                                                                                           \
    "  --answers MODE  generate (the decoder writes a verified answer), extractive (quoted sentences), or auto\n"     \
    "                  (default: generate when the decoder's weights are installed)\n"                                \
    "  --model PATH    decoder GGUF (default: " CQ_DECODER_DEFAULT_FILE " in the models folders, --models;\n"        \
    "                  on the GPU " CQ_DECODER_GPU_FILE " when they hold it)\n"                                   \
    "  --device D      cpu, cuda or auto (default) for the decoder; --threads N  its CPU threads\n"               \
    "  --exact         CPU decoder: float products in decode steps too (the reference; slower)\n"               \
    "  --adapter DIR   the decoder's trained adapter, or none (default: DATA/models/answer when present)\n"
/* Applies getopt value c (1000..1005) to a; returns 1 when it was one of them, 0 when not, -1 on a bad value. */
int cq_cli_answer_opt(int c, const char *value, cq_answer_cli *a);
/* The decoder the options ask for: NULL for extractive answers (and for auto without weights). *failed is set when
 * the decoder was required or its weights exist but cannot be used (message printed). */
cq_decoder *cq_cli_answer_decoder(const char *cmd, const cq_answer_cli *a, int *failed);
/* Opens the decoder --model (default: the one the models folders hold) names on --device with --threads, with the
 * adapter (--adapter, else the folder `answer` next to the model when present; one that cannot be used is logged as
 * a warning and left out); NULL with the reason printed as "clauseqa CMD: ...". */
cq_decoder *cq_cli_open_decoder(const char *cmd, const cq_answer_cli *a);
/* The warning for answers that are extractive because no folder holds the decoder's weights: where they were looked
 * for and how to install them. */
void cq_cli_warn_no_decoder(const char *cmd);
/* Logs whether d runs an adapter, and which. */
void cq_cli_log_adapter(const cq_decoder *d);

/* The options `retrieve` and `ask` share: --kb --k --mode --as-of --json --jsonl --help, the answer options, and
 * the question (the words after the options, joined by spaces). */
typedef struct {
    const char *kb, *mode; /* mode NULL: the default (CQ_RETRIEVE_DEFAULT_MODE) */
    long k;
    int modes;            /* parsed --mode */
    cq_fusion_method fusion; /* parsed --fusion (search/fusion.h); CQ_FUSION_WEIGHTS when not given */
    int json, jsonl;
    const char *question; /* NULL with --jsonl */
    cq_date as_of;        /* --as-of YYYY-MM-DD: the versions in force that day (store/versions.h); 0: none */
    cq_answer_cli answer;
} cq_question_cli;

/* The usage lines of --fusion, for the commands that take it, and its parse (2 after printing the slip). */
#define CQ_CLI_FUSION_USAGE                                                                                           \
    "  --fusion F      how BM25 and dense hits are fused: weights (default: what the encoder's ssm.json says,\n"    \
    "                  reciprocal rank when it says nothing), rrf, or keep (the weights' fitted keep fusion)\n"
int cq_cli_parse_fusion(const char *cmd, const char *s, cq_fusion_method *out);

/* The usage line of --as-of, for the commands that take it. */
#define CQ_CLI_AS_OF_USAGE                                                                                            \
    "  --as-of DAY     YYYY-MM-DD: prefer the versions of regulations in force that day (a date in the question,\n"   \
    "                  \"2020年时\", \"as of 1 March 2020\", does the same)\n"

/* Parses them for command cmd; returns -1 when the command should go on, else the exit code to return (0 after
 * --help, 2 for bad usage, with the slip and the --help hint printed). */
int cq_cli_parse_question(const char *cmd, int argc, char **argv, void (*usage)(FILE *), cq_question_cli *o);

/* Answers JSON lines {"id", "question"} from stdin: fn turns one question into the output object (or returns NULL
 * with err set, which becomes {"error": ...}); "id" is copied. Returns 0, or 1 when any line failed. */
typedef cJSON *(*cq_jsonl_fn)(void *ctx, const char *question, cq_err *err);
int cq_cli_jsonl(cq_jsonl_fn fn, void *ctx);

#endif
