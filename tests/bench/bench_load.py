#!/usr/bin/python3
"""Load generator for asks (issue 15): a server of its own with a KB (data/demo, plus the first LOAD_DOCS PDFs of
../shared/eval/laws-zh-pdf when present), then closed-loop clients asking streamed questions at each concurrency
level for a bounded time. Prints one table row a level: asks/s, latency P50/P95/P99 (to the stream's end), time to
first token P50/P95, generated tokens/s, 503s (admission: busy) and other errors. The clients run on the same machine
as the server: on a small box they take cores from it (say so next to any figure).

usage: tests/bench/bench_load.py [--binary build/clauseqa] [--levels 1,4,16,64,256] [--seconds 10]
                                 [--answers extractive|generate|auto] [--docs N] [--docs-dir DIR]
                                 [--questions FILE.jsonl] [--mode MODE] [--data DIR] [-- SERVE OPTIONS...]
--docs-dir DIR ingests every document of DIR (e.g. an evaluation suite's docs/) instead of the laws-zh-pdf PDFs;
--data DIR keeps the KB in DIR and reuses it in later runs with the same DIR (no second ingestion);
--questions FILE asks the "question" of each JSON line of FILE (a suite's questions.jsonl) instead of the built-in
ones; --mode M sends it as each ask's retrieval mode (e.g. router,bm25: no reranking; default: the server's). The mean decode batch of a level (steps per forward, from /metrics) is printed with it, and after the table the mean
time an ask spent in each phase (/metrics clauseqa_ask_phase_seconds: admission wait, question, retrieval, the
decoder's rerank/prefill/decode waits and runs, answer, streaming, total) at each level.
tests/bench/bench_cluster.py drives several nodes behind HAProxy on PostgreSQL with this file's clients.
Serve options after -- go to `clauseqa serve` (--device cuda, --max-asks 16, --threads 300 ...)."""
import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, '..', '..'))
SHARED = os.environ.get('CLAUSEQA_SHARED') or os.path.join(SOURCE, '..', 'shared')
QUESTIONS = [
    '劳动法第四十四条规定了什么？', '试用期最长多长时间？', '加班费怎么算', '用人单位解除劳动合同需要提前几天通知？',
    'What does Section 5.2 say?', 'How many days of notice are needed to terminate the services agreement?',
    '劳动合同法第十条', '未成年工是指多大年龄的劳动者？', '工会的职责是什么', '女职工生育享受多少天产假？',
    '劳动争议发生后当事人可以怎么办？', 'Who owns the work product under the agreement?',
]


def percentile(values, q):
    if not values:
        return float('nan')
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


MODE = None  # --mode: the asks' retrieval mode (None: the server's default)
KB = 'demo'  # the KB asked (tests/bench/bench_cluster.py asks another)


def ask_streamed(port, question, timeout_s):
    """One streamed ask: (status, seconds to the end, seconds to the first token or None, tokens, error code)."""
    t0 = time.time()
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout_s)
    try:
        body = json.dumps(dict({'question': question, 'stream': True}, **({'mode': MODE} if MODE else {}))).encode()
        conn.request('POST', f'/api/v1/kbs/{KB}/ask', body=body,
                     headers={'Content-Type': 'application/json', 'Accept': 'text/event-stream'})
        r = conn.getresponse()
        if r.status != 200:
            data = r.read()
            try:
                code = json.loads(data)['error']['code']
            except (ValueError, KeyError, TypeError):
                code = 'http_%d' % r.status
            return r.status, time.time() - t0, None, 0, code
        first, tokens, event = None, 0, None
        for raw in r:
            line = raw.decode('utf-8', 'replace').rstrip('\n')
            if line.startswith('event:'):
                event = line[6:].strip()
            elif line.startswith('data:') and event == 'token':
                if first is None:
                    first = time.time() - t0
            elif line.startswith('data:') and event == 'done':
                try:
                    tokens = int(json.loads(line[5:]).get('tokens_generated') or 0)
                except ValueError:
                    pass
        return 200, time.time() - t0, first, tokens, None
    except OSError as e:
        return 0, time.time() - t0, None, 0, type(e).__name__
    finally:
        conn.close()


PHASES = ['admission_wait', 'question', 'retrieve', 'rerank_wait', 'rerank_run', 'prefill_wait', 'prefill_run',
          'decode_wait', 'decode_run', 'answer', 'stream', 'total']


def metrics_counts(port):
    """From /metrics: (decode steps, forwards) of the clauseqa_decoder_batch_size histogram, and {phase: (sum s,
    count)} of clauseqa_ask_phase_seconds; zeros and {} without them."""
    try:
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
        c.request('GET', '/metrics')
        text = c.getresponse().read().decode()
    except OSError:
        return 0, 0, {}
    vals, phases = {}, {}
    for ln in text.splitlines():
        if ln.startswith('clauseqa_decoder_batch_size_sum') or ln.startswith('clauseqa_decoder_batch_size_count'):
            vals[ln.split()[0]] = float(ln.split()[1])
        elif ln.startswith('clauseqa_ask_phase_seconds_sum{') or ln.startswith('clauseqa_ask_phase_seconds_count{'):
            key, value = ln.rsplit(' ', 1)
            phase = key.split('phase="', 1)[1].split('"', 1)[0]
            s, n = phases.get(phase, (0.0, 0.0))
            phases[phase] = (float(value), n) if '_sum{' in key else (s, float(value))
    return vals.get('clauseqa_decoder_batch_size_sum', 0), vals.get('clauseqa_decoder_batch_size_count', 0), phases


def run_level(port, clients, seconds):
    results, lock = [], threading.Lock()
    stop_at = time.time() + seconds

    def client(i):
        n = i
        while time.time() < stop_at:
            res = ask_streamed(port, QUESTIONS[n % len(QUESTIONS)], timeout_s=120)
            n += clients
            with lock:
                results.append(res)
            if res[0] == 503:
                time.sleep(0.05)  # a refused client does not spin

    steps0, fwd0, ph0 = metrics_counts(port)
    t0 = time.time()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    steps1, fwd1, ph1 = metrics_counts(port)
    phase_ms = {}  # mean milliseconds an observation (an ask; the rerank phases a reranked ask) this level
    for p in PHASES:
        s0, n0 = ph0.get(p, (0, 0))
        s1, n1 = ph1.get(p, (0, 0))
        phase_ms[p] = ((s1 - s0) / (n1 - n0) * 1e3 if n1 > n0 else None, n1 - n0)
    ok = [r for r in results if r[0] == 200]
    lat = [r[1] for r in ok]
    ttft = [r[2] for r in ok if r[2] is not None]
    busy = sum(1 for r in results if r[4] == 'busy')
    errors = len(results) - len(ok) - busy
    return {'clients': clients, 'asks': len(ok), 'asks_s': len(ok) / wall, 'p50': percentile(lat, 0.5),
            'p95': percentile(lat, 0.95), 'p99': percentile(lat, 0.99), 'ttft50': percentile(ttft, 0.5),
            'ttft95': percentile(ttft, 0.95), 'tok_s': sum(r[3] for r in ok) / wall, 'busy': busy,
            'errors': errors, 'wall': wall, 'batch': (steps1 - steps0) / (fwd1 - fwd0) if fwd1 > fwd0 else 0,
            'phases': phase_ms}


def main():
    argv = sys.argv[1:]
    serve_extra = []
    if '--' in argv:
        serve_extra = argv[argv.index('--') + 1:]
        argv = argv[:argv.index('--')]
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--binary', default=os.path.join(SOURCE, 'build', 'clauseqa'))
    ap.add_argument('--levels', default='1,4,16,64,256')
    ap.add_argument('--seconds', type=float, default=10)
    ap.add_argument('--answers', default='auto')
    ap.add_argument('--docs', type=int, default=int(os.environ.get('LOAD_DOCS', '30')))
    ap.add_argument('--docs-dir')
    ap.add_argument('--questions')
    ap.add_argument('--mode')
    ap.add_argument('--data', help='the data folder to use and keep: made (and the documents ingested) when it does '
                    'not hold an earlier run\'s KB, else reused as it is')
    a = ap.parse_args(argv)
    global MODE
    MODE = a.mode
    if a.questions:
        QUESTIONS[:] = [json.loads(ln)['question'] for ln in open(a.questions, encoding='utf-8') if ln.strip()]
    levels = [int(x) for x in a.levels.split(',')]
    work = tempfile.mkdtemp(prefix='cq-load-')
    server = None
    try:
        data = a.data or os.path.join(work, 'data')
        pdf_dir = os.path.join(SHARED, 'eval', 'laws-zh-pdf', 'docs')
        ready = os.path.join(data, '.bench_load_ready')
        reuse = a.data and os.path.exists(ready)  # the KB of an earlier run with the same --data
        if not reuse:
            subprocess.run(['bash', os.path.join(SOURCE, 'tools', 'demo_kb.sh'), a.binary, data], check=True,
                           stdout=subprocess.DEVNULL)
        if reuse:
            pass
        elif a.docs_dir:
            docs = sorted(os.path.join(a.docs_dir, f) for f in os.listdir(a.docs_dir))
            subprocess.run([a.binary, 'ingest', '--data', data, '--kb', 'demo', '--ocr', 'off'] + docs,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elif a.docs > 0 and os.path.isdir(pdf_dir):
            pdfs = sorted(os.path.join(pdf_dir, f) for f in os.listdir(pdf_dir) if f.endswith('.pdf'))[:a.docs]
            subprocess.run([a.binary, 'ingest', '--data', data, '--kb', 'demo', '--ocr', 'off'] + pdfs,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if a.data:
            open(ready, 'w').close()
        port_file = os.path.join(work, 'port')
        threads = str(min(256, max(levels) + 8))  # a worker a client up to the server's cap: queueing shows in the
        # admission numbers (and, past 256 clients, in the connection queue)
        log = open(os.path.join(work, 'server.log'), 'wb')
        server = subprocess.Popen([a.binary, 'serve', '--data', data, '--port', '0', '--port-file', port_file,
                                   '--threads', threads, '--connections', str(max(levels) * 2 + 16),
                                   '--max-client-connections', '0', '--answers', a.answers] + serve_extra,
                                  stdout=log, stderr=subprocess.STDOUT)
        for _ in range(600):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            if server.poll() is not None:
                sys.exit('bench_load: the server exited:\n' + open(log.name, errors='replace').read()[-2000:])
            time.sleep(0.1)
        port = int(open(port_file).read())
        health = {}
        for _ in range(300):
            try:
                c = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
                c.request('GET', '/api/v1/health')
                health = json.loads(c.getresponse().read())
                break
            except OSError:
                time.sleep(0.1)
        ask_streamed(port, QUESTIONS[0], 120)  # warm-up (the decoder's first prompt)
        print(f'# bench_load: {a.binary}, answers {a.answers}, {os.cpu_count()} CPUs here (clients included), '
              f'{a.seconds:g} s a level; serve {" ".join(serve_extra) or "(defaults)"}')
        models = health.get('models', {})
        kb = (f'{len(os.listdir(a.docs_dir))} documents of {a.docs_dir}' if a.docs_dir else
              f'{a.docs if os.path.isdir(pdf_dir) else 0} laws-zh-pdf documents')
        print(f'# answers: {models.get("answers", "?")}, decoder on {models.get("decoder_device", "-")}; '
              f'KB demo: data/demo + {kb}; {len(QUESTIONS)} questions{" of " + a.questions if a.questions else ""}; '
              f'mode {MODE or "the server default"}')
        print()
        print('| clients | asks | asks/s | P50 ms | P95 ms | P99 ms | first token P50 / P95 ms | generated tok/s | '
              'mean decode batch | 503 busy | errors |')
        print('|---|---|---|---|---|---|---|---|---|---|---|')
        rows = []
        for n in levels:
            r = run_level(port, n, a.seconds)
            rows.append(r)
            print(f'| {n} | {r["asks"]} | {r["asks_s"]:.1f} | {r["p50"] * 1e3:.0f} | {r["p95"] * 1e3:.0f} | '
                  f'{r["p99"] * 1e3:.0f} | {r["ttft50"] * 1e3:.0f} / {r["ttft95"] * 1e3:.0f} | {r["tok_s"]:.0f} | '
                  f'{r["batch"]:.1f} | {r["busy"]} | {r["errors"]} |', flush=True)
        if any(any(v[0] is not None for v in r['phases'].values()) for r in rows):
            print()
            print('# where an ask\'s time goes (/metrics clauseqa_ask_phase_seconds): mean ms an ask (the rerank_* '
                  'columns: a reranked ask; decode_*: the sum of its steps), the asks counted in ()')
            print('| clients | ' + ' | '.join(PHASES) + ' |')
            print('|---|' + '---|' * len(PHASES))
            for r in rows:
                cells = []
                for p in PHASES:
                    ms, n = r['phases'][p]
                    cells.append('-' if ms is None else f'{ms:.1f} ({n:.0f})' if p in ('total', 'rerank_run',
                                                                                    'prefill_run') else f'{ms:.1f}')
                print(f'| {r["clients"]} | ' + ' | '.join(cells) + ' |', flush=True)
    finally:
        if server and server.poll() is None:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
