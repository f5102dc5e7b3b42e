#include "app/cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/config.h"
#include "app/ssm_vocab.h"
#include "decoder/decoder.h"
#include "core/log.h"
#include "db/db.h"
#include "store/store.h"
#include "search/vectors.h"

/* One line per command; its implementation is app/cli_<name>.c. */
int cq_cmd_ingest(int argc, char **argv);
int cq_cmd_retrieve(int argc, char **argv);
int cq_cmd_ask(int argc, char **argv);
int cq_cmd_eval(int argc, char **argv);
int cq_cmd_generate(int argc, char **argv);
int cq_cmd_perplexity(int argc, char **argv);
int cq_cmd_reindex(int argc, char **argv);
int cq_cmd_serve(int argc, char **argv);
int cq_cmd_keys(int argc, char **argv);
int cq_cmd_user(int argc, char **argv);
int cq_cmd_group(int argc, char **argv);
int cq_cmd_kb(int argc, char **argv);
int cq_cmd_doc(int argc, char **argv);
int cq_cmd_backup(int argc, char **argv);
int cq_cmd_restore(int argc, char **argv);
int cq_cmd_prompt(int argc, char **argv);
int cq_cmd_compare(int argc, char **argv);
int cq_cmd_versions(int argc, char **argv);
int cq_cmd_feedback(int argc, char **argv);

static const cq_command commands[] = {
    {"ingest", cq_cmd_ingest, "add documents (PDF, Markdown, text) to a knowledge base"},
    {"retrieve", cq_cmd_retrieve, "rank the clauses that answer a question"},
    {"ask", cq_cmd_ask, "answer a question with citations"},
    {"kb", cq_cmd_kb, "list, create and delete knowledge bases"},
    {"doc", cq_cmd_doc, "list, show and delete the documents of a knowledge base"},
    {"eval", cq_cmd_eval, "score an evaluation suite (shared/eval/FORMAT.md)"},
    {"generate", cq_cmd_generate, "continue a prompt with the decoder (streamed)"},
    {"perplexity", cq_cmd_perplexity, "perplexity of the decoder on a text file"},
    {"reindex", cq_cmd_reindex, "analyse versions again and rebuild a KB's vector index (FAISS) from SQLite"},
    {"serve", cq_cmd_serve, "serve the web page and the REST API (docs/API.md)"},
    {"keys", cq_cmd_keys, "create, list and revoke API keys"},
    {"user", cq_cmd_user, "add, list, change and remove the users who sign in to the page"},
    {"group", cq_cmd_group, "groups of users: their KB grants and members"},
    {"backup", cq_cmd_backup, "copy the data directory, consistent while the server runs"},
    {"restore", cq_cmd_restore, "restore a backup into the data directory"},
    {"prompt", cq_cmd_prompt, "print the trained decoder's prompts (cq-prompt-v1) for JSON lines"},
    {"compare", cq_cmd_compare, "compare two versions of a regulation clause by clause"},
    {"versions", cq_cmd_versions, "list and correct which documents are versions of one regulation"},
    {"feedback", cq_cmd_feedback, "export the rated answers of a KB as an eval suite's JSONL"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa [--data DIR] [--store WHERE] [--config FILE] [--models DIR] [--log-level L] COMMAND "
               "[options]\n\n"
               "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nOptions every command takes, before or after its name:\n"
               "  --data DIR      the data directory (else $CLAUSEQA_DATA, else `data =` of clauseqa.conf,\n"
               "                  else ./data)\n"
               "  --store WHERE   the store: postgresql://USER@HOST/DB (or libpq key=value …; the password in\n"
               "                  ~/.pgpass or $PGPASSFILE), or sqlite:FILE (else `store =` of clauseqa.conf,\n"
               "                  else DATA/clauseqa.db; docs/SCALE.md)\n"
               "  --config FILE   the configuration file (else $CLAUSEQA_CONFIG, else /etc/clauseqa/clauseqa.conf,\n"
               "                  else DATA/clauseqa.conf when they exist); flags override it (docs/API.md)\n"
               "  --models DIR    where the model files are looked for first (else $CLAUSEQA_MODELS, else `models =`\n"
               "                  of clauseqa.conf); then DATA/models, then the install's share/clauseqa/models\n"
               "  --log-level L   debug, info, warn, error or off (else $CLAUSEQA_LOG, else `log-level =`, else info)\n"
               "Run `clauseqa COMMAND --help` for a command's options.\n");
}

/* ---- the options every command takes ---------------------------------------------------------------------------- */

static struct {
    const char *data, *data_origin;
    const char *store; /* NULL: DATA/clauseqa.db */
    const char *models, *models_origin;
    cq_config config; /* path NULL when no file was read */
    bool models_found;
    cq_models found;
} g;

const char *cq_cli_data_dir(void) { return g.data ? g.data : "data"; }

const char *cq_cli_store_where(void) { return g.store; }

const char *cq_cli_store_name(void) {
    static char shown[512];
    if (!g.store) return cq_cli_data_dir();
    cq_db_where_redact(g.store, shown, sizeof shown);
    return shown;
}

const char *cq_cli_config_path(void) { return g.config.path; }
const cq_config *cq_cli_config(void) { return g.config.path ? &g.config : NULL; }

const cq_models *cq_cli_models(void) {
    if (!g.models_found) {
        char shared[1024];
        const char *shared_origin = NULL;
        bool has_shared = cq_models_shared_dir(shared, sizeof shared, &shared_origin);
        cq_models_find(g.models, g.models_origin, cq_cli_data_dir(), has_shared ? shared : NULL, shared_origin,
                       &g.found);
        g.models_found = true;
    }
    return &g.found;
}

/* The decoder's vocabulary for encoder weights trained on it (docs/SSM.md "Input layer"): from the decoder GGUF that
 * the models search found. */
static cq_status lend_vocab(void *ctx, const char *name, const cq_ssm_vocab **vocab, void **handle, cq_err *err) {
    (void)ctx;
    const cq_models *m = cq_cli_models();
    if (!m->decoder_origin) {
        char searched[3400] = "";
        cq_models_searched(m, searched, sizeof searched);
        *vocab = NULL;
        *handle = NULL;
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "the encoder weights read text through the decoder's vocabulary "
                          "(\"%s\"), and no decoder (%s) was found in %s", name, CQ_DECODER_DEFAULT_FILE, searched);
    }
    return cq_ssm_vocab_open_for_dense(m->decoder, name, vocab, handle, err);
}

int cq_cli_usage_hint(const char *cmd) {
    fprintf(stderr, "Run 'clauseqa %s --help' for its options.\n", cmd);
    return 2;
}

static void free_config(void) { cq_config_free(&g.config); }

typedef struct {
    const char *name;
    const char **value;
} global_option;

/* Takes the global options out of argv (anywhere before a "--"), leaving the command and its own options in order.
 * Returns -1 when they are fine, else the exit code (the problem printed). */
static int take_global_options(int *argc, char **argv, const char **data, const char **store, const char **config,
                               const char **models, const char **log_level) {
    const global_option opts[] = {{"data", data},     {"store", store},         {"config", config},
                                  {"models", models}, {"log-level", log_level}};
    int out = 1;
    bool rest = false;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (!rest && !strcmp(a, "--")) rest = true;
        size_t k = 0;
        for (; !rest && k < sizeof opts / sizeof opts[0]; k++) {
            size_t n = strlen(opts[k].name);
            if (strncmp(a, "--", 2) || strncmp(a + 2, opts[k].name, n) || (a[2 + n] && a[2 + n] != '=')) continue;
            if (a[2 + n] == '=') *opts[k].value = a + 3 + n;
            else if (i + 1 < *argc) *opts[k].value = argv[++i];
            else {
                fprintf(stderr, "clauseqa: --%s needs a value\n", opts[k].name);
                return 2;
            }
            if (!**opts[k].value) {
                fprintf(stderr, "clauseqa: --%s is empty\n", opts[k].name);
                return 2;
            }
            break;
        }
        if (rest || k == sizeof opts / sizeof opts[0]) argv[out++] = argv[i];
    }
    *argc = out;
    argv[out] = NULL;
    return -1;
}

static bool readable(const char *path) { return access(path, R_OK) == 0; }

/* Settles the data directory, the configuration file, the models folder and the log level. */
static int settle(const char *data, const char *store, const char *config, const char *models, const char *log_level) {
    const char *env_data = getenv("CLAUSEQA_DATA"), *env_config = getenv("CLAUSEQA_CONFIG"),
               *env_models = getenv("CLAUSEQA_MODELS");
    g.data = data ? data : env_data && *env_data ? env_data : NULL;
    static char in_data[1100];
    const char *path = config ? config : env_config && *env_config ? env_config : NULL;
    if (!path && readable("/etc/clauseqa/clauseqa.conf")) path = "/etc/clauseqa/clauseqa.conf";
    if (!path) {
        snprintf(in_data, sizeof in_data, "%s/clauseqa.conf", cq_cli_data_dir());
        if (readable(in_data)) path = in_data;
    }
    if (path) {
        cq_err err = {0};
        if (cq_config_load(path, &g.config, &err)) {
            fprintf(stderr, "clauseqa: %s\n", err.msg);
            return 2;
        }
        atexit(free_config);
        const char *file_data = cq_config_get(&g.config, "", "data");
        if (path == in_data && file_data) {
            fprintf(stderr, "clauseqa: %s: `data =` has no place in the data directory's own clauseqa.conf\n", path);
            return 2;
        }
        if (!g.data) g.data = file_data;
    }
    /* A password on the command line is visible to every user of the machine (ps): it belongs in ~/.pgpass. */
    if (store && cq_db_where_has_password(store)) {
        fprintf(stderr, "clauseqa: --store must not carry the password (anyone on this machine can read a command "
                        "line): put it in ~/.pgpass or the file $PGPASSFILE names\n");
        return 2;
    }
    g.store = store ? store : cq_config_get(&g.config, "", "store");
    if (models) g.models = models, g.models_origin = "--models";
    else if (env_models && *env_models) g.models = env_models, g.models_origin = "$CLAUSEQA_MODELS";
    else if ((g.models = cq_config_get(&g.config, "", "models"))) g.models_origin = "clauseqa.conf";
    const char *file_level = cq_config_get(&g.config, "", "log-level");
    const char *level = log_level ? log_level : getenv("CLAUSEQA_LOG") ? NULL : file_level;
    if (level) {
        int l = cq_log_level_parse(level);
        if (l < 0) {
            fprintf(stderr, "clauseqa: the log level is debug, info, warn, error or off, not '%s'%s%s\n", level,
                    level == file_level ? " (in " : "", level == file_level ? path : "");
            return 2;
        }
        cq_log_set_level((cq_log_level)l);
    }
    return -1;
}

int cq_cli_main(int argc, char **argv) {
    const char *data = NULL, *store = NULL, *config = NULL, *models = NULL, *log_level = NULL;
    int rc = take_global_options(&argc, argv, &data, &store, &config, &models, &log_level);
    if (rc >= 0) return rc;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("clauseqa 0.1.0\n");
        return 0;
    }
    const cq_command *cmd = NULL;
    for (size_t i = 0; i < N_COMMANDS && !cmd; i++)
        if (!strcmp(argv[1], commands[i].name)) cmd = &commands[i];
    if (!cmd) {
        fprintf(stderr, "clauseqa: %s '%s'. Run 'clauseqa --help' for the commands.\n",
                argv[1][0] == '-' ? "unknown option" : "unknown command", argv[1]);
        return 2;
    }
    if ((rc = settle(data, store, config, models, log_level)) >= 0) return rc;
    /* encoder weights trained on the decoder's vocabulary read it from the decoder's GGUF, wherever the models were
     * found (docs/SSM.md "Input layer") */
    cq_dense_set_vocab_source(lend_vocab, cq_ssm_vocab_close_for_dense, NULL);

    /* The command's argv: its name as the program ("clauseqa ask", which getopt's messages show), the flags of its
     * section of clauseqa.conf, then the command line's own (later flags override earlier ones). */
    char *from_file[64];
    size_t n_file = cq_config_flags(&g.config, cmd->name, from_file, 64);
    char **cargv = calloc((size_t)argc + n_file + 1, sizeof *cargv);
    char program[64];
    snprintf(program, sizeof program, "clauseqa %s", cmd->name);
    int cargc = 0;
    if (cargv) {
        cargv[cargc++] = program;
        for (size_t i = 0; i < n_file; i++) cargv[cargc++] = from_file[i];
        for (int i = 2; i < argc; i++) cargv[cargc++] = argv[i];
        rc = cmd->run(cargc, cargv);
    } else {
        fprintf(stderr, "clauseqa: out of memory\n");
        rc = 1;
    }
    for (size_t i = 0; i < n_file; i++) free(from_file[i]);
    free(cargv);
    return rc;
}
