#!/usr/bin/env bash
# CLI integration of versions of a regulation (issue 19): version groups and statuses (`versions`), as-of retrieval
# and answers (--as-of, dates in questions), `compare` (JSON and text, one clause, changes only, the previous
# version), comparison questions, corrections, `reindex`; the real 公司法 2018/2023 from ../shared when present.
# usage: test_cli_versions.sh path/to/clauseqa
set -euo pipefail
bin=$(realpath "$1")
src=${CLAUSEQA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
shared=${CLAUSEQA_SHARED:-$src/../shared}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=$work/data
source "$(dirname "$0")/checks.sh"

# Two versions of a small law (tests/data/versions/): 第二条 renumbered to 第三条 and changed, a new 第二条, one
# clause unchanged.
mkdir -p "$work/docs"
cp "$src/tests/data/versions/示例法(2018-10-26).md" "$src/tests/data/versions/示例法(2023-12-29).md" "$work/docs/"
out=$("$bin" ingest --data "$data" --kb v --json "$work/docs/"*.md)
check "versions ingested" test "$(echo "$out" | json 'd["ingested"]')" = 2

# --- groups and statuses ---
out=$("$bin" versions --data "$data" --kb v --json)
check "one group of two" test "$(echo "$out" | json 'len(d["versions"])')" = 2
check "dates and status" test "$(echo "$out" | json '[(v["doc"], v["label"], v["effective"], v["status"]) for v in d["versions"]]')" \
  = "[('示例法(2018-10-26)', '2018年修正', '2018-10-26', 'superseded'), ('示例法(2023-12-29)', '2023年修订', '2024-07-01', 'in_force')]"
out=$("$bin" versions --data "$data" --kb v)
check "text listing" grep -q "示例法(2018-10-26).*superseded" <<< "$out"

# --- as of: retrieval and answers ---
out=$("$bin" retrieve --data "$data" --kb v --json "示例法第三条")
check "today: the version in force first" test "$(echo "$out" | json 'd["results"][0]["doc"]')" = "示例法(2023-12-29)"
check "today: status" test "$(echo "$out" | json 'd["results"][0]["version"]["status"]')" = in_force
check "today: the other version after" test "$(echo "$out" | json '[r["version"]["status"] for r in d["results"] if r["source"] == "router"]')" \
  = "['in_force', 'superseded']"
out=$("$bin" retrieve --data "$data" --kb v --json --as-of 2020-01-01 --k 1 "示例法第三条")
check "--as-of: the version then" test "$(echo "$out" | json 'd["results"][0]["doc"]')" = "示例法(2018-10-26)"
check "--as-of: in force then, superseded today" test \
  "$(echo "$out" | json '(d["results"][0]["version"]["status"], d["results"][0]["version"]["status_today"], d["results"][0]["version"]["on"])')" \
  = "('in_force', 'superseded', '2020-01-01')"
out=$("$bin" retrieve --data "$data" --kb v --json --k 1 "2020年时示例法第三条怎么规定的？")
check "date in the question" test "$(echo "$out" | json 'd["results"][0]["doc"]')" = "示例法(2018-10-26)"
out=$("$bin" ask --data "$data" --kb v --json --as-of 2020-01-01 "示例法第二条规定了什么？")
check "ask --as-of: the answer says which version" test "$(echo "$out" | json 'd["answer"].startswith("依据2018年修正版（2018-10-26起施行）")')" = True
check "ask --as-of: as_of and notice" test "$(echo "$out" | json '(d["as_of"], "2023年修订版" in d["version_notice"])')" = "('2020-01-01', True)"
# text mode says what --json's version_notice says, a generated (streamed) answer too (where the decoder is
# installed) and an extractive one
q="一人有限责任公司的股东作出决定时应当采用什么形式？"
for answers in auto extractive; do
  notice=$("$bin" ask --data "$data" --kb v --json --answers $answers --as-of 2020-01-01 "$q" 2> /dev/null | json 'd["version_notice"]')
  out=$("$bin" ask --data "$data" --kb v --answers $answers --as-of 2020-01-01 "$q" 2> /dev/null)
  check "ask --as-of, text ($answers answers): the version notice" bash -c \
    "test -n '$notice' && grep -qF '$notice' <<< '$out'"
done
check "bad --as-of" bash -c "'$bin' ask --data '$data' --kb v --as-of 2020-02-30 x 2>/dev/null; test \$? = 2"

# --- compare ---
out=$("$bin" compare --data "$data" --kb v --json "示例法(2018-10-26)" "示例法(2023-12-29)")
check "compare: summary (renumbered and changed counts as changed)" test "$(echo "$out" | json '[d["summary"][k] for k in ("same", "changed", "added", "removed", "renumbered", "renumbered_changed")]')" = "[2, 2, 1, 0, 1, 2]"
check "compare: renumbered pairs" test "$(echo "$out" | json '[(p["kind"], p["a"][0]["clause"] if p["a"] else None, p["b"][0]["clause"]) for p in d["pairs"]]')" \
  = "[('same', '第一条', '第一条'), ('added', None, '第二条'), ('changed', '第二条', '第三条'), ('same', '第三条', '第四条'), ('changed', '第四条', '第五条')]"
check "compare: the diff" test "$(echo "$out" | json '[(x["op"], x["text"]) for x in d["pairs"][2]["diff"] if x["op"] != "equal"]')" \
  = "[('removed', '一人'), ('added', '只有一个股东的'), ('added', '，并由股东签名或者盖章')]"
check "compare: versions of the sides" test "$(echo "$out" | json '(d["a"]["version"]["label"], d["b"]["version"]["effective"])')" = "('2018年修正', '2024-07-01')"
out=$("$bin" compare --data "$data" --kb v --json --clause 第三条 "示例法(2018-10-26)" "示例法(2023-12-29)")
check "compare --clause: both pairs with a 第三条" test "$(echo "$out" | json '[p["kind"] for p in d["pairs"]]')" = "['changed', 'same']"
out=$("$bin" compare --data "$data" --kb v --json --changed "示例法(2023-12-29)")
check "compare one name: with the previous version" test "$(echo "$out" | json '(d["a"]["doc"], d["b"]["doc"])')" = "('示例法(2018-10-26)', '示例法(2023-12-29)')"
check "compare --changed" test "$(echo "$out" | json 'sorted(set(p["kind"] for p in d["pairs"]))')" = "['added', 'changed', 'same']"
out=$("$bin" compare --data "$data" --kb v "示例法(2018-10-26)" "示例法(2023-12-29)")
check "compare text: the summary" grep -q "4 → 5 clauses: 2 same (1 renumbered), 2 changed (2 renumbered), 1 added, 0 removed" <<< "$out"
check "compare text: the changed pair" grep -q "~ 第二条 → 第三条 (changed" <<< "$out"
check "compare text: the diff markers" grep -q "\[-一人-\]{+只有一个股东的+}" <<< "$out"
check "compare: unknown document" bash -c "! '$bin' compare --data '$data' --kb v nope '示例法(2018-10-26)' 2>/dev/null"

# --- a question comparing versions ---
out=$("$bin" ask --data "$data" --kb v --json "示例法新旧版本第三条有何不同？")
check "comparison answer" test "$(echo "$out" | json '"新版第三条（原第二条）有修改" in d["answer"]')" = True
check "comparison answer: compare object" test "$(echo "$out" | json 'd["compare"]["url"]')" = "/api/v1/documents/1/compare/2?clause=3"
check "comparison answer: cites both versions" test "$(echo "$out" | json 'sorted(set(c["doc"] for c in d["citations"]))')" \
  = "['示例法(2018-10-26)', '示例法(2023-12-29)']"

# --- corrections ---
out=$("$bin" versions --data "$data" --kb v --set "示例法(2023-12-29)" --effective 2099-01-01)
check "correction shown" grep -q "corrected by a person" <<< "$out"
out=$("$bin" retrieve --data "$data" --kb v --json --k 1 "示例法第三条")
check "corrected: the older version is in force today" test "$(echo "$out" | json 'd["results"][0]["doc"]')" = "示例法(2018-10-26)"
out=$("$bin" reindex --data "$data" --kb v)
check "reindex keeps corrections" test "$("$bin" retrieve --data "$data" --kb v --json --k 1 '示例法第三条' | json 'd["results"][0]["doc"]')" = "示例法(2018-10-26)"
check "reindex says what it did" grep -q "versions of 2 documents analysed; 1 regulations have several versions" <<< "$out"
"$bin" versions --data "$data" --kb v --auto "示例法(2023-12-29)" > /dev/null
check "--auto: analysis again" test "$("$bin" retrieve --data "$data" --kb v --json --k 1 '示例法第三条' | json 'd["results"][0]["doc"]')" = "示例法(2023-12-29)"
check "--set: bad day" bash -c "'$bin' versions --data '$data' --kb v --set x --effective 2020-13-01 2>/dev/null; test \$? = 2"

# --- the real 公司法 2018 / 2023 ---
docs=$shared/eval/laws-zh/docs
if [ -f "$docs/公司法(2018-10-26).md" ]; then
  "$bin" ingest --data "$data" --kb gs "$docs/公司法(2018-10-26).md" "$docs/公司法(2023-12-29).md" > /dev/null 2>&1
  out=$("$bin" compare --data "$data" --kb gs --json --clause 60 "公司法(2018-10-26)" "公司法(2023-12-29)")
  check "公司法: new 第六十条 was 第六十一条" test "$(echo "$out" | json '[(p["kind"], [c["clause"] for c in p["a"]], [c["clause"] for c in p["b"]]) for p in d["pairs"]]')" \
    = "[('changed', ['第六十一条'], ['第六十条']), ('removed', ['第六十条'], [])]"
  out=$("$bin" retrieve --data "$data" --kb gs --json --k 1 "2020年时公司法第六十条怎么规定的？")
  check "公司法 in 2020: the 2018 text" test "$(echo "$out" | json 'd["results"][0]["text"]')" = "第六十条 一人有限责任公司章程由股东制定。"
else
  echo "  ../shared not found: 公司法 checks skipped"
fi

finish
