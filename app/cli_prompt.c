/* clauseqa prompt --jsonl: the trained decoder's prompts (docs/ANSWERS.md, cq-prompt-v1) as the runtime builds
 * them (app/generate_answer.c), so that the training tools' formatter can be tested against the C code. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "app/generate_answer.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa prompt --jsonl < requests.jsonl\n"
               "Prints the trained decoder's prompts (docs/ANSWERS.md, cq-prompt-v1) exactly as the runtime builds\n"
               "them. Input lines {\"id\", \"task\": \"answer\"|\"relevance\", \"question\", \"passages\": [{\"title\",\n"
               "\"label\", \"text\"}]} (title and label may be null; a relevance prompt takes the first passage);\n"
               "output lines {\"id\", \"prompt\"} (the text after <bos>), or {\"id\", \"error\"}.\n");
}

static const char *str_field(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The prompt of one request, or NULL with the reason in *why. */
static char *prompt_of(const cJSON *in, const char **why) {
    const char *task = str_field(in, "task"), *question = str_field(in, "question");
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(in, "passages");
    if (!task || (strcmp(task, "answer") && strcmp(task, "relevance")))
        return *why = "\"task\" must be \"answer\" or \"relevance\"", NULL;
    if (!question) return *why = "each line needs a string \"question\"", NULL;
    if (!cJSON_IsArray(ps)) return *why = "\"passages\" must be an array", NULL;
    const size_t n = (size_t)cJSON_GetArraySize(ps);
    if (!strcmp(task, "relevance") && n < 1) return *why = "a relevance prompt needs a passage", NULL;
    cq_prompt_passage *pp = calloc(n + 1, sizeof *pp);
    if (!pp) return *why = "out of memory", NULL;
    size_t i = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, ps) {
        pp[i++] = (cq_prompt_passage){str_field(p, "title"), str_field(p, "label"), str_field(p, "text")};
        if (!pp[i - 1].text) {
            free(pp);
            return *why = "every passage needs a string \"text\"", NULL;
        }
    }
    char *prompt = !strcmp(task, "answer") ? cq_prompt_answer(question, pp, n, NULL) : cq_prompt_relevance(question, pp);
    free(pp);
    if (!prompt) *why = "out of memory";
    return prompt;
}

int cq_cmd_prompt(int argc, char **argv) {
    static const struct option opts[] = {{"jsonl", no_argument, 0, 'l'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int jsonl = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'l': jsonl = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!jsonl || optind != argc) {
        usage(stderr);
        return 2;
    }
    int status = 0;
    char *line;
    while ((line = cq_read_line(stdin))) {
        cJSON *in = cJSON_Parse(line);
        free(line);
        cJSON *out = cJSON_CreateObject();
        const cJSON *id = in ? cJSON_GetObjectItemCaseSensitive(in, "id") : NULL;
        cJSON_AddItemToObject(out, "id", id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
        const char *why = "not a JSON object";
        char *prompt = cJSON_IsObject(in) ? prompt_of(in, &why) : NULL;
        if (prompt) {
            cJSON_AddStringToObject(out, "prompt", prompt);
        } else {
            cJSON_AddStringToObject(out, "error", why);
            status = 1;
        }
        free(prompt);
        cJSON_Delete(in);
        cq_json_print_line(out, stdout);
        fflush(stdout);
    }
    return status;
}
