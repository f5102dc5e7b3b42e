"""Writes tests/data/ssm/dochead/: a tiny random encoder with a random document head, exported as train.py exports
them (ssm.json with "manifest"."doc_head"."window_tokens", ssm.safetensors, doc_head.safetensors), and the document
vectors TRAINING gives a few token-level documents: train.py's own Data.doc_prefix (which clauses of the document's
start fit the window) and doc_vectors (the head over [mean of the final outputs; the last one], normalized), on
model.py's parallel forward, in float64 from the float32 weights. tests/unit/test_ssm_doc_head.c encodes each whole
document with the C runtime (cq_ssm_seq.doc_vector) and must match to a relative error <= 1e-4.

    /opt/venv-train/bin/python tools/ssm_train/make_dochead_fixture.py [OUT_DIR]   (default tests/data/ssm/dochead)

Deterministic (fixed seeds). Token level (a vocabulary of 64 ids), so the fixture stays a few kB. The documents are
chosen to cover the window's edges: a clause ending exactly at the window, a first clause longer than the window
(taken whole), a document shorter than the window, and windows longer than the CPU backend's 1,024-token block (a
clause cut by a block edge inside the window). Every clause is at most 256 tokens (train.py's MAX_CLAUSE), where
training's window and the runtime's are the same by construction (docs/SSM.md, "Document vectors").
"""
import json
import os
import sys
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model as tm  # noqa: E402
import train  # noqa: E402

SMALL = dict(vocab_size=64, d_model=8, n_layer=2, d_state=4, d_conv=4, expand=2, dt_rank=2, d_embed=8)
WINDOW = 1500


def documents(rng):
    """Clause lengths per document (tokens, without SEP); ids drawn from 5..63 (no markers)."""
    docs = []
    # a segment ends exactly at the window: BOS + 14 × (SEP + 99 tokens) + SEP + 98 tokens = 1,500
    docs.append([99] * 14 + [98, 40, 7])
    docs.append([250, 250, 250, 250, 250, 250, 250, 250])      # window ends between clauses (1 + 5 * 251 = 1256)
    docs.append([30, 12, 5])                                     # shorter than the window: the whole document
    docs.append([256] * 3 + [1] + [200] * 9)                     # crosses the 1,024 block edge inside a clause
    docs.append([3])                                             # one short clause
    return [[rng.integers(5, SMALL["vocab_size"], n).tolist() for n in d] for d in docs]


def fake_data(clauses):
    """What train.Data.doc_prefix reads of a corpus holding one document."""
    lens = [len(c) for c in clauses]
    d = types.SimpleNamespace(tok=np.asarray([t for c in clauses for t in c], np.int64),
                              cl_off=np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
                              doc_off=np.asarray([0, len(clauses)], np.int64))
    d.clause = types.MethodType(train.Data.clause, d)
    d.clen = types.MethodType(train.Data.clen, d)
    return d


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/data/ssm/dochead"
    torch.manual_seed(5)
    cfg = tm.Config(**SMALL)
    model = tm.SSMEncoder(cfg)
    tm.random_init(model, 21)
    head = torch.nn.Linear(2 * cfg.d_model, cfg.d_embed)
    with torch.no_grad():
        head.weight.copy_(torch.randn(head.weight.shape, generator=torch.Generator().manual_seed(22)) * 0.5)
        head.bias.copy_(torch.randn(head.bias.shape, generator=torch.Generator().manual_seed(23)) * 0.1)
    tm.ssm_ref.save(model, out_dir)
    # train.py's export of the head: F32 here (the runtime reads F32, F16 and BF16 alike) and the manifest entry
    args = types.SimpleNamespace(out=out_dir, doc_window=WINDOW, doc_head=1.0, doc_tau=0.05)
    entry = train.export_doc_head(head, args)
    from safetensors.torch import save_file
    save_file({"doc_head." + k: v.detach().float().contiguous() for k, v in head.state_dict().items()},
              os.path.join(out_dir, "doc_head.safetensors"))
    path = os.path.join(out_dir, "ssm.json")
    j = json.load(open(path))
    j["manifest"] = {"note": "tools/ssm_train/make_dochead_fixture.py", "doc_head": entry}
    with open(path, "w") as f:
        json.dump(j, f, indent=2)
        f.write("\n")
    m64, h64 = model.double(), head.double()
    rng = np.random.default_rng(7)
    cases = []
    with torch.no_grad():
        for clauses in documents(rng):
            prefix = train.Data.doc_prefix(fake_data(clauses), 0, WINDOW)
            toks = tm.document_tokens(prefix)[0]
            lens = torch.as_tensor([len(toks)])
            o = tm.encode(m64, torch.as_tensor([toks]), lens=lens)
            v = train.doc_vectors(m64, h64, o, lens)[0]
            full, _, ends = tm.document_tokens(clauses)
            cases.append({"tokens": full, "segment_ends": ends, "window_end": len(toks),
                          "doc_vector": [float("%.12g" % x) for x in v.tolist()]})
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump({"note": "document vectors from train.py's doc_prefix + doc_vectors (float64) for ssm.safetensors "
                           "+ doc_head.safetensors, window %d tokens" % WINDOW, "cases": cases}, f)
        f.write("\n")
    print("wrote", out_dir, [c["window_end"] for c in cases])


if __name__ == "__main__":
    main()
