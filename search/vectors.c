/* FAISS (C API) over SQLite's clause vectors; see vectors.h. */
#include "search/vectors.h"

#include <faiss/c_api/IndexIVF_c.h>
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/MetaIndexes_c.h>
#include <faiss/c_api/error_c.h>
#include <faiss/c_api/impl/AuxIndexStructures_c.h>
#include <faiss/c_api/index_factory_c.h>
#include <faiss/c_api/index_io_c.h>
#include <dlfcn.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/grow.h"
#include "core/log.h"
#include "db/db.h"
#include "search/vector_feed.h"
#include "search/vectors_internal.h"
#include "ssm/ssm.h"
#include "store/vectors.h"

static cq_status faiss_error(cq_err *err, const char *what) {
    const char *m = faiss_get_last_error();
    return cq_err_set(err, CQ_ERR_INTERNAL, "FAISS %s: %s", what, m ? m : "failed");
}

#define SMALL_ADD 1024 /* vectors: an add below this runs on one OpenMP thread (cq_vectors_add) */

/* FAISS's matrix products go to the BLAS this program is linked with, OpenBLAS in practice. OpenBLAS starts one
 * thread per core and, after each call, keeps them spinning on sched_yield for a long while (its THREAD_TIMEOUT,
 * ~0.1 s) before they sleep; a document's add (~44 vectors against the IVF centroids) every few milliseconds
 * therefore kept 15 threads spinning through a whole ingest on the 16-core GPU box (laws-zh: 13 minutes of system
 * time in 76 s, docs/PERF.md). Here every product is small except training an IVF index, so OpenBLAS runs on the
 * calling thread (its threads sleep) and gets the cores only while fill trains and fills an index.
 * Looked up at run time: a reference BLAS has no such call and needs none. The setting is process-wide. */
static void (*blas_set_threads)(int);
static int blas_cores = 1;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_init(void) {
    *(void **)&blas_set_threads = dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    blas_cores = n > 0 ? (int)n : 1;
    if (blas_set_threads) blas_set_threads(1);
}

/* all: the cores (training an index), else the calling thread only */
static void blas_threads(bool all) {
    pthread_once(&blas_once, blas_init);
    if (blas_set_threads) blas_set_threads(all ? blas_cores : 1);
}

void cq_vectors_ivf_shape(size_t n, int *nlist, int *nprobe) {
    int l = 64;
    while (l < 4096 && l * 2 <= 4 * sqrt((double)n) * 1.41421356) l *= 2;
    *nlist = l;
    *nprobe = l / 32 < 8 ? 8 : l / 32;
}

/* A fresh, empty index for n vectors; an IVF one is trained on x (n × dim) first. */
static cq_status new_index(cq_vectors *v, size_t n, const float *x, cq_err *err) {
    if (v->index) faiss_Index_free(v->index);
    v->index = NULL;
    v->ivf = n >= CQ_VECTORS_IVF_MIN;
    if (!v->ivf) {
        if (faiss_index_factory(&v->index, v->dim, CQ_VECTORS_FLAT_SPEC, METRIC_INNER_PRODUCT))
            return faiss_error(err, "index_factory");
        return CQ_OK;
    }
    int nlist, nprobe;
    cq_vectors_ivf_shape(n, &nlist, &nprobe);
    char spec[64];
    snprintf(spec, sizeof spec, "IVF%d,Flat", nlist);
    if (faiss_index_factory(&v->index, v->dim, spec, METRIC_INNER_PRODUCT)) return faiss_error(err, "index_factory");
    if (faiss_Index_train(v->index, (idx_t)n, x)) return faiss_error(err, "train");
    faiss_IndexIVF_set_nprobe(faiss_IndexIVF_cast(v->index), (size_t)nprobe);
    return CQ_OK;
}

cq_status cq_vectors_save(cq_vectors *v, cq_err *err) {
    pthread_rwlock_rdlock(&v->lock);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", v->path, (int)getpid());
    cq_status rc = CQ_OK;
    if (faiss_write_index_fname(v->index, tmp))
        rc = faiss_error(err, "write index");
    else if (rename(tmp, v->path))
        rc = cq_err_set(err, CQ_ERR_IO, "cannot rename %s to %s", tmp, v->path);
    if (rc) unlink(tmp);
    if (!rc && v->seq >= 0) { /* the feed position, after the file it describes (vectors_internal.h) */
        char seq_path[4200], text[32];
        snprintf(seq_path, sizeof seq_path, "%s.seq", v->path);
        int len = snprintf(text, sizeof text, "%lld\n", (long long)v->seq);
        rc = cq_file_write_atomic(seq_path, text, (size_t)len, err);
    }
    if (!rc) v->dirty = 0;
    pthread_rwlock_unlock(&v->lock);
    return rc;
}

/* Replaces the index by one holding exactly these n vectors (flat or IVF by n), under the write lock. */
static cq_status fill(cq_vectors *v, const int64_t *ids, const float *x, size_t n, cq_err *err) {
    pthread_rwlock_wrlock(&v->lock);
    blas_threads(true);
    cq_status rc = new_index(v, n, x, err);
    if (!rc && n && faiss_Index_add_with_ids(v->index, (idx_t)n, x, (const idx_t *)ids)) rc = faiss_error(err, "add");
    blas_threads(false);
    v->dirty = 1;
    pthread_rwlock_unlock(&v->lock);
    return rc;
}

cq_status cq_vectors_rebuild(cq_vectors *v, cq_store *s, cq_err *err) {
    int64_t *ids = NULL, seq = -1;
    float *x = NULL;
    size_t n = 0;
    cq_status rc = cq_store_vectors_read_all(s, v->kb_id, v->model, v->dim, &ids, &x, &n, &seq, err);
    if (!rc) rc = fill(v, ids, x, n, err);
    free(ids);
    free(x);
    if (!rc && seq >= 0) { /* PostgreSQL: exactly the changes the snapshot includes */
        pthread_rwlock_wrlock(&v->lock);
        v->seq = seq;
        pthread_rwlock_unlock(&v->lock);
    }
    if (!rc) rc = cq_vectors_save(v, err);
    if (!rc && seq >= 0)
        CQ_INFO("vectors: KB %lld rebuilt from PostgreSQL: %zu vectors (%s), feed position %lld", (long long)v->kb_id,
                n, v->ivf ? "IVF" : "flat", (long long)seq);
    else if (!rc)
        CQ_INFO("vectors: KB %lld rebuilt from SQLite: %zu vectors (%s)", (long long)v->kb_id, n, v->ivf ? "IVF" : "flat");
    return rc;
}

/* An object without an index yet (DATA/vectors created; path set). */
static cq_status vectors_new(const char *data_dir, int64_t kb_id, const char *model, int dim, cq_vectors **out,
                             cq_err *err) {
    *out = NULL;
    pthread_once(&blas_once, blas_init); /* before FAISS's first product */
    if (dim <= 0 || !model || !*model || strlen(model) >= sizeof ((cq_vectors *)0)->model)
        return cq_err_set(err, CQ_ERR_INVALID, "vectors: bad dimension or model id");
    char dir[4000];
    snprintf(dir, sizeof dir, "%s/vectors", data_dir);
    cq_status rc = cq_mkdirs(dir, err);
    if (rc) return rc;
    cq_vectors *v = calloc(1, sizeof *v);
    if (!v) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    v->kb_id = kb_id;
    v->dim = dim;
    v->seq = -1;
    snprintf(v->model, sizeof v->model, "%s", model);
    pthread_rwlock_init(&v->lock, NULL);
    snprintf(v->path, sizeof v->path, "%s/kb%lld.faiss", dir, (long long)kb_id);
    *out = v;
    return CQ_OK;
}

/* The saved FAISS file when it is one of ours of dimension dim, else NULL. */
static FaissIndex *read_file(const cq_vectors *v) {
    FaissIndex *idx = NULL;
    if (access(v->path, R_OK) || faiss_read_index_fname(v->path, 0, &idx)) return NULL;
    if ((!faiss_IndexIVF_cast(idx) && !faiss_IndexIDMap_cast(idx)) || faiss_Index_d(idx) != v->dim) {
        faiss_Index_free(idx); /* not one of ours */
        return NULL;
    }
    return idx;
}

/* The loaded index, an IVF one with the search breadth for its size. */
static void adopt(cq_vectors *v, FaissIndex *idx) {
    pthread_rwlock_wrlock(&v->lock);
    if (v->index) faiss_Index_free(v->index);
    v->index = idx;
    v->ivf = faiss_IndexIVF_cast(idx) != NULL;
    if (v->ivf) {
        int nlist, nprobe;
        cq_vectors_ivf_shape((size_t)faiss_Index_ntotal(idx), &nlist, &nprobe);
        faiss_IndexIVF_set_nprobe(faiss_IndexIVF_cast(idx), (size_t)nprobe);
    }
    pthread_rwlock_unlock(&v->lock);
}

/* The seq saved beside the FAISS file (PostgreSQL), or -1. */
static int64_t read_seq_file(const cq_vectors *v) {
    char path[4200];
    snprintf(path, sizeof path, "%s.seq", v->path);
    char *data = NULL;
    size_t len = 0;
    cq_err e = {0};
    if (access(path, R_OK) || cq_file_read(path, 64, &data, &len, &e)) return -1;
    char *end;
    long long seq = strtoll(data, &end, 10);
    bool ok = end != data && (*end == '\n' || !*end) && seq >= 0;
    free(data);
    return ok ? seq : -1;
}

cq_status cq_vectors_load(cq_store *s, const char *data_dir, int64_t kb_id, const char *model, int dim,
                          cq_vectors **out, bool *rebuilt, cq_err *err) {
    *out = NULL;
    if (rebuilt) *rebuilt = false;
    cq_vectors *v = NULL;
    cq_status rc = vectors_new(data_dir, kb_id, model, dim, &v, err);
    if (rc) return rc;
    const bool shared = cq_store_vectors_shared(s);
    cq_db *db = cq_store_conn(s);
    /* PostgreSQL: one snapshot for the feed's bounds, the catch-up and the count, when the connection is free */
    const bool began = shared && !cq_db_in_transaction(db);
    if (began) rc = cq_db_exec(db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", err);
    int64_t pruned_to = 0, last = 0;
    if (!rc && shared) rc = cq_store_vector_feed_bounds(s, &pruned_to, &last, err);
    FaissIndex *idx = rc ? NULL : read_file(v);
    const int64_t file_seq = idx && shared ? read_seq_file(v) : -1;
    bool use_file = idx && (!shared || (file_seq >= pruned_to && file_seq <= last));
    if (idx && !use_file) {
        CQ_INFO("vectors: %s is at feed position %lld, the feed keeps %lld..%lld: rebuilding", v->path,
                (long long)file_seq, (long long)pruned_to, (long long)last);
        faiss_Index_free(idx);
    }
    if (!rc && use_file) {
        adopt(v, idx);
        v->seq = file_seq;
        cq_vectors *const list[] = {v};
        size_t n_rows = 0;
        if (shared) rc = cq_vectors_catch_up(s, list, 1, file_seq, NULL, NULL, err);
        if (!rc) rc = cq_store_vectors_count(s, kb_id, model, &n_rows, err);
        if (!rc && n_rows != cq_vectors_count(v)) {
            CQ_WARN("vectors: %s holds %zu vectors%s, %s %zu: rebuilding", v->path, cq_vectors_count(v),
                    shared ? " after catching up" : "", shared ? "PostgreSQL" : "SQLite", n_rows);
            use_file = false;
        }
    }
    if (!rc && !use_file) {
        rc = cq_vectors_rebuild(v, s, err);
        if (rebuilt) *rebuilt = true;
    }
    if (began) rc = cq_db_end(db, true, rc, err);
    if (rc) cq_vectors_close(v);
    else *out = v;
    return rc;
}

cq_status cq_vectors_open(cq_store *s, const char *data_dir, int64_t kb_id, const char *model, int dim,
                          cq_vectors **out, cq_err *err) {
    return cq_vectors_load(s, data_dir, kb_id, model, dim, out, NULL, err);
}

void cq_vectors_close(cq_vectors *v) {
    if (!v) return;
    if (v->dirty && v->index) {
        cq_err err = {0};
        if (cq_vectors_save(v, &err)) CQ_WARN("vectors: %s (SQLite keeps the vectors)", err.msg);
    }
    if (v->index) faiss_Index_free(v->index);
    pthread_rwlock_destroy(&v->lock);
    free(v);
}

/* Under the read lock: on PostgreSQL the node's feed replaces the index from its own thread (a rebuild). */
size_t cq_vectors_count(const cq_vectors *v) {
    cq_vectors *w = (cq_vectors *)v; /* the lock is not part of the value */
    pthread_rwlock_rdlock(&w->lock);
    size_t n = (size_t)faiss_Index_ntotal(v->index);
    pthread_rwlock_unlock(&w->lock);
    return n;
}

int cq_vectors_is_ivf(const cq_vectors *v) {
    cq_vectors *w = (cq_vectors *)v;
    pthread_rwlock_rdlock(&w->lock);
    int ivf = v->ivf;
    pthread_rwlock_unlock(&w->lock);
    return ivf;
}

static cq_status remove_from_index(cq_vectors *v, const int64_t *clause_ids, size_t n, cq_err *err) {
    if (!n) return CQ_OK;
    FaissIDSelectorBatch *sel = NULL;
    if (faiss_IDSelectorBatch_new(&sel, n, (const idx_t *)clause_ids)) return faiss_error(err, "IDSelectorBatch");
    size_t removed = 0;
    int rc = faiss_Index_remove_ids(v->index, (FaissIDSelector *)sel, &removed);
    faiss_IDSelector_free((FaissIDSelector *)sel);
    return rc ? faiss_error(err, "remove_ids") : CQ_OK;
}

cq_status cq_vectors_update(cq_vectors *v, const int64_t *remove, size_t n_remove, const int64_t *ids, const float *x,
                            size_t n, bool *rebuild, cq_err *err) {
    *rebuild = false;
    pthread_rwlock_wrlock(&v->lock);
    size_t total = (size_t)faiss_Index_ntotal(v->index) + n;
    if (!v->ivf && total >= CQ_VECTORS_IVF_MIN) { /* grown past flat: the caller trains an IVF */
        pthread_rwlock_unlock(&v->lock);
        *rebuild = true;
        return CQ_OK;
    }
    /* A document's few vectors: FAISS's OpenMP team (the IVF add and remove) and OpenBLAS's threads (the product
     * that assigns them to lists) spin against each other between such small calls, about 4x the time of the add
     * on 2 cores (tests/bench/bench_vectors_add.c); one OpenMP thread for them avoids that, as for one query in
     * cq_vectors_search. The setting is this thread's own and is put back here. */
    int omp_prev = omp_get_max_threads();
    if (n + n_remove < SMALL_ADD) omp_set_num_threads(1);
    cq_status rc = remove_from_index(v, remove, n_remove, err);
    if (!rc && n && faiss_Index_add_with_ids(v->index, (idx_t)n, x, (const idx_t *)ids)) rc = faiss_error(err, "add");
    if (n + n_remove < SMALL_ADD) omp_set_num_threads(omp_prev);
    v->dirty = 1;
    pthread_rwlock_unlock(&v->lock);
    return rc;
}

cq_status cq_vectors_add(cq_vectors *v, cq_store *s, const int64_t *clause_ids, const float *vectors, size_t n,
                         cq_err *err) {
    if (!n) return CQ_OK;
    bool replaced = true;
    cq_status rc = cq_store_vectors_store(s, v->kb_id, v->model, v->dim, clause_ids, vectors, n, &replaced, err);
    bool rebuild = false;
    /* A replaced clause must not appear twice: its old vector goes first. Clauses that had no row have no vector
     * in FAISS either (FAISS follows SQLite: every rollback and delete forgets its ids), and removing ids scans
     * the whole index (~0.3 ms an add at 64,000 vectors, tests/bench/bench_vectors_add.c): skipped for them. */
    if (!rc) rc = cq_vectors_update(v, clause_ids, replaced ? n : 0, clause_ids, vectors, n, &rebuild, err);
    if (!rc && rebuild) rc = cq_vectors_rebuild(v, s, err);
    return rc;
}

/* Removes them from FAISS only: their SQLite rows are gone already (cascade, rollback). */
static cq_status forget(cq_vectors *v, const int64_t *clause_ids, size_t n, cq_err *err) {
    pthread_rwlock_wrlock(&v->lock);
    cq_status rc = remove_from_index(v, clause_ids, n, err);
    v->dirty = 1;
    pthread_rwlock_unlock(&v->lock);
    return rc;
}

cq_status cq_vectors_remove(cq_vectors *v, cq_store *s, const int64_t *clause_ids, size_t n, cq_err *err) {
    if (!n) return CQ_OK;
    cq_status rc = cq_store_vectors_delete(s, clause_ids, n, err);
    return rc ? rc : forget(v, clause_ids, n, err);
}

cq_status cq_vectors_search(cq_vectors *v, const float *query, size_t k, int64_t *ids, float *scores, size_t *n_out,
                            cq_err *err) {
    *n_out = 0;
    if (!k) return CQ_OK;
    idx_t *labels = malloc(k * sizeof *labels);
    float *dist = malloc(k * sizeof *dist);
    cq_status rc = labels && dist ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc) {
        /* one query is too little work to share: FAISS's OpenMP team only waits on busy cores (this thread only) */
        omp_set_num_threads(1);
        pthread_rwlock_rdlock(&v->lock);
        if (faiss_Index_search(v->index, 1, query, (idx_t)k, dist, labels)) rc = faiss_error(err, "search");
        pthread_rwlock_unlock(&v->lock);
    }
    for (size_t i = 0; !rc && i < k; i++)
        if (labels[i] >= 0) {
            ids[*n_out] = labels[i];
            scores[*n_out] = dist[i];
            (*n_out)++;
        }
    free(labels);
    free(dist);
    return rc;
}

/* ---- dense retrieval ---- */

/* The KBs' indexes stay open for the life of the cq_dense (each is as large as its vectors, which are needed to
 * answer anyway); a KB's index is closed only when the KB is deleted (cq_dense_forget_kb), so a pointer handed out
 * by cq_dense_kb stays valid while the KB exists. */
struct cq_dense {
    char data_dir[4000];
    cq_ssm_model *model;
    cq_ssm_encoder *encoder;     /* questions: short, on the calling thread, under encode_mu */
    cq_ssm_encoder *doc_encoder; /* documents: long, its own workers, under doc_mu, so ingestion never holds up
                                    the questions of other threads */
    pthread_mutex_t encode_mu, doc_mu, kbs_mu;
    cq_fusion fusion;   /* how retrieval fuses BM25 with these weights' vectors: ssm.json "fusion" (rrf without) */
    cq_doc_routing route; /* document routing (search/doc_route.h): ssm.json's, or CLAUSEQA_DOC_ROUTE's; off without */
    cq_doc_route_cache *route_cache; /* the KBs' document vectors between questions */
    void *vocab_handle; /* the external input vocabulary, when the weights need one */
    cq_vectors **kbs; /* each knows its KB */
    size_t n_kbs, cap_kbs;
    cq_vector_feed *feed; /* PostgreSQL: the node's feed, started by the first cq_dense_kb; it owns the indexes */
};

/* The GPU when there is one, else the fast CPU path, else the reference; why the GPU was not used goes to why
 * (empty when it was). */
static cq_status new_encoder(const cq_ssm_model *m, int n_threads, cq_ssm_encoder **out, char why[512], cq_err *err) {
    cq_err e2 = {0};
    why[0] = 0;
    if (cq_ssm_encoder_new(m, CQ_SSM_BACKEND_CUDA, 0, out, &e2) == CQ_OK) return CQ_OK;
    memcpy(why, e2.msg, sizeof e2.msg);
    cq_err_clear(&e2);
    if (cq_ssm_encoder_new(m, CQ_SSM_BACKEND_CPU, n_threads, out, &e2) == CQ_OK) return CQ_OK;
    return cq_ssm_encoder_new(m, CQ_SSM_BACKEND_REF, 1, out, err);
}

#define CONFIG_MAX_BYTES (1u << 20) /* ssm.json, as the encoder's loader reads it */

static cq_dense_vocab_open_fn vocab_open;
static void (*vocab_close)(void *handle);
static void *vocab_ctx;

void cq_dense_set_vocab_source(cq_dense_vocab_open_fn open, void (*close)(void *handle), void *ctx) {
    vocab_open = open;
    vocab_close = close;
    vocab_ctx = ctx;
}

/* Opens the retriever; why the GPU is not used goes to why ("" when it is). */
static cq_status dense_open(const char *data_dir, const char *weights_dir, cq_dense **out, char why[512],
                            cq_err *err) {
    *out = NULL;
    why[0] = 0;
    char cfg[4200];
    const char *dir = weights_dir;
    snprintf(cfg, sizeof cfg, "%s/ssm.json", dir ? dir : "");
    if (!dir || access(cfg, R_OK))
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "dense retrieval needs trained encoder weights (ssm.json and "
                          "ssm.safetensors in a models/ssm folder); none are installed, so use --mode router,bm25");
    cq_dense *d = calloc(1, sizeof *d);
    if (!d) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    snprintf(d->data_dir, sizeof d->data_dir, "%s", data_dir);
    pthread_mutex_init(&d->encode_mu, NULL);
    pthread_mutex_init(&d->doc_mu, NULL);
    pthread_mutex_init(&d->kbs_mu, NULL);
    char tokenizer[32] = "";
    const cq_ssm_vocab *vocab = NULL;
    char *text = NULL;
    size_t len = 0;
    cq_status rc = cq_file_read(cfg, CONFIG_MAX_BYTES, &text, &len, err);
    if (!rc && (rc = cq_fusion_from_config(text, len, &d->fusion, err))) cq_err_prefix(err, "%s: ", cfg);
    if (!rc && (rc = cq_doc_routing_from_config(text, len, &d->route, err))) cq_err_prefix(err, "%s: ", cfg);
    if (!rc && (rc = cq_doc_routing_env(getenv("CLAUSEQA_DOC_ROUTE"), &d->route, err)))
        cq_err_prefix(err, "CLAUSEQA_DOC_ROUTE: ");
    if (!rc && !(d->route_cache = cq_doc_route_cache_new())) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    free(text);
    if (!rc) rc = cq_ssm_model_tokenizer(dir, tokenizer, sizeof tokenizer, err);
    if (!rc && strcmp(tokenizer, "cq-hash-v1")) {
        if (!vocab_open)
            rc = cq_err_set(err, CQ_ERR_UNSUPPORTED, "the encoder weights in %s read text through the \"%s\" "
                            "vocabulary, which this program cannot lend", dir, tokenizer);
        else
            rc = vocab_open(vocab_ctx, tokenizer, &vocab, &d->vocab_handle, err);
    }
    if (!rc) rc = cq_ssm_model_load_vocab(dir, vocab, &d->model, err);
    if (!rc && !vocab && cq_ssm_model_config(d->model)->vocab_size != CQ_SSM_VOCAB_SIZE)
        rc = cq_err_set(err, CQ_ERR_UNSUPPORTED, "encoder weights in %s have a %d-token vocabulary; text needs %d",
                        dir, cq_ssm_model_config(d->model)->vocab_size, CQ_SSM_VOCAB_SIZE);
    if (!rc) rc = new_encoder(d->model, 1, &d->encoder, why, err);
    if (!rc) rc = new_encoder(d->model, 0, &d->doc_encoder, why, err);
    if (rc) cq_dense_close(d);
    else *out = d;
    return rc;
}

/* Which device encodes is worth one line: a GPU box that silently encodes on its CPU is slow for no clear reason. */
static void log_backend(const cq_dense *d, const char *why) {
    cq_ssm_backend b = cq_dense_backend(d);
    if (b == CQ_SSM_BACKEND_CUDA) CQ_INFO("dense: SSM encoder on the GPU (cuda)");
    else CQ_INFO("dense: SSM encoder on the CPU (%s backend): no GPU encoder: %s", cq_ssm_backend_name(b), why);
    const cq_fusion *f = &d->fusion;
    if (f->method == CQ_FUSION_KEEP)
        CQ_INFO("dense: fused with BM25 by the weights' keep fusion (Chinese questions: w %g, m %d; others: w %g, "
                "m %d)%s%s", f->zh.w, f->zh.m, f->en.w, f->en.m, f->fitted_on[0] ? "; fitted on " : "", f->fitted_on);
    else if (f->method == CQ_FUSION_SCORE)
        CQ_INFO("dense: fused with BM25 by the weights' score fusion, %s (Chinese questions: w %g, m %d, c %g; others: "
                "w %g, m %d, c %g)%s%s", cq_fusion_norm_name(f->norm), f->zh.w, f->zh.m, f->zh.c, f->en.w, f->en.m,
                f->en.c, f->fitted_on[0] ? "; fitted on " : "", f->fitted_on);
    const cq_doc_routing *r = &d->route;
    if (r->source[0])
        CQ_INFO("dense: document routing (%s, %s): Chinese questions: the %zu nearest documents, + %g on their clauses; "
                "others: %zu, + %g%s%s; document vectors from %s", r->source, cq_doc_route_method_name(r->method),
                r->zh.top, r->zh.beta, r->en.top, r->en.beta, r->fitted_on[0] ? "; fitted on " : "", r->fitted_on,
                cq_ssm_model_doc_window(d->model) ? "the document head (documents ingested without it: their clause "
                "vectors' mean)" : "the mean of their clause vectors (these weights have no document head)");
}

cq_status cq_dense_open(const char *data_dir, const char *weights_dir, cq_dense **out, cq_err *err) {
    char why[512];
    cq_status rc = dense_open(data_dir, weights_dir, out, why, err);
    if (!rc) log_backend(*out, why);
    return rc;
}

cq_status cq_dense_open_configured(const char *data_dir, const char *weights_dir, cq_dense **out, cq_err *err) {
    *out = NULL;
    const char *env = getenv("CLAUSEQA_DENSE");
    const char *mode = env && *env ? env : "auto";
    if (!strcmp(mode, "off")) return cq_err_set(err, CQ_ERR_UNSUPPORTED, "CLAUSEQA_DENSE=off");
    if (strcmp(mode, "on") && strcmp(mode, "auto"))
        return cq_err_set(err, CQ_ERR_INVALID, "CLAUSEQA_DENSE is on, off or auto, not '%s'", mode);
    char why[512];
    cq_status rc = dense_open(data_dir, weights_dir, out, why, err);
    if (rc) return rc;
    if (!strcmp(mode, "on") || cq_dense_backend(*out) == CQ_SSM_BACKEND_CUDA) {
        log_backend(*out, why);
        return CQ_OK;
    }
    /* auto without a GPU: off, and one line from the caller says so (not a line that the encoder runs first) */
    cq_dense_close(*out);
    *out = NULL;
    return cq_err_set(err, CQ_ERR_UNSUPPORTED,
                      "no GPU, and encoding on the CPU makes ingestion several times slower "
                      "and the trained weights do not beat BM25 yet (docs/EVAL.md); CLAUSEQA_DENSE=on turns it on");
}

void cq_dense_close(cq_dense *d) {
    if (!d) return;
    if (d->feed) cq_vector_feed_stop(d->feed); /* closes its indexes */
    else
        for (size_t i = 0; i < d->n_kbs; i++) cq_vectors_close(d->kbs[i]);
    free(d->kbs);
    cq_ssm_encoder_free(d->encoder);
    cq_ssm_encoder_free(d->doc_encoder);
    cq_ssm_model_free(d->model);
    cq_doc_route_cache_free(d->route_cache);
    if (d->vocab_handle && vocab_close) vocab_close(d->vocab_handle);
    pthread_mutex_destroy(&d->encode_mu);
    pthread_mutex_destroy(&d->doc_mu);
    pthread_mutex_destroy(&d->kbs_mu);
    free(d);
}

cq_status cq_dense_kb(cq_dense *d, cq_store *s, int64_t kb_id, cq_vectors **out, cq_err *err) {
    pthread_mutex_lock(&d->kbs_mu);
    cq_status rc = CQ_OK;
    size_t i = 0;
    while (i < d->n_kbs && d->kbs[i]->kb_id != kb_id) i++;
    if (i == d->n_kbs) {
        if (!cq_grow((void **)&d->kbs, &d->cap_kbs, d->n_kbs + 1, sizeof *d->kbs))
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        const bool shared = cq_store_vectors_shared(s);
        const char *model = cq_ssm_model_id(d->model);
        int dim = cq_ssm_model_config(d->model)->d_embed;
        if (!rc && shared && !d->feed) rc = cq_vector_feed_start(s, d->data_dir, NULL, &d->feed, err);
        if (!rc && shared) rc = cq_vector_feed_kb(d->feed, kb_id, model, dim, &d->kbs[i], err);
        else if (!rc) rc = cq_vectors_open(s, d->data_dir, kb_id, model, dim, &d->kbs[i], err);
        if (!rc) d->n_kbs++;
    }
    *out = rc ? NULL : d->kbs[i];
    pthread_mutex_unlock(&d->kbs_mu);
    return rc;
}

/* Keeps the FAISS hits that SQLite (as s sees it) holds for this KB and model: a vector whose clause was rolled
 * back, deleted by another process, or whose id now names a clause of another KB is never served. */
static cq_status keep_stored(cq_store *s, int64_t kb_id, const char *model, int64_t *ids, float *scores, size_t *n,
                             cq_err *err) {
    size_t before = *n;
    cq_status rc = cq_store_vectors_keep_stored(s, kb_id, model, ids, scores, n, err);
    if (!rc && *n < before) CQ_WARN("vectors: KB %lld: %zu stale FAISS hits skipped", (long long)kb_id, before - *n);
    return rc;
}

cq_status cq_dense_search_vec(cq_dense *d, cq_store *s, int64_t kb_id, const float *q, size_t k, int64_t *ids,
                              float *scores, size_t *n, cq_err *err) {
    *n = 0;
    cq_vectors *v = NULL;
    cq_status rc = cq_dense_kb(d, s, kb_id, &v, err);
    if (!rc) rc = cq_vectors_search(v, q, k, ids, scores, n, err);
    if (!rc) rc = keep_stored(s, kb_id, cq_ssm_model_id(d->model), ids, scores, n, err);
    return rc;
}

cq_status cq_dense_search(cq_dense *d, cq_store *s, int64_t kb_id, const char *question, size_t k, int64_t *ids,
                          float *scores, size_t *n, cq_err *err) {
    *n = 0;
    int dim = cq_ssm_model_config(d->model)->d_embed;
    float *q = malloc((size_t)dim * sizeof *q);
    if (!q) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_status rc = cq_dense_query_vector(d, question, q, err);
    if (!rc) rc = cq_dense_search_vec(d, s, kb_id, q, k, ids, scores, n, err);
    free(q);
    return rc;
}

cq_status cq_dense_encode_document(cq_dense *d, cq_ssm_state *state, const char *const *clauses, const size_t *lens,
                                   size_t n, float *vectors, float *doc_vector, cq_err *err) {
    pthread_mutex_lock(&d->doc_mu);
    cq_status rc = cq_ssm_encode_document_vec(d->doc_encoder, state, clauses, lens, n, vectors, doc_vector, err);
    pthread_mutex_unlock(&d->doc_mu);
    return rc;
}

cq_status cq_dense_encode_tokens(cq_dense *d, cq_ssm_seq *seqs, size_t n, cq_err *err) {
    pthread_mutex_lock(&d->doc_mu);
    cq_status rc = cq_ssm_encode_tokens(d->doc_encoder, seqs, n, err);
    pthread_mutex_unlock(&d->doc_mu);
    return rc;
}

const cq_ssm_model *cq_dense_model(cq_dense *d) { return d->model; }
const cq_fusion *cq_dense_fusion(const cq_dense *d) { return &d->fusion; }
const cq_doc_routing *cq_dense_doc_route(const cq_dense *d) { return &d->route; }
cq_doc_route_cache *cq_dense_doc_route_cache(cq_dense *d) { return d->route_cache; }

cq_status cq_dense_query_vector(cq_dense *d, const char *question, float *q, cq_err *err) {
    size_t len = strlen(question);
    pthread_mutex_lock(&d->encode_mu);
    cq_status rc = cq_ssm_encode_queries(d->encoder, &question, &len, 1, q, err);
    pthread_mutex_unlock(&d->encode_mu);
    return rc;
}
cq_ssm_backend cq_dense_backend(const cq_dense *d) { return cq_ssm_encoder_backend(d->doc_encoder); }

/* The KB's index if it is open (no opening: an index opened now would be checked against SQLite anyway). */
static cq_vectors *open_kb(cq_dense *d, int64_t kb_id) {
    pthread_mutex_lock(&d->kbs_mu);
    cq_vectors *v = NULL;
    for (size_t i = 0; i < d->n_kbs && !v; i++)
        if (d->kbs[i]->kb_id == kb_id) v = d->kbs[i];
    pthread_mutex_unlock(&d->kbs_mu);
    return v;
}

cq_status cq_dense_forget(cq_dense *d, int64_t kb_id, const int64_t *clause_ids, size_t n, cq_err *err) {
    cq_vectors *v = d && n ? open_kb(d, kb_id) : NULL;
    return v ? forget(v, clause_ids, n, err) : CQ_OK;
}

cq_status cq_dense_forget_doc(cq_dense *d, cq_store *s, int64_t doc_id, cq_err *err) {
    if (!d) return CQ_OK;
    int64_t kb_id = -1;
    cq_status rc = cq_store_doc_kb(s, doc_id, &kb_id, err);
    if (rc || kb_id < 0 || !open_kb(d, kb_id)) return rc;
    int64_t *ids = NULL;
    size_t n = 0;
    rc = cq_vectors_doc_clause_ids(s, doc_id, &ids, &n, err);
    if (!rc) rc = cq_dense_forget(d, kb_id, ids, n, err);
    free(ids);
    return rc;
}

void cq_dense_forget_kb(cq_dense *d, int64_t kb_id) {
    cq_vectors *v = d ? open_kb(d, kb_id) : NULL;
    if (!v) return;
    /* Emptied, not closed: a request that looked the KB up just before it went may still hold the pointer. */
    cq_err err = {0};
    pthread_rwlock_wrlock(&v->lock);
    if (new_index(v, 0, NULL, &err)) CQ_WARN("vectors: KB %lld: %s", (long long)kb_id, err.msg);
    v->dirty = 1;
    pthread_rwlock_unlock(&v->lock);
}
