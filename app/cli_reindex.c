/* clauseqa reindex --kb KB [--data DIR]: analyses the versions of the KB's regulations again (store/versions.h) and
 * rebuilds the KB's FAISS index from the vectors SQLite holds. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "app/cli_common.h"
#include "search/vectors.h"
#include "store/versions.h"
#include "store/vectors.h"

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa reindex --kb KB [--data DIR]\n"
               "Analyses again which documents of KB are versions of one regulation, with their dates (a person's\n"
               "corrections are kept), and rebuilds KB's vector index (DATA/vectors/kb<ID>.faiss) from the clause\n"
               "vectors stored in SQLite, for the encoder model that wrote the most recent ones.\n");
}

int cq_cmd_reindex(int argc, char **argv) {
    static const struct option opts[] = {{"kb", required_argument, 0, 'b'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *kb = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'b': kb = optarg; break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint("reindex");
        }
    }
    if (!kb || optind < argc) {
        fprintf(stderr, "clauseqa reindex: %s\n", !kb ? "--kb is required" : "unexpected argument");
        return cq_cli_usage_hint("reindex");
    }
    const char *data_dir = cq_cli_data_dir();
    cq_store *s = cq_cli_open_store(data_dir);
    if (!s) return 1;
    int64_t kb_id = cq_cli_kb(s, kb, false);
    if (!kb_id) {
        cq_store_close(s);
        return 1;
    }
    /* versions of regulations (store/versions.h): every document analysed again, corrections kept */
    cq_err verr = {0};
    size_t analysed = 0, n_groups = 0;
    cq_version_group *groups = NULL;
    if (cq_versions_ensure(s, kb_id, true, &analysed, &verr) || cq_versions_list(s, kb_id, &groups, &n_groups, &verr)) {
        fprintf(stderr, "clauseqa reindex: versions: %s\n", verr.msg);
        cq_store_close(s);
        return 1;
    }
    for (size_t i = 0; i < n_groups; i++) cq_version_group_free(&groups[i]);
    free(groups);
    printf("KB %s: versions of %zu documents analysed; %zu regulations have several versions\n", kb, analysed,
           n_groups);
    if (cq_store_vectors_shared(s)) { /* the vectors are the store's; each node's FAISS index is a cache its feed keeps */
        printf("KB %s: the store is PostgreSQL, where each node's vector index is a cache kept current from the store "
               "(docs/SCALE.md): a node rebuilds it at its start when its file kb%lld.faiss is removed\n", kb, (long long)kb_id);
        cq_store_close(s);
        return 0;
    }
    /* the model and dimension of the KB's newest vectors */
    char model[80] = "";
    int dim = 0;
    cq_err merr = {0};
    if (cq_vectors_kb_model(s, kb_id, model, &dim, &merr)) {
        fprintf(stderr, "clauseqa reindex: %s\n", merr.msg);
        cq_store_close(s);
        return 1;
    }
    if (!*model || dim <= 0) {
        printf("KB %s has no clause vectors: nothing to index (dense retrieval needs trained encoder weights)\n", kb);
        cq_store_close(s);
        return 0;
    }
    cq_err err = {0};
    cq_vectors *v = NULL;
    int rc = 0;
    /* open repairs a mismatch itself; rebuild anyway, as asked */
    if (cq_vectors_open(s, data_dir, kb_id, model, dim, &v, &err) || cq_vectors_rebuild(v, s, &err)) {
        fprintf(stderr, "clauseqa reindex: %s\n", err.msg);
        rc = 1;
    } else {
        printf("KB %s: %zu vectors of %d (model %.12s…) indexed %s\n", kb, cq_vectors_count(v), dim, model,
               cq_vectors_is_ivf(v) ? "with an inverted file (IVF)" : "exactly (flat)");
    }
    cq_vectors_close(v);
    cq_store_close(s);
    return rc;
}
