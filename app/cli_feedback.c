/* clauseqa feedback export [--kb KB] [--out FILE]: the answers people rated (thumbs up or down on the page or over
 * the API), as an eval suite's questions.jsonl (../shared/eval/FORMAT.md, with the rating, the answer and its
 * cited clauses beside each question: app/office_export.h), so that feedback becomes test data. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "app/office_export.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa feedback export [--kb KB] [--out FILE]\n"
               "The rated answers (of KB, else of every KB), one JSON object a line in the eval suite format\n"
               "(question, answerable, gold, answers) with \"answer\", \"verdict\" (up or down), \"comment\" and\n"
               "\"cited\" (the clauses the answer cited). A thumbs-up answer's citations are its gold and its text\n"
               "a reference answer; a thumbs-down keeps both empty. To stdout unless --out.\n");
}

int cq_cmd_feedback(int argc, char **argv) {
    static const struct option opts[] = {
        {"kb", required_argument, 0, 'b'}, {"out", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *kb = NULL, *path = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'b': kb = optarg; break;
        case 'o': path = optarg; break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint("feedback");
        }
    }
    if (optind >= argc || strcmp(argv[optind], "export") || optind + 1 != argc) {
        usage(stderr);
        return 2;
    }
    cq_store *s = cq_cli_open_store(cq_cli_data_dir());
    if (!s) return 1;
    int64_t kb_id = 0;
    if (kb && !(kb_id = cq_cli_kb(s, kb, false))) {
        cq_store_close(s);
        return 1;
    }
    cq_strbuf b = {0};
    size_t n = 0;
    cq_err err = {0};
    int status = 0;
    if (cq_feedback_jsonl(s, kb_id, &b, &n, &err)) {
        fprintf(stderr, "clauseqa feedback export: %s\n", err.msg);
        status = 1;
    } else {
        FILE *f = path ? fopen(path, "w") : stdout;
        if (!f || fwrite(b.data ? b.data : "", 1, b.len, f) != b.len || (path && fclose(f))) {
            fprintf(stderr, "clauseqa feedback export: cannot write %s\n", path ? path : "stdout");
            status = 1;
        } else if (path) {
            fprintf(stderr, "%zu rated answer%s written to %s\n", n, n == 1 ? "" : "s", path);
        }
    }
    cq_strbuf_free(&b);
    cq_store_close(s);
    return status;
}
