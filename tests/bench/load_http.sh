#!/usr/bin/env bash
# HTTP load: wrk with 50 connections against /api/v1/kbs/{kb}/retrieve and /ask (JSON and SSE), on a server of its
# own on a free loopback port. Prints throughput, P50/P95/P99 latency and errors per endpoint.
#
# usage: tests/bench/load_http.sh [BINARY] [SECONDS]
#   BINARY   default build/clauseqa;  SECONDS per endpoint, default 20
#   LOAD_CONNECTIONS (50), LOAD_THREADS (2), LOAD_SERVER_THREADS (16), LOAD_DOCS (laws-zh-pdf documents to add, 30)
# The KB holds data/demo plus, when ../shared/eval/laws-zh-pdf is there, its first LOAD_DOCS PDFs.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath "${1:-$here/build/clauseqa}")
seconds=${2:-20}
conns=${LOAD_CONNECTIONS:-50}
threads=${LOAD_THREADS:-2}
server_threads=${LOAD_SERVER_THREADS:-16}
n_docs=${LOAD_DOCS:-30}
shared=${CLAUSEQA_SHARED:-$here/../shared}
command -v wrk > /dev/null || { echo "load_http: wrk is not installed (make setup)"; exit 1; }

work=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill -TERM "$pid" 2> /dev/null || true; wait "$pid" 2> /dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# --- the knowledge base ---
bash "$here/tools/demo_kb.sh" "$bin" "$work/data" > /dev/null
docs=()
if [ -d "$shared/eval/laws-zh-pdf/docs" ]; then
  while IFS= read -r f; do docs+=("$f"); done < <(ls "$shared"/eval/laws-zh-pdf/docs/*.pdf | head -n "$n_docs")
  "$bin" ingest --data "$work/data" --kb demo "${docs[@]}" 2>&1 | tail -n 1 || true
fi
n_clauses=$(sqlite3 "$work/data/clauseqa.db" "SELECT count(*) FROM clauses")
n_ready=$(sqlite3 "$work/data/clauseqa.db" "SELECT count(*) FROM documents WHERE status = 'ready'")

# --- the server ---
"$bin" serve --data "$work/data" --port 0 --port-file "$work/port" --threads "$server_threads" \
  > "$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
url="http://127.0.0.1:$port"
curl -sf "$url/api/v1/health" > /dev/null

# --- wrk script: POST JSON questions in turn; done() prints one table row ---
cat > "$work/post.lua" << 'EOF'
local questions = {
  "劳动法第四十四条规定了什么？", "试用期最长多长时间？", "加班费怎么算", "用人单位解除劳动合同需要提前几天通知？",
  "What does Section 5.2 say?", "How many days of notice are needed to terminate the services agreement?",
  "劳动合同法第十条", "《农民专业合作社法》第三十三条", "未成年工是指多大年龄的劳动者？", "工会的职责是什么",
  "女职工生育享受多少天产假？", "劳动争议发生后当事人可以怎么办？",
}
local i = 0
local chat = os.getenv("LOAD_CHAT") == "1"
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  i = i + 1
  local q = questions[(i % #questions) + 1]
  if chat then
    return wrk.format(nil, nil, nil, '{"model": "demo", "messages": [{"role": "user", "content": "' .. q .. '"}]}')
  end
  return wrk.format(nil, nil, nil, '{"question": "' .. q .. '", "k": 5}')
end
done = function(summary, latency, requests)
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status +
                 summary.errors.timeout
  io.write(string.format("RESULT %.1f %.1f %.1f %.1f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1e3, latency:percentile(95) / 1e3, latency:percentile(99) / 1e3, summary.requests, errors))
end
EOF

run() { # run NAME PATH [ACCEPT [CHAT]]
  local name=$1 path=$2 accept=${3:-application/json}
  local out
  out=$(LOAD_CHAT=${4:-0} wrk -t "$threads" -c "$conns" -d "${seconds}s" --timeout 30s -H "Accept: $accept" -s "$work/post.lua" \
    "$url$path" | grep '^RESULT')
  read -r _ rps p50 p95 p99 n errors <<< "$out"
  printf '| %-26s | %8s | %8s | %8s | %8s | %8s | %6s |\n' "$name" "$rps" "$p50" "$p95" "$p99" "$n" "$errors"
}

echo "clauseqa HTTP load: $conns connections, $threads wrk threads, ${seconds} s each; server --threads $server_threads;"
echo "KB: $n_ready documents, $n_clauses clauses; $(nproc) cores; $(git -C "$here" rev-parse --short HEAD 2> /dev/null || echo '?')"
echo
printf '| %-26s | %8s | %8s | %8s | %8s | %8s | %6s |\n' endpoint "req/s" "P50 ms" "P95 ms" "P99 ms" requests errors
printf '|%s|%s|%s|%s|%s|%s|%s|\n' "----------------------------" "----------" "----------" "----------" \
  "----------" "----------" "--------"
run "POST retrieve" /api/v1/kbs/demo/retrieve
run "POST ask (JSON)" /api/v1/kbs/demo/ask
run "POST ask (SSE)" /api/v1/kbs/demo/ask text/event-stream
run "POST /v1/chat/completions" /v1/chat/completions application/json 1
grep -E " (error|warn) " "$work/server.log" | grep -v "open mode" | head -n 5 || true
