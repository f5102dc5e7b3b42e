#include "app/cli_common.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "index/vectors.h"

cq_store *cq_cli_open_store(const char *data_dir) {
    cq_err err = {0};
    if (cq_mkdirs(data_dir, &err)) {
        fprintf(stderr, "clauseqa: %s\n", err.msg);
        return NULL;
    }
    size_t n = strlen(data_dir) + 32;
    char *path = malloc(n);
    if (!path) return NULL;
    snprintf(path, n, "%s/clauseqa.db", data_dir);
    cq_store *s = NULL;
    if (cq_store_open(path, &s, &err)) fprintf(stderr, "clauseqa: %s\n", err.msg);
    free(path);
    return s;
}

cq_dense *cq_cli_open_dense(const char *data_dir) {
    cq_dense *d = NULL;
    cq_err err = {0};
    if (cq_dense_open_configured(data_dir, &d, &err) && err.code != CQ_ERR_UNSUPPORTED)
        fprintf(stderr, "clauseqa: dense retrieval off: %s\n", err.msg);
    return d;
}

int64_t cq_cli_kb(cq_store *s, const char *name, bool create) {
    cq_err err = {0};
    int64_t id = 0;
    cq_status rc = create ? cq_store_kb_ensure(s, name, &id, &err) : cq_store_kb_find(s, name, &id, &err);
    if (rc) {
        fprintf(stderr, "clauseqa: %s\n", err.msg);
        return 0;
    }
    return id;
}

char *cq_read_line(FILE *f) {
    size_t cap = 0;
    char *line = NULL;
    ssize_t n = getline(&line, &cap, f);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    return line;
}

long cq_cli_positive(const char *opt, const char *value) {
    char *end;
    long v = strtol(value, &end, 10);
    if (*value == 0 || *end || v <= 0) {
        fprintf(stderr, "clauseqa: %s needs a positive number, not '%s'\n", opt, value);
        return -1;
    }
    return v;
}

long cq_cli_count(const char *opt, const char *value) {
    char *end;
    long v = strtol(value, &end, 10);
    if (*value == 0 || *end || v < 0 || v > 1000000000L) {
        fprintf(stderr, "clauseqa: %s needs a number (0 or more), not '%s'\n", opt, value);
        return -1;
    }
    return v;
}

int cq_cli_parse_question(const char *cmd, int argc, char **argv, void (*usage)(FILE *), cq_question_cli *o) {
    static const struct option opts[] = {{"kb", required_argument, 0, 'b'},   {"k", required_argument, 0, 'k'},
                                         {"mode", required_argument, 0, 'm'}, {"data", required_argument, 0, 'd'},
                                         {"json", no_argument, 0, 'j'},       {"jsonl", no_argument, 0, 'l'},
                                         {"help", no_argument, 0, 'h'},       CQ_CLI_ANSWER_OPTIONS,
                                         {0, 0, 0, 0}};
    *o = (cq_question_cli){.k = CQ_RETRIEVE_DEFAULT_K};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int a = cq_cli_answer_opt(c, optarg, &o->answer);
        if (a < 0) return 2;
        if (a) continue;
        switch (c) {
        case 'b': o->kb = optarg; break;
        case 'k':
            if ((o->k = cq_cli_positive("--k", optarg)) < 0) return 2;
            break;
        case 'm': o->mode = optarg; break;
        case 'd': o->data = optarg; break;
        case 'j': o->json = 1; break;
        case 'l': o->jsonl = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!o->kb || (!o->jsonl && optind >= argc)) {
        fprintf(stderr, "clauseqa %s: %s\n", cmd, !o->kb ? "--kb is required" : "no question given");
        usage(stderr);
        return 2;
    }
    cq_err err = {0};
    o->modes = cq_retrieve_parse_mode(o->mode, &err);
    if (!o->modes) {
        fprintf(stderr, "clauseqa %s: %s\n", cmd, err.msg);
        return 2;
    }
    o->question = o->jsonl ? NULL : argv[optind];
    return -1;
}

int cq_cli_jsonl(cq_jsonl_fn fn, void *ctx) {
    int status = 0;
    char *line;
    while ((line = cq_read_line(stdin))) {
        cJSON *in = cJSON_Parse(line);
        free(line);
        const cJSON *id = in ? cJSON_GetObjectItem(in, "id") : NULL;
        const cJSON *q = in ? cJSON_GetObjectItem(in, "question") : NULL;
        cJSON *out = NULL;
        cq_err err = {0};
        if (!cJSON_IsString(q)) cq_err_set(&err, CQ_ERR_INVALID, "each line needs a string \"question\"");
        else out = fn(ctx, q->valuestring, &err);
        if (!out) {
            out = cJSON_CreateObject();
            cJSON_AddStringToObject(out, "error", err.msg);
            status = 1;
        }
        cJSON_AddItemToObject(out, "id", id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
        cJSON_Delete(in);
        cq_json_print_line(out, stdout);
        fflush(stdout);
    }
    return status;
}

int cq_cli_answer_opt(int c, const char *value, cq_answer_cli *a) {
    switch (c) {
    case 1000:
        if (strcmp(value, "auto") && strcmp(value, "generate") && strcmp(value, "extractive")) {
            fprintf(stderr, "clauseqa: --answers is auto, generate or extractive, not '%s'\n", value);
            return -1;
        }
        a->answers = value;
        return 1;
    case 1001: a->model = value; return 1;
    case 1002: {
        cq_device d;
        cq_err err = {0};
        if (cq_device_parse(value, &d, &err)) {
            fprintf(stderr, "clauseqa: %s\n", err.msg);
            return -1;
        }
        a->device = value;
        return 1;
    }
    case 1003: return (a->threads = cq_cli_positive("--threads", value)) < 0 ? -1 : 1;
    case 1004: a->exact = true; return 1;
    default: return 0;
    }
}

cq_decoder *cq_cli_answer_decoder(const char *cmd, const char *data_dir, const cq_answer_cli *a, int *failed) {
    *failed = 0;
    const char *mode = a->answers ? a->answers : "auto";
    if (!strcmp(mode, "extractive")) return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", data_dir, CQ_DECODER_DEFAULT_MODEL);
    if (!strcmp(mode, "auto") && !a->model && access(path, R_OK)) return NULL; /* not installed: extractive */
    cq_decoder *d = cq_cli_open_decoder(cmd, data_dir, a);
    *failed = d == NULL;
    return d;
}

cq_decoder *cq_cli_open_decoder(const char *cmd, const char *data_dir, const cq_answer_cli *a) {
    char path[4096];
    const char *model = a->model;
    if (!model) {
        snprintf(path, sizeof path, "%s/%s", data_dir, CQ_DECODER_DEFAULT_MODEL);
        model = path;
    }
    cq_decoder_options opt = {CQ_DEVICE_AUTO, (int)a->threads, a->exact};
    cq_err err = {0};
    cq_decoder *d = NULL;
    if ((a->device && cq_device_parse(a->device, &opt.device, &err)) || cq_decoder_open(model, &opt, &d, &err)) {
        fprintf(stderr, "clauseqa %s: the decoder cannot be used: %s\n", cmd, err.msg);
        return NULL;
    }
    return d;
}
