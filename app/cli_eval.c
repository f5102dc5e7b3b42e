/* clauseqa eval --kb KB --suite DIR [--k 5] [--mode hybrid] [--limit N] [--out FILE] [--json]
 *
 * Scores an evaluation suite (shared/eval/FORMAT.md): ingests the suite's documents into KB when they are not
 * there yet, then retrieves and answers every question and reports hit@1/3/5/10, MRR, answer EM / char-F1 and
 * abstention, per question type and overall. */
#include <dirent.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/answer.h"
#include "app/cli.h"
#include "app/cli_common.h"
#include "app/rerank.h"
#include "app/eval_score.h"
#include "app/ingest.h"
#include "core/clock.h"
#include "core/fileio.h"

#define EVAL_DEPTH 10 /* hit@k is reported up to 10 */

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa eval --kb KB --suite DIR [--k 5] [--mode " CQ_RETRIEVE_DEFAULT_MODE "] [--limit N]"
               " [--out FILE] [--json]\n"
               "                     [--min-coverage X] [--min-confidence X] [--refusal-min-p X] [--rerank-top-n N]\n"
               "                     [--keyless-min-confidence X] [--rerank-keep-doc 0|1|2|3]\n"
               "                     [--fusion weights|rrf|keep|score] [--reader-margin off|inf|X[,...]] [--reader-max N]\n"
               "Scores the suite in DIR (docs/ + questions.jsonl, see shared/eval/FORMAT.md). Documents not yet in KB\n"
               "are ingested first. --k is the number of clauses the answer step sees; hit@1/3/5/10 and MRR are\n"
               "always reported. --out writes one JSON line per question (with the answer's coverage, the rank of the\n"
               "clause it cites, the top 3 clauses' scores); --json prints the scores as JSON.\n"
               "--every N scores every Nth question only (a spread-out sample; --limit counts the scored ones).\n"
               "--min-coverage sets the share of question terms the best clause must hold to answer (tuning; the base\n"
               "model only). --min-confidence sets the floor below which a generated answer falls back to the\n"
               "extractive one (default 0.3 for the base model; with an adapter its adapter.json \"min_confidence\",\n"
               "else none; negative: none).\n"
               "--refusal-min-p: the trained model refuses only when it gives the refusal at least this probability\n"
               "(above 1: never; the per-question lines of --out carry refusal_p).\n"
               "--keyless-min-confidence X: an answer from a clause with none of the question's key terms is refused\n"
               "below this confidence (default 0.8; negative: never; the lines of --out carry key_terms, confidence).\n"
               "--rerank-top-n sets how many candidates mode rerank rescores (default 20 on the GPU, 3 on the CPU).\n"
               "--rerank-keep-doc 0|1|2|3: 1 puts the candidates of retrieval's top document first (in the reranker's\n"
               "order), then the others; 2 only its best candidate first; 3 as 2 when that document leads retrieval's first\n"
               "three candidates by a fifth of the first score, else the reranker's order; 0 the reranker's order alone\n"
               "(default: CLAUSEQA_RERANK_KEEP_DOC, else 3; docs/EVAL.md).\n"
               "--rerank-chars N cuts each candidate's text to N characters in its relevance prompt (at most 400);\n"
               "--rerank-sure-margin X with --rerank-sure-top-n N rescores only the first N candidates when the first\n"
               "leads the second by X of its score (docs/EVAL.md).\n"
               "--reader-margin off|inf|X: with the reranker run, the reader sees the first clause and the clauses the\n"
               "reranker judged at most X below it (inf: every judged one; off: every clause); several, comma-separated\n"
               "(at most 8), answer each question under each and print one table a setting (an answer whose reader\n"
               "passages are those of an earlier setting is reused; --out lines carry reader_margin). --reader-max N: at\n"
               "most N clauses for the reader (defaults: CLAUSEQA_READER_MARGIN, CLAUSEQA_READER_MAX; docs/API.md).\n"
               "The scores add cited_gold: the share of answerable questions with gold whose cited clause is a gold one.\n"
               CQ_CLI_FUSION_USAGE CQ_CLI_ANSWER_USAGE);
}

typedef struct {
    char name[40];
    long n_questions, n_retrieval, hits[4], n_answers, n_unanswerable, abstained_right, n_answerable,
        false_abstain, cited_gold;
    double mrr, em, f1;
} type_stats;

typedef struct {
    type_stats *v;
    size_t n;
} stats_table;

static type_stats *stats_for(stats_table *t, const char *name) {
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].name, name)) return &t->v[i];
    type_stats *p = realloc(t->v, (t->n + 1) * sizeof *p);
    if (!p) return NULL;
    t->v = p;
    memset(&p[t->n], 0, sizeof p[t->n]);
    snprintf(p[t->n].name, sizeof p[t->n].name, "%s", name);
    return &p[t->n++];
}

static const int ks[4] = {1, 3, 5, 10};

/* What an answer is scored as: on yes_no questions a verdict (the trained model's 是/否, Yes/No) is YES or NO, as
 * the suites write those answers (shared/eval/FORMAT.md); otherwise the answer text. */
static const char *eval_prediction(const cq_answer *a, const char *type) {
    if (a->verdict && !strcmp(type, "yes_no")) return strcmp(a->verdict, "yes") ? "NO" : "YES";
    return a->answer;
}

/* Ingests every document of dir/docs that KB lacks (by name). Returns the number that failed. */
static int ensure_docs(cq_store *s, const char *data_dir, int64_t kb_id, const char *dir, cq_dense *dense,
                       int quiet) {
    char path[4096];
    snprintf(path, sizeof path, "%s/docs", dir);
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "clauseqa eval: cannot open %s\n", path);
        return 1;
    }
    int failed = 0, added = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *name = cq_path_stem(e->d_name);
        cq_doc_info info;
        cq_err err = {0};
        int present = name && cq_store_doc_by_name(s, kb_id, name, &info, &err) == CQ_OK;
        if (present) {
            present = info.state == CQ_DOC_READY;
            cq_doc_info_free(&info);
        }
        free(name);
        if (present) continue;
        snprintf(path, sizeof path, "%s/docs/%s", dir, e->d_name);
        cq_ingest_result r;
        cq_ingest_options opt = {.dense = dense};
        if (cq_ingest_file(s, data_dir, kb_id, path, &opt, &r, &err)) {
            fprintf(stderr, "clauseqa eval: ingest failed: %s\n", err.msg);
            failed++;
        } else if (++added % 100 == 0 && !quiet && isatty(fileno(stderr))) {
            fprintf(stderr, "\ringested %d documents", added);
        }
    }
    closedir(d);
    if (added && !quiet) fprintf(stderr, "\ringested %d documents from %s\n", added, dir);
    return failed;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static cJSON *stats_json(const type_stats *t) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "questions", (double)t->n_questions);
    cJSON_AddNumberToObject(o, "retrieval_questions", (double)t->n_retrieval);
    for (int i = 0; i < 4; i++) {
        char key[16];
        snprintf(key, sizeof key, "hit@%d", ks[i]);
        cJSON_AddNumberToObject(o, key, t->n_retrieval ? (double)t->hits[i] / (double)t->n_retrieval : 0);
    }
    cJSON_AddNumberToObject(o, "mrr", t->n_retrieval ? t->mrr / (double)t->n_retrieval : 0);
    cJSON_AddNumberToObject(o, "cited_gold", t->n_retrieval ? (double)t->cited_gold / (double)t->n_retrieval : 0);
    cJSON_AddNumberToObject(o, "answer_questions", (double)t->n_answers);
    cJSON_AddNumberToObject(o, "em", t->n_answers ? t->em / (double)t->n_answers : 0);
    cJSON_AddNumberToObject(o, "f1", t->n_answers ? t->f1 / (double)t->n_answers : 0);
    cJSON_AddNumberToObject(o, "unanswerable", (double)t->n_unanswerable);
    cJSON_AddNumberToObject(o, "abstention_accuracy",
                            t->n_unanswerable ? (double)t->abstained_right / (double)t->n_unanswerable : 0);
    cJSON_AddNumberToObject(o, "false_abstention_rate",
                            t->n_answerable ? (double)t->false_abstain / (double)t->n_answerable : 0);
    return o;
}

static void print_row(const type_stats *t) {
    double r = t->n_retrieval ? (double)t->n_retrieval : 1, a = t->n_answers ? (double)t->n_answers : 1;
    printf("%-18s %6ld %6ld", t->name, t->n_questions, t->n_retrieval);
    for (int i = 0; i < 4; i++) printf(" %6.3f", t->hits[i] / r);
    printf(" %6.3f %6ld %6.3f %6.3f", t->mrr / r, t->n_answers, t->em / a, t->f1 / a);
    if (t->n_unanswerable) printf("  %6.3f", (double)t->abstained_right / (double)t->n_unanswerable);
    else printf("  %6s", "-");
    printf(" %6.3f\n", t->n_answerable ? (double)t->false_abstain / (double)t->n_answerable : 0);
}

static void accumulate(type_stats *dst, const type_stats *src) {
    dst->n_questions += src->n_questions;
    dst->n_retrieval += src->n_retrieval;
    for (int i = 0; i < 4; i++) dst->hits[i] += src->hits[i];
    dst->mrr += src->mrr;
    dst->n_answers += src->n_answers;
    dst->em += src->em;
    dst->f1 += src->f1;
    dst->n_unanswerable += src->n_unanswerable;
    dst->abstained_right += src->abstained_right;
    dst->n_answerable += src->n_answerable;
    dst->false_abstain += src->false_abstain;
    dst->cited_gold += src->cited_gold;
}

/* Is retrieved clause h one of the question's gold passages (shared/eval/FORMAT.md)? */
static bool is_gold(const cq_hit *h, const cJSON *gold) {
    cq_eval_passage r = {h->doc_name, h->text, h->page_first, h->page_last};
    const cJSON *g;
    cJSON_ArrayForEach(g, gold) {
        const cJSON *gd = cJSON_GetObjectItem(g, "doc"), *gp = cJSON_GetObjectItem(g, "page"),
                    *gt = cJSON_GetObjectItem(g, "text");
        cq_eval_gold gg = {cJSON_IsString(gd) ? gd->valuestring : NULL, cJSON_IsNumber(gp) ? gp->valueint : 0,
                           cJSON_IsString(gt) ? gt->valuestring : NULL};
        if (cq_eval_is_hit(&r, &gg)) return true;
    }
    return false;
}

#define MAX_READER_SETTINGS 8

/* --reader-margin's list: off (-1), inf, or positive numbers. Returns how many, 0 when one is not valid. */
static size_t parse_reader_margins(const char *arg, double *out) {
    size_t n = 0;
    const char *p = arg;
    for (;;) {
        const size_t len = strcspn(p, ",");
        char word[32];
        if (len == 0 || len >= sizeof word || n == MAX_READER_SETTINGS) return 0;
        memcpy(word, p, len);
        word[len] = 0;
        char *end = NULL;
        const double m = strcmp(word, "off") ? strtod(word, &end) : -1.0;
        if (strcmp(word, "off") && (end == word || *end || !(m > 0))) return 0;
        out[n++] = m;
        if (!p[len]) return n;
        p += len + 1;
    }
}

/* One question's answer under one reader setting, as scored. */
typedef struct {
    double em, f1;
    bool abstained, cited_gold;
    size_t reader[CQ_PROMPT_ANSWER_PASSAGES + 1]; /* the clauses the reader was shown (its first ones) */
    size_t n_reader;
} eval_result;

/* Adds result r of a question (answerable or not, with reference answers or not, with gold or not) to t. */
static void count_answer(type_stats *t, const eval_result *r, int answerable, int n_ans, bool with_gold) {
    if (!answerable) {
        t->n_unanswerable++;
        if (r->abstained) t->abstained_right++;
        return;
    }
    t->n_answerable++;
    if (r->abstained) t->false_abstain++;
    if (n_ans > 0) {
        t->n_answers++;
        t->em += r->em;
        t->f1 += r->f1;
    }
    if (with_gold && r->cited_gold) t->cited_gold++;
}

int cq_cmd_eval(int argc, char **argv) {
    static const struct option opts[] = {
        {"kb", required_argument, 0, 'b'},    {"suite", required_argument, 0, 's'}, {"k", required_argument, 0, 'k'},
        {"mode", required_argument, 0, 'm'},  {"limit", required_argument, 0, 'n'}, {"every", required_argument, 0, 'e'},
        {"out", required_argument, 0, 'o'},   {"json", no_argument, 0, 'j'},        {"help", no_argument, 0, 'h'},
        {"min-coverage", required_argument, 0, 'c'}, {"min-confidence", required_argument, 0, 'f'},
        {"rerank-top-n", required_argument, 0, 't'}, {"refusal-min-p", required_argument, 0, 'r'},
        {"fusion", required_argument, 0, 'u'}, {"keyless-min-confidence", required_argument, 0, 'y'},
        {"rerank-chars", required_argument, 0, 'C'}, {"rerank-sure-margin", required_argument, 0, 'M'},
        {"rerank-sure-top-n", required_argument, 0, 'N'}, {"rerank-keep-doc", required_argument, 0, 'K'},
        {"reader-margin", required_argument, 0, 'R'}, {"reader-max", required_argument, 0, 'X'},
        CQ_CLI_ANSWER_OPTIONS, {0, 0, 0, 0}};
    cq_answer_cli answer_cli = {0};
    const char *kb = NULL, *suite = NULL, *mode = NULL, *out_path = NULL;
    long k = CQ_RETRIEVE_DEFAULT_K, limit = 0, every = 1, rerank_top_n = 0, rerank_chars = -1, sure_top_n = -1;
    double sure_margin = -1;
    int keep_doc = 0;
    double margins[MAX_READER_SETTINGS] = {0}; /* one setting, 0: the default (the environment's) */
    size_t n_settings = 1;
    long reader_max = 0;
    double min_coverage = 0, min_confidence = 0, refusal_min_p = 0, keyless_min_confidence = 0;
    cq_fusion_method fusion = CQ_FUSION_WEIGHTS;
    int json = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int a = cq_cli_answer_opt(c, optarg, &answer_cli);
        if (a < 0) return 2;
        if (a) continue;
        switch (c) {
        case 'b': kb = optarg; break;
        case 's': suite = optarg; break;
        case 'k':
            if ((k = cq_cli_positive("--k", optarg)) < 0) return 2;
            break;
        case 'm': mode = optarg; break;
        case 'n':
            if ((limit = cq_cli_positive("--limit", optarg)) < 0) return 2;
            break;
        case 'e':
            if ((every = cq_cli_positive("--every", optarg)) < 0) return 2;
            break;
        case 'o': out_path = optarg; break;
        case 'c': min_coverage = atof(optarg); break;
        case 'f': min_confidence = atof(optarg); break;
        case 'r': refusal_min_p = atof(optarg); break;
        case 'y': keyless_min_confidence = atof(optarg); break;
        case 't':
            if ((rerank_top_n = cq_cli_positive("--rerank-top-n", optarg)) < 0) return 2;
            break;
        case 'C':
            if ((rerank_chars = cq_cli_positive("--rerank-chars", optarg)) < 0) return 2;
            break;
        case 'M': sure_margin = atof(optarg); break;
        case 'K':
            if (!(optarg[0] >= '0' && optarg[0] <= '3' && !optarg[1])) {
                fprintf(stderr, "clauseqa eval: --rerank-keep-doc takes 0, 1, 2 or 3\n");
                return 2;
            }
            keep_doc = optarg[0] == '0' ? -1 : optarg[0] - '0';
            break;
        case 'R':
            if (!(n_settings = parse_reader_margins(optarg, margins))) {
                fprintf(stderr, "clauseqa eval: --reader-margin takes off, inf or positive numbers, at most %d, "
                                "comma-separated\n", MAX_READER_SETTINGS);
                return 2;
            }
            break;
        case 'X':
            if ((reader_max = cq_cli_positive("--reader-max", optarg)) < 0) return 2;
            break;
        case 'N':
            if ((sure_top_n = cq_cli_positive("--rerank-sure-top-n", optarg)) < 0) return 2;
            break;
        case 'u':
            if (cq_cli_parse_fusion("eval", optarg, &fusion)) return 2;
            break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint("eval");
        }
    }
    if (!kb || !suite) {
        fprintf(stderr, "clauseqa eval: --kb and --suite are required\n");
        return cq_cli_usage_hint("eval");
    }
    cq_err err = {0};
    int modes = cq_retrieve_parse_mode(mode, &err);
    if (!modes) {
        fprintf(stderr, "clauseqa eval: %s\n", err.msg);
        return 2;
    }
    char qpath[4096];
    snprintf(qpath, sizeof qpath, "%s/questions.jsonl", suite);
    FILE *qf = fopen(qpath, "r");
    if (!qf) {
        fprintf(stderr, "clauseqa eval: cannot open %s\n", qpath);
        return 1;
    }
    const char *data_dir = cq_cli_data_dir();
    int dec_failed;
    cq_decoder *dec = cq_cli_answer_decoder("eval", &answer_cli, &dec_failed);
    /* --answers extractive with mode rerank: the decoder reranks only (retrieval scored without generating) */
    cq_decoder *rerank_dec = NULL;
    if (!dec && !dec_failed && (modes & CQ_RETRIEVE_RERANK) && answer_cli.answers &&
        !strcmp(answer_cli.answers, "extractive"))
        dec_failed = !(rerank_dec = cq_cli_open_decoder("eval", &answer_cli));
    cq_store *s = dec_failed ? NULL : cq_cli_open_store(data_dir);
    if (!s) {
        cq_decoder_close(dec);
        cq_decoder_close(rerank_dec);
        fclose(qf);
        return 1;
    }
    cq_dense *dense = cq_cli_open_dense(data_dir);
    int64_t kb_id = cq_cli_kb(s, kb, true);
    int status = kb_id ? 0 : 1;
    if (kb_id) {
        int failed = 0;
        /* The suite's documents, and those of the suites corpus.txt points to. */
        char cpath[4096];
        snprintf(cpath, sizeof cpath, "%s/corpus.txt", suite);
        FILE *cf = fopen(cpath, "r");
        if (cf) {
            char *line;
            while ((line = cq_read_line(cf))) {
                if (*line) {
                    char dir[4096];
                    snprintf(dir, sizeof dir, "%s/%s", suite, line);
                    failed += ensure_docs(s, data_dir, kb_id, dir, dense, json);
                }
                free(line);
            }
            fclose(cf);
        } else {
            failed += ensure_docs(s, data_dir, kb_id, suite, dense, json);
        }
        if (failed) fprintf(stderr, "clauseqa eval: %d documents failed to ingest (scored as misses)\n", failed);
    }
    FILE *out = out_path ? fopen(out_path, "w") : NULL;
    if (out_path && !out) fprintf(stderr, "clauseqa eval: cannot write %s\n", out_path);
    stats_table tables[MAX_READER_SETTINGS] = {{0}};
    double *latencies = NULL;
    size_t n_lat = 0, cap_lat = 0;
    long n = 0, seen = 0;
    char *line;
    /* Retrieval goes EVAL_DEPTH deep for hit@10; the answer step sees the same ranking. */
    cq_retrieve_options ropt = {.modes = modes, .k = EVAL_DEPTH, .dense = dense, .rerank_top_n = (size_t)rerank_top_n,
                                 .fusion = fusion};
    cq_reranker reranker = {.keep_doc = keep_doc}; /* 0: attach takes the environment's or the default */
    cq_rerank_attach(&ropt, &reranker, dec ? dec : rerank_dec, mode == NULL);
    if (rerank_chars >= 0) reranker.chars = (size_t)rerank_chars;
    if (sure_margin >= 0) reranker.sure_margin = sure_margin;
    if (sure_top_n >= 0) reranker.sure_top_n = (size_t)sure_top_n;
    cq_answer_options aopt = {.min_coverage = min_coverage,
                              .min_confidence = min_confidence, .refusal_min_p = refusal_min_p,
                              .keyless_min_confidence = keyless_min_confidence, .decoder = dec,
                              .reader_max = (size_t)reader_max};
    while (kb_id && (line = cq_read_line(qf)) && (!limit || n < limit)) {
        cJSON *q = cJSON_Parse(line);
        free(line);
        const cJSON *question = q ? cJSON_GetObjectItem(q, "question") : NULL;
        if (!cJSON_IsString(question)) {
            fprintf(stderr, "clauseqa eval: skipping a malformed line of %s\n", qpath);
            cJSON_Delete(q);
            continue;
        }
        if (seen++ % every) {
            cJSON_Delete(q);
            continue;
        }
        n++;
        const cJSON *type = cJSON_GetObjectItem(q, "type");
        const cJSON *gold = cJSON_GetObjectItem(q, "gold");
        const cJSON *answers = cJSON_GetObjectItem(q, "answers");
        int answerable = !cJSON_IsFalse(cJSON_GetObjectItem(q, "answerable"));
        const char *type_name = cJSON_IsString(type) ? type->valuestring : "unknown";
        double t0 = cq_clock_seconds();
        cq_query query;
        cq_hits hits;
        if (cq_query_parse(s, kb_id, question->valuestring, &query, &err) ||
            cq_retrieve(s, &query, &ropt, &hits, &err)) {
            fprintf(stderr, "clauseqa eval: %s\n", err.msg);
            cq_query_free(&query);
            cJSON_Delete(q);
            status = 1;
            break;
        }
        double retrieve_ms = cq_clock_ms_since(t0);
        if (n_lat == cap_lat) {
            cap_lat = cap_lat ? cap_lat * 2 : 1024;
            double *p = realloc(latencies, cap_lat * sizeof *p);
            if (p) latencies = p;
        }
        if (n_lat < cap_lat)
            latencies[n_lat++] = retrieve_ms;
        const bool with_gold = answerable && cJSON_GetArraySize(gold) > 0;
        int rank = 0;
        for (size_t i = 0; with_gold && i < hits.n && !rank; i++)
            if (is_gold(&hits.hits[i], gold)) rank = (int)i + 1;
        const int n_ans = cJSON_GetArraySize(answers);
        /* The answer step sees the first k clauses of the same ranking, as an ask with that k would, under each
         * reader setting. */
        cq_hits_truncate(&hits, (size_t)k);
        eval_result res[MAX_READER_SETTINGS];
        for (size_t si = 0; si < n_settings && !status; si++) {
            type_stats *t = stats_for(&tables[si], type_name);
            if (!t) {
                status = 1;
                break;
            }
            t->n_questions++;
            if (with_gold) {
                t->n_retrieval++;
                for (int i = 0; i < 4; i++)
                    if (rank && rank <= ks[i]) t->hits[i]++;
                if (rank) t->mrr += 1.0 / rank;
            }
            aopt.reader_margin = margins[si];
            eval_result *r = &res[si];
            memset(r, 0, sizeof *r);
            size_t *keep = malloc((hits.n ? hits.n : 1) * sizeof *keep);
            const size_t n_keep = keep ? cq_answer_reader_passages(&hits, &aopt, keep) : 0;
            for (size_t i = 0; i < n_keep && i < CQ_PROMPT_ANSWER_PASSAGES; i++) r->reader[r->n_reader++] = keep[i];
            free(keep);
            size_t same = si; /* an earlier setting whose reader saw the same clauses: the same answer */
            for (size_t sj = 0; sj < si && same == si; sj++)
                if (res[sj].n_reader == r->n_reader && !memcmp(res[sj].reader, r->reader, r->n_reader * sizeof *r->reader))
                    same = sj;
            if (same < si) {
                *r = res[same];
                count_answer(t, r, answerable, n_ans, with_gold);
                if (out) {
                    cJSON *o = cJSON_CreateObject();
                    cJSON_AddItemToObject(o, "id", cJSON_Duplicate(cJSON_GetObjectItem(q, "id"), 1));
                    cJSON_AddNumberToObject(o, "reader_margin", margins[si]);
                    cJSON_AddNumberToObject(o, "same_as", margins[same]);
                    cq_json_print_line(o, out);
                }
                continue;
            }
            cq_answer a;
            if (cq_answer_from_hits(&query, &hits, &aopt, &a, &err)) {
                fprintf(stderr, "clauseqa eval: %s\n", err.msg);
                status = 1;
                break;
            }
            double em = 0, f1 = 0;
            const cJSON *ans;
            cJSON_ArrayForEach(ans, answers) {
                if (!answerable || !cJSON_IsString(ans)) continue;
                const char *pred = a.abstained ? "" : eval_prediction(&a, t->name);
                if (cq_eval_exact(pred, ans->valuestring)) em = 1;
                double f = cq_eval_char_f1(pred, ans->valuestring);
                if (f > f1) f1 = f;
            }
            r->em = em;
            r->f1 = f1;
            r->abstained = a.abstained;
            for (size_t i = 0; with_gold && a.n_citations && i < a.hits.n && !r->cited_gold; i++)
                if (a.hits.hits[i].clause_id == a.citations[0].clause_id) r->cited_gold = is_gold(&a.hits.hits[i], gold);
            count_answer(t, r, answerable, n_ans, with_gold);
            if (out) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddItemToObject(o, "id", cJSON_Duplicate(cJSON_GetObjectItem(q, "id"), 1));
                if (n_settings > 1 || margins[0] != 0) cJSON_AddNumberToObject(o, "reader_margin", margins[si]);
                cJSON_AddNumberToObject(o, "rank", rank);
                cJSON_AddNumberToObject(o, "em", em);
                cJSON_AddNumberToObject(o, "f1", f1);
                cJSON *ja = cq_json_answer(&a);
                cJSON_AddItemToObject(o, "prediction", ja);
                if (a.refusal_p > 0) cJSON_AddNumberToObject(o, "refusal_p", a.refusal_p);
                if (a.key_terms >= 0) cJSON_AddNumberToObject(o, "key_terms", a.key_terms);
                if (a.key_terms_sentence >= 0) cJSON_AddNumberToObject(o, "key_terms_sentence", a.key_terms_sentence);
                if (a.tokens_generated) cJSON_AddNumberToObject(o, "n_key_terms", a.n_key_terms);
                if (a.tokens_generated) cJSON_AddNumberToObject(o, "confidence", a.confidence);
                /* retrieval's side of the refusal (tools/decoder_train/refusal_rule.py): the share of the question's
                 * terms in the best clause, and which retrieved clause (1-based, 0: none) the answer cites */
                cJSON_AddNumberToObject(o, "coverage", a.coverage);
                int cited = 0;
                for (size_t i = 0; a.n_citations && i < a.hits.n && !cited; i++)
                    if (a.hits.hits[i].clause_id == a.citations[0].clause_id) cited = (int)i + 1;
                cJSON_AddNumberToObject(o, "cited", cited);
                cJSON_AddBoolToObject(o, "cited_gold", r->cited_gold);
                cJSON_AddNumberToObject(o, "reader", (double)r->n_reader); /* clauses the reader was shown, at most 5 */
                cJSON *top = cJSON_CreateArray();
                for (size_t i = 0; i < a.hits.n && i < 3; i++) {
                    cJSON *h = cJSON_CreateObject();
                    cJSON_AddStringToObject(h, "doc", a.hits.hits[i].doc_name);
                    cJSON_AddStringToObject(h, "path", a.hits.hits[i].path ? a.hits.hits[i].path : "");
                    cJSON_AddNumberToObject(h, "score", a.hits.hits[i].score);
                    if (a.hits.hits[i].reranked) cJSON_AddNumberToObject(h, "relevance", a.hits.hits[i].relevance);
                    cJSON_AddItemToArray(top, h);
                }
                cJSON_AddItemToObject(o, "top", top);
                cq_json_print_line(o, out);
            }
            hits = a.hits; /* the clauses back, for the next setting */
            memset(&a.hits, 0, sizeof a.hits);
            cq_answer_free(&a);
        }
        cq_hits_free(&hits);
        cq_query_free(&query);
        cJSON_Delete(q);
        if (status) break;
    }
    fclose(qf);
    if (out) fclose(out);
    double p50 = 0, p95 = 0;
    if (n_lat) {
        qsort(latencies, n_lat, sizeof *latencies, cmp_double);
        p50 = latencies[n_lat / 2];
        p95 = latencies[(size_t)floor(0.95 * (double)(n_lat - 1))];
    }
    for (size_t si = 0; si < n_settings; si++) {
        const stats_table *table = &tables[si];
        type_stats all = {.name = "all"};
        for (size_t i = 0; i < table->n; i++) accumulate(&all, &table->v[i]);
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "suite", suite);
            cJSON_AddStringToObject(o, "kb", kb);
            cJSON_AddStringToObject(o, "mode", mode ? mode : CQ_RETRIEVE_DEFAULT_MODE);
            if (n_settings > 1 || margins[0] != 0) cJSON_AddNumberToObject(o, "reader_margin", margins[si]);
            cJSON *types = cJSON_CreateObject();
            for (size_t i = 0; i < table->n; i++)
                cJSON_AddItemToObject(types, table->v[i].name, stats_json(&table->v[i]));
            cJSON_AddItemToObject(o, "types", types);
            cJSON_AddItemToObject(o, "all", stats_json(&all));
            cJSON_AddNumberToObject(o, "retrieve_ms_p50", p50);
            cJSON_AddNumberToObject(o, "retrieve_ms_p95", p95);
            cq_json_print_line(o, stdout);
        } else if (kb_id) {
            printf("suite %s  (kb %s, mode %s, %s answers from top %ld)\n", suite, kb,
                   mode ? mode : CQ_RETRIEVE_DEFAULT_MODE, dec ? "generated" : "extractive", k);
            if (n_settings > 1 || margins[0] != 0) printf("reader margin %g\n", margins[si]);
            printf("%-18s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s  %6s %6s\n", "type", "n", "n_ret", "hit@1", "hit@3",
                   "hit@5", "hit@10", "MRR", "n_ans", "EM", "F1", "abst", "falseA");
            for (size_t i = 0; i < table->n; i++) print_row(&table->v[i]);
            print_row(&all);
            printf("cited clause is gold: %.3f of %ld answerable questions with gold\n",
                   all.n_retrieval ? (double)all.cited_gold / (double)all.n_retrieval : 0, all.n_retrieval);
        }
    }
    if (!json && kb_id) printf("retrieve latency: p50 %.1f ms, p95 %.1f ms over %zu questions\n", p50, p95, n_lat);
    free(latencies);
    for (size_t si = 0; si < MAX_READER_SETTINGS; si++) free(tables[si].v);
    cq_store_close(s);
    cq_dense_close(dense);
    cq_decoder_close(dec);
    cq_decoder_close(rerank_dec);
    return status;
}
