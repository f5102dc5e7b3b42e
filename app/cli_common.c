#include "app/cli_common.h"
#include "store/audit.h"
#include "store/grants.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app/cli.h"
#include "core/fileio.h"
#include "core/json.h"
#include "core/log.h"
#include "core/utf8.h"
#include "search/vectors.h"

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
    const char *where = cq_cli_store_where();
    cq_store *s = NULL;
    if (where ? cq_store_open_uri(where, &s, &err) : cq_store_open(path, &s, &err))
        fprintf(stderr, "clauseqa: %s\n", err.msg);
    free(path);
    return s;
}

cq_dense *cq_cli_open_dense(const char *data_dir) {
    cq_dense *d = NULL;
    cq_err err = {0};
    const cq_models *m = cq_cli_models();
    if (cq_dense_open_configured(data_dir, m->encoder_origin ? m->encoder : NULL, &d, &err) &&
        err.code != CQ_ERR_UNSUPPORTED)
        fprintf(stderr, "clauseqa: dense retrieval off: %s\n", err.msg);
    return d;
}

int64_t cq_cli_kb(cq_store *s, const char *name, bool create) {
    cq_err err = {0};
    int64_t id = 0;
    cq_status rc = create ? cq_store_kb_ensure(s, name, &id, &err) : cq_store_kb_find(s, name, &id, &err);
    if (rc == CQ_ERR_NOT_FOUND) {
        cq_kb_info *kbs = NULL;
        size_t n = 0;
        cq_store_kb_list(s, &kbs, &n, &err);
        fprintf(stderr, "clauseqa: no knowledge base is named '%s'", name);
        if (n) {
            fprintf(stderr, "; there %s ", n == 1 ? "is" : "are");
            for (size_t i = 0; i < n; i++) fprintf(stderr, "%s'%s'", i ? ", " : "", kbs[i].name);
            fprintf(stderr, " (clauseqa kb list)\n");
        } else {
            fprintf(stderr, "; there is none yet in %s (clauseqa ingest --kb NAME FILE... makes one)\n",
                    cq_cli_store_name());
        }
        free(kbs);
        return 0;
    }
    if (rc) {
        fprintf(stderr, "clauseqa: %s\n", err.msg);
        return 0;
    }
    return id;
}

void cq_cli_print_cell(FILE *f, const char *s, int cols) {
    size_t n = strlen(s);
    int used;
    size_t fit = cq_utf8_fit_width(s, n, cols, &used);
    if (fit < n) {
        fit = cq_utf8_fit_width(s, n, cols - 1, &used);
        fwrite(s, 1, fit, f);
        fputs("…", f);
        used++;
    } else {
        fwrite(s, 1, fit, f);
    }
    for (; used < cols; used++) fputc(' ', f);
}

void cq_cli_format_time(int64_t t, char *out, size_t cap) {
    if (!t) {
        snprintf(out, cap, "-");
        return;
    }
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, cap, "%Y-%m-%d %H:%M", &tm);
}

int cq_cli_grant_add(char *list, const char *value, const char *cmd) {
    size_t len = strlen(list);
    int w = snprintf(list + len, CQ_GRANT_BYTES - len, "%s%s", len ? "," : "", value);
    if (w < 0 || (size_t)w >= CQ_GRANT_BYTES - len) {
        list[len] = 0;
        fprintf(stderr, "clauseqa %s: too many knowledge bases (at most %d)\n", cmd, CQ_GRANT_MAX_KBS);
        return 1;
    }
    return 0;
}

static bool one_of(const char *s, const char *const *list) {
    for (size_t i = 0; list && list[i]; i++)
        if (!strcmp(s, list[i])) return true;
    return false;
}

int cq_cli_principal_parse(int argc, char **argv, const char *cmd, const char *actions, const char *const *named,
                           const char *const *own, bool (*name_valid)(const char *), void (*usage)(FILE *),
                           cq_cli_principal_args *a) {
    static const struct option opts[] = {{"role", required_argument, 0, 'r'}, {"kb", required_argument, 0, 'k'},
                                         {"json", no_argument, 0, 'j'},       {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    const char *role = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'r': role = optarg; break;
        case 'k':
            if (cq_cli_grant_add(a->kbs, optarg, cmd)) return 2;
            break;
        case 'j': a->json = true; break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint(cmd);
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "clauseqa %s: say %s\n", cmd, actions);
        return cq_cli_usage_hint(cmd);
    }
    const char *action = a->action = argv[optind];
    bool is_named = one_of(action, named), is_own = one_of(action, own);
    if (!is_named && !is_own && strcmp(action, "list")) {
        fprintf(stderr, "clauseqa %s: unknown action '%s'\n", cmd, action);
        return cq_cli_usage_hint(cmd);
    }
    if (!is_own && argc - optind - 1 != (is_named ? 1 : 0)) {
        fprintf(stderr, is_named ? "clauseqa %s %s: give one %s name\n" : "clauseqa %s %s: takes no name\n", cmd,
                action, cmd);
        return 2;
    }
    bool grants = !strcmp(action, "add") || !strcmp(action, "set");
    if ((role || a->kbs[0]) && !grants) {
        fprintf(stderr, "clauseqa %s %s: takes no --role or --kb\n", cmd, action);
        return 2;
    }
    a->role = cq_key_role_parse(role ? role : "reader");
    if (a->role == CQ_ROLE_NONE || (!strcmp(action, "set") && !role)) {
        fprintf(stderr, "clauseqa %s %s: --role must be admin, editor or reader\n", cmd, action);
        return 2;
    }
    a->name = is_named ? argv[optind + 1] : NULL;
    if (is_named && !name_valid(a->name)) {
        fprintf(stderr, "clauseqa %s %s: invalid %s name '%s': use 1-63 bytes of letters, digits, Chinese "
                        "characters, '-', '_', '.' or '@'\n", cmd, action, cmd, a->name);
        return 2;
    }
    if (grants) {
        cq_err err = {0};
        if (cq_grants_check(a->role, a->kbs[0] ? a->kbs : NULL, cmd, NULL, &err)) {
            fprintf(stderr, "clauseqa %s %s: %s\n", cmd, action, err.msg);
            return 2;
        }
    }
    return -1;
}

cJSON *cq_cli_grant_json(const char *kbs) {
    if (!kbs || !*kbs) return cJSON_CreateNull();
    if (!strcmp(kbs, "*")) return cJSON_CreateString("*");
    cJSON *a = cJSON_CreateArray();
    char buf[CQ_GRANT_BYTES];
    snprintf(buf, sizeof buf, "%s", kbs);
    char *save = NULL;
    for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save))
        cJSON_AddItemToArray(a, cJSON_CreateString(p));
    return a;
}

void cq_cli_audit(cq_store *s, const char *action, const char *kb, const char *target) {
    cq_audit_entry e = {0};
    const char *who = getenv("SUDO_USER") && *getenv("SUDO_USER") ? getenv("SUDO_USER") : getenv("USER");
    snprintf(e.actor_kind, sizeof e.actor_kind, "cli");
    snprintf(e.actor_name, sizeof e.actor_name, "%s", who && *who ? who : "?");
    snprintf(e.action, sizeof e.action, "%s", action);
    snprintf(e.kb, sizeof e.kb, "%s", kb ? kb : "");
    snprintf(e.target, sizeof e.target, "%s", target ? target : "");
    cq_err err = {0};
    if (cq_store_audit_add(s, &e, &err)) CQ_WARN("audit: %s not recorded: %s", action, err.msg);
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

bool cq_cli_ocr(const char *cmd, const char *value, cq_reader_ocr *ocr) {
    if (cq_reader_ocr_parse(value, ocr)) return true;
    fprintf(stderr, "clauseqa %s: --ocr takes off, auto or force (not '%s')\n", cmd, value);
    return false;
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

/* The question's words joined by spaces (`clauseqa ask --kb k What law governs…` asks the whole sentence); kept
 * until the next call. */
static const char *join_words(int n, char **words) {
    static char *joined;
    free(joined);
    size_t len = 1;
    for (int i = 0; i < n; i++) len += strlen(words[i]) + 1;
    if (!(joined = malloc(len))) return NULL;
    joined[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i) strcat(joined, " ");
        strcat(joined, words[i]);
    }
    return joined;
}

int cq_cli_parse_fusion(const char *cmd, const char *s, cq_fusion_method *out) {
    cq_err err = {0};
    if (!cq_fusion_parse_method(s, out, &err)) return 0;
    fprintf(stderr, "clauseqa %s: --fusion: %s\n", cmd, err.msg);
    return 2;
}

int cq_cli_parse_question(const char *cmd, int argc, char **argv, void (*usage)(FILE *), cq_question_cli *o) {
    static const struct option opts[] = {{"kb", required_argument, 0, 'b'},   {"k", required_argument, 0, 'k'},
                                         {"mode", required_argument, 0, 'm'}, {"json", no_argument, 0, 'j'},
                                         {"jsonl", no_argument, 0, 'l'},      {"help", no_argument, 0, 'h'},
                                         {"as-of", required_argument, 0, 'a'},
                                         {"fusion", required_argument, 0, 'f'},
                                         CQ_CLI_ANSWER_OPTIONS,               {0, 0, 0, 0}};
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
        case 'f':
            if (cq_cli_parse_fusion(cmd, optarg, &o->fusion)) return 2;
            break;
        case 'j': o->json = 1; break;
        case 'l': o->jsonl = 1; break;
        case 'a':
            if (!(o->as_of = cq_date_parse_iso(optarg))) {
                fprintf(stderr, "clauseqa %s: --as-of is a day written YYYY-MM-DD, not '%s'\n", cmd, optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint(cmd);
        }
    }
    if (!o->kb || (!o->jsonl && optind >= argc) || (o->jsonl && optind < argc)) {
        fprintf(stderr, "clauseqa %s: %s\n", cmd,
                !o->kb      ? "--kb is required"
                : o->jsonl ? "--jsonl reads the questions from stdin: give none on the command line"
                           : "no question given");
        return cq_cli_usage_hint(cmd);
    }
    cq_err err = {0};
    o->modes = cq_retrieve_parse_mode(o->mode, &err);
    if (!o->modes) {
        fprintf(stderr, "clauseqa %s: %s\n", cmd, err.msg);
        return 2;
    }
    if (!o->jsonl && !(o->question = join_words(argc - optind, argv + optind))) {
        fprintf(stderr, "clauseqa %s: out of memory\n", cmd);
        return 1;
    }
    return -1;
}

int cq_cli_jsonl(cq_jsonl_fn fn, void *ctx) {
    int status = 0;
    char *line;
    while ((line = cq_read_line(stdin))) {
        char why[160];
        cJSON *in = cq_json_parse_strict(line, strlen(line), why, sizeof why); /* \u0000 would cut a question short */
        free(line);
        const cJSON *id = in ? cJSON_GetObjectItem(in, "id") : NULL;
        const cJSON *q = in ? cJSON_GetObjectItem(in, "question") : NULL;
        cJSON *out = NULL;
        cq_err err = {0};
        if (!in) cq_err_set(&err, CQ_ERR_INVALID, "the line is not valid JSON: %s", why);
        else if (!cJSON_IsString(q)) cq_err_set(&err, CQ_ERR_INVALID, "each line needs a string \"question\"");
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
    case 1005: a->adapter = value; return 1;
    default: return 0;
    }
}

void cq_cli_warn_no_decoder(const char *cmd) {
    char searched[3400];
    cq_models_searched(cq_cli_models(), searched, sizeof searched);
    fprintf(stderr,
            "clauseqa %s: warning: the decoder's weights (%s) are in none of %s, so answers are extractive (quoted "
            "sentences). Fetch them with `make setup` or `tools/fetch_model.sh DIR`, or point --models (or "
            "$CLAUSEQA_MODELS) at a folder that has them; --answers extractive says you mean it.\n",
            cmd, CQ_DECODER_DEFAULT_FILE, searched);
}

cq_decoder *cq_cli_answer_decoder(const char *cmd, const cq_answer_cli *a, int *failed) {
    *failed = 0;
    const char *mode = a->answers ? a->answers : "auto";
    if (!strcmp(mode, "extractive")) return NULL;
    if (!strcmp(mode, "auto") && !a->model && !cq_cli_models()->decoder_origin) { /* not installed: extractive */
        cq_cli_warn_no_decoder(cmd);
        return NULL;
    }
    cq_decoder *d = cq_cli_open_decoder(cmd, a);
    *failed = d == NULL;
    return d;
}

/* The adapter --adapter names, else the one next to the model made for it: the folder `answer-STEM` (STEM: the
 * model's file name without .gguf, e.g. answer-qwen2.5-coder-1.5b-instruct-q4_k_m), else `answer` (the default
 * model's), when it holds an adapter.json; NULL for none (--adapter none, or nothing there). An adapter trained on
 * another model is then refused by its base.sha256. */
static const char *adapter_dir(const char *model, const cq_answer_cli *a, char *buf, size_t cap) {
    if (a->adapter) return strcmp(a->adapter, "none") ? a->adapter : NULL;
    const char *slash = strrchr(model, '/');
    const int dir_len = slash ? (int)(slash - model + 1) : 0;
    const char *file = model + dir_len, *dot = strrchr(file, '.');
    const int stem_len = dot && !strcmp(dot, ".gguf") ? (int)(dot - file) : (int)strlen(file);
    const char *answer = strrchr(CQ_DECODER_DEFAULT_ADAPTER, '/') + 1;
    snprintf(buf, cap, "%.*s%s-%.*s/adapter.json", dir_len, model, answer, stem_len, file);
    if (access(buf, R_OK)) snprintf(buf, cap, "%.*s%s/adapter.json", dir_len, model, answer);
    if (access(buf, R_OK)) return NULL;
    *strrchr(buf, '/') = 0;
    return buf;
}

void cq_cli_log_adapter(const cq_decoder *d) {
    const cq_adapter_info *ai = cq_decoder_adapter(d);
    if (ai)
        CQ_INFO("decoder: adapter %s (steps %lld, rank %d, %d projections) from %s: trained prompt %s", ai->name,
                (long long)ai->steps, ai->rank, ai->n_adapted, ai->dir, ai->prompt_format);
    else
        CQ_INFO("decoder: no adapter (base model, few-shot prompt)");
}

cq_decoder *cq_cli_open_decoder(const char *cmd, const cq_answer_cli *a) {
    char adir[4096];
    const cq_models *m = cq_cli_models();
    cq_decoder_options opt = {CQ_DEVICE_AUTO, (int)a->threads, a->exact};
    cq_err err = {0};
    if (a->device && cq_device_parse(a->device, &opt.device, &err)) {
        fprintf(stderr, "clauseqa %s: the decoder cannot be used: %s\n", cmd, err.msg);
        return NULL;
    }
    const char *model = cq_models_reader(m, a->model, opt.device);
    if (!model) {
        char searched[3400];
        cq_models_searched(m, searched, sizeof searched);
        fprintf(stderr, "clauseqa %s: the decoder's weights (%s) are in none of %s. Fetch them with `make setup` or "
                        "`tools/fetch_model.sh DIR`, or give --models DIR or --model PATH.\n",
                cmd, CQ_DECODER_DEFAULT_FILE, searched);
        return NULL;
    }
    cq_decoder *d = NULL;
    if (cq_decoder_open(model, &opt, &d, &err)) {
        fprintf(stderr, "clauseqa %s: the decoder cannot be used: %s\n", cmd, err.msg);
        return NULL;
    }
    /* An adapter that cannot be used is a warning: answers still work with the base model and its prompt. */
    const char *dir = adapter_dir(model, a, adir, sizeof adir);
    if (dir && cq_decoder_load_adapter(d, dir, &err))
        CQ_WARN("clauseqa %s: the adapter is not used (the base model answers): %s", cmd, err.msg);
    cq_cli_log_adapter(d);
    return d;
}
