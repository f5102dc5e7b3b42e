#!/usr/bin/env bash
# CLI integration: ingest real documents, retrieve, ask, duplicates, bad inputs, database consistency, eval, the
# decoder's adapter discovery, the trained prompts.
# usage: test_cli.sh path/to/clauseqa
set -euo pipefail
bin=$(realpath "$1")
src=${CLAUSEQA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
shared=${CLAUSEQA_SHARED:-$src/../shared}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=$work/data
source "$(dirname "$0")/checks.sh"

# --- ingest the demo documents (PDF + Markdown) ---
out=$("$bin" ingest --data "$data" --kb demo --json "$src"/data/demo/*.pdf "$src"/data/demo/*.md)
check "demo ingested" test "$(echo "$out" | json 'd["ingested"]')" = 3
check "no failures" test "$(echo "$out" | json 'd["failed"]')" = 0
check "pdf has pages" test "$(echo "$out" | json '[f for f in d["files"] if f["file"].endswith(".pdf")][0]["pages"] > 5')" = True

# Same files again: duplicates, not re-ingested.
out=$("$bin" ingest --data "$data" --kb demo --json "$src"/data/demo/*.pdf)
check "duplicate detected" test "$(echo "$out" | json 'd["files"][0]["status"]')" = duplicate

# --- retrieve: exact reference, title, page ---
out=$("$bin" retrieve --data "$data" --kb demo --json "劳动法第四十四条规定了什么？")
check "router: clause" test "$(echo "$out" | json 'd["results"][0]["clause"]')" = "第四十四条"
check "router: doc" test "$(echo "$out" | json 'd["results"][0]["doc"]')" = "劳动法(2018-12-29)"
check "router: page" test "$(echo "$out" | json 'd["results"][0]["page"] >= 1')" = True
check "router: text" test "$(echo "$out" | json '"百分之一百五十" in d["results"][0]["text"]')" = True
check "hits name their document (as REST)" test "$(echo "$out" | json 'all(r["document_id"] >= 1 for r in d["results"])')" = True
out=$("$bin" retrieve --data "$data" --kb demo --json "劳动合同法第九百九十九条")
check "missing article gives no router hit" test "$(echo "$out" | json 'all(r["source"] != "router" for r in d["results"])')" = True
out=$("$bin" retrieve --data "$data" --kb demo --json --mode bm25 "How many days of notice are needed to terminate the services agreement?")
check "bm25 English" test "$(echo "$out" | json '"sixty (60) days" in d["results"][0]["text"]')" = True
out=$("$bin" retrieve --data "$data" --kb demo --json "What does Section 5.2 say?")
check "English section reference" test "$(echo "$out" | json 'd["results"][0]["clause"]')" = "Section 5.2"
printf '%s\n' '{"id": 7, "question": "试用期最长多长时间？"}' '{"id": "b", "question": "加班费怎么算"}' |
  "$bin" retrieve --data "$data" --kb demo --jsonl --k 3 > "$work/r.jsonl"
check "jsonl ids" test "$(json 'd["id"]' < <(head -1 "$work/r.jsonl"))" = 7
check "jsonl results" test "$(json 'len(d["results"])' < <(tail -1 "$work/r.jsonl"))" = 3
# strict JSON lines: \u0000 would cut the question short, trailing junk is not JSON; each such line is an error line
printf '%s\n' '{"id": 1, "question": "试用期\u0000最长"}' '{"id": 2, "question": "试用期"} x' |
  "$bin" retrieve --data "$data" --kb demo --jsonl --k 3 > "$work/bad.jsonl" && rc=0 || rc=$?
check "jsonl: a line that is not strict JSON gives exit 1" test "$rc" = 1
check "jsonl: \\u0000 refused" test "$(json '"NUL" in d["error"]' < <(head -1 "$work/bad.jsonl"))" = True
check "jsonl: trailing data refused" test "$(json '"after the JSON value" in d["error"]' < <(tail -1 "$work/bad.jsonl"))" = True

# --- ask (extractive answers: the decoder's are tested in test_http_generate.py) ---
out=$("$bin" ask --data "$data" --kb demo --answers extractive --json "劳动法第四十四条")
check "ask cites" test "$(echo "$out" | json 'd["citations"][0]["clause"]')" = "第四十四条"
check "ask quotes verbatim" test "$(echo "$out" | json 'd["citations"][0]["quote"] in d["answer"]')" = True
check "citations name their document (as REST)" test "$(echo "$out" | json 'd["citations"][0]["document_id"] >= 1')" = True
out=$("$bin" ask --data "$data" --kb demo --answers extractive --json "火星上的量子引力如何影响足球比赛的转播权？")
check "ask abstains" test "$(echo "$out" | json 'd["abstained"]')" = True

# --- bad inputs: each fails clearly and leaves the database consistent ---
: > "$work/empty.pdf"
printf 'this is plain text, not a PDF\n' > "$work/fake.pdf"
head -c 20000 "$src/data/demo/劳动法(2018-12-29).pdf" > "$work/truncated.pdf"
printf '   \n\n' > "$work/blank.txt"
printf 'x' > "$work/image.png"
bad=("$work/empty.pdf" "$work/fake.pdf" "$work/truncated.pdf" "$work/blank.txt" "$work/image.png")
for f in "$src"/tests/data/pdf/encrypted*.pdf "$src"/tests/data/pdf/scanned*.pdf; do [ -f "$f" ] && bad+=("$f"); done
for f in "${bad[@]}"; do
  if "$bin" ingest --data "$data" --kb demo "$f" 2> "$work/err.txt"; then
    echo "FAIL: $(basename "$f") was accepted"; fail=$((fail + 1))
  else
    check "$(basename "$f") has a reason" grep -q "FAILED" "$work/err.txt"
    sed -n 's/^FAILED/  rejected/p' "$work/err.txt"
  fi
done
db=$data/clauseqa.db
check "integrity" test "$(sqlite3 "$db" 'PRAGMA integrity_check')" = ok
check "fts rows = clauses" test "$(sqlite3 "$db" 'SELECT (SELECT count(*) FROM fts_kb1_docsize) = (SELECT count(*) FROM clauses)')" = 1
check "failed docs have no clauses" test "$(sqlite3 "$db" "SELECT count(*) FROM clauses c JOIN documents d ON d.id = c.doc_id WHERE d.status != 'ready'")" = 0
check "ready docs unchanged" test "$(sqlite3 "$db" "SELECT count(*) FROM documents WHERE status = 'ready'")" = 3
check "unknown kb" bash -c "! '$bin' retrieve --data '$data' --kb nope x 2>/dev/null"
check "usage error" bash -c "'$bin' retrieve --data '$data' 2>/dev/null; test \$? = 2"

# --- a folder with a GB2312 web page and a Word file (the format table says what a folder holds) ---
mkdir -p "$work/web"
python3 - "$work/web" <<'PY'
import sys, zipfile
d = sys.argv[1]
page = ('<html><head><meta charset="gb2312"><title>通知</title></head><body><nav>首页</nav><h1>关于网页归档的通知</h1>'
        '<p>第一条 各单位应当定期归档网页。</p><p>第二条 归档网页保存十年。</p></body></html>')
open(d + '/通知.html', 'wb').write(page.encode('gb18030'))
w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
body = ''.join(f'<w:p><w:r><w:t>{t}</w:t></w:r></w:p>' for t in ('第一条 文书档案永久保存。', '第二条 会计档案保存三十年。'))
with zipfile.ZipFile(d + '/期限.docx', 'w') as z:
    z.writestr('word/document.xml', f'<w:document {w}><w:body>{body}</w:body></w:document>')
open(d + '/notes.odt', 'w').write('not a supported format: skipped by the folder scan')
PY
out=$("$bin" ingest --data "$data" --kb web --json "$work/web")
check "folder: Word and HTML ingested" test "$(echo "$out" | json 'd["ingested"]')" = 2
check "Word has no pages" test "$(echo "$out" | json '[f for f in d["files"] if f["file"].endswith(".docx")][0]["pages"]')" = 0
out=$("$bin" retrieve --data "$data" --kb web --json "网页保存多少年")
check "GB2312 page retrieved" test "$(echo "$out" | json 'd["results"][0]["text"]')" = "第二条 归档网页保存十年。"
check "Word clause has no page" test "$("$bin" retrieve --data "$data" --kb web --json "期限第二条" | json 'd["results"][0]["page"]')" = None
check "--ocr takes off, auto or force" bash -c "'$bin' ingest --data '$data' --kb web --ocr sometimes '$work/web' 2>/dev/null; test \$? = 2"
check "--ocr off leaves scans flagged" bash -c "'$bin' ingest --data '$data' --kb web --ocr off '$src/tests/data/pdf/scanned.pdf' 2>&1 | grep -q 'FAILED.*OCR is off'"

# --- real PDFs and a small eval from ../shared, when it is there ---
if [ -d "$shared/eval/laws-zh-pdf" ]; then
  out=$("$bin" ingest --data "$data" --kb pdf --json "$shared/eval/laws-zh-pdf/docs/农民专业合作社法(2017-12-27).pdf" \
        "$shared/eval/cuad-dev/docs/ADAMSGOLFINC_03_21_2005-EX-10.17-ENDORSEMENT_AGREEMENT.pdf")
  check "shared PDFs ingested" test "$(echo "$out" | json 'd["ingested"]')" = 2
  out=$("$bin" retrieve --data "$data" --kb pdf --json "农民专业合作社法第三十三条")
  check "pdf article 33 on page 5" test "$(echo "$out" | json 'd["results"][0]["page"]')" = 5
  check "pdf article 33 text" test "$(echo "$out" | json 'd["results"][0]["text"].startswith("第三十三条")')" = True
  mkdir -p "$work/suite/docs"
  cp "$shared/eval/laws-zh-pdf/docs/农民专业合作社法(2017-12-27).pdf" "$work/suite/docs/"
  grep '"农民专业合作社法(2017-12-27)"' "$shared/eval/laws-zh-pdf/questions.jsonl" | head -20 > "$work/suite/questions.jsonl"
  out=$("$bin" eval --data "$data" --kb suite --suite "$work/suite" --answers extractive --json --out "$work/suite.jsonl")
  echo "  mini eval: $(echo "$out" | json 'd["all"]')"
  check "mini eval clause lookups" test "$(echo "$out" | json 'd["types"]["clause_lookup"]["hit@1"] >= 0.9')" = True
  # the per-question lines carry retrieval's side of the refusal: coverage, the cited clause's rank, top scores
  check "eval --out: coverage, cited, top scores" python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) >= 5 and all(0 <= r['coverage'] <= 1 and isinstance(r['cited'], int) for r in rows)
assert all(r['top'] and all('score' in h for h in r['top']) for r in rows)
assert sum(1 for r in rows if not r['prediction']['abstained'] and r['cited'] >= 1) >= len(rows) // 2
assert all(r['cited'] == 0 for r in rows if r['prediction']['abstained'])
" "$work/suite.jsonl"
else
  echo "  ../shared not found: shared-suite checks skipped"
fi

# --- generate: default and exact CPU decode steps (the real model, when set-up fetched it) ---
model=$src/data/models/gemma-3-270m-q4_k_m.gguf
if [ -f "$model" ]; then
  texts=()
  for mode in default exact; do
    flag=(); [ $mode = exact ] && flag=(--exact)
    out=$("$bin" generate --model "$model" --adapter none --device cpu --threads 2 --max-tokens 6 --json \
      "${flag[@]}" "The capital of France is") # the base model: the shipped adapter sits next to it
    check "generate ($mode): 6 new tokens" test "$(echo "$out" | json 'd["new_tokens"]')" = 6
    texts+=("$(echo "$out" | json 'd["text"]')")
  done
  check "generate: default and --exact greedy continuations agree" test "${texts[0]}" = "${texts[1]}"
  check "generate: continuation not empty" test -n "${texts[0]// /}"

  # the adapter next to the model is loaded by default (here one whose factors are zero: the same text), --adapter
  # none leaves it out, and one trained on another base model is a warning while the base model answers
  mkdir -p "$work/models/answer"
  ln -s "$model" "$work/models/m.gguf"
  python3 - "$model" "$work/models/answer" <<'PY'
import hashlib, json, struct, sys
model, out = sys.argv[1], sys.argv[2]
h = hashlib.sha256()
with open(model, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
hdr = {"blk.0.attn_q.lora_a": {"dtype": "F32", "shape": [1, 640], "data_offsets": [0, 2560]},
       "blk.0.attn_q.lora_b": {"dtype": "F32", "shape": [1024, 1], "data_offsets": [2560, 6656]}}
raw = json.dumps(hdr).encode()
raw += b" " * (-len(raw) % 8)
with open(out + "/adapter.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(raw)) + raw + bytes(6656))
json.dump({"format": "clauseqa-lora-v1", "rank": 1, "alpha": 1, "prompt_format": "cq-prompt-v1",
           "base": {"file": "gemma-3-270m-q4_k_m.gguf", "sha256": h.hexdigest()},
           "manifest": {"steps": 12}}, open(out + "/adapter.json", "w"))
PY
  gen() { "$bin" generate --model "$work/models/m.gguf" --device cpu --threads 2 --max-tokens 6 --json "$@" \
    "The capital of France is" 2>"$work/gen.err" | json 'd["text"]'; }
  check "generate with the default adapter: same text as the base model" test "$(gen)" = "${texts[0]}"
  check "generate: the log names the adapter" grep -q "decoder: adapter answer (steps 12, rank 1" "$work/gen.err"
  check "generate --adapter none: the same text" test "$(gen --adapter none)" = "${texts[0]}"
  check "generate --adapter none: no adapter" grep -q "decoder: no adapter" "$work/gen.err"
  sed -i 's/"sha256": "[0-9a-f]*"/"sha256": "'"$(printf '0%.0s' $(seq 64))"'"/' "$work/models/answer/adapter.json"
  check "generate with a wrong-base adapter: the base model answers" test "$(gen)" = "${texts[0]}"
  check "generate with a wrong-base adapter: a warning says why" grep -q "the adapter is not used.*was trained on base model" "$work/gen.err"
else
  echo "  decoder weights not found: generate checks skipped"
fi

# --- prompt --jsonl: the trained decoder's prompts (docs/ANSWERS.md) ---
out=$(printf '%s\n' '{"id": 1, "task": "relevance", "question": " 试用期最长多长时间？\n", "passages": [{"title": "劳动法", "label": "第二十一条", "text": "试用期最长\n不得超过六个月。"}]}' \
        '{"id": 2, "task": "summary", "question": "q", "passages": []}' | "$bin" prompt --jsonl) && rc=0 || rc=$?
check "prompt: a line that fails gives exit 1" test "$rc" = 1
check "prompt: relevance prompt" test "$(echo "$out" | head -1 | json 'd["prompt"]')" = "$(printf '任务：相关性\n材料：《劳动法》第二十一条 试用期最长 不得超过六个月。\n问题：试用期最长多长时间？\n相关：')"
check "prompt: unknown task" test "$(echo "$out" | tail -1 | json '"must be" in d["error"] and d["id"] == 2')" = True
out=$(printf '%s\n' '{"id": 3, "task": "answer", "question": "a\u0000b", "passages": []}' | "$bin" prompt --jsonl) || true
check "prompt: \\u0000 refused" test "$(echo "$out" | json '"NUL" in d["error"]')" = True

finish
