#!/usr/bin/python3
"""The verdict of a tools/device_cuda31.sh run: which of issue 31's four CUDA gates may become a default.

usage: tools/device_cuda31_verdict.py DIR   (DIR holds the run's tests.txt, bench.txt and load.txt)

Reads the sections the run wrote ("=== tests gemma: ...", "=== bench batch1 model=M kv=K", "=== bench concurrent
model=M kv=K logits=L [planes=P]" (no planes: 1), "=== load mode=MODE gates=G ..."), prints the numbers it judged by, then one line a gate:
"GATE <env>: DEFAULT" (every rule below held), "GATE <env>: KEEP OFF (why)" (a rule failed) or "GATE <env>:
UNDECIDED (what is missing)" (a test or a measurement did not run: a timeout, a skipped step, no GPU).

The rules (docs/PERF.md, issue 31's CUDA halves):
- every test the gate's code runs in is OK in test_decoder_cuda on Gemma AND on the Qwen file (real or synthetic);
- CLAUSEQA_KV_BF16=1: batch-1 greedy decode after 512 tokens with the bf16 cache at least 0.97x the float cache's on
  each model; the batched step (rows logits, 64 streams) likewise; and the load with it (alone, else all gates on)
  not worse than off (asks/s >= 0.93x at each level, no errors beyond off's);
- CLAUSEQA_PREFIX_REUSE=1: the load in the default mode (reranks) with it (alone, else all on) as above;
- CLAUSEQA_BATCH_LOGITS=rows: the batched step's aggregate tok/s with the rows kernel at least 0.90x the GEMM's at
  every --concurrent level above 1, on each model; the load with it (alone, else all on) as above.
- CLAUSEQA_BATCH_PLANES=3 (the batched products' float inputs exactly, in 3 bf16 planes): the batched step's
  aggregate tok/s with 3 planes at least 0.95x 1 plane's at every --concurrent level above 1, for each logits kernel
  benched both ways (the GEMM's at least), on each model; no load rule (the planes change the batched step's speed
  only, which the concurrent bench measures).
Exit status 0 whatever the verdict (1: DIR unreadable)."""
import os
import re
import sys

TESTS = {
    'CLAUSEQA_KV_BF16=1': ['test_attention', 'test_decoder_packed', 'test_packed_shared', 'test_decode_attention',
                           'test_batched_decode', 'test_kv_bf16_logits', 'test_prefix_share'],
    'CLAUSEQA_PREFIX_REUSE=1': ['test_decoder_packed', 'test_packed_shared', 'test_packed_scoring', 'test_score_calls',
                                'test_prefix_share'],
    'CLAUSEQA_BATCH_LOGITS=rows': ['test_top_kernel', 'test_eval_top', 'test_batched_decode', 'test_concurrent_decode',
                                   'test_forward_rows'],
    'CLAUSEQA_BATCH_PLANES=3': ['test_matmul_bf16', 'test_batched_decode', 'test_concurrent_decode', 'test_forward_rows',
                                'test_batched_prefill'],
}
ALONE = {'CLAUSEQA_KV_BF16=1': 'kv16', 'CLAUSEQA_PREFIX_REUSE=1': 'share', 'CLAUSEQA_BATCH_LOGITS=rows': 'rows'}
SPEED_KV, SPEED_ROWS, SPEED_PLANES, LOAD_RATIO = 0.97, 0.90, 0.95, 0.93


def sections(path):
    """[(title, lines)] of a file of '=== TITLE' sections ('=== rc N' lines stay in their section)."""
    out = []
    if not os.path.exists(path):
        return out
    for line in open(path, encoding='utf-8', errors='replace'):
        line = line.rstrip('\n')
        if line.startswith('=== ') and not line.startswith('=== rc '):
            out.append((line[4:], []))
        elif out:
            out[-1][1].append(line)
    return out


def attrs(title):
    return dict(re.findall(r'(\w+)=(\S+)', title))


def parse_tests(path):
    """{'gemma'|'qwen': {test: 'OK'|'FAILED'|'SKIPPED'}}, and the Qwen section's title."""
    res, qtitle = {}, None
    for title, lines in sections(path):
        kind = title.split(':')[0].replace('tests ', '').strip()
        if kind == 'qwen':
            qtitle = title
        got = res.setdefault(kind, {})
        running, rc = None, None
        for ln in lines:
            m = re.match(r'^\[ *(RUN|OK|FAILED|SKIPPED) *\] (test_\w+)\s*$', ln)
            if m and m.group(1) == 'RUN':
                running = m.group(2)
            elif m and got.get(m.group(2)) != 'FAILED':
                got[m.group(2)] = m.group(1)
                running = None
            m = re.match(r'^=== rc (\d+)', ln)
            if m:
                rc = int(m.group(1))
        # a test left running when the program ended by itself (a crash, not the step's timeout: 124, 137) failed
        if running and rc not in (None, 0, 124, 137):
            got[running] = 'FAILED'
    return res, qtitle


def parse_bench(path):
    """{(model, kv): greedy tok/s} and {(model, kv, logits, planes): {streams: aggregate tok/s}}."""
    b1, conc = {}, {}
    for title, lines in sections(path):
        a = attrs(title)
        if title.startswith('bench batch1'):
            for ln in lines:
                m = re.match(r'^decode \(greedy, argmax on GPU\)\s+\d+\s+([\d.]+)', ln)
                if m:
                    b1[(a.get('model'), a.get('kv'))] = float(m.group(1))
        elif title.startswith('bench concurrent'):
            rows = {}
            for ln in lines:
                m = re.match(r'^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$', ln)
                if m:
                    rows[int(m.group(1))] = float(m.group(2))
            if rows:
                conc[(a.get('model'), a.get('kv'), a.get('logits'), a.get('planes', '1'))] = rows
    return b1, conc


def parse_load(path):
    """{(mode, gates): {clients: (asks/s, P50, P95, errors + busy)}} and the runs' reader."""
    res, reader = {}, None
    for title, lines in sections(path):
        a = attrs(title)
        reader = a.get('reader', reader)
        rows = {}
        for ln in lines:
            c = [x.strip() for x in ln.strip().strip('|').split('|')]
            if len(c) == 11 and c[0].isdigit():
                rows[int(c[0])] = (float(c[2]), float(c[3]), float(c[4]), int(c[9]) + int(c[10]))
        if rows:
            res[(a.get('mode'), a.get('gates'))] = rows
    return res, reader


def load_rule(load, mode, gates):
    """(ok, why) for the load run (mode, gates) against (mode, off); ok None when either is missing."""
    off, on = load.get((mode, 'off')), load.get((mode, gates))
    if not off or not on:
        return None, f'no load {mode} {"off" if not off else gates}'
    for n in sorted(off):
        if n not in on:
            return None, f'load {mode} {gates}: no row at {n} clients'
        if on[n][0] < LOAD_RATIO * off[n][0]:
            return False, f'load {mode} {gates} at {n} clients: {on[n][0]:.1f} asks/s vs {off[n][0]:.1f} off'
        if on[n][3] > off[n][3]:
            return False, f'load {mode} {gates} at {n} clients: {on[n][3]} errors/503 vs {off[n][3]} off'
    return True, ''


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print(__doc__)
        return 1
    d = sys.argv[1]
    tests, qtitle = parse_tests(os.path.join(d, 'tests.txt'))
    b1, conc = parse_bench(os.path.join(d, 'bench.txt'))
    load, reader = parse_load(os.path.join(d, 'load.txt'))
    models = sorted({m for m, _ in b1} | {k[0] for k in conc})

    print('# device_cuda31 verdict')
    for kind in ('gemma', 'qwen'):
        t = tests.get(kind, {})
        n = {s: sum(1 for v in t.values() if v == s) for s in ('OK', 'FAILED', 'SKIPPED')}
        print(f'tests {kind}: {n["OK"]} OK, {n["FAILED"]} FAILED, {n["SKIPPED"]} SKIPPED'
              + (f' ({qtitle})' if kind == 'qwen' and qtitle else '')
              + ''.join(f'\n  FAILED {k}' for k, v in sorted(t.items()) if v == 'FAILED'))
    for m in models:
        g0, g1 = b1.get((m, '0')), b1.get((m, '1'))
        print(f'batch-1 greedy after 512 tokens, {m}: float KV {g0 or "-"} tok/s, bf16 KV {g1 or "-"} tok/s')
        for key in sorted(k[1:] for k in conc if k[0] == m):
            r = conc.get((m,) + key)
            if r:
                print(f'  concurrent kv={key[0]} logits={key[1]} planes={key[2]}: '
                      + ', '.join(f'{s} streams {v:.0f}' for s, v in sorted(r.items())) + ' tok/s aggregate')
    for (mode, gates), rows in sorted(load.items()):
        print(f'load {mode} {gates} ({reader}): ' + '; '.join(
            f'{n} clients {a:.1f} asks/s P50 {p50:.0f} P95 {p95:.0f} ms{f" {e} errors/503" if e else ""}'
            for n, (a, p50, p95, e) in sorted(rows.items())))

    for gate, names in TESTS.items():
        missing, why = [], []
        for kind in ('gemma', 'qwen'):
            t, absent = tests.get(kind, {}), {}
            for nm in names:
                st = t.get(nm)
                if st == 'FAILED':
                    why.append(f'{nm} failed on {kind}')
                elif st != 'OK':
                    absent.setdefault(st.lower() if st else 'not run', []).append(nm)
            missing += [f'{", ".join(v)} on {kind}: {k}' for k, v in absent.items()]
        if gate == 'CLAUSEQA_KV_BF16=1':
            for m in models:
                g0, g1 = b1.get((m, '0')), b1.get((m, '1'))
                if not g0 or not g1:
                    missing.append(f'batch-1 bench of {m}')
                elif g1 < SPEED_KV * g0:
                    why.append(f'{m}: batch-1 {g1:.0f} tok/s bf16 KV vs {g0:.0f} float')
                r0, r1 = conc.get((m, '0', 'rows', '1')), conc.get((m, '1', 'rows', '1'))
                if not r0 or not r1 or 64 not in r0 or 64 not in r1:
                    missing.append(f'concurrent bench of {m} (rows, kv 0 and 1)')
                elif r1[64] < SPEED_KV * r0[64]:
                    why.append(f'{m}: 64 streams {r1[64]:.0f} tok/s bf16 KV vs {r0[64]:.0f} float')
        if gate == 'CLAUSEQA_BATCH_LOGITS=rows':
            for m in models:
                rg, rr = conc.get((m, '0', 'gemm', '1')), conc.get((m, '0', 'rows', '1'))
                if not rg or not rr:
                    missing.append(f'concurrent bench of {m} (gemm and rows)')
                    continue
                for s in sorted(rg):
                    if s > 1 and s in rr and rr[s] < SPEED_ROWS * rg[s]:
                        why.append(f'{m}: {s} streams {rr[s]:.0f} tok/s rows vs {rg[s]:.0f} GEMM')
        if gate == 'CLAUSEQA_BATCH_PLANES=3':
            if len(models) < 2:
                missing.append(f'the benches of both models (only {", ".join(models) or "none"})')
            for m in models:
                if not conc.get((m, '0', 'gemm', '1')) or not conc.get((m, '0', 'gemm', '3')):
                    missing.append(f'concurrent bench of {m} (gemm logits, planes 1 and 3)')
                for lg in ('gemm', 'rows'):
                    r1, r3 = conc.get((m, '0', lg, '1')), conc.get((m, '0', lg, '3'))
                    for s in sorted(r1 or {}) if r3 else []:
                        if s > 1 and s in r3 and r3[s] < SPEED_PLANES * r1[s]:
                            why.append(f'{m}: {s} streams {r3[s]:.0f} tok/s 3 planes vs {r1[s]:.0f} 1 plane ({lg} logits)')
        if not models and gate != 'CLAUSEQA_PREFIX_REUSE=1':
            missing.append('the decode benches')
        modes = (['default'] if gate == 'CLAUSEQA_PREFIX_REUSE=1' else [] if gate == 'CLAUSEQA_BATCH_PLANES=3'
                 else ['default', 'router,bm25'])
        for mode in modes:
            alone = ALONE[gate] if (mode, ALONE[gate]) in load else 'on'
            ok, w = load_rule(load, mode, alone)
            if ok is None:
                missing.append(w)
            elif not ok:
                why.append(w + (' (all gates on: run the gates alone to tell which)' if alone == 'on' else ''))
        if why:
            print(f'GATE {gate}: KEEP OFF ({"; ".join(why)})')
        elif missing:
            print(f'GATE {gate}: UNDECIDED (missing: {"; ".join(missing)})')
        else:
            print(f'GATE {gate}: DEFAULT')
    return 0


if __name__ == '__main__':
    sys.exit(main())
