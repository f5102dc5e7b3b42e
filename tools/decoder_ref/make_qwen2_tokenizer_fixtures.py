#!/usr/bin/env python3
"""Reference token ids for the qwen2 tokenizer (tests/unit/test_decoder_qwen2.c): transformers' tokenizer built
from the GGUF itself (AutoTokenizer with gguf_file: the vocabulary, merges and Qwen2's split regex, no normalizer),
on Chinese, English, mixed, digit, whitespace, emoji and special-token strings. Reference tool only: CI never runs
it (the tokenizer conversion takes ~1 min).
  /opt/venv-train/bin/python tools/decoder_ref/make_qwen2_tokenizer_fixtures.py \
      data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf tests/data/decoder/qwen2_tokenizer_ids.json
"""
import json
import os
import sys

from transformers import AutoTokenizer

TEXTS = [
    "你好，世界！",
    "中华人民共和国劳动法第一条 为了保护劳动者的合法权益，调整劳动关系。",
    "用人单位应当支付不低于工资的百分之一百五十的工资报酬；",
    "The capital of France is Paris.",
    "I'm sure they'll say it's fine, but we've seen THEY'RE wrong; he'd agree. Don'T",
    "Article 44: overtime pay is 150% (not 200%) of the wage.",
    "第44条规定：加班费按150%支付，休息日为200%。Mixed 中英文 text with 数字 12345 and 3.14159.",
    "1234567890 ２０２６年１２月６日 ⅣⅫ ½ ①②",
    "  leading spaces,   inner   runs, trailing   ",
    "tabs\tand\t\tnewlines\n\nline two\r\nline three\n   \n  indented\n",
    "emoji 😀👍🏽 and 🇨🇳 flags, ZWJ 👨‍👩‍👧",
    "code: def f(x):\n    return x**2  # square\n",
    "punctuation!!! ??? ... —— 《书名》「引号」【括号】",
    "Ünïcödé café naïve résumé ΑΒΓ кириллица العربية हिन्दी 한국어 日本語のテキスト",
    " ",
    "\n",
    "a",
    "<|im_start|>user\n公司的注册资本最低限额是多少？<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|> plain text after a special token",
]


def main():
    path, out = sys.argv[1], sys.argv[2]
    d, f = os.path.split(os.path.abspath(path))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    cases = []
    for t in TEXTS:
        # with special tokens parsed (transformers always matches added tokens) and as plain text (split_special_tokens)
        ids = tok.encode(t, add_special_tokens=False)
        plain = tok(t, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        cases.append({"text": t, "ids": ids, "plain_ids": plain})
        print(len(ids), repr(t[:40]))
    doc = {"model": f, "reference": "transformers AutoTokenizer(gguf_file) %s" % __import__("transformers").__version__,
           "cases": cases}
    with open(out, "w", encoding="utf-8") as fp:
        json.dump(doc, fp, ensure_ascii=False, indent=0)
        fp.write("\n")


if __name__ == "__main__":
    main()
