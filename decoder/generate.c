/* Generation: prompt in, text out, streamed. Sampling is decoder/sampler.c; this file is the loop, the stop rules
 * and the streaming of whole characters. */
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder.h"
#include "decoder/sampler.h"
#include "core/clock.h"
#include "core/strbuf.h"

cq_generate_params cq_generate_defaults(void) {
    return (cq_generate_params){.sampler = cq_sampler_defaults(),
                                .max_tokens = 256,
                                .stop = NULL,
                                .stop_at_eos = true,
                                .encode_flags = CQ_TOK_ADD_BOS | CQ_TOK_PARSE_SPECIAL};
}

/* Bytes at the end of s[0..n) that start a UTF-8 character not yet complete. */
static size_t incomplete_utf8_tail(const char *s, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xc0) == 0x80) continue; /* continuation byte: look further back */
        size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of a stop string (it may still become one). */
static size_t stop_prefix_tail(const char *s, size_t n, const char *const *stop) {
    size_t best = 0;
    for (; stop && *stop; stop++) {
        size_t m = strlen(*stop);
        for (size_t k = m > 1 ? m - 1 : 0; k > best; k--)
            if (k <= n && !memcmp(s + n - k, *stop, k)) {
                best = k;
                break;
            }
    }
    return best;
}

/* Earliest occurrence of any stop string in s[from..n), or -1. */
static long find_stop(const char *s, size_t n, size_t from, const char *const *stop) {
    long best = -1;
    for (; stop && *stop; stop++) {
        size_t m = strlen(*stop);
        if (!m) continue;
        for (size_t i = from; i + m <= n; i++)
            if (!memcmp(s + i, *stop, m)) {
                if (best < 0 || (long)i < best) best = (long)i;
                break;
            }
    }
    return best;
}

cq_status cq_decoder_generate(cq_decoder_seq *s, const char *prompt, const cq_generate_params *gp, cq_token_cb cb,
                              void *user, char **out, cq_generate_stats *stats, cq_err *err) {
    cq_generate_params p = gp ? *gp : cq_generate_defaults();
    cq_generate_stats st = {0};
    if (out) *out = NULL;
    const cq_decoder *d = cq_decoder_seq_decoder(s);
    const cq_tokenizer *tok = cq_decoder_tokenizer(d);
    const int32_t V = cq_decoder_get_info(d)->n_vocab;
    /* end of generation: EOS, the end-of-turn token, and <|endoftext|> where the vocabulary has it (Qwen2's EOS is
     * <|im_end|>, but a base model ends a text with <|endoftext|>) */
    int32_t eot = cq_tokenizer_eot(tok), eos = cq_tokenizer_eos(tok), eot2 = cq_tokenizer_find(tok, "<|endoftext|>");
    size_t max_stop = 0;
    for (const char *const *stop = p.stop; stop && *stop; stop++)
        if (strlen(*stop) > max_stop) max_stop = strlen(*stop);

    int32_t *ids = NULL;
    size_t n_ids = 0;
    cq_status rc = cq_tokenizer_encode(tok, prompt, strlen(prompt), p.encode_flags, &ids, &n_ids, err);
    if (rc) return rc;
    if (n_ids == 0) {
        free(ids);
        return cq_err_set(err, CQ_ERR_INVALID, "generate: the prompt is empty");
    }
    /* history = prompt + generated ids, for the repetition penalty */
    size_t cap = n_ids + (size_t)(p.max_tokens > 0 ? p.max_tokens : 0) + 1;
    int32_t *hist = realloc(ids, cap * sizeof *hist);
    float *logits = malloc((size_t)V * sizeof *logits);
    cq_sampler sampler;
    if (!hist || !logits) {
        free(hist ? hist : ids);
        free(logits);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    if ((rc = cq_sampler_init(&sampler, &p.sampler, V, err))) {
        free(hist);
        free(logits);
        return rc;
    }
    cq_decoder_seq_reset(s);
    double t0 = cq_clock_seconds();
    rc = cq_decoder_eval(s, hist, n_ids, logits, false, err);
    st.prompt_tokens = (int32_t)n_ids;
    st.prefill_s = cq_clock_seconds() - t0;
    t0 = cq_clock_seconds();
    cq_strbuf text = {0};
    size_t emitted = 0, n_hist = n_ids;
    char piece[256];
    /* Greedy without a penalty needs only the argmax: cq_decoder_eval_greedy takes it where the logits are (on the
     * GPU it copies 8 bytes a step instead of the whole vocabulary's logits). */
    const bool greedy = p.sampler.temperature <= 0 && (p.sampler.repetition_penalty == 0 ||
                                                         p.sampler.repetition_penalty == 1);
    int32_t pending = -1;
    for (int32_t i = 0; !rc && i < p.max_tokens; i++) {
        int32_t next = greedy && pending >= 0 ? pending : cq_sampler_pick(&sampler, logits, hist, n_hist);
        if (p.stop_at_eos && (next == eos || next == eot || next == eot2)) {
            st.stopped_by_eos = true;
            break;
        }
        hist[n_hist++] = next;
        st.new_tokens++;
        size_t old_len = text.len, m = cq_tokenizer_piece(tok, next, false, piece, sizeof piece);
        if (m <= sizeof piece) {
            cq_strbuf_append(&text, piece, m);
        } else { /* a long token (runs of spaces, rules of '=' ...) */
            char *big = malloc(m);
            if (big) cq_tokenizer_piece(tok, next, false, big, m), cq_strbuf_append(&text, big, m);
            else text.failed = true;
            free(big);
        }
        if (text.failed) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        size_t from = old_len + 1 > max_stop ? old_len + 1 - max_stop : 0;
        long at = find_stop(text.data, text.len, from < emitted ? emitted : from, p.stop);
        if (at >= 0) {
            text.len = (size_t)at;
            text.data[at] = 0;
            st.stopped_by_string = true;
            break;
        }
        size_t hold = stop_prefix_tail(text.data, text.len, p.stop);
        size_t utf8 = incomplete_utf8_tail(text.data, text.len);
        size_t safe = text.len - (hold > utf8 ? hold : utf8);
        if (cb && safe > emitted) {
            if (!cb(user, text.data + emitted, safe - emitted)) {
                emitted = safe;
                st.stopped_by_callback = true;
                break;
            }
            emitted = safe;
        }
        if (i + 1 == p.max_tokens || cq_decoder_seq_pos(s) >= cq_decoder_seq_limit(s)) break;
        rc = greedy ? cq_decoder_eval_greedy(s, next, &pending, err) : cq_decoder_eval(s, &next, 1, logits, false, err);
    }
    st.decode_s = cq_clock_seconds() - t0;
    if (!rc && cb && !st.stopped_by_callback && text.len > emitted) cb(user, text.data + emitted, text.len - emitted);
    cq_sampler_free(&sampler);
    free(hist);
    free(logits);
    if (stats) *stats = st;
    if (rc) {
        cq_strbuf_free(&text);
        return rc;
    }
    if (out) *out = cq_strbuf_take(&text);
    else cq_strbuf_free(&text);
    return CQ_OK;
}
