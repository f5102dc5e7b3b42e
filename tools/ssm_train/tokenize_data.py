"""Token ids of prepare.py's texts for one input layer, in parallel (here, or on the GPU box before training):

    python3 tools/ssm_train/tokenize_data.py --data .device/ssm14/data --tokenizer gemma3 [--gguf F] [--jobs N]
    python3 tools/ssm_train/tokenize_data.py --data .device/ssm14/data --tokenizer cq-hash-v1

writes DATA/tokens.<tokenizer>.npz: for each kind k in c (clauses, corpus.npz order), q (queries.json "questions"),
h ("headings"), i ("ict"): k_tok (int32 ids) and k_off (item j = k_tok[k_off[j]:k_off[j+1]]). With gemma3 also
`ids` (every distinct id used, sorted) and `table_id`, and DATA/table.gemma3.npy: the float32 table rows of `ids` as
the runtime dequantizes them (gemma_vocab.py: the C adapter itself), which is all of the table training needs.
"""
import argparse
import json
import os
import sys
import time
from multiprocessing import Pool

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "ssm_ref"))

_ENC = None


def _init(tokenizer, gguf):
    global _ENC
    if tokenizer == "gemma3":
        import gemma_vocab
        v = gemma_vocab.Vocab(gguf)
        _ENC = v.encode
    else:
        import tokenizer as cq
        _ENC = lambda t: np.asarray(cq.tokenize(t), np.int32)  # noqa: E731


def _encode_chunk(texts):
    out = [_ENC(t) for t in texts]
    return np.concatenate(out) if out else np.zeros(0, np.int32), np.asarray([len(x) for x in out], np.int64)


def encode_all(pool, texts, chunk=2000):
    parts = pool.map(_encode_chunk, [texts[i:i + chunk] for i in range(0, len(texts), chunk)])
    tok = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
    lens = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    off = np.zeros(len(lens) + 1, np.int64)
    off[1:] = np.cumsum(lens)
    return tok.astype(np.int32), off


def corpus_texts(data):
    z = np.load(os.path.join(data, "corpus.npz"))
    blob, off = z["text"].tobytes(), z["text_off"]
    return [blob[off[i]:off[i + 1]].decode("utf-8") for i in range(len(off) - 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=".device/ssm14/data")
    ap.add_argument("--tokenizer", choices=["gemma3", "cq-hash-v1"], required=True)
    ap.add_argument("--gguf", default=None, help="gemma3: the decoder's GGUF (or a trimmed one, gemma_vocab.py)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=None, help="default DATA")
    a = ap.parse_args()
    t0 = time.time()
    import gemma_vocab
    gguf = a.gguf or gemma_vocab.DEFAULT_GGUF
    if a.tokenizer == "gemma3":
        gemma_vocab._lib()  # compile once, before the workers load it
    q = json.load(open(os.path.join(a.data, "queries.json"), encoding="utf-8"))
    kinds = {"c": corpus_texts(a.data), "q": [x["text"] for x in q["questions"]],
             "h": [x["text"] for x in q["headings"]], "i": [x["text"] for x in q["ict"]]}
    out = {}
    with Pool(a.jobs, initializer=_init, initargs=(a.tokenizer, gguf)) as pool:
        for k, texts in kinds.items():
            out[k + "_tok"], out[k + "_off"] = encode_all(pool, texts)
            print("[%.0fs] %s: %d texts, %d tokens" % (time.time() - t0, k, len(texts), len(out[k + "_tok"])),
                  flush=True)
    dest = a.out or a.data
    os.makedirs(dest, exist_ok=True)
    if a.tokenizer == "gemma3":
        v = gemma_vocab.Vocab(gguf)
        ids = np.unique(np.concatenate([out[k + "_tok"] for k in kinds]))
        out["ids"] = ids.astype(np.int32)
        out["table_id"] = np.asarray(v.table_id)
        rows = v.rows(ids)
        if not np.isfinite(rows).all() or (np.abs(rows).sum(1) == 0).any():
            sys.exit("table rows missing (a trimmed GGUF without these ids?)")
        np.save(os.path.join(dest, "table.gemma3.npy"), rows)
        print("[%.0fs] %d distinct ids, table rows %.1f MB" % (time.time() - t0, len(ids), rows.nbytes / 1e6))
    np.savez(os.path.join(dest, "tokens.%s.npz" % a.tokenizer), **out)
    print("[%.0fs] wrote %s" % (time.time() - t0, os.path.join(dest, "tokens.%s.npz" % a.tokenizer)), flush=True)


if __name__ == "__main__":
    main()
