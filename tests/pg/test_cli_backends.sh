#!/usr/bin/env bash
# The command line on both stores (issue 20): the same real documents (data/demo, tests/data/pdf) ingested into a
# SQLite data folder and into PostgreSQL (--store, the throwaway cluster of tests/pg/cluster.sh: CLAUSEQA_PG) give
# the same KB and document listings, the same retrieve top-5 lists (documents, clauses, pages, scores) for keyword
# questions and clause lookups (English ones searched in their other forms too: "invoices" finds "invoice"), the same
# after a document is deleted; originals reach a node that lacks them.
#
#   tests/pg/cluster.sh tests/pg/test_cli_backends.sh path/to/clauseqa
set -euo pipefail
bin=${1:?usage: $0 path/to/clauseqa}
[ -n "${CLAUSEQA_PG:-}" ] || { echo "SKIP: CLAUSEQA_PG is not set (run through tests/pg/cluster.sh)" >&2; exit 77; }
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CLAUSEQA_CONFIG=/dev/null CLAUSEQA_LOG=warn
pg="$CLAUSEQA_PG dbname=clibackends"
psql_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)/psql
"$psql_bin" "$CLAUSEQA_PG" -qc "CREATE DATABASE clibackends" >/dev/null

files=("$src"/data/demo/* "$src"/tests/data/pdf/zh_law.pdf "$src"/tests/data/pdf/en_contract.pdf)
questions="$work/questions.jsonl"
python3 - "$questions" <<'EOF'
import json, sys
qs = ["加班工资怎么计算", "劳动法第四十四条", "劳动合同法第三十九条", "用人单位解除劳动合同的经济补偿",
      "试用期最长多长", "What law governs the agreement?", "termination for convenience notice period",
      "confidentiality obligations", "第一百零七条", "劳动合同法第五章第二节", "Section 7.2", "不存在的词语组合xyz",
      "When are invoices due?", "Are the services terminated for convenience?"]
with open(sys.argv[1], "w") as f:
    for i, q in enumerate(qs):
        f.write(json.dumps({"id": f"q{i}", "question": q}, ensure_ascii=False) + "\n")
EOF

# run NAME STORE_ARGS...: ingest, list, retrieve; outputs under $work/NAME.*
run() {
  local name=$1
  shift
  local data="$work/$name-data"
  mkdir -p "$data"
  "$bin" --data "$data" "$@" ingest --kb t --ocr off "${files[@]}" > "$work/$name.ingest" 2>&1 ||
    { cat "$work/$name.ingest" >&2; exit 1; }
  "$bin" --data "$data" "$@" kb list > "$work/$name.kbs"
  "$bin" --data "$data" "$@" doc list --kb t --json > "$work/$name.docs.json"
  "$bin" --data "$data" "$@" retrieve --kb t --jsonl --mode router,bm25 < "$questions" > "$work/$name.before.jsonl"
  # delete the Chinese PDF law (by its id on this store), then ask again
  local id
  id=$(python3 -c 'import json,sys; print([d["id"] for d in json.load(open(sys.argv[1]))["documents"] if d["name"] == "zh_law"][0])' "$work/$name.docs.json")
  "$bin" --data "$data" "$@" doc delete "$id" > /dev/null
  "$bin" --data "$data" "$@" retrieve --kb t --jsonl --mode router,bm25 < "$questions" > "$work/$name.after.jsonl"
  "$bin" --data "$data" "$@" kb list > "$work/$name.kbs.after"
}
run sqlite
run pg --store "$pg"

# The same listings, the KB's creation minute aside.
diff <(cut -c1-46 "$work/sqlite.kbs") <(cut -c1-46 "$work/pg.kbs")
diff <(cut -c1-46 "$work/sqlite.kbs.after") <(cut -c1-46 "$work/pg.kbs.after")
python3 - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
def docs(name):
    return [(d["name"], d["format"], d["pages"], d["clauses"], d["status"], d["quality"])
            for d in json.load(open(f"{w}/{name}.docs.json"))["documents"]]
assert docs("sqlite") == docs("pg"), (docs("sqlite"), docs("pg"))
assert len(docs("pg")) == 5
def lists(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        # ids differ between stores (clause ids are the store's); what is found, where, and its score must not
        out[r["id"]] = [(h["doc"], h["path"], h.get("clause"), h.get("page"), h["source"], round(h["score"], 9),
                         h["text"]) for h in r["results"]][:5]
    return out
for when in ("before", "after"):
    a, b = lists(f"{w}/sqlite.{when}.jsonl"), lists(f"{w}/pg.{when}.jsonl")
    assert a.keys() == b.keys() and len(a) == 14, (a.keys(), b.keys())
    for q in a:
        assert a[q] == b[q], f"{when} {q}:\nsqlite {a[q]}\npg     {b[q]}"
    found = sum(1 for q in a if a[q])
    routed = sum(1 for q in a if a[q] and a[q][0][4] == "router")
    assert found >= 10 and routed >= 3, (when, found, routed)
    print(f"{when}: {len(a)} questions, identical top-5 on both stores ({found} with hits, {routed} clause lookups)")
gone = lists(f"{w}/pg.after.jsonl")
assert not any(h[0] == "zh_law" for q in gone for h in gone[q])
EOF

# `store =` of clauseqa.conf does what --store does.
printf 'store = %s\n' "$pg" > "$work/clauseqa.conf"
CLAUSEQA_CONFIG="$work/clauseqa.conf" "$bin" --data "$work/empty" kb list > "$work/pg.kbs.conf"
diff "$work/pg.kbs.after" "$work/pg.kbs.conf"

# Originals in the store: the four documents left have theirs, the deleted one's is gone.
"$psql_bin" "$pg" -Atc "SELECT count(DISTINCT sha256) FROM originals" | grep -qx 4
# The password never goes on the command line; the store is named without it.
if "$bin" --data "$work/x" --store "postgresql://u:secret@127.0.0.1:1/x" kb list 2> "$work/pw.err"; then
  echo "a --store with a password was accepted" >&2
  exit 1
fi
grep -q pgpass "$work/pw.err"
! grep -q secret "$work/pw.err"
echo "PASS"
