/* The models folders (app/models.h). */
#include "app/models.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decoder/decoder.h"

static void add_dir(cq_models *m, const char *dir, const char *origin) {
    if (!dir || !*dir || m->n_dirs == CQ_MODELS_MAX_DIRS) return;
    cq_models_dir *d = &m->dirs[m->n_dirs++];
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    d->origin = origin;
}

void cq_models_find(const char *explicit_dir, const char *explicit_origin, const char *data_dir, const char *shared_dir,
                    const char *shared_origin, cq_models *out) {
    memset(out, 0, sizeof *out);
    char data_models[1024];
    snprintf(data_models, sizeof data_models, "%s/models", data_dir);
    add_dir(out, explicit_dir, explicit_origin);
    add_dir(out, data_models, "data directory");
    add_dir(out, shared_dir, shared_origin);
    char path[1200];
    /* CLAUSEQA_DECODER_FILE names another GGUF of the models folders (a file name, e.g. the Qwen2.5 1.5B that
     * tools/fetch_model.sh fetches too); --model PATH still wins over both */
    const char *file = getenv("CLAUSEQA_DECODER_FILE");
    const bool chosen = file && *file && !strchr(file, '/');
    if (!chosen) file = CQ_DECODER_DEFAULT_FILE;
    /* the GPU's reader unless CLAUSEQA_DECODER_FILE chose one reader for both; CLAUSEQA_DECODER_GPU_FILE names
     * another (a file name) or "none" */
    const char *gpu_file = getenv("CLAUSEQA_DECODER_GPU_FILE");
    if (!gpu_file || !*gpu_file || strchr(gpu_file, '/')) gpu_file = CQ_DECODER_GPU_FILE;
    if (chosen || !strcmp(gpu_file, "none")) gpu_file = NULL;
    for (size_t i = 0; i < out->n_dirs; i++) {
        const cq_models_dir *d = &out->dirs[i];
        snprintf(path, sizeof path, "%s/%s", d->dir, file);
        if (!out->decoder_origin && access(path, R_OK) == 0) {
            snprintf(out->decoder, sizeof out->decoder, "%s", path);
            out->decoder_origin = d->origin;
        }
        snprintf(path, sizeof path, "%s/%s", d->dir, gpu_file ? gpu_file : "");
        if (gpu_file && !out->decoder_gpu_origin && access(path, R_OK) == 0) {
            snprintf(out->decoder_gpu, sizeof out->decoder_gpu, "%s", path);
            out->decoder_gpu_origin = d->origin;
        }
        snprintf(path, sizeof path, "%s/ssm/ssm.json", d->dir);
        if (!out->encoder_origin && access(path, R_OK) == 0) {
            snprintf(out->encoder, sizeof out->encoder, "%s/ssm", d->dir);
            out->encoder_origin = d->origin;
        }
    }
}

const char *cq_models_reader(const cq_models *m, const char *given, cq_device device) {
    if (given) return given;
    const bool gpu = device == CQ_DEVICE_CUDA || (device == CQ_DEVICE_AUTO && cq_decoder_cuda_available());
    if (gpu && m->decoder_gpu_origin) return m->decoder_gpu;
    return m->decoder_origin ? m->decoder : NULL;
}

bool cq_models_shared_dir(char *out, size_t cap, const char **origin) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return false;
    exe[n] = 0;
    char *bin = dirname(exe); /* in place: exe now holds the binary's folder */
#ifdef CQ_BUILD_TREE
    /* A binary of this build tree: the models `make setup` put in the source tree. */
    char build[PATH_MAX];
    if (realpath(CQ_BUILD_TREE, build) && !strcmp(build, bin)) {
        snprintf(out, cap, "%s/data/models", CQ_SOURCE_TREE);
        *origin = "source tree";
        return true;
    }
#endif
    size_t len = strlen(bin);
    if (len < 4 || strcmp(bin + len - 4, "/bin")) return false;
    bin[len - 4] = 0;
    snprintf(out, cap, "%s/share/clauseqa/models", bin);
    *origin = "install";
    return true;
}

void cq_models_searched(const cq_models *m, char *out, size_t cap) {
    size_t used = 0;
    out[0] = 0;
    for (size_t i = 0; i < m->n_dirs && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%s (%s)", i ? ", " : "", m->dirs[i].dir, m->dirs[i].origin);
}
