"""Writes the fixtures that tie the C runtime to the PyTorch reference (tests/unit/test_ssm_ref.c reads them):

  tests/data/ssm/{uni,bidir}/ssm.json, ssm.safetensors   tiny random models (vocab 64, d_model 8)
  tests/data/ssm/{uni,bidir}/cases.json                  token sequences with their outputs, vectors, final state
  tests/data/ssm/tokenizer.json                          texts and their cq-hash-v1 ids
  tests/data/ssm/table/                                  the same for an external-vocabulary input layer (markers +
                                                         projected table rows, docs/SSM.md "Input layer"): a random
                                                         300 x 16 table in table.json, lent by the C test

Expected values are computed in float64 from the float32 weights, so they are the exact answer to within 1e-12 and
the C float32 result must match them to the tolerance the test states. Deterministic: fixed seeds.

    python3 tools/ssm_ref/make_fixtures.py [OUT_DIR]      (default tests/data/ssm)
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ssm_ref  # noqa: E402
import tokenizer  # noqa: E402

TINY = dict(vocab_size=64, d_model=8, n_layer=2, d_state=4, d_conv=4, expand=2, dt_rank=2, d_embed=8)


def flat(t):
    return [float("%.9g" % v) for v in t.detach().reshape(-1).tolist()]


def make_cases(model, seed):
    g = torch.Generator().manual_seed(seed)
    cases = []
    # (length, segment ends, split): split is where the C test cuts the sequence into two calls (a segment end)
    shapes = [(1, [1], 0), (7, [3, 7], 3), (40, [5, 6, 20, 33, 40], 20), (65, [64, 65], 64)]
    m64 = model.double()
    for L, ends, split in shapes:
        tokens = torch.randint(0, model.c.vocab_size, (L,), generator=g)
        with torch.no_grad():
            out, vec, (conv, hs) = m64(tokens, ends)
        cases.append({"tokens": tokens.tolist(), "segment_ends": ends, "split": split, "outputs": flat(out),
                      "vectors": flat(vec), "conv": flat(torch.stack(conv)), "h": flat(torch.stack(hs))})
    return cases


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/data/ssm"
    for name, bidir, seed in (("uni", False, 1), ("bidir", True, 2)):
        cfg = ssm_ref.Config(**TINY, bidirectional=bidir)
        model = ssm_ref.SSMEncoder(cfg)
        ssm_ref.random_init(model, seed)
        d = os.path.join(out_dir, name)
        ssm_ref.save(model, d)
        with open(os.path.join(d, "cases.json"), "w") as f:
            json.dump({"cases": make_cases(model, seed + 100)}, f)
            f.write("\n")
    # external vocabulary "test-table": ids 0..4 the markers, the others rows of a random table, projected
    cfg = ssm_ref.Config(**dict(TINY, vocab_size=300), tokenizer="test-table", token_embd_dim=16,
                         token_table_id="test-table-1")
    model = ssm_ref.SSMEncoder(cfg)
    g = torch.Generator().manual_seed(7)
    rows = (torch.randn(300, 16, generator=g) * 0.05).float()
    model.embedding.set_table(torch.arange(300), rows)
    ssm_ref.random_init(model, 3)
    d = os.path.join(out_dir, "table")
    ssm_ref.save(model, d)
    with open(os.path.join(d, "table.json"), "w") as f:
        json.dump({"n_vocab": 300, "n_embd": 16, "rows": flat(rows)}, f)
        f.write("\n")
    with open(os.path.join(d, "cases.json"), "w") as f:
        json.dump({"cases": make_cases(model, 103)}, f)
        f.write("\n")
    texts = ["《XX省数字经济促进条例》第三章第十二条规定的申报条件有哪些？", "What does Section 7.2 say about termination?",
             "员工加班费怎么算？ Overtime pay, Art. 44", "  tabs\tand\nnewlines　全角空格  ", "Ünïcödé — «quotes» …",
             "第十二条之一 a b C D", "emoji 😀 and ｆｕｌｌｗｉｄｔｈ", ""]
    items = [{"hex": t.encode().hex(), "ids": tokenizer.tokenize(t)} for t in texts]
    bad = b"ok\xff\xfe bad \xe4\xb8 cut \xed\xa0\x80 surrogate \xc0\xaf overlong"
    items.append({"hex": bad.hex(), "ids": tokenizer.tokenize(bad)})
    with open(os.path.join(out_dir, "tokenizer.json"), "w") as f:
        json.dump({"tokenizer": "cq-hash-v1", "items": items}, f, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
