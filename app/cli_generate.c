/* clauseqa generate PROMPT [--model PATH] [--max-tokens N] [--temperature T] ...: runs the decoder on a prompt and
 * streams the continuation to stdout. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "decoder/decoder.h"

#define MAX_STOPS 16

static void usage(FILE *f) {
    fprintf(f,
            "usage: clauseqa generate [options] PROMPT\n"
            "Continues PROMPT with the decoder and streams the text (prompt special tokens such as\n"
            "<start_of_turn> or <|im_start|> are parsed; <bos> is added where the model asks for it).\n"
            "  --model PATH            GGUF weights (default: " CQ_DECODER_DEFAULT_FILE " in the models folders:\n"
            "                          --models DIR, DATA/models, the install's; see clauseqa --help)\n"
            "  --max-tokens N          new tokens at most (default 128)\n"
            "  --temperature T         0 = greedy (default 0)\n"
            "  --top-k K, --top-p P    sampling filters (default off)\n"
            "  --repetition-penalty R  > 1 discourages repeats (default 1)\n"
            "  --seed S                sampling seed\n"
            "  --stop STR              stop before STR (repeatable)\n"
            "  --device cpu|cuda|auto  (default auto)\n"
            "  --threads N             CPU threads (default: all)\n"
            "  --exact                 CPU: float products in decode steps too (the reference; slower)\n"
            "  --adapter DIR|none      the trained adapter (default: DATA/models/answer when present)\n"
            "  --json                  print one JSON document instead of streaming\n"
            "  --chat                  PROMPT is a user message: wrapped in the model's chat format (Gemma's\n"
            "                          <start_of_turn>, or ChatML's <|im_start|> for Qwen2; from the GGUF)\n");
}

static bool print_piece(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return true;
}

/* Tokens a second, to one decimal. */
static double rate(int tokens, double seconds) {
    return seconds > 0 ? (double)(long long)(tokens / seconds * 10) / 10 : 0;
}

static int parse_float(const char *opt, const char *v, float *out) {
    char *end;
    *out = strtof(v, &end);
    if (*v == 0 || *end) {
        fprintf(stderr, "clauseqa generate: %s needs a number, not '%s'\n", opt, v);
        return -1;
    }
    return 0;
}

int cq_cmd_generate(int argc, char **argv) {
    static const struct option opts[] = {{"max-tokens", required_argument, 0, 'n'},
                                         {"temperature", required_argument, 0, 't'},
                                         {"top-k", required_argument, 0, 'k'},
                                         {"top-p", required_argument, 0, 'p'},
                                         {"repetition-penalty", required_argument, 0, 'r'},
                                         {"seed", required_argument, 0, 's'},
                                         {"stop", required_argument, 0, 'x'},
                                         {"json", no_argument, 0, 'J'},
                                         {"chat", no_argument, 0, 'C'},
                                         {"help", no_argument, 0, 'h'},
                                         CQ_CLI_DECODER_OPTIONS,
                                         {0, 0, 0, 0}};
    const char *stops[MAX_STOPS + 1] = {0};
    cq_answer_cli dec_cli = {0};
    int n_stops = 0, json = 0, chat = 0, c;
    cq_generate_params gp = cq_generate_defaults();
    gp.max_tokens = 128;
    cq_err err = {0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int a = cq_cli_answer_opt(c, optarg, &dec_cli);
        if (a < 0) return 2;
        if (a) continue;
        char *end;
        switch (c) {
        case 'n':
            gp.max_tokens = (int32_t)strtol(optarg, &end, 10);
            if (*optarg == 0 || *end || gp.max_tokens <= 0) {
                fprintf(stderr, "clauseqa generate: --max-tokens needs a positive number\n");
                return 2;
            }
            break;
        case 't': if (parse_float("--temperature", optarg, &gp.sampler.temperature)) return 2; break;
        case 'k':
            gp.sampler.top_k = (int32_t)strtol(optarg, &end, 10);
            if (*optarg == 0 || *end || gp.sampler.top_k < 0) {
                fprintf(stderr, "clauseqa generate: --top-k needs a number >= 0\n");
                return 2;
            }
            break;
        case 'p': if (parse_float("--top-p", optarg, &gp.sampler.top_p)) return 2; break;
        case 'r': if (parse_float("--repetition-penalty", optarg, &gp.sampler.repetition_penalty)) return 2; break;
        case 's': gp.sampler.seed = strtoull(optarg, NULL, 10); break;
        case 'x':
            if (n_stops == MAX_STOPS) {
                fprintf(stderr, "clauseqa generate: at most %d --stop strings\n", MAX_STOPS);
                return 2;
            }
            stops[n_stops++] = optarg;
            break;
        case 'J': json = 1; break;
        case 'C': chat = 1; break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint("generate");
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "clauseqa generate: give one PROMPT (quote it)\n");
        return cq_cli_usage_hint("generate");
    }
    if (n_stops) gp.stop = stops;
    cq_decoder *d = cq_cli_open_decoder("generate", &dec_cli);
    if (!d) return 1;
    cq_decoder_seq *s;
    if (cq_decoder_seq_new(d, 0, &s, &err)) {
        fprintf(stderr, "clauseqa generate: %s\n", err.msg);
        cq_decoder_close(d);
        return 1;
    }
    char *text = NULL, *wrapped = chat ? cq_decoder_chat_user(d, argv[optind]) : NULL;
    cq_generate_stats st;
    cq_status rc = chat && !wrapped ? cq_err_set(&err, CQ_ERR_NOMEM, "out of memory")
                                    : cq_decoder_generate(s, wrapped ? wrapped : argv[optind], &gp,
                                                          json ? NULL : print_piece, NULL, &text, &st, &err);
    free(wrapped);
    if (rc) {
        fprintf(stderr, "\nclauseqa generate: %s\n", err.msg);
    } else if (json) {
        /* the text may end inside a character (max_tokens): cq_json_print_line keeps the JSON valid */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "text", text ? text : "");
        cJSON_AddNumberToObject(o, "prompt_tokens", st.prompt_tokens);
        cJSON_AddNumberToObject(o, "new_tokens", st.new_tokens);
        cJSON_AddNumberToObject(o, "prefill_tokens_per_s", rate(st.prompt_tokens, st.prefill_s));
        cJSON_AddNumberToObject(o, "decode_tokens_per_s", rate(st.new_tokens, st.decode_s));
        cJSON_AddStringToObject(o, "device", cq_device_name(cq_decoder_get_info(d)->device));
        cJSON_AddStringToObject(o, "stopped_by",
                                st.stopped_by_string ? "stop" : st.stopped_by_eos ? "eos" : "max_tokens");
        cq_json_print_line(o, stdout);
    } else {
        printf("\n");
        fprintf(stderr, "[%d prompt tokens, %.1f tok/s prefill; %d new tokens, %.1f tok/s decode; %s]\n",
                st.prompt_tokens, st.prefill_s > 0 ? st.prompt_tokens / st.prefill_s : 0, st.new_tokens,
                st.decode_s > 0 ? st.new_tokens / st.decode_s : 0, cq_device_name(cq_decoder_get_info(d)->device));
    }
    free(text);
    cq_decoder_seq_free(s);
    cq_decoder_close(d);
    return rc ? 1 : 0;
}
