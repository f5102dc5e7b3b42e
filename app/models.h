/* Where the model files are: the decoder's GGUF and the SSM encoder's folder, found apart from the data directory
 * so that a new --data directory keeps them.
 *
 * Each file is looked for in these folders, the first that holds it wins:
 *   1. --models DIR, else $CLAUSEQA_MODELS, else `models =` of clauseqa.conf   (when given)
 *   2. DATA/models
 *   3. the install's shared folder: <prefix>/share/clauseqa/models for <prefix>/bin/clauseqa, or the source tree's
 *      data/models for a binary run from its build tree (where `make setup` fetches them)
 * The files: models/gemma-3-270m-q4_k_m.gguf (decoder, decoder/decoder.h), the GPU's reader
 * models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (used instead when the decoder runs on the GPU, app/cli_common.c),
 * and models/ssm/ssm.json with ssm.safetensors (encoder, search/vectors.h). */
#ifndef CQ_APP_MODELS_H
#define CQ_APP_MODELS_H

#include <stdbool.h>
#include <stddef.h>

#include "decoder/decoder.h"

#define CQ_MODELS_MAX_DIRS 3

typedef struct {
    char dir[1024];
    const char *origin; /* "--models", "$CLAUSEQA_MODELS", "clauseqa.conf", "data directory", "install", "source tree" */
} cq_models_dir;

typedef struct {
    cq_models_dir dirs[CQ_MODELS_MAX_DIRS]; /* searched, in order */
    size_t n_dirs;
    char decoder[1200];         /* the decoder GGUF; "" when no folder has it */
    const char *decoder_origin; /* the origin of the folder it is in; NULL when not found */
    char decoder_gpu[1200];         /* the GPU's reader GGUF (CQ_DECODER_GPU_FILE, or $CLAUSEQA_DECODER_GPU_FILE; "none"
                                       for none); "" when not found or when $CLAUSEQA_DECODER_FILE chose the reader */
    const char *decoder_gpu_origin; /* NULL when not found */
    char encoder[1200];         /* the encoder folder (ssm.json + ssm.safetensors); "" when none */
    const char *encoder_origin;
} cq_models;

/* Searches explicit_dir (NULL: none; origin says where it was given), DATA/models and shared_dir (NULL: none). */
void cq_models_find(const char *explicit_dir, const char *explicit_origin, const char *data_dir, const char *shared_dir,
                    const char *shared_origin, cq_models *out);

/* The reader's weights for device: given (--model) when set, else the GPU's reader (m->decoder_gpu) when the
 * decoder runs on the GPU (cuda, or auto with a GPU) and the folders hold it, else m->decoder; NULL for none. */
const char *cq_models_reader(const cq_models *m, const char *given, cq_device device);

/* The running binary's shared models folder (3. above); false when it has none. */
bool cq_models_shared_dir(char *out, size_t cap, const char **origin);

/* "folder (origin), folder (origin), ...": where the files were looked for, for messages. */
void cq_models_searched(const cq_models *m, char *out, size_t cap);

#endif
