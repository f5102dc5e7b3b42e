#!/usr/bin/python3
"""tools/device_cuda31_verdict.py on fixed outputs in the formats the device run writes (cmocka's result lines,
bench_decoder's batch-1 line and --concurrent table, bench_load's table): every rule met gives DEFAULT for the four
gates; a failed test, a slow rows kernel, slow planes, a load run with errors give KEEP OFF for the gate concerned only; a timed-out
test section or a missing bench gives UNDECIDED, never DEFAULT.

usage: test_cuda31_verdict.py [path/to/clauseqa] (unused)"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import ROOT, check, failed  # noqa: E402

TOOL = os.path.join(ROOT, 'tools', 'device_cuda31_verdict.py')
NAMES = ['test_rmsnorm', 'test_matmul_bf16', 'test_batched_prefill', 'test_attention', 'test_decoder_packed', 'test_packed_shared', 'test_decode_attention',
         'test_packed_scoring', 'test_top_kernel', 'test_eval_top', 'test_batched_decode', 'test_concurrent_decode',
         'test_forward_rows', 'test_score_calls', 'test_kv_bf16_logits', 'test_prefix_share']


def tests_txt(fail=None, cut_qwen_at=None):
    out = []
    for kind in ('gemma', 'qwen'):
        out.append(f'=== tests {kind}: test_decoder_cuda, x.gguf')
        out.append(f'[==========] Running {len(NAMES)} test(s).')
        for n in NAMES:
            if kind == 'qwen' and n == cut_qwen_at:
                out += ['(timed out after 140 s)', '=== rc 124']
                break
            out.append(f'[ RUN      ] {n}')
            out.append(f'[  FAILED  ] {n}' if (kind, n) == fail else f'[       OK ] {n}')
        else:
            out.append('=== rc 0')
    return '\n'.join(out) + '\n'


def bench_txt(rows_slow=False, kv_slow=False, drop_qwen=False, planes_slow=False, no_planes=False):
    out = []
    for model, g in (('gemma-3-270m-q4_k_m', 2100.0), ('qwen', 510.0)):
        if drop_qwen and model == 'qwen':
            continue
        for kv in (0, 1):
            tok = g * (0.8 if kv_slow and kv else 1.02 if kv else 1)
            out += [f'=== bench batch1 model={model} kv={kv}',
                    'decode (full logits to host, batch 1)         128       1500.0',
                    f'decode (greedy, argmax on GPU)                128 {tok:12.1f}', '=== rc 0']
        runs = [(0, 'gemm', ''), (0, 'rows', ''), (1, 'rows', '')]
        if not no_planes:
            runs += [(0, 'gemm', ' planes=3'), (0, 'rows', ' planes=3')]
        for kv, lg, pl in runs:
            out += [f'=== bench concurrent model={model} kv={kv} logits={lg}{pl}',
                    'concurrent decode (cq_decoder_eval_top, 64 candidates a step), after a 512-token prompt each',
                    ' streams  aggregate tok/s per stream tok/s   mean batch      wall ms']
            for s, agg in ((1, 1800), (8, 9000), (32, 11000), (64, 12000)):
                f = 0.7 if rows_slow and lg == 'rows' and s == 64 else 1.0
                f *= 0.9 if planes_slow and pl and s == 32 else 0.97 if pl else 1.0
                out.append(f'{s:8d} {agg * f:16.0f} {agg * f / s:16.1f} {s:12.1f} {500.0:12.1f}')
            out.append('=== rc 0')
    return '\n'.join(out) + '\n'


def load_txt(errors_in=None):
    out = []
    for mode, gates in (('default', 'off'), ('router,bm25', 'off'), ('default', 'on'), ('router,bm25', 'on'),
                        ('default', 'share'), ('default', 'kv16'), ('default', 'rows')):
        out += [f'=== load mode={mode} gates={gates} reader=x.gguf (CLAUSEQA_KV_BF16=0)',
                '| clients | asks | asks/s | P50 ms | P95 ms | P99 ms | first token P50 / P95 ms | generated tok/s | '
                'mean decode batch | 503 busy | errors |', '|---|---|---|---|---|---|---|---|---|---|---|']
        for n, a in ((1, 26.0), (16, 36.0), (64, 40.0)):
            e = 3 if (mode, gates) == errors_in and n == 64 else 0
            out.append(f'| {n} | {int(a * 5)} | {a:.1f} | 43 | 116 | 150 | 37 / 48 | 162 | 1.0 | 0 | {e} |')
        out.append('=== rc 0')
    return '\n'.join(out) + '\n'


def verdict(tests, bench, load):
    with tempfile.TemporaryDirectory() as d:
        for name, text in (('tests.txt', tests), ('bench.txt', bench), ('load.txt', load)):
            if text is not None:
                open(os.path.join(d, name), 'w').write(text)
        r = subprocess.run([sys.executable, TOOL, d], capture_output=True, text=True)
        gates = {ln.split(':')[0][5:]: ln.split(':', 1)[1].strip() for ln in r.stdout.splitlines()
                 if ln.startswith('GATE ')}
        return r.returncode, gates, r.stdout


KV, PR, RW, PL = 'CLAUSEQA_KV_BF16=1', 'CLAUSEQA_PREFIX_REUSE=1', 'CLAUSEQA_BATCH_LOGITS=rows', 'CLAUSEQA_BATCH_PLANES=3'


def main():
    rc, g, out = verdict(tests_txt(), bench_txt(), load_txt())
    check(rc == 0 and g == {KV: 'DEFAULT', PR: 'DEFAULT', RW: 'DEFAULT', PL: 'DEFAULT'},
          f'every rule met (3 planes at 0.97x): four defaults ({g})')
    check('batch-1 greedy after 512 tokens, gemma-3-270m-q4_k_m: float KV 2100.0' in out, 'the batch-1 numbers printed')

    _, g, _ = verdict(tests_txt(fail=('qwen', 'test_prefix_share')), bench_txt(), load_txt())
    check(g[PR].startswith('KEEP OFF') and 'test_prefix_share failed on qwen' in g[PR] and g[KV].startswith('KEEP OFF')
          and g[RW] == 'DEFAULT', f'a failed prefix test keeps prefix reuse and bf16 KV off, not rows ({g})')

    _, g, _ = verdict(tests_txt(), bench_txt(rows_slow=True), load_txt())
    check(g[RW].startswith('KEEP OFF') and '64 streams' in g[RW] and g[KV] == 'DEFAULT' and g[PR] == 'DEFAULT',
          f'the rows kernel 30 % slower at 64 streams: rows kept off ({g})')

    _, g, _ = verdict(tests_txt(), bench_txt(planes_slow=True), load_txt())
    check(g[PL].startswith('KEEP OFF') and '32 streams' in g[PL] and g[RW] == 'DEFAULT' and g[KV] == 'DEFAULT',
          f'3 planes 10 % slower at 32 streams: planes kept off, nothing else ({g})')

    _, g, _ = verdict(tests_txt(fail=('gemma', 'test_matmul_bf16')), bench_txt(), load_txt())
    check(g[PL].startswith('KEEP OFF') and 'test_matmul_bf16 failed on gemma' in g[PL] and g[RW] == 'DEFAULT',
          f'the planes kernel test failed: planes kept off, rows not ({g})')

    _, g, _ = verdict(tests_txt(), bench_txt(no_planes=True), load_txt())
    check(g[PL].startswith('UNDECIDED') and 'planes 1 and 3' in g[PL] and g[RW] == 'DEFAULT',
          f'no planes bench: planes undecided ({g})')

    _, g, _ = verdict(tests_txt(), bench_txt(kv_slow=True), load_txt())
    check(g[KV].startswith('KEEP OFF') and g[RW] == 'DEFAULT', f'bf16 KV slower at batch 1: kept off ({g})')

    _, g, _ = verdict(tests_txt(), bench_txt(), load_txt(errors_in=('default', 'share')))
    check(g[PR].startswith('KEEP OFF') and 'errors' in g[PR] and g[KV] == 'DEFAULT',
          f'errors in the load with prefix reuse alone: kept off ({g})')

    _, g, _ = verdict(tests_txt(cut_qwen_at='test_forward_rows'), bench_txt(), load_txt())
    check(all(v.startswith('UNDECIDED') for v in g.values()) and 'test_forward_rows on qwen: not run' in g[RW]
          and 'test_kv_bf16_logits, test_prefix_share on qwen: not run' in g[KV], f'the Qwen tests cut by their timeout: undecided ({g})')

    crashed = tests_txt(cut_qwen_at='test_forward_rows').replace(
        '(timed out after 140 s)\n=== rc 124', '[ RUN      ] test_forward_rows\n=== rc 139')
    _, g, _ = verdict(crashed, bench_txt(), load_txt())
    check(g[RW].startswith('KEEP OFF') and 'test_forward_rows failed on qwen' in g[RW],
          f'the program crashed inside a test: that test failed ({g})')

    _, g, _ = verdict(tests_txt(), bench_txt(drop_qwen=True), None)
    check(all(v.startswith('UNDECIDED') for v in g.values()), f'no load run: all undecided ({g})')

    rc, g, _ = verdict(None, None, None)
    check(rc == 0 and all(v.startswith('UNDECIDED') for v in g.values()) and len(g) == 4,
          f'nothing ran (no GPU): all undecided ({g})')
    return 1 if failed() else 0


if __name__ == '__main__':
    sys.exit(main())
