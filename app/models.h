/* Where the model files are: the decoder's GGUF and the SSM encoder's folder, found apart from the data directory
 * so that a new --data directory keeps them.
 *
 * Each file is looked for in these folders, the first that holds it wins:
 *   1. --models DIR, else $CLAUSEQA_MODELS, else `models =` of clauseqa.conf   (when given)
 *   2. DATA/models
 *   3. the install's shared folder: <prefix>/share/clauseqa/models for <prefix>/bin/clauseqa, or the source tree's
 *      data/models for a binary run from its build tree (where `make setup` fetches them)
 * The files: models/gemma-3-270m-q4_k_m.gguf (decoder, decoder/decoder.h) and models/ssm/ssm.json with
 * ssm.safetensors (encoder, search/vectors.h). */
#ifndef CQ_APP_MODELS_H
#define CQ_APP_MODELS_H

#include <stdbool.h>
#include <stddef.h>

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
    char encoder[1200];         /* the encoder folder (ssm.json + ssm.safetensors); "" when none */
    const char *encoder_origin;
} cq_models;

/* Searches explicit_dir (NULL: none; origin says where it was given), DATA/models and shared_dir (NULL: none). */
void cq_models_find(const char *explicit_dir, const char *explicit_origin, const char *data_dir, const char *shared_dir,
                    const char *shared_origin, cq_models *out);

/* The running binary's shared models folder (3. above); false when it has none. */
bool cq_models_shared_dir(char *out, size_t cap, const char **origin);

/* "folder (origin), folder (origin), ...": where the files were looked for, for messages. */
void cq_models_searched(const cq_models *m, char *out, size_t cap);

#endif
