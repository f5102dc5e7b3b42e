/* The decoder's vocabulary lent to the SSM encoder (docs/SSM.md, "Input layer"): the Gemma-3 tokenizer and the
 * token_embd.weight table of the decoder's GGUF, as a cq_ssm_vocab. ssm/ never reads GGUF files; this adapter does,
 * with decoder/'s reader, tokenizer and dequantization.
 *
 *   tokenize  cq_tokenizer_encode without BOS and without parsing control tokens; an id below 5 (a control token,
 *             which plain text does not produce) is read as 1, the encoder's UNK marker
 *   row       the table row dequantized as the decoder dequantizes it (any type decoder/quant.h reads)
 *   table_id  SHA-256 of "<type>:<n_embd>x<n_vocab>\n" and the raw bytes of every 64th row (tools/ssm_train/
 *             gemma_vocab.py computes the same for the weights' ssm.json): cheap, and a different table differs */
#ifndef CQ_APP_SSM_VOCAB_H
#define CQ_APP_SSM_VOCAB_H

#include "core/error.h"
#include "ssm/ssm.h"

typedef struct cq_ssm_gemma_vocab cq_ssm_gemma_vocab;

/* Opens the GGUF at path (memory-mapped, read-only) and builds the vocabulary "gemma3". */
cq_status cq_ssm_gemma_vocab_open(const char *gguf_path, cq_ssm_gemma_vocab **out, cq_err *err);
const cq_ssm_vocab *cq_ssm_gemma_vocab_get(const cq_ssm_gemma_vocab *v);
void cq_ssm_gemma_vocab_close(cq_ssm_gemma_vocab *v);

/* For cq_dense_set_vocab_source (search/vectors.h): the vocabulary name from the decoder's GGUF at gguf_path (where
 * app/models.h found the decoder; app/cli.c passes it). Only "gemma3" is known. */
cq_status cq_ssm_vocab_open_for_dense(const char *gguf_path, const char *name, const cq_ssm_vocab **vocab,
                                      void **handle, cq_err *err);
void cq_ssm_vocab_close_for_dense(void *handle);

#endif
