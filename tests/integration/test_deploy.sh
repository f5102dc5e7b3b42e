#!/usr/bin/env bash
# deploy/: the example configuration loads, the systemd unit verifies, and — with nginx and logrotate, which `make
# setup` installs (elsewhere those parts are skipped with a line that says so) — the nginx example proxies a real
# server over TLS (uploads, the answer stream) and the logrotate file parses.
# usage: test_deploy.sh path/to/clauseqa
set -euo pipefail
bin=$(realpath "$1")
src=${CLAUSEQA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
deploy=$src/deploy
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
source "$(dirname "$0")/checks.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- the example clauseqa.conf: every key known, the values the commands accept ---
"$bin" --config "$deploy/clauseqa.conf.example" --data "$work/data" kb list --json > /dev/null 2> "$work/err" || true
check "clauseqa.conf.example loads" test ! -s "$work/err"
sed "s|^data = .*|data = $work/data|; s|^access-log = .*|access-log = $work/access.log|; s|^port = .*|port = 0|" \
  "$deploy/clauseqa.conf.example" > "$work/clauseqa.conf"
CLAUSEQA_CONFIG=$work/clauseqa.conf "$bin" serve --port-file "$work/port" --answers extractive 2> "$work/serve.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
check "the example's [serve] options start a server" curl -sf "http://127.0.0.1:$port/api/v1/health" -o /dev/null
check "no-open-mode = true: keys required" test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/api/v1/kbs")" = 401
check "access-log = written" grep -q " GET /api/v1/health 200 " "$work/access.log"

# --- the service's access log by default: $LOGS_DIRECTORY (systemd's LogsDirectory=), unless configured ---
grep -v '^access-log' "$work/clauseqa.conf" > "$work/service.conf"
mkdir -p "$work/service-logs"
CLAUSEQA_CONFIG=$work/service.conf LOGS_DIRECTORY=$work/service-logs "$bin" serve --data "$work/data2" \
  --port-file "$work/port2" --answers extractive 2> "$work/serve2.log" &
svc=$!
pids+=($svc)
for _ in $(seq 100); do [ -s "$work/port2" ] && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$(cat "$work/port2")/api/v1/health" -o /dev/null || true
check "a service writes \$LOGS_DIRECTORY/access.log by default" grep -q " GET /api/v1/health 200 " "$work/service-logs/access.log"
kill "$svc" && wait "$svc" 2> /dev/null || true
check "the unit sets LogsDirectory= (\$LOGS_DIRECTORY)" grep -q "^LogsDirectory=clauseqa$" "$deploy/clauseqa.service"

# --- the systemd unit ---
if command -v systemd-analyze > /dev/null; then
  sed "s|/usr/local/bin/clauseqa|$bin|" "$deploy/clauseqa.service" > "$work/clauseqa.service"
  systemd-analyze verify "$work/clauseqa.service" > "$work/verify" 2>&1 && ok=1 || ok=0
  check "systemd-analyze verify: no complaint" test "$ok" = 1 -a ! -s "$work/verify"
  cat "$work/verify"
else
  echo "  systemd-analyze not found: unit not verified"
fi
for key in User=clauseqa Environment=MALLOC_ARENA_MAX=2 NoNewPrivileges=yes ProtectSystem=strict ReadWritePaths=/var/lib/clauseqa PrivateTmp=yes \
           ExecReload=; do
  check "unit has $key" grep -q "^$key" "$deploy/clauseqa.service"
done

# --- logrotate ---
if command -v logrotate > /dev/null; then
  sed "s|/var/log/clauseqa|$work/logs|; s|su clauseqa clauseqa|su $(id -un) $(id -gn)|; s|create 0640 clauseqa clauseqa|create 0640 $(id -un) $(id -gn)|" \
    "$deploy/clauseqa.logrotate" > "$work/logrotate.conf"
  mkdir -p "$work/logs"
  echo x > "$work/logs/access.log"
  check "logrotate -d parses it" logrotate -d -s "$work/logrotate.state" "$work/logrotate.conf" 2> "$work/lr"
  check "logrotate: no error" bash -c "! grep -qi error '$work/lr'"
else
  echo "  logrotate not found: its file not checked"
fi

# --- nginx in front: TLS, an upload, the answer stream ---
if command -v nginx > /dev/null; then
  key=$("$bin" keys create --data "$work/data" --role admin --name t 2> /dev/null)
  mkdir -p "$work/nginx/logs" "$work/nginx/tmp"
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout "$work/nginx/key.pem" \
    -out "$work/nginx/cert.pem" 2> /dev/null
  http_port=$(free_port)
  https_port=$(free_port)
  sed "s|listen 80;|listen 127.0.0.1:$http_port;|; s|listen 443 ssl http2;|listen 127.0.0.1:$https_port ssl http2;|; \
       s|server 127.0.0.1:8080;|server 127.0.0.1:$port;|; s|/etc/ssl/certs/qa.example.org.pem|$work/nginx/cert.pem|; \
       s|/etc/ssl/private/qa.example.org.key|$work/nginx/key.pem|" "$deploy/nginx-clauseqa.conf" > "$work/nginx/site.conf"
  cat > "$work/nginx/nginx.conf" << EOF
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log;
events { worker_connections 512; }
http {
    access_log off;
    client_body_temp_path $work/nginx/tmp/body;
    proxy_temp_path $work/nginx/tmp/proxy;
    fastcgi_temp_path $work/nginx/tmp/fastcgi;
    uwsgi_temp_path $work/nginx/tmp/uwsgi;
    scgi_temp_path $work/nginx/tmp/scgi;
    include $work/nginx/site.conf;
}
EOF
  chmod -R a+rwX "$work/nginx"
  check "nginx -t accepts the site" nginx -t -q -p "$work/nginx" -c "$work/nginx/nginx.conf"
  nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
  pids+=($!)
  for _ in $(seq 50); do curl -sk "https://127.0.0.1:$https_port/api/v1/health" -o /dev/null && break; sleep 0.1; done
  base=https://127.0.0.1:$https_port
  check "nginx: TLS to clauseqa" curl -skf "$base/api/v1/health" -o /dev/null
  check "nginx: http redirects to https" test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http_port/")" = 301
  auth=(-H "Authorization: Bearer $key")
  curl -sk "${auth[@]}" -X POST -H 'Content-Type: application/json' -d '{"name":"laws"}' "$base/api/v1/kbs" -o /dev/null
  head -c 3000000 /dev/zero | tr '\0' 'a' | sed 's/^/第一条 /' > "$work/big.txt"
  code=$(curl -sk "${auth[@]}" -o "$work/up.json" -w '%{http_code}' --data-binary @"$work/big.txt" \
    "$base/api/v1/kbs/laws/documents?filename=big.txt")
  check "nginx: a 3 MB upload passes" test "$code" = 202
  code=$(curl -sk "${auth[@]}" -o /dev/null -w '%{http_code}' --data-binary @"$src/data/demo/劳动合同法(2012-12-28).md" \
    "$base/api/v1/kbs/laws/documents?filename=law.md")
  check "nginx: an upload of a law" test "$code" = 202
  for _ in $(seq 100); do
    curl -sk "${auth[@]}" "$base/api/v1/kbs/laws/documents" | grep -q '"status":"ready".*"status":"ready"' && break
    sleep 0.1
  done
  curl -sk -N "${auth[@]}" -H 'Accept: text/event-stream' -H 'Content-Type: application/json' \
    -d '{"question":"劳动合同法第十九条"}' -D "$work/sse.headers" "$base/api/v1/kbs/laws/ask" > "$work/sse"
  check "nginx: the answer stream arrives as events" grep -q '^event: done' "$work/sse"
  check "nginx: with its citations" grep -q '^event: citations' "$work/sse"
  check "nginx: as an event stream" grep -qi '^content-type: text/event-stream' "$work/sse.headers"
  # an office behind one address: 40 uploads at once all pass (the per-client limit is nginx's, 512 an address;
  # clauseqa's own, which sees only nginx's address, is off). HTTP/1.1: each upload streams on its own connection.
  check "nginx: a per-client connection limit (limit_conn, 429)" bash -c \
    "grep -q '^    limit_conn clauseqa_per_client 512;' '$deploy/nginx-clauseqa.conf' && grep -q 'limit_conn_status 429;' '$deploy/nginx-clauseqa.conf'"
  mkdir -p "$work/many"
  uploads=()
  for i in $(seq 40); do
    { echo "第一条 office upload $i"; head -c 60000 /dev/zero | tr '\0' 'b'; } > "$work/many/u$i.txt"
    curl -sk --http1.1 "${auth[@]}" -o /dev/null -w '%{http_code}\n' --limit-rate 20k --data-binary @"$work/many/u$i.txt" \
      "$base/api/v1/kbs/laws/documents?filename=u$i.txt" > "$work/many/code$i" &
    uploads+=($!)
  done
  wait "${uploads[@]}" || true
  codes=$(cat "$work/many"/code* | sort | uniq -c | tr -s ' ' | tr '\n' ';')
  check "nginx: 40 concurrent uploads from one address all accepted ($codes)" test "$codes" = " 40 202;"
  check "nginx: no error logged" bash -c "! grep -q '\[error\]' '$work/nginx/logs/error.log'"
else
  echo "  nginx not found: the nginx example not exercised (apt-get install nginx-light to run it)"
fi

finish
