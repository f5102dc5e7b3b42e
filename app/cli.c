#include "app/cli.h"

#include <stdlib.h>
#include <string.h>

#include "app/ssm_vocab.h"
#include "core/log.h"
#include "index/vectors.h"

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

static const cq_command commands[] = {
    {"ingest", cq_cmd_ingest, "add documents (PDF, Markdown, text) to a knowledge base"},
    {"retrieve", cq_cmd_retrieve, "rank the clauses that answer a question"},
    {"ask", cq_cmd_ask, "answer a question with citations"},
    {"eval", cq_cmd_eval, "score an evaluation suite (shared/eval/FORMAT.md)"},
    {"generate", cq_cmd_generate, "continue a prompt with the decoder (streamed)"},
    {"perplexity", cq_cmd_perplexity, "perplexity of the decoder on a text file"},
    {"reindex", cq_cmd_reindex, "rebuild a knowledge base's vector index (FAISS) from SQLite"},
    {"serve", cq_cmd_serve, "serve the web page and the REST API (docs/API.md)"},
    {"keys", cq_cmd_keys, "create, list and revoke API keys"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun `clauseqa COMMAND --help` for a command's options. Data directory: --data DIR, else "
               "$CLAUSEQA_DATA, else ./data\n");
}

const char *cq_cli_data_dir(const char *flag_value) {
    if (flag_value && *flag_value) return flag_value;
    const char *env = getenv("CLAUSEQA_DATA");
    if (env && *env) return env;
    return "data";
}

int cq_cli_main(int argc, char **argv) {
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
    /* encoder weights trained on the decoder's vocabulary read it from the decoder's GGUF (docs/SSM.md) */
    cq_dense_set_vocab_source(cq_ssm_vocab_open_for_dense, cq_ssm_vocab_close_for_dense);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "clauseqa: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
