#!/usr/bin/env python3
"""Reference token ids for tests/unit/test_decoder_tokenizer.c, from two tokenizers independent of ours, both
built from the vocabulary of the same GGUF file:

  1. transformers' GGUF tokenizer (tokenizers BPE with merges rebuilt from the vocabulary; control tokens parsed
     as special, user-defined ones as added tokens);
  2. the sentencepiece library, given a ModelProto made from the GGUF pieces, scores and types (BPE, byte
     fallback, no dummy prefix, whitespace escaped to U+2581). SentencePiece never parses control tokens from
     text, so for texts with them we split on them first.

The script fails if the two disagree on any text. Reference tool only: CI never runs it.
  python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install gguf sentencepiece transformers protobuf
  /tmp/refvenv/bin/python tools/decoder_ref/make_tokenizer_fixtures.py data/models/gemma-3-270m-q4_k_m.gguf \
      tests/data/decoder/tokenizer_ids.json
"""
import json
import re
import sys

import numpy as np
from gguf import GGUFReader

TEXTS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "What does Section 7.2 say about termination of this Agreement?",
    "  leading spaces, trailing spaces   ",
    "tabs\tand\nnewlines\n\nand\n\n\nmore\r\nCRLF",
    "中华人民共和国劳动法",
    "《XX省数字经济促进条例》第三章第十二条规定的申报条件有哪些？",
    "第一条 为了保护劳动者的合法权益，调整劳动关系，建立和维护适应社会主义市场经济的劳动制度，促进经济发展和社会进步，根据宪法，制定本法。",
    "员工加班费怎么算？第四十四条：安排劳动者延长工作时间的，支付不低于工资的百分之一百五十的工资报酬。",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 텍스트도 있습니다.",
    "Ελληνικά και русский текст, עברית, العربية",
    "emoji: 😀👍🏽 🇨🇳 family: 👨‍👩‍👧",
    "numbers 1234567890 3.14159 1,000,000 2024-05-01",
    "code: def f(x):\n    return x**2  # square\n",
    "<h1>Title</h1><p>para &amp; more</p>",
    "rare: 𠀀𠀁 𪚥 \u0001\u0007 \u00a0nbsp \u3000ideographic space",
    "<start_of_turn>user\nWhat is Article 5?<end_of_turn>\n<start_of_turn>model\n",
    "<bos>text after a literal bos",
    "",
    " ",
    "a",
    "\n",
]


def load_vocab(path):
    r = GGUFReader(path)
    f = r.fields
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8") for i in f["tokenizer.ggml.tokens"].data]
    scores = [float(f["tokenizer.ggml.scores"].parts[i][0]) for i in f["tokenizer.ggml.scores"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    return tokens, scores, types


def sentencepiece_reference(tokens, scores, types):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.vocab_size = len(tokens)
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.unk_id = types.index(2) if 2 in types else tokens.index("<unk>")
    m.trainer_spec.bos_id = tokens.index("<bos>")
    m.trainer_spec.eos_id = tokens.index("<eos>")
    m.trainer_spec.pad_id = tokens.index("<pad>")
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = False
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    unk = m.trainer_spec.unk_id
    for i, (t, s, ty) in enumerate(zip(tokens, scores, types)):
        p = m.pieces.add()
        # SentencePiece matches user-defined pieces after escaping spaces, so spell them with U+2581.
        p.piece = t.replace(" ", "\u2581") if ty == 4 else t
        p.score = s
        p.type = {1: pb.ModelProto.SentencePiece.NORMAL, 3: pb.ModelProto.SentencePiece.CONTROL,
                  4: pb.ModelProto.SentencePiece.USER_DEFINED, 5: pb.ModelProto.SentencePiece.UNUSED,
                  6: pb.ModelProto.SentencePiece.BYTE}.get(ty, pb.ModelProto.SentencePiece.NORMAL)
        if i == unk:
            p.type = pb.ModelProto.SentencePiece.UNKNOWN
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(m.SerializeToString())
    control = {t: i for i, (t, ty) in enumerate(zip(tokens, types)) if ty == 3}
    pattern = re.compile("(" + "|".join(re.escape(t) for t in sorted(control, key=len, reverse=True)) + ")")

    def encode(text):
        ids = []
        for part in pattern.split(text):
            if part in control:
                ids.append(control[part])
            elif part:
                ids.extend(sp.encode(part))
        return ids

    return encode


def transformers_reference(path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path.rsplit("/", 1)[0]), gguf_file=path.rsplit("/", 1)[1])
    return lambda text: tok.encode(text, add_special_tokens=False)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    path, out = sys.argv[1], sys.argv[2]
    tokens, scores, types = load_vocab(path)
    ref_sp = sentencepiece_reference(tokens, scores, types)
    ref_tf = transformers_reference(path)
    cases = []
    for text in TEXTS:
        a, b = ref_tf(text), ref_sp(text)
        if a != b:
            sys.exit(f"references disagree on {text!r}:\n transformers  {a}\n sentencepiece {b}")
        cases.append({"text": text, "ids": a})
        print(f"{len(a):4d} ids  {text[:60]!r}")
    doc = {
        "model": path.rsplit("/", 1)[-1],
        "about": "encode(text, add_bos=false, parse_special=true); ids from transformers' GGUF tokenizer and "
                 "sentencepiece (identical); tools/decoder_ref/make_tokenizer_fixtures.py",
        "vocab_size": len(tokens),
        "cases": cases,
    }
    with open(out, "w", encoding="utf-8") as fp:
        json.dump(doc, fp, ensure_ascii=False, indent=1)
        fp.write("\n")


if __name__ == "__main__":
    main()
