/* clauseqa perplexity FILE [--model PATH] [--context N]: how well the decoder predicts a text. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "core/fileio.h"
#include "decoder/decoder.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: clauseqa perplexity [options] FILE\n"
            "Perplexity of the decoder on FILE (UTF-8 text), in windows of --context tokens, each starting with\n"
            "<bos>; every token of the text is scored once.\n"
            "  --model PATH            GGUF weights (default: " CQ_DECODER_DEFAULT_FILE " in the models folders:\n"
            "                          --models DIR, DATA/models, the install's; see clauseqa --help)\n"
            "  --context N             window in tokens (default 512)\n"
            "  --device cpu|cuda|auto  (default auto)\n"
            "  --threads N             CPU threads (default: all)\n"
            "  --exact                 CPU: float products in decode steps too (the reference; slower)\n"
            "  --adapter DIR|none      the trained adapter (default: DATA/models/answer when present)\n"
            "  --json                  print one JSON document\n");
}

int cq_cmd_perplexity(int argc, char **argv) {
    static const struct option opts[] = {{"context", required_argument, 0, 'c'}, {"json", no_argument, 0, 'J'},
                                         {"help", no_argument, 0, 'h'}, CQ_CLI_DECODER_OPTIONS, {0, 0, 0, 0}};
    cq_answer_cli dec_cli = {0};
    long context = 512;
    int json = 0, c;
    cq_err err = {0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int a = cq_cli_answer_opt(c, optarg, &dec_cli);
        if (a < 0) return 2;
        if (a) continue;
        char *end;
        switch (c) {
        case 'c':
            context = strtol(optarg, &end, 10);
            if (*optarg == 0 || *end || context < 2) {
                fprintf(stderr, "clauseqa perplexity: --context needs a number >= 2\n");
                return 2;
            }
            break;
        case 'J': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint("perplexity");
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "clauseqa perplexity: give one FILE\n");
        return cq_cli_usage_hint("perplexity");
    }
    size_t len = 0;
    char *text = NULL;
    if (cq_file_read(argv[optind], 0, &text, &len, &err)) {
        fprintf(stderr, "clauseqa perplexity: %s\n", err.msg);
        return 1;
    }
    cq_decoder *d = cq_cli_open_decoder("perplexity", &dec_cli);
    if (!d) {
        free(text);
        return 1;
    }
    cq_perplexity p;
    cq_status rc = cq_decoder_perplexity(d, text, len, (int32_t)context, &p, &err);
    if (rc) {
        fprintf(stderr, "clauseqa perplexity: %s: %s\n", argv[optind], err.msg);
    } else if (json) {
        cJSON *o = cJSON_CreateObject(); /* the file name is any bytes: cq_json_print_line keeps the JSON valid */
        cJSON_AddStringToObject(o, "file", argv[optind]);
        cJSON_AddNumberToObject(o, "perplexity", p.perplexity);
        cJSON_AddNumberToObject(o, "tokens", (double)p.n_tokens);
        cJSON_AddNumberToObject(o, "scored", (double)p.n_scored);
        cJSON_AddNumberToObject(o, "windows", p.n_windows);
        cJSON_AddNumberToObject(o, "context", (double)context);
        cJSON_AddNumberToObject(o, "tokens_per_s",
                                p.seconds > 0 ? (double)(long long)(p.n_scored / p.seconds * 10) / 10 : 0);
        cJSON_AddStringToObject(o, "device", cq_device_name(cq_decoder_get_info(d)->device));
        cq_json_print_line(o, stdout);
    } else {
        printf("perplexity %.4f over %lld tokens (%d windows of <= %ld), %.1f tokens/s on %s\n", p.perplexity,
               (long long)p.n_scored, p.n_windows, context, p.seconds > 0 ? p.n_scored / p.seconds : 0,
               cq_device_name(cq_decoder_get_info(d)->device));
    }
    cq_decoder_close(d);
    free(text);
    return rc ? 1 : 0;
}
