/* The service's state for operators: GET /api/v1/health (JSON) and its families of GET /metrics (Prometheus). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/json.h"
#include "app/service_internal.h"
#include "core/clock.h"
#include "ssm/ssm.h"

/* Which model files were found where: {"files": {"decoder": {"path", "from"} | null, "decoder_gpu": ..., "encoder":
 * ...}, "searched": [{"dir", "from"}]} (decoder_gpu: the GPU's reader, app/models.h). */
static void add_model_files(cJSON *m, const cq_models *found) {
    if (!found) return;
    cJSON *files = cJSON_AddObjectToObject(m, "files");
    const char *names[3] = {"decoder", "decoder_gpu", "encoder"};
    const char *paths[3] = {found->decoder, found->decoder_gpu, found->encoder};
    const char *origins[3] = {found->decoder_origin, found->decoder_gpu_origin, found->encoder_origin};
    for (int i = 0; i < 3; i++) {
        cJSON *f = origins[i] ? cJSON_CreateObject() : cJSON_CreateNull();
        if (origins[i]) {
            cJSON_AddStringToObject(f, "path", paths[i]);
            cJSON_AddStringToObject(f, "from", origins[i]);
        }
        cJSON_AddItemToObject(files, names[i], f);
    }
    cJSON *searched = cJSON_AddArrayToObject(m, "searched");
    for (size_t i = 0; i < found->n_dirs; i++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "dir", found->dirs[i].dir);
        cJSON_AddStringToObject(d, "from", found->dirs[i].origin);
        cJSON_AddItemToArray(searched, d);
    }
}

static cq_status svc_health(void *ctx, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_kb_info *kbs;
    size_t n;
    cq_status rc = cq_svc_kb_list(s, &kbs, &n, err);
    if (rc) return rc;
    int64_t docs = 0;
    for (size_t i = 0; i < n; i++) docs += kbs[i].n_documents;
    free(kbs);
    int64_t running;
    size_t queued = cq_svc_queue_depth(s, &running);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "ok");
    cJSON_AddStringToObject(o, "version", "0.1.0");
    cJSON_AddNumberToObject(o, "uptime_s", (double)(long long)(cq_clock_seconds() - s->started_at));
    cJSON_AddBoolToObject(o, "auth", !cq_service_open_mode(s));
    cJSON_AddNumberToObject(o, "kbs", (double)n);
    cJSON_AddNumberToObject(o, "documents", (double)docs);
    cJSON *q = cJSON_AddObjectToObject(o, "ingest_queue");
    cJSON_AddNumberToObject(q, "queued", (double)queued);
    cJSON_AddItemToObject(q, "running_job", running ? cJSON_CreateNumber((double)running) : cJSON_CreateNull());
    cJSON *m = cJSON_AddObjectToObject(o, "models");
    cJSON_AddStringToObject(m, "answers", s->decoder ? "generated" : "extractive");
    cJSON_AddBoolToObject(m, "decoder_loaded", s->decoder != NULL);
    if (s->decoder) {
        const cq_decoder_info *di = cq_decoder_get_info(s->decoder);
        cJSON_AddStringToObject(m, "decoder", di->name);
        cJSON_AddStringToObject(m, "decoder_device", cq_device_name(di->device));
        const cq_adapter_info *ai = cq_decoder_adapter(s->decoder);
        cJSON *ad = ai ? cJSON_AddObjectToObject(m, "adapter") : cJSON_AddNullToObject(m, "adapter");
        if (ai) {
            cJSON_AddStringToObject(ad, "name", ai->name);
            cJSON_AddItemToObject(ad, "steps", ai->steps >= 0 ? cJSON_CreateNumber((double)ai->steps) : cJSON_CreateNull());
            cJSON_AddNumberToObject(ad, "rank", ai->rank);
            cJSON_AddStringToObject(ad, "prompt_format", ai->prompt_format);
        }
    }
    cJSON_AddBoolToObject(m, "encoder_loaded", s->dense != NULL);
    if (s->dense) cJSON_AddStringToObject(m, "encoder_device", cq_ssm_backend_name(cq_dense_backend(s->dense)));
    add_model_files(m, s->models);
    cJSON_AddItemToObject(o, "formats", cq_json_formats());
    cJSON *ocr = cJSON_AddObjectToObject(o, "ocr"); /* for uploads that do not choose (docs/API.md) */
    cJSON_AddStringToObject(ocr, "default", cq_reader_ocr_name(s->ocr));
    cJSON_AddStringToObject(ocr, "languages", CQ_OCR_LANGUAGES);
    *out = o;
    return CQ_OK;
}

static void svc_metrics(void *ctx, cq_strbuf *b) {
    cq_service *s = ctx;
    int64_t running;
    size_t queued = cq_svc_queue_depth(s, &running);
    double pages = (double)atomic_load(&s->ingest_pages), ms = (double)atomic_load(&s->ingest_ms);
    cq_strbuf_printf(b,
                     "# HELP clauseqa_ingest_queue_depth Ingestion jobs waiting or running.\n"
                     "# TYPE clauseqa_ingest_queue_depth gauge\n"
                     "clauseqa_ingest_queue_depth %zu\n"
                     "# HELP clauseqa_ingest_jobs_total Ingestion jobs ended, by outcome.\n"
                     "# TYPE clauseqa_ingest_jobs_total counter\n"
                     "clauseqa_ingest_jobs_total{state=\"ready\"} %llu\n"
                     "clauseqa_ingest_jobs_total{state=\"failed\"} %llu\n"
                     "clauseqa_ingest_jobs_total{state=\"duplicate\"} %llu\n"
                     "clauseqa_ingest_jobs_total{state=\"cancelled\"} %llu\n"
                     "# HELP clauseqa_ingest_jobs_interrupted_total Running jobs a shutdown queued again.\n"
                     "# TYPE clauseqa_ingest_jobs_interrupted_total counter\n"
                     "clauseqa_ingest_jobs_interrupted_total %llu\n"
                     "# HELP clauseqa_ingest_pages_total Pages ingested.\n"
                     "# TYPE clauseqa_ingest_pages_total counter\n"
                     "clauseqa_ingest_pages_total %.0f\n"
                     "# HELP clauseqa_ingest_seconds_total Time spent ingesting.\n"
                     "# TYPE clauseqa_ingest_seconds_total counter\n"
                     "clauseqa_ingest_seconds_total %.3f\n"
                     "# HELP clauseqa_ingest_pages_per_second Pages ingested per second of ingestion, since start.\n"
                     "# TYPE clauseqa_ingest_pages_per_second gauge\n"
                     "clauseqa_ingest_pages_per_second %.2f\n",
                     queued + (running ? 1 : 0), (unsigned long long)atomic_load(&s->jobs_ready),
                     (unsigned long long)atomic_load(&s->jobs_failed),
                     (unsigned long long)atomic_load(&s->jobs_duplicate),
                     (unsigned long long)atomic_load(&s->jobs_cancelled),
                     (unsigned long long)atomic_load(&s->jobs_interrupted), pages, ms / 1e3,
                     ms > 0 ? pages / (ms / 1e3) : 0.0);
    cq_strbuf_printf(b,
                     "# HELP clauseqa_answers_total Questions answered (abstentions included).\n"
                     "# TYPE clauseqa_answers_total counter\n"
                     "clauseqa_answers_total %llu\n"
                     "# HELP clauseqa_abstentions_total Questions the documents did not answer.\n"
                     "# TYPE clauseqa_abstentions_total counter\n"
                     "clauseqa_abstentions_total %llu\n"
                     "# HELP clauseqa_retrievals_total Retrieve requests.\n"
                     "# TYPE clauseqa_retrievals_total counter\n"
                     "clauseqa_retrievals_total %llu\n"
                     "# HELP clauseqa_generated_tokens_total Tokens generated by the decoder (extractive answers "
                     "generate none).\n"
                     "# TYPE clauseqa_generated_tokens_total counter\n"
                     "clauseqa_generated_tokens_total %llu\n"
                     "# HELP clauseqa_answers_generated_total Answers written by the decoder, and generated answers "
                     "replaced by the extractive one (not verified against the clauses, or a decoder error).\n"
                     "# TYPE clauseqa_answers_generated_total counter\n"
                     "clauseqa_answers_generated_total{outcome=\"used\"} %llu\n"
                     "clauseqa_answers_generated_total{outcome=\"fallback\"} %llu\n"
                     "# HELP clauseqa_answer_chunks_streamed_total Pieces of answer text sent to streaming clients.\n"
                     "# TYPE clauseqa_answer_chunks_streamed_total counter\n"
                     "clauseqa_answer_chunks_streamed_total %llu\n"
                     "# HELP clauseqa_model_loaded Whether a model is loaded (1) or not (0).\n"
                     "# TYPE clauseqa_model_loaded gauge\n"
                     "clauseqa_model_loaded{model=\"decoder\"} %d\n"
                     "clauseqa_model_loaded{model=\"encoder\"} %d\n"
                     "# HELP clauseqa_page_images_total Page images served, by whether they were rendered or cached.\n"
                     "# TYPE clauseqa_page_images_total counter\n"
                     "clauseqa_page_images_total{source=\"rendered\"} %llu\n"
                     "clauseqa_page_images_total{source=\"cache\"} %llu\n"
                     "# HELP clauseqa_auth_open_mode 1 while no API key exists and requests are not authenticated.\n"
                     "# TYPE clauseqa_auth_open_mode gauge\n"
                     "clauseqa_auth_open_mode %d\n",
                     (unsigned long long)atomic_load(&s->answers), (unsigned long long)atomic_load(&s->abstentions),
                     (unsigned long long)atomic_load(&s->retrievals),
                     (unsigned long long)atomic_load(&s->tokens_generated),
                     (unsigned long long)atomic_load(&s->answers_generated),
                     (unsigned long long)atomic_load(&s->answers_fallback),
                     (unsigned long long)atomic_load(&s->chunks_streamed), s->decoder ? 1 : 0, s->dense ? 1 : 0,
                     (unsigned long long)atomic_load(&s->pages_rendered),
                     (unsigned long long)atomic_load(&s->page_cache_hits), cq_service_open_mode(s) ? 1 : 0);
    cq_admission_stats a = cq_admission_get_stats(&s->asks);
    cq_strbuf_printf(b,
                     "# HELP clauseqa_asks_active Asks being answered now (at most clauseqa_asks_active_max).\n"
                     "# TYPE clauseqa_asks_active gauge\n"
                     "clauseqa_asks_active %d\n"
                     "# HELP clauseqa_asks_active_max Asks answered at once (--max-asks).\n"
                     "# TYPE clauseqa_asks_active_max gauge\n"
                     "clauseqa_asks_active_max %d\n"
                     "# HELP clauseqa_asks_waiting Asks waiting their turn (at most clauseqa_asks_waiting_max).\n"
                     "# TYPE clauseqa_asks_waiting gauge\n"
                     "clauseqa_asks_waiting %d\n"
                     "# HELP clauseqa_asks_waiting_max Asks that may wait (--max-waiting-asks).\n"
                     "# TYPE clauseqa_asks_waiting_max gauge\n"
                     "clauseqa_asks_waiting_max %d\n"
                     "# HELP clauseqa_asks_admitted_total Asks given a place.\n"
                     "# TYPE clauseqa_asks_admitted_total counter\n"
                     "clauseqa_asks_admitted_total %llu\n"
                     "# HELP clauseqa_asks_refused_total Asks refused with 503 (the queue full, or the wait too long).\n"
                     "# TYPE clauseqa_asks_refused_total counter\n"
                     "clauseqa_asks_refused_total{why=\"full\"} %llu\n"
                     "clauseqa_asks_refused_total{why=\"waited\"} %llu\n"
                     "# HELP clauseqa_asks_wait_seconds_total Time admitted asks spent waiting for their place.\n"
                     "# TYPE clauseqa_asks_wait_seconds_total counter\n"
                     "clauseqa_asks_wait_seconds_total %.3f\n"
                     "# HELP clauseqa_asks_hold_seconds Running mean of how long an ask holds its place.\n"
                     "# TYPE clauseqa_asks_hold_seconds gauge\n"
                     "clauseqa_asks_hold_seconds %.4f\n",
                     a.active, a.max_active, a.waiting, a.max_waiting, (unsigned long long)a.admitted,
                     (unsigned long long)(a.refused - a.timed_out), (unsigned long long)a.timed_out, a.wait_seconds,
                     a.mean_hold_s);
    /* where asks' time goes: the service's phases, and the decoder's (waiting for the model, and running) */
    cq_decoder_stats ds;
    if (s->decoder) cq_decoder_get_stats(s->decoder, &ds);
    cq_strbuf_puts(b, "# HELP clauseqa_ask_phase_seconds Time an ask spent in each phase: admission_wait, question, "
                      "retrieve (reranking included), answer (streaming included), stream, total; the decoder's "
                      "rerank_*, prefill_* and decode_* (one observation an ask: its sequence's prompt, the sum of "
                      "its steps), each *_wait for the model and *_run on it.\n"
                      "# TYPE clauseqa_ask_phase_seconds histogram\n");
    static const char *const phase_names[CQ_ASK_PHASES] = {"admission_wait", "question", "retrieve",
                                                           "answer",         "stream",   "total"};
    cq_lat_hist phases[CQ_ASK_PHASES];
    pthread_mutex_lock(&s->phase_lock);
    memcpy(phases, s->phase, sizeof phases);
    pthread_mutex_unlock(&s->phase_lock);
    char label[64];
    for (int i = 0; i < CQ_ASK_PHASES; i++) {
        snprintf(label, sizeof label, "phase=\"%s\"", phase_names[i]);
        cq_lat_hist_prometheus(b, "clauseqa_ask_phase_seconds", label, &phases[i]);
    }
    for (int i = 0; s->decoder && i < CQ_DECODER_PHASES; i++) {
        snprintf(label, sizeof label, "phase=\"%s\"", cq_decoder_phase_name((cq_decoder_phase)i));
        cq_lat_hist_prometheus(b, "clauseqa_ask_phase_seconds", label, &ds.phase[i]);
    }
    cq_svc_quality_metrics(s, b); /* the quality log per KB and day (service_feedback.c) */
    if (!s->decoder) return;
    /* decode steps batched across asks (cq_decoder_eval_top): a histogram of the forwards by batch size, whose sum
     * is the steps; and the KV cache the open sequences hold */
    cq_strbuf_puts(b, "# HELP clauseqa_decoder_batch_size Decode steps per forward (asks' steps run together).\n"
                      "# TYPE clauseqa_decoder_batch_size histogram\n");
    static const char *const le[CQ_DECODER_BATCH_BUCKETS] = {"1", "3", "7", "15", "31", "63", "+Inf"};
    uint64_t cum = 0;
    for (int i = 0; i < CQ_DECODER_BATCH_BUCKETS; i++) {
        cum += ds.batch_hist[i];
        cq_strbuf_printf(b, "clauseqa_decoder_batch_size_bucket{le=\"%s\"} %llu\n", le[i], (unsigned long long)cum);
    }
    cq_strbuf_printf(b,
                     "clauseqa_decoder_batch_size_sum %llu\n"
                     "clauseqa_decoder_batch_size_count %llu\n"
                     "# HELP clauseqa_decoder_kv_bytes KV cache held by the decoder's open sequences, and (GPU) by "
                     "closed ones kept for reuse.\n"
                     "# TYPE clauseqa_decoder_kv_bytes gauge\n"
                     "clauseqa_decoder_kv_bytes{state=\"open\"} %lld\n"
                     "clauseqa_decoder_kv_bytes{state=\"pooled\"} %lld\n"
                     "# HELP clauseqa_decoder_prompt_forwards_total Forwards that fed asks' prompts, and of them "
                     "those shared with other asks' prompts or decode steps.\n"
                     "# TYPE clauseqa_decoder_prompt_forwards_total counter\n"
                     "clauseqa_decoder_prompt_forwards_total{shared=\"no\"} %llu\n"
                     "clauseqa_decoder_prompt_forwards_total{shared=\"yes\"} %llu\n"
                     "# HELP clauseqa_decoder_sequences Decoder sequences open now.\n"
                     "# TYPE clauseqa_decoder_sequences gauge\n"
                     "clauseqa_decoder_sequences %lld\n",
                     (unsigned long long)ds.steps, (unsigned long long)ds.forwards, (long long)ds.kv_bytes,
                     (long long)ds.kv_pooled_bytes,
                     (unsigned long long)(ds.prompt_forwards - ds.prompt_forwards_shared),
                     (unsigned long long)ds.prompt_forwards_shared,
                     (long long)ds.seqs);
    cq_strbuf_printf(b,
                     "# HELP clauseqa_decoder_rerank_slices_total Slices the reranker's prompts ran in, and of them "
                     "those holding several asks' prompts.\n"
                     "# TYPE clauseqa_decoder_rerank_slices_total counter\n"
                     "clauseqa_decoder_rerank_slices_total{shared=\"no\"} %llu\n"
                     "clauseqa_decoder_rerank_slices_total{shared=\"yes\"} %llu\n"
                     "# HELP clauseqa_decoder_rerank_tokens_total Tokens of the reranker's prompts, and of them those "
                     "whose KV was reused from the prompt before (not run again).\n"
                     "# TYPE clauseqa_decoder_rerank_tokens_total counter\n"
                     "clauseqa_decoder_rerank_tokens_total{reused=\"no\"} %llu\n"
                     "clauseqa_decoder_rerank_tokens_total{reused=\"yes\"} %llu\n"
                     "# HELP clauseqa_decoder_steps_between_rerank_slices_total Decode-step forwards run between two "
                     "slices of a rerank part-way through.\n"
                     "# TYPE clauseqa_decoder_steps_between_rerank_slices_total counter\n"
                     "clauseqa_decoder_steps_between_rerank_slices_total %llu\n",
                     (unsigned long long)(ds.score_slices - ds.score_slices_shared),
                     (unsigned long long)ds.score_slices_shared,
                     (unsigned long long)(ds.score_tokens - ds.score_reused_tokens),
                     (unsigned long long)ds.score_reused_tokens, (unsigned long long)ds.step_forwards_mid_score);
}

void cq_svc_metrics_web(cq_web_service *w) {
    w->health = svc_health;
    w->metrics = svc_metrics;
}
