"""Writes tests/data/ssm/train/: a small random model and the vectors the TRAINING model (model.py's parallel
forward, tokenizer twin, document/query layout, pooling) gives for a few documents and questions, in float64 from the
float32 weights. tests/unit/test_ssm_train_parity.c encodes the same texts with the C runtime (text-level calls:
tokenizer, BOS/SEP/QRY, pooling) and must match to a relative error <= 1e-4. The generator also checks the parallel
forward against ssm_ref's sequential loop on the same weights (<= 1e-9 in float64).

    python3 tools/ssm_train/make_parity_fixture.py [OUT_DIR]     (default tests/data/ssm/train)

Deterministic (fixed seed). The vocabulary is the full 32768 because the text-level calls need it.

With the decoder's GGUF present (data/models/gemma-3-270m-q4_k_m.gguf) it also writes tests/data/ssm/train_gemma/:
the same for an encoder on the Gemma-3 vocabulary (docs/SSM.md, "Input layer"), tokenized by gemma_vocab.py (the C
tokenizer itself) and fed the table's rows as the runtime dequantizes them; test_ssm_train_parity.c lends the C side
the same GGUF through app/ssm_vocab.c (and skips where the GGUF is not installed).
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as tm  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ssm_ref"))
import tokenizer  # noqa: E402

SMALL = dict(vocab_size=32768, d_model=8, n_layer=2, d_state=4, d_conv=4, expand=2, dt_rank=2, d_embed=8)

DOCS = [
    ["中华人民共和国劳动合同法", "第一章 总则", "第一条 为了完善劳动合同制度，明确劳动合同双方当事人的权利和义务，保护劳动者的合法权益，制定本法。",
     "第四十七条 经济补偿按劳动者在本单位工作的年限，每满一年支付一个月工资的标准向劳动者支付。六个月以上不满一年的，按一年计算。"],
    ["NON-DISCLOSURE AGREEMENT", "1. Definitions. \"Confidential Information\" means any information disclosed by either party.",
     "7.2 Termination. Either party may terminate this Agreement upon thirty (30) days' written notice.", "8. Governing Law."],
    ["《XX省数字经济促进条例》", "第十二条之一 申报条件：（一）依法设立；（二）信用良好。 Ünïcödé — «quotes» …"],
]
QUERIES = ["劳动合同解除的经济补偿怎么计算？", "What does Section 7.2 say about termination?", "第十二条之一 a b C D",
           "员工加班费怎么算？ Overtime pay, Art. 44"]


def flat(t):
    return [float("%.12g" % v) for v in t.detach().reshape(-1).tolist()]


def gemma_fixture(out_dir, weights=None):
    """weights: a trained gemma3 encoder's folder (train.py's export) to write the fixture for, instead of a small
    random model: `make_parity_fixture.py --weights DIR OUT` then shows the C runtime gives that encoder's vectors."""
    import numpy as np
    import gemma_vocab
    v = gemma_vocab.Vocab()
    docs_tok = [[v.encode(c).tolist() for c in d] for d in DOCS]
    q_tok = [v.encode(q).tolist() for q in QUERIES]
    ids = sorted(set(i for d in docs_tok for c in d for i in c) | set(i for q in q_tok for i in q))
    if weights:
        from safetensors.torch import load_file
        j = json.load(open(os.path.join(weights, "ssm.json")))
        cfg = tm.Config(**{k: j[k] for k in ("vocab_size", "d_model", "n_layer", "d_state", "d_conv", "expand",
                                              "dt_rank", "d_embed", "bidirectional", "norm_eps", "tokenizer",
                                              "token_embd_dim", "token_table_id")})
        model = tm.SSMEncoder(cfg)
        model.embedding.set_table(ids, v.rows(ids))
        model.load_state_dict({k: t.float() for k, t in load_file(os.path.join(weights, "ssm.safetensors")).items()})
    else:
        cfg = tm.Config(**dict(SMALL, vocab_size=v.n_vocab), tokenizer="gemma3", token_embd_dim=v.n_embd,
                        token_table_id=v.table_id)
        model = tm.SSMEncoder(cfg)
        model.embedding.set_table(ids, v.rows(ids))
        tm.random_init(model, 12)
    tm.ssm_ref.save(model, out_dir)
    m64 = model.double()
    cases = []
    with torch.no_grad():
        vecs = tm.encode_documents(m64, docs_tok, "cpu")
        for d, dt, v in zip(DOCS, docs_tok, vecs):
            toks, starts, ends = tm.document_tokens(dt)
            _, v_ref, _ = m64(torch.as_tensor(toks), ends)
            assert ((v - v_ref).abs().max() / v_ref.abs().max()).item() < 1e-9
            cases.append({"kind": "document", "clauses": d, "vectors": flat(v)})
        qv = tm.encode_queries(m64, q_tok, "cpu")
        for q, v in zip(QUERIES, qv):
            cases.append({"kind": "query", "text": q, "vectors": flat(v)})
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump({"note": "vectors from tools/ssm_train/model.py (float64) for ssm.safetensors on the Gemma-3 "
                           "vocabulary of data/models/gemma-3-270m-q4_k_m.gguf",
                   "token_ids": {"documents": docs_tok, "queries": q_tok}, "cases": cases}, f, ensure_ascii=False)
        f.write("\n")
    print("wrote", out_dir, "(%d distinct token ids)" % len(ids), np.asarray(ids[:5]))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--weights":
        gemma_fixture(sys.argv[3], sys.argv[2])
        return
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/data/ssm/train"
    gemma_dir = os.path.join(os.path.dirname(out_dir.rstrip("/")), "train_gemma")
    import gemma_vocab
    if os.path.exists(gemma_vocab.DEFAULT_GGUF):
        gemma_fixture(gemma_dir)
    cfg = tm.Config(**SMALL)
    model = tm.SSMEncoder(cfg)
    tm.random_init(model, 11)
    tm.ssm_ref.save(model, out_dir)
    m64 = model.double()
    cases = []
    with torch.no_grad():
        docs_tok = [[tokenizer.tokenize(c) for c in d] for d in DOCS]
        vecs = tm.encode_documents(m64, docs_tok, "cpu")
        for d, dt, v in zip(DOCS, docs_tok, vecs):
            toks, starts, ends = tm.document_tokens(dt)
            _, v_ref, _ = m64(torch.as_tensor(toks), ends)      # ssm_ref's sequential loop, same weights
            err = ((v - v_ref).abs().max() / v_ref.abs().max()).item()
            assert err < 1e-9, "parallel forward vs ssm_ref: %g" % err
            cases.append({"kind": "document", "clauses": d, "vectors": flat(v)})
        qv = tm.encode_queries(m64, [tokenizer.tokenize(q) for q in QUERIES], "cpu")
        for q, v in zip(QUERIES, qv):
            _, v_ref, _ = m64(torch.as_tensor(tm.query_tokens(tokenizer.tokenize(q))), [len(tokenizer.tokenize(q)) + 1])
            err = ((v - v_ref[0]).abs().max() / v_ref.abs().max()).item()
            assert err < 1e-9, "query: parallel forward vs ssm_ref: %g" % err
            cases.append({"kind": "query", "text": q, "vectors": flat(v)})
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump({"note": "vectors from tools/ssm_train/model.py (float64) for ssm.safetensors",
                   "cases": cases}, f, ensure_ascii=False)
        f.write("\n")
    print("wrote", out_dir)


if __name__ == "__main__":
    main()
