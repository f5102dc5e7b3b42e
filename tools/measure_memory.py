#!/usr/bin/python3
"""The server's memory by part (docs/OPERATIONS.md): the same workload on the demo KB — its three documents uploaded,
then questions asked for a while — on servers that differ by one part each, RSS read from /proc after each stage:

  bare      no models: router + BM25 retrieval, extractive answers (SQLite, caches, thread and connection pools)
  encoder   + the SSM encoder's weights: dense retrieval, its FAISS index per KB
  decoder   + the Gemma 270M decoder and its adapter: generated answers (weights, KV caches of --max-asks sequences)

and, for the full server, the mappings that hold its RSS (/proc/PID/smaps: the GGUF file, anonymous memory, the
heap, libraries). A server is started from a copy of the binary outside the build tree, so it finds only the models
given to it (app/models.h).

usage: tools/measure_memory.py build/clauseqa [--seconds 120] [--json OUT]"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))
from http_server import SOURCE_DIR, Server, binary_without_models  # noqa: E402

DEMO = os.path.join(SOURCE_DIR, 'data', 'demo')
MODELS = os.path.join(SOURCE_DIR, 'data', 'models')
QUESTIONS = ['劳动法第四十四条规定了什么？', '加班工资怎么计算？', '试用期最长多久？', '用人单位解除劳动合同需要提前多久通知？',
             'How many days of notice are needed to terminate?', 'What are the payment terms?', '劳动合同应当具备哪些条款？',
             '未成年工是指什么？', '经济补偿如何计算？', 'Who owns the work product?']


def rss_kb(pid):
    for line in open(f'/proc/{pid}/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
    return 0


def by_mapping(pid):
    """RSS (KiB) of the process's mappings, grouped: the GGUF file, other files, anonymous, heap, stacks."""
    groups, name = {}, None
    for line in open(f'/proc/{pid}/smaps'):
        parts = line.split()
        if len(parts) >= 5 and '-' in parts[0] and ':' in parts[3]:
            path = parts[5] if len(parts) > 5 else ''
            if path.endswith('.gguf'):
                name = 'gguf file (mmap)'
            elif path == '[heap]':
                name = 'heap (brk)'
            elif path.startswith('[stack'):
                name = 'stacks'
            elif path.endswith('.faiss'):
                name = 'faiss file'
            elif path.startswith('/') and ('.so' in path or path.endswith('clauseqa')):
                name = 'code (binary, libraries)'
            elif path.startswith('/'):
                name = 'other files (' + os.path.basename(path) + ')'
            else:
                name = 'anonymous'
        elif parts and parts[0] == 'Rss:' and name:
            groups[name] = groups.get(name, 0) + int(parts[1])
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]))


def run(binary, label, models, seconds, concurrency=1, env=None):
    work = tempfile.mkdtemp(prefix='cq-mem-')
    data = os.path.join(work, 'data')
    os.makedirs(os.path.join(data, 'models'))
    for m in models:
        src = os.path.join(MODELS, m)
        dst = os.path.join(data, 'models', m)
        (shutil.copytree if os.path.isdir(src) else os.link)(src, dst)
    answers = 'generate' if any(m.endswith('.gguf') for m in models) else 'extractive'
    s = Server(binary_without_models(binary, work), data_dir=data, args=['--answers', answers])
    out = {'server': label, 'answers': answers, 'concurrency': concurrency, 'env': env or {}}
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        s.start()
        pid = s.proc.pid
        time.sleep(0.5)
        out['started'] = rss_kb(pid)
        s.post('/api/v1/kbs', {'name': 'demo'})
        for f in sorted(os.listdir(DEMO)):
            s.wait_job(s.upload('demo', os.path.join(DEMO, f)).json()['job']['id'], timeout_s=300)
        out['documents'] = rss_kb(pid)
        deadline, count, lock = time.time() + seconds, [0], threading.Lock()
        peak = [0]

        def client(k):
            i = k
            while time.time() < deadline:
                r = s.post('/api/v1/kbs/demo/ask', {'question': QUESTIONS[i % len(QUESTIONS)], 'store': i % 2 == 0},
                           timeout_s=600)
                if r.status != 200:
                    raise RuntimeError(f'ask: {r}')
                i += concurrency
                with lock:
                    count[0] += 1
                    peak[0] = max(peak[0], rss_kb(pid))

        with ThreadPoolExecutor(concurrency) as ex:
            list(ex.map(client, range(concurrency)))
        out['peak_during_asks'] = peak[0]
        out['asks'] = count[0]
        out['after_asks'] = rss_kb(pid)
        out['mappings'] = by_mapping(pid)
        health = s.get('/api/v1/health').json() or {}
        out['health'] = {k: health.get(k) for k in ('answers', 'dense', 'decoder') if k in health}
    finally:
        os.environ.clear()
        os.environ.update(saved)
        s.stop()
        s.close()
        shutil.rmtree(work, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('binary')
    ap.add_argument('--seconds', type=float, default=90)
    ap.add_argument('--concurrency', type=int, default=4, help='clients asking at once (--max-asks is 8)')
    ap.add_argument('--json')
    a = ap.parse_args()
    gguf = 'gemma-3-270m-q4_k_m.gguf'
    full = ['ssm', gguf, 'answer']
    configs = [('bare', [], None), ('encoder (dense on: CLAUSEQA_DENSE=on)', ['ssm'], {'CLAUSEQA_DENSE': 'on'}),
               ('decoder', full, None), ('decoder, MALLOC_ARENA_MAX=2', full, {'MALLOC_ARENA_MAX': '2'})]
    runs = []
    for label, models, env in configs:
        r = run(a.binary, label, models, a.seconds, a.concurrency, env)
        runs.append(r)
        print(f"{r['server']:38} started {r['started'] / 1024:6.1f} MiB  documents {r['documents'] / 1024:6.1f}  "
              f"{r['asks']} asks by {r['concurrency']} clients: peak {r['peak_during_asks'] / 1024:6.1f}, "
              f"after {r['after_asks'] / 1024:6.1f} MiB  {r['health']}", flush=True)
        print('   by mapping (MiB):', {k: round(v / 1024, 1) for k, v in r['mappings'].items() if v >= 1024},
              flush=True)
    if a.json:
        json.dump(runs, open(a.json, 'w'), indent=1)


if __name__ == '__main__':
    main()
