#!/usr/bin/env python3
"""tools/decoder_train: the prompt formatter (cq-prompt-v1), the training-example rules of prepare.py, and — where
torch, transformers and safetensors are importable (here or in $CQ_TRAIN_PYTHON, default /opt/venv-train/bin/python)
— LoRA training steps, the copy-constrained validation decoding and the adapter export (`clauseqa-lora-v1`) on a
tiny random Gemma-3 model. Without torch that part is skipped and the rest still runs (CI).

  python3 tests/integration/test_decoder_train.py [build/clauseqa]
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import types

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TOOLS = os.path.join(ROOT, "tools", "decoder_train")
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import cqprompt as P  # noqa: E402

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def test_formatter():
    check(P.lang_of("试用期最长多长时间？") == "zh", "lang zh")
    check(P.lang_of("What is 〸?") == "en", "U+3038 is not CJK")
    check(P.lang_of("〇") == "zh", "U+3007 is CJK")
    check(P.clean_question("  a\r\nb \u3000") == "a  b", "question: newlines to spaces, white space trimmed")
    zh = {"title": "劳动法", "label": "第四十四条", "text": "有下列情形之一的，\n支付报酬"}
    check(P.passage_line(zh, "zh") == "《劳动法》第四十四条 有下列情形之一的， 支付报酬", "zh header with label")
    zh2 = dict(zh, text="第四十四条 有下列情形")
    check(P.passage_line(zh2, "zh") == "《劳动法》第四十四条 有下列情形", "zh header: text starts with label")
    en = {"title": "MSA", "label": "7.2", "text": "Payment.\r\nNet 30."}
    check(P.passage_line(en, "en") == "MSA, 7.2. Payment.  Net 30.", "en header with label; \\r\\n -> two spaces")
    check(P.passage_line(dict(en, label=None), "en") == "MSA. Payment.  Net 30.", "en header without label")
    check(P.passage_line(dict(en, label="Payment"), "en") == "MSA. Payment.  Net 30.", "en: text starts with label")
    # the 800-character budget: first cut, next whole while they fit, the first that does not fit ends the list
    ps = [{"title": "a", "label": None, "text": "x" * 500}, {"title": "b", "label": None, "text": "y" * 300},
          {"title": "c", "label": None, "text": "z" * 1}]
    check(P.shown_passages(ps) == [(0, 500), (1, 300)], "budget: exactly 800 then stop")
    ps2 = [{"title": "a", "label": None, "text": "x" * 500}, {"title": "b", "label": None, "text": "y" * 301},
           {"title": "c", "label": None, "text": "z" * 10}]
    check(P.shown_passages(ps2) == [(0, 500)], "budget: the first that does not fit ends the list")
    check(P.shown_passages([{"text": "字" * 900}]) == [(0, 800)], "budget: first passage cut to 800")
    check(len(P.shown_passages([{"text": "a"}] * 7)) == 5, "at most 5 passages")
    prompt, flat = P.answer_prompt("试用期多长？", [zh, zh2])
    want = ("任务：回答\n材料：\n[1] 《劳动法》第四十四条 有下列情形之一的， 支付报酬\n[2] 《劳动法》第四十四条 有下列情形\n"
            "问题：试用期多长？\n答案：")
    check(prompt == want, "zh answer prompt")
    check(flat == [(0, "有下列情形之一的， 支付报酬"), (1, "第四十四条 有下列情形")], "flattened shown texts")
    prompt, _ = P.answer_prompt("How long?", [en])
    check(prompt == "Task: answer\nPassages:\n[1] MSA, 7.2. Payment.  Net 30.\nQuestion: How long?\nAnswer:",
          "en answer prompt")
    check(P.relevance_prompt("Net?", dict(en, text="w" * 450)) ==
          "Task: relevance\nPassage: MSA, 7.2. " + "w" * 400 + "\nQuestion: Net?\nRelevant:", "en relevance, 400 cut")
    check(P.relevance_prompt("多长？", zh) == "任务：相关性\n材料：《劳动法》第四十四条 有下列情形之一的， 支付报酬\n问题：多长？\n相关：",
          "zh relevance")
    check(P.answer_completion("en", span="Net 30.") == " Net 30.", "en span completion has one leading space")
    check(P.answer_completion("zh", verdict=False) == "否" and P.answer_completion("en", verdict=True) == " Yes",
          "verdicts")
    check(P.answer_completion("zh", refuse=True) == "无法回答" and
          P.answer_completion("en", refuse=True) == " Cannot be answered", "refusals")
    # FORMAT.md scoring and verbatim spans
    check(abs(P.char_f1("ＡＢ c", "abc") - 1.0) < 1e-9, "charF1 after norm")
    check(P.find_verbatim("支付 不低于工资的百分之一百五十", "不低于工资的 百分之一百五十") == "不低于工资的百分之一百五十",
          "find_verbatim ignores white space, returns the passage's own text")
    check(P.find_verbatim("Net  30 days", "net 30") == "Net  30", "find_verbatim folds case, keeps passage bytes")
    check(P.find_verbatim("abc", "zzz") is None, "find_verbatim: absent")
    g = {"doc": "d", "text": "支付报酬", "page": None}
    check(P.is_hit("d", "有下列情形，支付报酬。", None, g) and not P.is_hit("e", "支付报酬", None, g), "hit rule")
    check(P.is_hit("d", "anything", 3, {"doc": "d", "text": None, "page": None}), "hit rule: whole doc")


def test_prepare_rules():
    import prepare
    args = types.SimpleNamespace(en_variants=2, syn_rate={"zh": 1.0, "en": 1.0})

    class FakeStore:
        def clauses(self, kb):
            return {"d1": [prepare.passage("d1", "案一", None, "前文" * 500 + "被告赔偿原告损失八百元整。")],
                    "d2": [prepare.passage("d2", "案二", None, "无关的内容。")]}

    b = prepare.Builder(args, FakeStore(), random.Random(1))
    q = {"id": "q1", "question": "被告赔偿多少？", "type": "span_qa", "answerable": True,
         "gold": [{"doc": "d1", "clause": None, "page": None, "text": "八百元"}], "answers": ["八百元", "损失八百元整"]}
    cands = [prepare.passage("d2", "案二", None, "无关的内容。"), prepare.passage("d3", None, None, "另一个案子。")]
    b.qa_train("cjrc-dev", "kb", q, cands)
    ans = [r for r in b.train if r["task"] == "answer"]
    check(len(ans) == 1 and ans[0]["completion"] == "八百元", "answer: the shortest reference, gold put in")
    check(ans and "八百元" in ans[0]["prompt"] and ans[0]["meta"]["inserted"] is not None,
          "answer: the inserted gold clause is cut around the answer and shown")
    syn = [r for r in b.train if r["task"] == "abstain_syn"]
    check(len(syn) == 1 and syn[0]["completion"] == "无法回答" and "八百元" not in syn[0]["prompt"],
          "abstain_syn: wrong passages only, refusal")
    un = dict(q, id="q2", answerable=False, answers=[], gold=[{"doc": "d1", "clause": None, "page": None,
                                                                 "text": None}])
    b.qa_train("cjrc-dev", "kb", un, cands)
    ab = [r for r in b.train if r["task"] == "abstain"]
    check(len(ab) == 1 and "《案一》" in ab[0]["prompt"], "abstain: the question's own document is shown")
    check(prepare.generic_query('Highlight "X". Contract: A (file B)') == 'Highlight "X".' and
          prepare.generic_query("Consider the NDA of A; Does it?") == "Does it?", "generic_query")
    import dev_split
    check(dev_split.doc_is_validation("cjrc-dev", "1") in (True, False), "dev_split importable")


def test_reproduce():
    doc = {"format": "clauseqa-lora-v1", "rank": 16, "alpha": 32.0, "prompt_format": "cq-prompt-v1",
           "base": {"file": "gemma-3-270m-q4_k_m.gguf", "sha256": "0" * 64},
           "manifest": {"commit": "abc1234", "steps": 777,
                        "hyper_parameters": {"rank": 16, "alpha": 32.0, "lr": 0.0002, "batch": 32, "seed": 5,
                                             "mix": "answer=1", "attn": "sdpa"},
                        "data": {"licensed_only": True, "prepare_options": {"seed": 9, "rel_pairs": 1,
                                                                             "out": "/x", "limit": 0}}}}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "adapter.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        r = subprocess.run([sys.executable, os.path.join(TOOLS, "reproduce.py"), "--adapter", path, "--out",
                            os.path.join(d, "o"), "--dry-run"], capture_output=True, text=True)
    out = r.stdout
    check(r.returncode == 0, "reproduce --dry-run: %s" % r.stderr[-500:])
    lines = [l for l in out.splitlines() if not l.startswith("#")]
    check(len(lines) == 3 and "prepare.py" in lines[0] and "pack.py" in lines[1] and "train.py" in lines[2],
          "reproduce: prepare, pack, train")
    check(len(lines) == 3 and "--licensed-only" in lines[0] and "--rel-pairs 1" in lines[0] and "--seed 9" in lines[0],
          "reproduce: the recorded prepare options")
    check(len(lines) == 3 and "--steps 777" in lines[2] and "--rank 16" in lines[2] and "--mix answer=1" in lines[2],
          "reproduce: the recorded step count and hyper-parameters")


TORCH_PART = r'''
import json, os, sys, tempfile
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
import lora as L
import train as T
from transformers import Gemma3ForCausalLM, Gemma3TextConfig
torch.manual_seed(0)
cfg = Gemma3TextConfig(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, head_dim=32, sliding_window=16,
                       max_position_embeddings=256, pad_token_id=0, eos_token_id=1, bos_token_id=2)
model = Gemma3ForCausalLM(cfg).float().eval()
ids = torch.randint(3, 300, (2, 20))
with torch.no_grad():
    ref = model(input_ids=ids).logits
loras = L.add_lora(model, r=4, alpha=8)
assert len(loras) == 14, len(loras)
with torch.no_grad():
    same = model(input_ids=ids).logits
assert float((same - ref).abs().max()) < 1e-5, "B = 0 at start: the adapted model is the base"
# a few training steps on the completion-only loss
class D: pass
d = D()
rng = np.random.default_rng(0)
ex = [(np.concatenate([[2], rng.integers(3, 300, 12)]), np.concatenate([rng.integers(3, 300, 3), [1]])) for _ in range(4)]
d.example = lambda i: ex[i]
params = [p for m in loras.values() for p in (m.lora_a, m.lora_b)]
opt = torch.optim.AdamW(params, lr=1e-2)
model.train()
losses = []
for step in range(6):
    batch = T.collate(d, np.array([0, 1, 2, 3]), torch.device("cpu"))
    loss, tok = T.completion_loss(model, batch, lambda: torch.autocast("cpu", enabled=False))
    assert tok.numel() == 16, tok.numel()
    opt.zero_grad(); loss.backward(); opt.step(); losses.append(float(loss))
assert losses[-1] < losses[0], losses
model.eval()
out = tempfile.mkdtemp()
L.write_adapter(out, loras, 4, 8, "base.gguf", "0" * 64, {"steps": 6})
doc, back = L.read_adapter(out)
assert doc["format"] == "clauseqa-lora-v1" and doc["rank"] == 4 and doc["alpha"] == 8, doc
assert doc["prompt_format"] == "cq-prompt-v1" and doc["base"]["sha256"] == "0" * 64
assert set(back) == {"blk.%d.%s.lora_%s" % (l, p, w) for l in range(2) for p in L.HF_TO_GGUF.values() for w in "ab"}
shapes = L.hf_weight_shapes(model)
assert shapes["blk.0.attn_q.weight"] == (64, 64) and shapes["blk.0.ffn_down.weight"] == (64, 96), shapes
assert back["blk.1.ffn_down.lora_a"].shape == (4, 96) and back["blk.1.ffn_down.lora_b"].shape == (64, 4)
assert back["blk.0.attn_k.lora_b"].shape == (32, 4)
bad = L.check_adapter(doc, back, shapes)
assert not bad, bad
bad2 = L.check_adapter(doc, {"blk.0.attn_q.lora_a": back["blk.0.attn_q.lora_b"]}, shapes)
assert bad2, "a wrong shape is caught"
# the runtime's formula W' = W + (alpha/r) B A, merged into a fresh base, gives the adapted model's logits
with torch.no_grad():
    lo = model(input_ids=ids).logits
    torch.manual_seed(0)
    base = Gemma3ForCausalLM(cfg).float().eval()
    for l, layer in enumerate(base.model.layers):
        for hf, g in L.HF_TO_GGUF.items():
            lin = getattr(layer.self_attn if hf in L.ATTN else layer.mlp, hf)
            lin.weight.copy_(L.merged_weight(lin.weight, back["blk.%d.%s.lora_a" % (l, g)],
                                             back["blk.%d.%s.lora_b" % (l, g)], doc["rank"], doc["alpha"]))
    merged = base(input_ids=ids).logits
diff = float((merged - lo).abs().max())
assert diff < 1e-4, diff
assert float((lo - ref).abs().max()) > 1e-3, "training moved the model"
# copy-constrained greedy decoding through generate(): every answer is a span of a shown passage or the refusal
vocab = [None, None, None] + [bytes([97 + (i % 26)]) if i % 3 else b" " + bytes([97 + (i % 26)]) for i in range(3, 300)]
passage = b"hello world abc"
states = [{"flat": [passage], "words": [b"Cannot be answered", b"Yes", b"No"], "refusal": b"Cannot be answered",
           "refusal_id": 5, "ans": b"", "done": False, "n": 0} for _ in range(2)]
from transformers import LogitsProcessorList
proc = T.CopyConstraint(states, vocab, [1], 64)
pr, mask = T.left_pad([np.array([2, 10, 11, 12]), np.array([2, 13])], 0, torch.device("cpu"))
model.config.use_cache = True
model.generate(input_ids=pr, attention_mask=mask, max_new_tokens=8, do_sample=False,
               logits_processor=LogitsProcessorList([proc]), eos_token_id=[1], pad_token_id=0)
for st in states:
    a = st["ans"]
    assert a and (a in passage or b"Cannot be answered".startswith(a) or b"Yes".startswith(a) or b"No".startswith(a)), a
    assert 0.0 <= st["p_refuse"] <= 1.0
# the reranker's score: logit(yes) - logit(no) at the last prompt position, batched with right padding
prompts = [np.array([2, 7, 8, 9, 10]), np.array([2, 11]), np.array([2, 12, 13, 14])]
sc = T.relevance_scores(model, prompts, [(20, 21)] * 3, lambda: torch.autocast("cpu", enabled=False), torch.device("cpu"))
model.config.use_cache = False
for p_, v in zip(prompts, sc):
    with torch.no_grad():
        lg = model(input_ids=torch.tensor([p_])).logits[0, -1]
    assert abs(float(lg[20] - lg[21]) - v) < 1e-4, (float(lg[20] - lg[21]), v)
print("torch part ok: losses %.3f -> %.3f, merged vs LoRA logits %.1e, answers %r" % (losses[0], losses[-1], diff,
      [s["ans"] for s in states]))
'''


def test_torch():
    py = None
    try:
        import safetensors  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
        py = sys.executable
    except ImportError:
        cand = os.environ.get("CQ_TRAIN_PYTHON", "/opt/venv-train/bin/python")
        if os.path.exists(cand):
            py = cand
    if not py:
        print("skip: no Python with torch + transformers + safetensors (set CQ_TRAIN_PYTHON)")
        return
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(TORCH_PART)
    try:
        r = subprocess.run([py, f.name, TOOLS], capture_output=True, text=True, timeout=500)
    finally:
        os.unlink(f.name)
    print(r.stdout.strip()[-2000:])
    check(r.returncode == 0, "torch part (%s): %s" % (py, r.stderr.strip()[-3000:]))


def main():
    test_formatter()
    test_prepare_rules()
    test_reproduce()
    test_torch()
    if FAILS:
        print("%d failure(s)" % len(FAILS))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
