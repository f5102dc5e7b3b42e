/* The tokenizers of GGUF vocabularies: SentencePiece-style BPE (tokenizer.ggml.model = "llama": tokens, scores,
 * token types; Gemma 3's), described first, and GPT-2-style byte-level BPE (model "gpt2" with the "qwen2"
 * pre-tokenizer: Qwen2's), described after it.
 *
 * Encoding: the text is first cut at special tokens (user-defined ones such as "\n\n" or "<h1>" always; control
 * ones such as <start_of_turn> and <bos> only with CQ_TOK_PARSE_SPECIAL), longest match first. Each piece between
 * them has its spaces replaced by U+2581 and is split into characters; then the adjacent pair whose concatenation
 * is the vocabulary entry with the highest score is merged, leftmost first, until no pair is in the vocabulary.
 * Symbols that are not tokens fall back to byte tokens <0xNN>. No dummy prefix unless the file asks for one
 * (tokenizer.ggml.add_space_prefix). Decoding inverts this exactly, so decode(encode(s)) == s for any bytes (a
 * literal U+2581 in the text, which would otherwise read back as a space, is spelled in byte tokens).
 *
 * gpt2: special tokens are cut out first as above (control ones such as <|im_start|> only with
 * CQ_TOK_PARSE_SPECIAL). Each piece between them is pre-tokenized with Qwen2's split regex (contractions, letters
 * with one leading non-letter, single digits, punctuation runs, newline runs, spaces; tokenizer.c spells it out
 * over Unicode categories), each pre-token's bytes are mapped to GPT-2's printable code points, and adjacent
 * symbols are merged by the rank of the pair in tokenizer.ggml.merges, lowest first. No normalization (Qwen's
 * tokenizer.json asks for NFC, which llama.cpp does not apply either: text that is already NFC, nearly all, is
 * unaffected). BOS only where tokenizer.ggml.add_bos_token says (Qwen2: no). Decoding maps the code points back to
 * bytes, so decode(encode(s)) == s for any bytes. */
#ifndef CQ_DECODER_TOKENIZER_H
#define CQ_DECODER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decoder/gguf.h"
#include "core/error.h"

typedef struct cq_tokenizer cq_tokenizer;

typedef enum {
    CQ_TOKEN_NORMAL = 1,
    CQ_TOKEN_UNKNOWN = 2,
    CQ_TOKEN_CONTROL = 3,
    CQ_TOKEN_USER_DEFINED = 4,
    CQ_TOKEN_UNUSED = 5,
    CQ_TOKEN_BYTE = 6,
} cq_token_type;

enum {
    CQ_TOK_ADD_BOS = 1,       /* prepend the BOS token */
    CQ_TOK_PARSE_SPECIAL = 2, /* control tokens written in the text (<start_of_turn>) become their ids */
};

/* Copies what it needs: the GGUF may be closed afterwards. */
cq_status cq_tokenizer_from_gguf(const cq_gguf *g, cq_tokenizer **out, cq_err *err);
void cq_tokenizer_free(cq_tokenizer *t);

int32_t cq_tokenizer_vocab_size(const cq_tokenizer *t);
int32_t cq_tokenizer_bos(const cq_tokenizer *t);
int32_t cq_tokenizer_eos(const cq_tokenizer *t);
/* The end-of-turn token: tokenizer.ggml.eot_token_id, else <end_of_turn> or <|im_end|>, or -1. */
int32_t cq_tokenizer_eot(const cq_tokenizer *t);
/* Whether CQ_TOK_ADD_BOS adds a BOS token (tokenizer.ggml.add_bos_token; SentencePiece yes, gpt2 no by default). */
bool cq_tokenizer_adds_bos(const cq_tokenizer *t);
bool cq_tokenizer_is_gpt2(const cq_tokenizer *t);
/* The id of a token spelled exactly so ("<end_of_turn>"), or -1. */
int32_t cq_tokenizer_find(const cq_tokenizer *t, const char *piece);
cq_token_type cq_tokenizer_type(const cq_tokenizer *t, int32_t id);

/* Encodes len bytes of text; *ids is allocated (free() it), *n_ids its length. */
cq_status cq_tokenizer_encode(const cq_tokenizer *t, const char *text, size_t len, unsigned flags, int32_t **ids,
                              size_t *n_ids, cq_err *err);

/* The bytes token id stands for: U+2581 becomes a space, <0xNN> the byte NN; control tokens are empty unless
 * render_special. Writes at most cap bytes to buf and returns the full length (like snprintf, no NUL). */
size_t cq_tokenizer_piece(const cq_tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap);

/* Decodes n ids into *text (NUL-terminated, malloc'd; free() it), *len bytes without the NUL. Out-of-range ids
 * are CQ_ERR_INVALID. */
cq_status cq_tokenizer_decode(const cq_tokenizer *t, const int32_t *ids, size_t n, bool render_special, char **text,
                              size_t *len, cq_err *err);

#endif
