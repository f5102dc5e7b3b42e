/* Dense clause vectors of a knowledge base: SQLite holds the truth (clause_vectors, doc_states; migration 2 in
 * store.c), a FAISS index per KB answers nearest-neighbour queries and can always be rebuilt from SQLite. On the
 * PostgreSQL store the same calls keep the vectors there (store/vectors.h) and each node's FAISS
 * index is a cache that its feed keeps current (search/vector_feed.h: LISTEN/NOTIFY, docs/SCALE.md "Vectors").
 *
 *   FAISS file  DATA/vectors/kb<ID>.faiss, an index whose ids are clause ids: exact inner product ("IDMap,Flat")
 *               below CQ_VECTORS_IVF_MIN vectors, the size where the flat scan stops meeting the latency target
 *               on 2 cores; an inverted file ("IVF<nlist>,Flat", nlist ≈ 4·√n, nprobe nlist/32) from there on.
 *               IVF rather than HNSW: it removes ids in place and trains in seconds, where HNSW can remove nothing
 *               and took minutes to build 150,000 vectors on 2 cores (docs/PERF.md, "SSM encoder").
 *   open        loads the file and checks its count against SQLite; a missing, unreadable or mismatched file is
 *               rebuilt from SQLite before anything is served.
 *   model       every vector row names the encoder weights that made it (cq_ssm_model_id); only rows of the
 *               model the KB is opened with are indexed, so vectors of older weights are never mixed in.
 *
 * Vectors are unit length, so the inner product is the cosine. A cq_vectors is used by one thread at a time for
 * changes; searches may run concurrently with each other (a read-write lock guards the index). */
#ifndef CQ_SEARCH_VECTORS_H
#define CQ_SEARCH_VECTORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "search/doc_route.h"
#include "search/fusion.h"
#include "store/vectors.h" /* the rows: also a KB's model, a document's clause ids, document states */
#include "store/store.h"
#include "ssm/ssm.h"

#define CQ_VECTORS_IVF_MIN 20000
#define CQ_VECTORS_FLAT_SPEC "IDMap,Flat"

/* The IVF shape for n vectors: nlist a power of two near 4·√n (64..4096), nprobe = nlist / 32 (at least 8). */
void cq_vectors_ivf_shape(size_t n, int *nlist, int *nprobe);

typedef struct cq_vectors cq_vectors;

/* Opens KB kb_id's index for vectors of `dim` floats made by `model`; rebuilds it from the store when needed. */
cq_status cq_vectors_open(cq_store *s, const char *data_dir, int64_t kb_id, const char *model, int dim,
                          cq_vectors **out, cq_err *err);
/* Saves the FAISS file when it changed, then frees. */
void cq_vectors_close(cq_vectors *v);

size_t cq_vectors_count(const cq_vectors *v);
int cq_vectors_is_ivf(const cq_vectors *v);

/* Stores n clause vectors (n × dim) in SQLite (replacing earlier ones of those clauses) and adds them to FAISS.
 * The caller's transaction, if any, covers the SQLite rows. */
cq_status cq_vectors_add(cq_vectors *v, cq_store *s, const int64_t *clause_ids, const float *vectors, size_t n,
                         cq_err *err);

/* Removes the vectors of these clauses from SQLite and FAISS (call before deleting a document's clauses, with
 * cq_vectors_doc_clause_ids; a later open repairs a missed call). */
cq_status cq_vectors_remove(cq_vectors *v, cq_store *s, const int64_t *clause_ids, size_t n, cq_err *err);

/* Up to k nearest clauses of the unit query vector: ids and scores (inner products, best first); *n_out ≤ k. */
cq_status cq_vectors_search(cq_vectors *v, const float *query, size_t k, int64_t *ids, float *scores, size_t *n_out,
                            cq_err *err);

/* Rebuilds the FAISS index from SQLite (read through s) and saves it (`clauseqa reindex`). */
cq_status cq_vectors_rebuild(cq_vectors *v, cq_store *s, cq_err *err);
cq_status cq_vectors_save(cq_vectors *v, cq_err *err);

/* ---- dense retrieval: the encoder and the KBs' indexes ----
 * Weights: weights_dir holds ssm.json + ssm.safetensors (app/models.h finds it: a models/ssm folder); the KBs'
 * FAISS files live under data_dir. Without weights (weights_dir NULL or empty) cq_dense_open fails with
 * CQ_ERR_UNSUPPORTED and a message a person can act on; the product ships no untrained weights. One cq_dense per
 * process, passed explicitly to whatever needs it: retrieval (cq_retrieve_options.dense), ingest
 * (cq_ingest_options.dense) and deletions (the forget calls below). Every call takes the caller's connection for
 * its SQLite work, so any number of connections (the server's pool and its ingestion worker) share one cq_dense;
 * questions and documents have an encoder each (each under its own lock, so an ingestion never holds up
 * questions), FAISS searches share a read lock. FAISS follows SQLite: hits whose rows the caller's connection does
 * not see (a rolled-back ingest, a deleted document) are dropped. */
typedef struct cq_dense cq_dense;
cq_status cq_dense_open(const char *data_dir, const char *weights_dir, cq_dense **out, cq_err *err);
/* Weights trained on an external input vocabulary (ssm.json "tokenizer" other than cq-hash-v1, docs/SSM.md "Input
 * layer") need it lent by the program: it registers once, before opening, how to open one by name (clauseqa:
 * app/ssm_vocab.c, "gemma3" from the decoder's GGUF where app/models.h finds it); ctx is passed back to open. The
 * handle is closed with the cq_dense. Without a source such weights are CQ_ERR_UNSUPPORTED. */
typedef cq_status (*cq_dense_vocab_open_fn)(void *ctx, const char *name, const cq_ssm_vocab **vocab, void **handle,
                                           cq_err *err);
void cq_dense_set_vocab_source(cq_dense_vocab_open_fn open, void (*close)(void *handle), void *ctx);
/* The process's dense retriever as the environment configures it (the CLI and the server use this):
 * CLAUSEQA_DENSE=on (the weights must be installed), off, or auto (unset): on when the weights are installed and
 * the encoder runs on a GPU. On the CPU, encoding every clause makes ingestion several times slower (docs/PERF.md)
 * while dense retrieval does not beat BM25 yet (docs/EVAL.md), so there it is opt-in. Off: CQ_ERR_UNSUPPORTED
 * with the reason. Documents ingested while it was off have no vectors: dense retrieval does not see them until
 * they are ingested again (replace) with it on. */
cq_status cq_dense_open_configured(const char *data_dir, const char *weights_dir, cq_dense **out, cq_err *err);
void cq_dense_close(cq_dense *d);
/* The k clauses of KB kb_id nearest the question: ids and cosine scores, best first, *n ≤ k. The KB's index is
 * opened (and checked against SQLite through s) on first use and kept. */
cq_status cq_dense_search(cq_dense *d, cq_store *s, int64_t kb_id, const char *question, size_t k, int64_t *ids,
                          float *scores, size_t *n, cq_err *err);
/* The KB's shared index (opened on first use): ingest adds and delete removes through it, so searches see them. */
cq_status cq_dense_kb(cq_dense *d, cq_store *s, int64_t kb_id, cq_vectors **out, cq_err *err);
/* Encodes a document's clauses for ingest (cq_ssm_encode_document_vec on the document encoder, under its lock);
 * doc_vector (may be NULL; the weights must have a document head) gets the document's vector. */
cq_status cq_dense_encode_document(cq_dense *d, cq_ssm_state *state, const char *const *clauses, const size_t *lens,
                                   size_t n, float *vectors, float *doc_vector, cq_err *err);
/* The same from tokens (cq_ssm_document_tokens), for several documents at once (cq_ssm_encode_tokens). */
cq_status cq_dense_encode_tokens(cq_dense *d, cq_ssm_seq *seqs, size_t n, cq_err *err);
const cq_ssm_model *cq_dense_model(cq_dense *d);
/* How retrieval fuses BM25 with these weights' vectors (search/fusion.h): the "fusion" of their ssm.json, read and
 * checked when the retriever opens (a bad one fails the open with the reason), rrf when they carry none. */
const cq_fusion *cq_dense_fusion(const cq_dense *d);
/* Document routing (search/doc_route.h): the weights' ssm.json "doc_route", or CLAUSEQA_DOC_ROUTE over it, read when
 * the retriever opened (a bad one fails the open); off when neither says. */
const cq_doc_routing *cq_dense_doc_route(const cq_dense *d);
/* The retriever's cache of the KBs' document vectors (search/doc_route.h). */
cq_doc_route_cache *cq_dense_doc_route_cache(cq_dense *d);
/* cq_dense_search for a question vector q (cq_dense_query_vector's). */
cq_status cq_dense_search_vec(cq_dense *d, cq_store *s, int64_t kb_id, const float *q, size_t k, int64_t *ids,
                              float *scores, size_t *n, cq_err *err);
/* The question's vector (d_embed floats) as cq_dense_search encodes it. */
cq_status cq_dense_query_vector(cq_dense *d, const char *question, float *q, cq_err *err);
/* Where documents are encoded (CUDA, the fast CPU path, or the reference). */
cq_ssm_backend cq_dense_backend(const cq_dense *d);
/* Keeping FAISS in step with SQLite (no-ops when d is NULL or the KB's index is not open): forget drops clause
 * ids whose rows went (or never committed); forget_doc drops a document's clauses (call before deleting it, with
 * the connection that will); forget_kb empties a KB's index (call once the KB is deleted). */
cq_status cq_dense_forget(cq_dense *d, int64_t kb_id, const int64_t *clause_ids, size_t n, cq_err *err);
cq_status cq_dense_forget_doc(cq_dense *d, cq_store *s, int64_t doc_id, cq_err *err);
void cq_dense_forget_kb(cq_dense *d, int64_t kb_id);

#endif
