#!/usr/bin/env bash
# Everyday CLI use (issue 17): kb and doc management, the global options before or after the command, usage slips,
# unquoted questions, a clear error for an unknown KB, clauseqa.conf, the models found apart from the data directory,
# and JSON that stays JSON for any file name.
# usage: test_cli_manage.sh path/to/clauseqa
set -euo pipefail
bin=$(realpath "$1")
src=${CLAUSEQA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=$work/data
source "$(dirname "$0")/checks.sh"
lines() { wc -l < "$1" | tr -d ' '; }
db() { sqlite3 "$1/clauseqa.db" "$2"; }
export CLAUSEQA_CONFIG=$work/none.conf # no /etc/clauseqa/clauseqa.conf of this machine
: > "$CLAUSEQA_CONFIG"

# --- global options before the command, after it, and as --opt=value ---
"$bin" --data "$data" ingest --kb laws "$src/data/demo/劳动合同法(2012-12-28).md" 2> "$work/err"
check "--data before the command" test "$(db "$data" "SELECT count(*) FROM documents")" = 1
"$bin" ingest --kb contracts "$src/data/demo/sample-services-agreement.md" --data="$data" 2> "$work/err"
check "--data=DIR after the command" test "$(db "$data" "SELECT count(*) FROM documents")" = 2
CLAUSEQA_DATA=$data "$bin" kb list > "$work/out"
check "\$CLAUSEQA_DATA" has "contracts" "$work/out"

# --- kb list / create / delete ---
"$bin" kb list --data "$data" --json > "$work/out"
check "kb list --json" test "$(json '[k["name"] for k in d["kbs"]]' < "$work/out")" = "['contracts', 'laws']"
check "kb list counts" test "$(json '[k for k in d["kbs"] if k["name"] == "laws"][0]["clauses"]' < "$work/out")" = 99
"$bin" kb create 草稿 --data "$data" 2> "$work/err"
check "kb create (a Chinese name)" has "'草稿' created" "$work/err"
"$bin" kb list --data "$data" > "$work/out"
check "kb list text shows it" has "草稿" "$work/out"
check "kb create twice fails" bash -c "! '$bin' kb create 草稿 --data '$data' 2>/dev/null"
"$bin" kb delete 草稿 --data "$data" 2> "$work/err"
check "kb delete" test "$(db "$data" "SELECT count(*) FROM kbs WHERE name = '草稿'")" = 0

# --- an unknown KB names the ones there are ---
set +e
"$bin" retrieve --data "$data" --kb nope 第一条 2> "$work/err"
rc=$?
set -e
check "unknown kb: exit 1" test $rc = 1
check "unknown kb: lists the KBs" has "no knowledge base is named 'nope'; there are 'contracts', 'laws' (clauseqa kb list)" "$work/err"
check "unknown kb: one line" test "$(lines "$work/err")" = 1

# --- usage slips: one line and the command's --help hint, never the whole help ---
for slip in "retrieve --data $data" "ask --kb laws --frobnicate x" "ingest --kb" "kb rename a b" "doc show" \
            "doc list" "backup" "serve --port" "keys" "frob"; do
  set +e
  # shellcheck disable=SC2086
  "$bin" $slip > "$work/out" 2> "$work/err"
  rc=$?
  set -e
  check "slip '$slip': exit 2" test $rc = 2
  check "slip '$slip': two lines at most" test "$(lines "$work/err")" -le 2
  check "slip '$slip': the hint" grep -q "Run 'clauseqa .*--help'" "$work/err"
done

# --- the question is every word after the options ---
"$bin" retrieve --data "$data" --kb laws --json 劳动合同法 第十九条 试用期 > "$work/out"
check "unquoted question: joined" test "$(json 'd["question"]' < "$work/out")" = "劳动合同法 第十九条 试用期"
"$bin" ask --data "$data" --kb contracts --answers extractive --json What does Section 5.2 say > "$work/out"
check "unquoted English question" test "$(json 'd["question"]' < "$work/out")" = "What does Section 5.2 say"
check "unquoted question: answered from it" test "$(json 'd["citations"][0]["clause"]' < "$work/out")" = "Section 5.2"

# --- doc list / show / delete: rows, search entries, vectors, the original when no other document uses it ---
dense=$work/dense
CLAUSEQA_DENSE=on "$bin" ingest --data "$dense" --kb a "$src"/data/demo/*.md 2> /dev/null
CLAUSEQA_DENSE=on "$bin" ingest --data "$dense" --kb b "$src/data/demo/sample-services-agreement.md" 2> /dev/null
"$bin" doc list --data "$dense" --kb a --json > "$work/out"
check "doc list --json" test "$(json 'len(d["documents"])' < "$work/out")" = 2
contract=$(json '[x["id"] for x in d["documents"] if x["name"] == "sample-services-agreement"][0]' < "$work/out")
law=$(json '[x["id"] for x in d["documents"] if x["name"] != "sample-services-agreement"][0]' < "$work/out")
original=$(json "[x['original'] for x in d['documents'] if x['id'] == $law][0]" < "$work/out")
check "the original is stored" test -f "$original"
"$bin" doc list --data "$dense" --kb a > "$work/out"
check "doc list text" has "劳动合同法(2012-12-28)" "$work/out"
"$bin" doc show "$law" --data "$dense" --json > "$work/out"
check "doc show --json" test "$(json 'd["kb"] + " " + str(d["clauses"]) + " " + d["status"]' < "$work/out")" = "a 99 ready"
"$bin" doc show "$law" --data "$dense" > "$work/out"
check "doc show text" has "contents   0 pages, 99 clauses" "$work/out"
check "vectors before" test "$(db "$dense" "SELECT count(*) FROM clause_vectors v JOIN clauses c ON c.id = v.clause_id WHERE c.doc_id = $law")" = 99
CLAUSEQA_DENSE=on "$bin" doc delete "$law" --data "$dense" 2> "$work/err"
check "doc delete says so" has "deleted from 'a' with its 99 clauses" "$work/err"
check "doc delete: row" test "$(db "$dense" "SELECT count(*) FROM documents WHERE id = $law")" = 0
check "doc delete: clauses" test "$(db "$dense" "SELECT count(*) FROM clauses WHERE doc_id = $law")" = 0
check "doc delete: vectors" test "$(db "$dense" "SELECT count(*) FROM clause_vectors")" = 26
check "doc delete: FTS" test "$(db "$dense" "SELECT (SELECT count(*) FROM fts_kb1_docsize) = (SELECT count(*) FROM clauses c JOIN documents d ON d.id = c.doc_id WHERE d.kb_id = 1)")" = 1
check "doc delete: original removed" test ! -e "$original"
check "doc show of a deleted one fails" bash -c "! '$bin' doc show $law --data '$dense' 2>/dev/null"
shared_original=$("$bin" doc show "$contract" --data "$dense" --json | json 'd["original"]')
"$bin" doc delete "$contract" --data "$dense" 2> /dev/null
check "an original KB b still uses is kept" test -f "$shared_original"
"$bin" kb delete b --data "$dense" 2> "$work/err"
check "kb delete: its documents" has "deleted with its 1 documents (13 clauses)" "$work/err"
check "kb delete: the last user's original goes" test ! -e "$shared_original"
check "kb delete: integrity" test "$(db "$dense" 'PRAGMA integrity_check')" = ok

# --- clauseqa.conf: found, flags win, unknown keys name the line ---
conf=$work/clauseqa.conf
printf 'data = %s\nlog-level = warn\n\n[serve]\nport = 8123\n' "$data" > "$conf"
"$bin" --config "$conf" kb list > "$work/out"
check "--config: data = from the file" has "contracts" "$work/out"
CLAUSEQA_CONFIG=$conf "$bin" kb list --data "$dense" > "$work/out"
check "\$CLAUSEQA_CONFIG, and --data wins over data =" grep -q "^a  " "$work/out"
printf '[serve]\nport = 8123\nprot = 1\n' > "$conf"
set +e
"$bin" --config "$conf" kb list 2> "$work/err"
rc=$?
set -e
check "unknown key: exit 2" test $rc = 2
check "unknown key: file and line" has "clauseqa.conf:3: unknown key 'prot' in [serve]" "$work/err"
check "a named config file must exist" bash -c "! '$bin' --config '$work/nope.conf' kb list 2>/dev/null"
unset CLAUSEQA_CONFIG
printf 'models = %s/conf-models\n' "$work" > "$data/clauseqa.conf"
cp "$bin" "$work/clauseqa-copy" # finds models nowhere else: the warning lists the folders searched
"$work/clauseqa-copy" --data "$data" ask --kb laws --json 第十九条 > /dev/null 2> "$work/err"
check "DATA/clauseqa.conf is read (models =)" has "$work/conf-models (clauseqa.conf)" "$work/err"
printf 'data = /elsewhere\n' > "$data/clauseqa.conf"
check "data = in DATA/clauseqa.conf is refused" bash -c "! '$bin' --data '$data' kb list 2>/dev/null"
rm "$data/clauseqa.conf"
export CLAUSEQA_CONFIG=$work/none.conf

# --- JSON stays JSON whatever the names: every --json output parsed (cJSON builds them) ---
odd=$work/'a"b\c'
mkdir -p "$odd"
printf '第一条 名字里有"引号"和\\反斜杠的文件。\n' > "$odd/q\"uote.txt"
"$bin" ingest --data "$data" --kb laws --json "$odd/q\"uote.txt" > "$work/out"
check "ingest --json with quotes in the path" test "$(json 'd["files"][0]["file"].endswith("q\"uote.txt")' < "$work/out")" = True
"$bin" doc list --data "$data" --kb laws --json > "$work/out"
check "doc list --json with quotes in a name" test "$(json '"q\"uote" in [x["name"] for x in d["documents"]]' < "$work/out")" = True
model=$src/data/models/gemma-3-270m-q4_k_m.gguf
if [ -f "$model" ]; then
  printf 'The law says what it says.\n' > "$work/a\"b.txt"
  "$bin" perplexity --json --device cpu --threads 2 --context 8 "$work/a\"b.txt" > "$work/out"
  check "perplexity --json: a\"b.txt" test "$(json 'd["file"].endswith("a\"b.txt") and d["perplexity"] > 1' < "$work/out")" = True
  "$bin" generate --json --device cpu --threads 2 --max-tokens 3 $'say "hi"\\\n\t' > "$work/out"
  check "generate --json: quotes, backslash, tab in the prompt" test "$(json 'd["new_tokens"]' < "$work/out")" = 3
else
  echo "  decoder weights not found: perplexity/generate JSON checks skipped"
fi

# --- models: a new data directory keeps them; --models first; a missing one is one warning with the fix ---
fresh=$work/fresh
"$bin" ingest --data "$fresh" --kb k "$src/data/demo/sample-services-agreement.md" 2> /dev/null
if [ -f "$model" ]; then
  "$bin" generate --data "$fresh" --json --device cpu --threads 2 --max-tokens 1 "Hello" > "$work/out"
  check "a new --data still finds the decoder (source tree)" test "$(json 'd["new_tokens"]' < "$work/out")" = 1
  "$bin" ask --data "$fresh" --kb k --json --device cpu --threads 2 "What does Section 5.2 say?" > "$work/out" 2> "$work/err"
  check "a new --data: no missing-model warning" bash -c "! grep -q warning '$work/err'"
fi
bare=$work/bare
mkdir -p "$bare/prefix/bin" "$bare/prefix/share/clauseqa/models" "$bare/other"
cp "$bin" "$bare/other/clauseqa"
"$bare/other/clauseqa" ask --data "$fresh" --kb k "What does Section 5.2 say?" > "$work/out" 2> "$work/err"
check "no models anywhere: one warning" test "$(grep -c warning "$work/err")" = 1
check "no models anywhere: the fix" has "make setup" "$work/err"
check "no models anywhere: where it looked" has "$fresh/models (data directory)" "$work/err"
check "no models anywhere: still answers" has "Section 5.2" "$work/out"
if [ -f "$model" ]; then
  mkdir -p "$bare/mine"
  ln -s "$model" "$bare/mine/gemma-3-270m-q4_k_m.gguf"
  "$bare/other/clauseqa" ask --models "$bare/mine" --data "$fresh" --kb k --json --device cpu --threads 2 \
    "What does Section 5.2 say?" > "$work/out" 2> "$work/err"
  check "--models DIR: no warning" bash -c "! grep -q warning '$work/err'"
  CLAUSEQA_MODELS=$bare/mine "$bare/other/clauseqa" ask --data "$fresh" --kb k --json --device cpu --threads 2 \
    "What does Section 5.2 say?" > "$work/out" 2> "$work/err"
  check "\$CLAUSEQA_MODELS: no warning" bash -c "! grep -q warning '$work/err'"
  cp "$bin" "$bare/prefix/bin/clauseqa"
  ln -s "$model" "$bare/prefix/share/clauseqa/models/gemma-3-270m-q4_k_m.gguf"
  "$bare/prefix/bin/clauseqa" ask --data "$fresh" --kb k --json --device cpu --threads 2 \
    "What does Section 5.2 say?" > "$work/out" 2> "$work/err"
  check "<prefix>/bin/clauseqa finds <prefix>/share/clauseqa/models" bash -c "! grep -q warning '$work/err'"
fi

finish
