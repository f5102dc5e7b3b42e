#!/usr/bin/env bash
# A node dies mid-ingest and another finishes its job (issue 20, docs/SCALE.md "Jobs"): two `clauseqa serve --store`
# nodes on one PostgreSQL database (tests/pg/cluster.sh: CLAUSEQA_PG), each with its own data folder. Node A takes an
# upload and dies while reading it (CLAUSEQA_FAULT=while-reading: exit 86, no clean-up, as kill -9); its data folder
# goes with it. Its lease is made to run out (rather than waited for: 30 s); node B takes the job over, fetches the
# upload from the store, clears what A left, and ends it ready at attempt 2 — with the clause count of a clean run of
# the same file, and nothing left processing. 77 (skipped) when the binary has no --store (before pgstore's part).
#
#   tests/pg/cluster.sh tests/pg/test_jobs_takeover.sh path/to/clauseqa
set -euo pipefail
bin=${1:?usage: $0 path/to/clauseqa}
[ -n "${CLAUSEQA_PG:-}" ] || { echo "SKIP: CLAUSEQA_PG is not set (run through tests/pg/cluster.sh)" >&2; exit 77; }
src=$(cd "$(dirname "$0")/../.." && pwd)
psql_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)/psql
"$psql_bin" "$CLAUSEQA_PG" -qc "CREATE DATABASE takeover" >/dev/null
export CLAUSEQA_SOURCE_DIR=$src CLAUSEQA_CONFIG=/dev/null TAKEOVER_PG="$CLAUSEQA_PG dbname=takeover" PSQL=$psql_bin
if ! "$bin" --store "$TAKEOVER_PG" kb list >/dev/null 2>&1; then
  echo "SKIP: this clauseqa cannot use a PostgreSQL store (--store)" >&2
  exit 77
fi
exec python3 - "$bin" <<'EOF_PY'
import os, re, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.environ['CLAUSEQA_SOURCE_DIR'], 'tests', 'integration'))
from http_server import DEMO_PDF, Checks, Server

T = Checks('test_jobs_takeover')
check = T.check
store = os.environ['TAKEOVER_PG']


def sql(statement):
    return subprocess.run([os.environ['PSQL'], store, '-tAc', statement], capture_output=True, text=True,
                          check=True).stdout.strip()


a = Server(sys.argv[1], args=['--store', store])
b = Server(sys.argv[1], args=['--store', store])
for bad in ('2', '3601', '10s', ''):  # the lease (CLAUSEQA_JOB_LEASE_S): whole seconds, 3-3600; empty: the default
    n = Server(sys.argv[1], args=['--store', store])
    n.env = {'CLAUSEQA_JOB_LEASE_S': bad}
    try:
        n.start()
        why = None
    except RuntimeError as e:
        why = str(e)
    if bad:
        check(f'a lease of {bad!r} is refused', why and 'CLAUSEQA_JOB_LEASE_S' in why and '3 to 3600' in why, why)
    else:
        check('an empty lease setting is the default', why is None and '(lease 30 s, renewed every 10 s)' in
              n.log_text(), n.log_text())
    n.close()
try:
    a.env = {'CLAUSEQA_FAULT': 'while-reading'}
    a.start()
    check('a KB', a.post('/api/v1/kbs', {'name': 'laws'}).status in (200, 201))
    r = a.upload('laws', DEMO_PDF)
    check('upload accepted by A', r.status == 202, r)
    job = r.json()['job']['id']
    check('A dies while reading', a.proc.wait(60) == 86)
    a.proc = None
    a.log.close()
    for leaf in ('uploads', 'files'):  # A's machine is gone: B has to fetch the upload from the store
        shutil.rmtree(os.path.join(a.data, leaf), ignore_errors=True)
    check('the job is A\'s, running', sql(f"SELECT state || ' ' || attempt FROM jobs WHERE id = {job}") == 'running 1')
    sql(f"UPDATE jobs SET lease_until = now() - interval '1 second' WHERE id = {job}")
    b.start()
    j = b.wait_job(job, timeout_s=60)
    check('B ends it ready', j.get('state') == 'ready', j)
    check('at the second start', j.get('attempts') == 2, j)
    check('fencing token moved on', sql(f'SELECT attempt FROM jobs WHERE id = {job}') == '2')
    owner = re.search(r"claims as '([^']+)'", b.log_text())
    check('B holds it', owner and sql(f'SELECT lease_owner FROM jobs WHERE id = {job}') == owner.group(1), owner)
    check('B logged the take-over', 'taken over (start 2' in b.log_text(), b.log_text())
    b.post('/api/v1/kbs', {'name': 'clean'})
    jc = b.wait_job(b.upload('clean', DEMO_PDF).json()['job']['id'])
    check('a clean run of the same file', jc.get('state') == 'ready', jc)
    kbs = {k['name']: k for k in b.get('/api/v1/kbs').json()['kbs']}
    check('one document, a clean run\'s clauses', kbs['laws']['documents'] == 1 and
          kbs['laws']['clauses'] == kbs['clean']['clauses'] > 0, kbs)
    check('nothing left processing', sql("SELECT count(*) FROM documents WHERE status <> 'ready'") == '0')
    check('postings as a clean run\'s', sql(
        'SELECT count(DISTINCT (p.kb_id, p.token)) FROM keyword_postings p JOIN kbs k ON k.id = p.kb_id '
        "WHERE k.name = 'laws'") == sql('SELECT count(DISTINCT (p.kb_id, p.token)) FROM keyword_postings p JOIN kbs k '
                                        "ON k.id = p.kb_id WHERE k.name = 'clean'"))
    r = b.post('/api/v1/kbs/laws/retrieve', {'question': '劳动法第四十四条规定了什么？', 'k': 3})
    check('searchable through B', r.status == 200 and r.json()['results'][0]['clause'] == '第四十四条', r)
finally:
    a.close()
    b.close()
T.finish()
EOF_PY
