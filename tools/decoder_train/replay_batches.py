#!/usr/bin/env python3
"""Replays train.py's batch sampler on the CPU (no model): the examples of the given steps (counted from 1, as the
log's progress lines and the manifest's skipped_nonfinite), their micro-batches and a well-formedness check
(prompt + completion within --max-len, completion of 2 tokens or more, ids below the vocabulary, a micro-batch
within --micro-tokens). train.py draws one batch per step: the timing block draws none.

  python3 tools/decoder_train/replay_batches.py --data DEC_DATA --mix answer=0.52,abstain=0.08,abstain_syn=0.08,\
relevance=0.32 --micro-tokens 8192 26 27
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train as T  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--mix", default=T.DEFAULT_MIX)
    ap.add_argument("--source-weights", default=T.DEFAULT_SOURCE_WEIGHTS)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--max-len", type=int, default=1280)
    ap.add_argument("--max-completion", type=int, default=192)
    ap.add_argument("--micro-tokens", type=int, default=0)
    ap.add_argument("steps", type=int, nargs="+")
    a = ap.parse_args()
    d = T.Data(a.data, None, a.max_len, a.max_completion)
    s = T.Sampler(d, T.parse_weights(a.mix), T.parse_weights(a.source_weights), a.batch, a.seed)
    n_vocab = int(d.meta.get("n_vocab") or len(d.vocab))
    batches = [s.next() for _ in range(max(a.steps))]
    bad = 0
    for st in a.steps:
        idx = batches[st - 1]
        mbs = T.micro_batches(d, idx, a.micro_tokens)
        print("step %d: %d examples (%d distinct), micro-batches %s" % (
            st, len(idx), len(set(idx.tolist())),
            ["%dx%d" % (len(m), int(d.length[m].max()) - 1) for m in mbs]))
        for i in idx:
            p, c = d.example(int(i))
            ids = np.concatenate([p, c])
            why = [w for w, ok in (("over --max-len", len(ids) <= a.max_len), ("completion < 2", len(c) >= 2),
                                   ("id out of range", int(ids.max()) < n_vocab and int(ids.min()) >= 0)) if not ok]
            bad += bool(why)
            print("  %6d %-12s %-28s prompt %4d completion %3d %s" % (
                int(i), d.tasks[int(d.task[i])], d.sources[int(d.source[i])], len(p), len(c), " ".join(why)))
        for m in mbs:
            if len(m) > 1 and a.micro_tokens and len(m) * (int(d.length[m].max())) > a.micro_tokens:
                print("  micro-batch over --micro-tokens: %s" % m.tolist())
                bad += 1
    print("%d problem(s)" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
