#include "core/grow.h"

#include <stdint.h>
#include <stdlib.h>

bool cq_grow(void **list, size_t *cap, size_t need, size_t elem_size) {
    if (need <= *cap) return true;
    if (!elem_size) return false;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) return false;
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / elem_size) return false;
    void *grown = realloc(*list, ncap * elem_size);
    if (!grown) return false;
    *list = grown;
    *cap = ncap;
    return true;
}
