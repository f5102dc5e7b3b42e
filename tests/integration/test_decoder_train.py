#!/usr/bin/env python3
"""tools/decoder_train: the prompt formatter (cq-prompt-v1), the training-example rules of prepare.py, and — where
torch, transformers and safetensors are importable (here or in $CQ_TRAIN_PYTHON, default /opt/venv-train/bin/python)
— LoRA training steps, the copy-constrained validation decoding and the adapter export (`clauseqa-lora-v1`) on a
tiny random Gemma-3 model, and on a tiny random Qwen2 model written as a GGUF (tools/decoder_train/base.py: the
fast loader's names, biases and untied output give the original model's logits; GPT-2 byte-level token bytes; the
micro-batched step's gradients equal the whole batch's; the runtime's refusal_p rule; the threshold choice). Without
torch that part is skipped and the rest still runs (CI).

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
    args = types.SimpleNamespace(en_variants=2, syn_rate={"zh": 1.0, "en": 1.0}, syn_same_doc=0.0)

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
    # hard unanswerables: the gold document's own clauses that hold no reference answer (nor its number)
    args2 = types.SimpleNamespace(en_variants=1, syn_rate={"zh": 1.0, "en": 1.0}, syn_same_doc=1.0)

    class SameDocStore:
        def clauses(self, kb):
            return {"d1": [prepare.passage("d1", "案一", "第一条", "被告赔偿原告损失800元整。"),
                           prepare.passage("d1", "案一", "第二条", "被告另支付诉讼费用800元。"),
                           prepare.passage("d1", "案一", "第三条", "被告应当赔偿原告的交通费用，由法院另行认定。")],
                    "d2": [prepare.passage("d2", "案二", None, "无关的内容。")]}

    b2 = prepare.Builder(args2, SameDocStore(), random.Random(1))
    q3 = {"id": "q3", "question": "被告赔偿多少？", "type": "span_qa", "answerable": True,
          "gold": [{"doc": "d1", "clause": "第一条", "page": None, "text": "800元"}], "answers": ["800元"]}
    b2.qa_train("cjrc-dev", "kb", q3, cands)
    syn2 = [r for r in b2.train if r["task"] == "abstain_syn"]
    check(len(syn2) == 1 and syn2[0]["meta"]["kind"] == "same_doc" and "交通费用" in syn2[0]["prompt"] and
          "800" not in syn2[0]["prompt"] and "[1] 《案一》" in syn2[0]["prompt"] and
          syn2[0]["completion"] == "无法回答",
          "abstain_syn same_doc: the gold document's clause without the answer (nor its number) first, refusal: %r"
          % (syn2[0]["prompt"] if syn2 else None))
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
    # an adapter trained on from another (train.py --init): reproduce needs that adapter, checked by its sha256
    with tempfile.TemporaryDirectory() as d:
        prev = os.path.join(d, "prev")
        os.makedirs(prev)
        with open(os.path.join(prev, "adapter.safetensors"), "wb") as f:
            f.write(b"weights")
        import hashlib
        doc2 = json.loads(json.dumps(doc))
        doc2["manifest"]["init"] = {"sha256": hashlib.sha256(b"weights").hexdigest(), "steps": 563, "commit": "3f52f7a"}
        doc2["manifest"]["data"]["prepare_options"].update(heldout_share=0.2, heldout_rounds="cuad-dev=5")
        path = os.path.join(d, "adapter.json")
        with open(path, "w") as f:
            json.dump(doc2, f)
        base = [sys.executable, os.path.join(TOOLS, "reproduce.py"), "--adapter", path, "--out", os.path.join(d, "o"),
                "--dry-run"]
        r1 = subprocess.run(base, capture_output=True, text=True)
        check(r1.returncode != 0 and "--init" in r1.stderr and "563" in r1.stderr,
              "reproduce: an --init adapter is required for a continued run: %s" % r1.stderr[-300:])
        r2 = subprocess.run(base + ["--init", prev], capture_output=True, text=True)
        lines2 = [l for l in r2.stdout.splitlines() if not l.startswith("#")]
        check(r2.returncode == 0 and len(lines2) == 3 and ("--init " + prev) in lines2[2] and
              "--heldout-share 0.2" in lines2[0] and "--heldout-rounds cuad-dev=5" in lines2[0],
              "reproduce: --init passed on, the held-out options recorded: %s" % (r2.stdout + r2.stderr)[-400:])
        with open(os.path.join(prev, "adapter.safetensors"), "wb") as f:
            f.write(b"other weights")
        r3 = subprocess.run(base + ["--init", prev], capture_output=True, text=True)
        check(r3.returncode != 0 and "sha256" in r3.stderr, "reproduce: another init adapter is refused")


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
# --init: a fresh LoRA started from the written adapter is the trained model (F32 exactly; int8 rows within their
# rounding), and a wrong rank / missing factor / non-finite value / other base is refused before anything is used
import importlib, subprocess as sp
with torch.no_grad():
    torch.manual_seed(0)
    m2 = Gemma3ForCausalLM(cfg).float().eval()
    l2 = L.add_lora(m2, r=4, alpha=8)
    assert float((m2(input_ids=ids).logits - ref).abs().max()) < 1e-5
    assert L.load_into(l2, doc, back, 4, 8) == 28
    d_f32 = float((m2(input_ids=ids).logits - lo).abs().max())
    assert d_f32 < 1e-5, d_f32
    out8 = tempfile.mkdtemp()
    r8 = sp.run([sys.executable, os.path.join(sys.argv[1], "adapter_int8.py"), out, out8], capture_output=True, text=True)
    assert r8.returncode == 0, r8.stderr
    doc8, back8 = L.read_adapter(out8)
    assert back8["blk.0.attn_q.lora_a"].dtype == torch.int8
    torch.manual_seed(0)
    m3 = Gemma3ForCausalLM(cfg).float().eval()
    l3 = L.add_lora(m3, r=4, alpha=8)
    L.load_into(l3, doc8, back8, 4, 8)
    lo3 = m3(input_ids=ids).logits
    d_i8 = float((lo3 - lo).abs().max()) / float((lo - ref).abs().max())
    assert d_i8 < 0.05, d_i8
    before = l3[(0, "attn_q")].lora_a.clone()
    for bad_doc, bad_t, what in ((dict(doc, rank=8), back, "rank"),
                                 (doc, {k: v for k, v in back.items() if k != "blk.1.ffn_up.lora_b"}, "missing"),
                                 (doc, dict(back, **{"blk.1.ffn_up.lora_b": back["blk.1.ffn_up.lora_b"] * float("nan")}),
                                  "not finite"),
                                 (doc, dict(back, **{"blk.0.attn_q.lora_a": back["blk.0.attn_q.lora_a"][:, :8]}), "shape")):
        try:
            L.load_into(l3, bad_doc, bad_t, 4, 8)
            raise AssertionError("load_into took a bad adapter: " + what)
        except ValueError:
            pass
    assert torch.equal(l3[(0, "attn_q")].lora_a, before), "a refused adapter changed nothing"
try:
    T.load_init(l3, out, 4, 8, "1" * 64)
    raise AssertionError("an adapter of another base was taken")
except SystemExit as e:
    assert "base sha256" in str(e), e
info = T.load_init(l3, out8, 4, 8, "0" * 64)
assert info["steps"] == 6 and info["tensors"] == 28 and len(info["sha256"]) == 64, info
print("init ok: F32 %.1e, int8 %.1e relative to the training's change" % (d_f32, d_i8))
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


QWEN_PART = r'''
import json, os, sys, tempfile
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
import gguf
import base as BASE
import lora as L
import train as T
from transformers import Qwen2Config, Qwen2ForCausalLM
torch.manual_seed(0)
# a tiny random Qwen2 (GQA 4:2, q/k/v biases, untied output), written as a GGUF the way llama.cpp names it
cfg = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-6, rope_theta=1000000.0,
                  tie_word_embeddings=False, bos_token_id=60, eos_token_id=61)
ref = Qwen2ForCausalLM(cfg).float().eval()
with torch.no_grad():
    for n, p in ref.named_parameters():
        if n.endswith("bias") or "norm" in n:
            p.add_(torch.randn_like(p) * 0.1)   # non-trivial biases and norms
d = tempfile.mkdtemp()
path = os.path.join(d, "tiny-qwen2.gguf")
w = gguf.GGUFWriter(path, "qwen2")
w.add_block_count(2); w.add_context_length(128); w.add_embedding_length(32); w.add_feed_forward_length(48)
w.add_head_count(4); w.add_head_count_kv(2); w.add_rope_freq_base(1000000.0); w.add_layer_norm_rms_eps(1e-6)
w.add_tokenizer_model("gpt2"); w.add_tokenizer_pre("qwen2")
byte_map = {b: c for c, b in BASE._byte_decoder().items()}
toks = ["".join(byte_map[b] for b in t.encode("utf-8")) for t in
        ["a", " hello", "你", "你好", " world", "\n", "！"]] + ["t%d" % i for i in range(7, 60)] + \
       ["<|endoftext|>", "<|im_end|>", "<|im_start|>", "<|fim_prefix|>"]
types = [1] * 60 + [3, 3, 3, 4]
w.add_token_list(toks); w.add_token_types(types)
w.add_bos_token_id(60); w.add_eos_token_id(61); w.add_add_bos_token(False)
names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
         "lm_head.weight": "output.weight"}
inv = {v: k for k, v in BASE.QWEN2_NAMES.items()}
for n, p in ref.named_parameters():
    if n in names:
        g = names[n]
    else:
        parts = n.split(".")   # model.layers.L.<module>.<proj>.<weight|bias>
        mod = ".".join(parts[3:-1])
        g = "blk.%s.%s.%s" % (parts[2], inv[mod], parts[-1])
    assert BASE.hf_name(g) == n, (g, n)
    w.add_tensor(g, p.detach().numpy().astype(np.float32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
info = BASE.describe(path)
assert info["arch"] == "qwen2" and not info["add_bos"] and info["eos"] == 61 and info["stop_ids"] == [61, 60], info
assert not info["tied_output"] and info["n_layers"] == 2, info
vb = BASE.vocab_bytes(path)
assert vb[0] == b"a" and vb[1] == b" hello" and vb[2] == "你".encode() and vb[3] == "你好".encode(), vb[:4]
assert vb[5] == b"\n" and vb[6] == "！".encode() and vb[60] is None and vb[63] is None, (vb[5], vb[60], vb[63])
model = BASE.load_fast(path, log=lambda *a: None, threads=2)
ids = torch.randint(0, 60, (2, 11))
with torch.no_grad():
    a = ref(input_ids=ids).logits
    b = model(input_ids=ids).logits
diff = float((a - b).abs().max())
assert diff < 1e-5, diff
assert T.check_orientation(model, path) == 0.0
shapes = L.gguf_weight_shapes(path)
assert L.adapter_bytes(shapes, 4, 2) == 2 * 4 * 2 * (32 + 32 + 32 + 16 + 32 + 16 + 32 + 32 + 2 * (32 + 48) + 48 + 32)
loras = L.add_lora(model, r=4, alpha=8)
assert len(loras) == 14 and L.hf_weight_shapes(model)["blk.0.attn_k.weight"] == (16, 32)
assert model.model.layers[0].self_attn.q_proj.base.bias is not None, "the biases stay in the base"
# micro-batches: the accumulated gradients are the whole batch's
class D: pass
data = D()
rng = np.random.default_rng(1)
ex = [(rng.integers(0, 60, int(rng.integers(4, 15))), np.concatenate([rng.integers(0, 60, int(rng.integers(1, 4))), [61]]))
      for _ in range(6)]
data.example = lambda i: ex[i]
data.length = np.array([len(p) + len(c) for p, c in ex])
data.max_completion = 192
mbs = T.micro_batches(data, np.arange(6), 30)
assert sorted(int(i) for m in mbs for i in m) == list(range(6)) and len(mbs) > 1
assert all(len(m) == 1 or len(m) * max(data.length[m]) <= 30 for m in mbs), mbs
params = [p for m in loras.values() for p in (m.lora_a, m.lora_b)]
with torch.no_grad():
    for p_ in params:
        p_.normal_(0, 0.05)
noauto = lambda: torch.autocast("cpu", enabled=False)
for norm in ("example", "token"):
    grads = []
    for mt in (0, 30):
        for p_ in params:
            p_.grad = None
        loss, per, skip = T.train_step(model, data, np.arange(6), torch.device("cpu"), noauto, norm, mt)
        assert skip == [], skip
        grads.append(torch.cat([p_.grad.flatten() for p_ in params]))
        if mt == 0:
            whole = loss
        else:
            assert abs(loss - whole) < 1e-5, (norm, loss, whole)
        assert sorted(i for i, _ in per) == list(range(6))
    gd = float((grads[0] - grads[1]).abs().max())
    assert gd < 1e-6 * max(1.0, float(grads[0].abs().max())) * 10, (norm, gd)
# a non-finite micro-batch (the Qwen2.5-1.5B run of 2026-12-06 stopped with "step 26: loss nan" after 25 finite
# steps, its batches being well-formed): the example that is non-finite on its own is skipped and reported, the step
# is the other examples' (renormalized), and no gradient is NaN. Token 59's embedding is poisoned with NaN here.
data2 = D()
ex2 = [(rng.integers(0, 59, int(rng.integers(4, 15))), np.concatenate([rng.integers(0, 59, int(rng.integers(1, 4))), [61]]))
       for _ in range(6)]
ex2[3] = (np.concatenate([ex2[3][0][:3], [59], ex2[3][0][3:]]), ex2[3][1])
data2.example = lambda i: ex2[i]
data2.length = np.array([len(p) + len(c) for p, c in ex2])
data2.max_completion = 192
emb = model.model.embed_tokens.weight
saved = emb.detach()[59].clone()
with torch.no_grad():
    emb[59] = float("nan")
for norm in ("example", "token"):
    res = []
    for sel in (np.arange(6), np.array([0, 1, 2, 4, 5])):
        for p_ in params:
            p_.grad = None
        msgs = []
        loss, per, skip = T.train_step(model, data2, sel, torch.device("cpu"), noauto, norm, 30, params,
                                       report=msgs.append)
        g = torch.cat([p_.grad.flatten() for p_ in params])
        assert np.isfinite(loss) and bool(torch.isfinite(g).all()), (norm, loss, msgs)
        res.append((loss, g, skip, msgs))
    (l6, g6, s6, m6), (l5, g5, s5, m5) = res
    assert s6 == [3] and s5 == [], (s6, s5)
    assert any("example 3 skipped" in m for m in m6) and not m5, m6
    assert abs(l6 - l5) < 1e-5 and float((g6 - g5).abs().max()) < 1e-5 * max(1.0, float(g5.abs().max())), \
        (norm, l6, l5, float((g6 - g5).abs().max()))
with torch.no_grad():
    emb[59] = saved
# the runtime's refusal_p: the probability of the candidates whose piece (leading spaces dropped) starts the refusal
vocab = [b"\xe6\x97\xa0", b"\xe6\x97\xa0\xe6\xb3\x95", b" ", b"x", b"y"] + [b"z"] * 59
st = [{"flat": [b"xy"], "words": [], "refusal": "无法回答".encode(), "refusal_id": 0, "ans": b"", "done": False,
       "n": 0}]
proc = T.CopyConstraint(st, vocab, [61], 8)
scores = torch.full((1, 64), -30.0)
scores[0, :5] = torch.tensor([2.0, 1.0, 0.5, 1.5, 0.0])
out = proc(torch.zeros((1, 1), dtype=torch.long), scores)
pr = torch.softmax(scores[0], -1)
assert abs(st[0]["p_refuse"] - float(pr[0] + pr[1])) < 1e-6, st[0]["p_refuse"]
assert int(out[0].argmax()) == 3 and st[0]["ans"] == b"x", "the refusal is masked: the best admissible span token"
# the threshold: chosen on calibration rows by refusal_threshold.py's objective
rows = [{"source": "s", "answerable": True, "has_answers": True, "f1": 1.0, "p": 0.2},
        {"source": "s", "answerable": True, "has_answers": True, "f1": 0.5, "p": 0.8},
        {"source": "s", "answerable": False, "has_answers": False, "f1": 0.0, "p": 0.95}]
t, curve = T.choose_threshold(rows)
assert 0.8 < t <= 0.95, (t, curve)
res, _ = T.score_answers([dict(r, i=k, id=str(k), gold_shown=True, answer="a", refs=["a"], em=r["f1"]) for k, r in enumerate(rows)], t)
assert res["s"]["abstain_unanswerable"] == 1.0 and res["s"]["false_abstention"] == 0.0 and res["s"]["f1"] == 0.75, res
print("qwen2 part ok: fast GGUF load vs the original logits %.1e, micro-batch gradients %.1e, threshold %.2f"
      % (diff, gd, t))
'''


def train_python():
    """A Python with torch + transformers + safetensors + gguf: this one, else $CQ_TRAIN_PYTHON (default
    /opt/venv-train/bin/python) when it can import them; None: the torch parts are skipped."""
    need = "import safetensors, torch, transformers, gguf"
    try:
        exec(need)
        return sys.executable
    except ImportError:
        pass
    cand = os.environ.get("CQ_TRAIN_PYTHON", "/opt/venv-train/bin/python")
    if os.path.exists(cand) and subprocess.run([cand, "-c", need], capture_output=True).returncode == 0:
        return cand
    return None


def run_part(py, code, what):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    try:
        r = subprocess.run([py, f.name, TOOLS], capture_output=True, text=True, timeout=500)
    finally:
        os.unlink(f.name)
    print(r.stdout.strip()[-2000:])
    check(r.returncode == 0, "%s (%s): %s" % (what, py, r.stderr.strip()[-3000:]))


def test_torch():
    py = train_python()
    if not py:
        print("skip: no Python with torch + transformers + safetensors + gguf (set CQ_TRAIN_PYTHON)")
        return
    run_part(py, TORCH_PART, "torch part")
    run_part(py, QWEN_PART, "qwen2 part")


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
