#!/usr/bin/env bash
# A PostgreSQL outage seen through HTTP (issue 29 item 1): `clauseqa serve --store postgresql…` while the server is
# killed with SIGKILL and started again (tests/pg/cluster.sh's CLAUSEQA_PG_CTL). During the outage every request gets
# 503 + Retry-After — a valid key is never answered 401, in open mode or not — and /api/v1/health says "store
# unreachable"; within seconds of the restart the same node answers 200 again, the KB and the key as they were.
#
#   tests/pg/cluster.sh tests/pg/test_store_outage.sh path/to/clauseqa
set -euo pipefail
bin=${1:?usage: $0 path/to/clauseqa}
[ -n "${CLAUSEQA_PG:-}" ] && [ -n "${CLAUSEQA_PG_CTL:-}" ] ||
  { echo "SKIP: CLAUSEQA_PG / CLAUSEQA_PG_CTL not set (run through tests/pg/cluster.sh)" >&2; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CLAUSEQA_CONFIG=/dev/null CLAUSEQA_LOG=warn
# cluster.sh runs the server with synchronous_commit off, which may lose the last commits to a crash: these must last
export PGOPTIONS="-c synchronous_commit=on"
psql_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)/psql
"$psql_bin" "$CLAUSEQA_PG" -qc "CREATE DATABASE outage_keys" >/dev/null
"$psql_bin" "$CLAUSEQA_PG" -qc "CREATE DATABASE outage_open" >/dev/null
keys="$CLAUSEQA_PG dbname=outage_keys"
open="$CLAUSEQA_PG dbname=outage_open"

"$bin" --data "$work/k" --store "$keys" kb create laws >/dev/null
secret=$("$bin" --data "$work/k" --store "$keys" keys create --role reader --kb laws --json |
         python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
"$bin" --data "$work/o" --store "$open" kb create laws >/dev/null

python3 - "$bin" "$work" "$secret" "$CLAUSEQA_PG_CTL" "$keys" "$open" <<'PY'
import atexit, json, os, subprocess, sys, time, urllib.error, urllib.request
binary, work, secret, ctl, keys_store, open_store = sys.argv[1:]

# two nodes, one on each store, on free ports
nodes = {}
for name, store in (("k", keys_store), ("o", open_store)):
    log = open(f"{work}/{name}.log", "w")
    nodes[name] = subprocess.Popen([binary, "--data", f"{work}/{name}", "--store", store, "serve", "--port", "0",
                                    "--port-file", f"{work}/{name}.port"], stdout=log, stderr=subprocess.STDOUT)
atexit.register(lambda: [p.kill() for p in nodes.values() if p.poll() is None])
ports = {}
for name in nodes:
    for _ in range(100):
        if os.path.exists(f"{work}/{name}.port") and open(f"{work}/{name}.port").read().strip():
            ports[name] = int(open(f"{work}/{name}.port").read())
            break
        time.sleep(0.1)
    else:
        sys.exit(open(f"{work}/{name}.log").read())

def get(node, path, key=None):
    req = urllib.request.Request(f"http://127.0.0.1:{ports[node]}{path}")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()

def healthy():
    return (get("k", "/api/v1/health")[0] == 200 and get("o", "/api/v1/health")[0] == 200 and
            get("k", "/api/v1/kbs", secret)[0] == 200 and get("o", "/api/v1/kbs")[0] == 200)

assert healthy()
assert get("k", "/api/v1/kbs")[0] == 401  # without the key: still refused

for outage in range(2):
    subprocess.run([ctl, "kill9"], check=True)
    # during the outage: 503 + Retry-After everywhere, never 401, health names the store
    for _ in range(3):
        for node, path, key in (("k", "/api/v1/health", None), ("o", "/api/v1/health", None),
                                ("k", "/api/v1/kbs", secret), ("o", "/api/v1/kbs", None),
                                ("k", "/api/v1/kbs/laws/documents", secret)):
            status, headers, body = get(node, path, key)
            assert status == 503, (node, path, status, body)
            assert int(headers.get("Retry-After", "0")) >= 1, (node, path, headers)
            if path == "/api/v1/health":
                assert "store unreachable" in body, body
        time.sleep(0.2)
    subprocess.run([ctl, "start"], check=True)
    t0 = time.time()
    while not healthy():
        assert time.time() - t0 < 10, "the nodes did not recover within 10 s of the restart"
        time.sleep(0.1)
    print(f"outage {outage + 1}: both nodes answer again {time.time() - t0:.2f} s after the restart")
    status, _, body = get("k", "/api/v1/kbs", secret)
    assert status == 200 and "laws" in body, body
for p in nodes.values():
    p.terminate()
    p.wait(timeout=30)
PY
echo "ok: 503 + Retry-After during the outage, recovered after it"
