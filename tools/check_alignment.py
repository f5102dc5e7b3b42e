#!/usr/bin/python3
"""Scores the clause alignment of `clauseqa compare` against the hand-checked sample in
tests/data/versions/alignment_gold.tsv (docs/EVAL.md, "Versions of a regulation").

usage: tools/check_alignment.py path/to/clauseqa [--docs DIR] [--verbose]

The documents are ingested from DIR (default ../shared/eval/laws-zh/docs) into a scratch data directory. A clause
is aligned right when the other side of its pair is empty and its gold is '-', or is not empty, shares a clause
with the gold and holds nothing outside it."""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GOLD = os.path.join(HERE, '..', 'tests', 'data', 'versions', 'alignment_gold.tsv')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('binary')
    ap.add_argument('--docs', default=os.path.join(HERE, '..', '..', 'shared', 'eval', 'laws-zh', 'docs'))
    ap.add_argument('--verbose', action='store_true')
    args = ap.parse_args()
    rows = [line.rstrip('\n').split('\t') for line in open(GOLD, encoding='utf-8') if line.strip() and line[0] != '#']
    laws = sorted({(r[0], r[1]) for r in rows})
    tally = collections.Counter()
    with tempfile.TemporaryDirectory() as data:
        for a, b in laws:
            files = [os.path.join(args.docs, n + '.md') for n in (a, b)]
            subprocess.run([args.binary, 'ingest', '--data', data, '--kb', 'gold'] + files, check=True,
                           capture_output=True)
            out = subprocess.run([args.binary, 'compare', '--data', data, '--kb', 'gold', '--json', a, b], check=True,
                                 capture_output=True, text=True).stdout
            pairs = json.loads(out)['pairs']
            other = {}
            for p in pairs:
                la, lb = [c['clause'] for c in p['a']], [c['clause'] for c in p['b']]
                for c in la:
                    other[('a', c)] = (set(lb), p['kind'])
                for c in lb:
                    other[('b', c)] = (set(la), p['kind'])
            for law_a, law_b, side, clause, gold, note in (r for r in rows if (r[0], r[1]) == (a, b)):
                got, kind = other.get((side, clause), (None, None))
                want = set() if gold == '-' else set(gold.split('+'))
                ok = bool(got is not None and ((not want and not got) or (got and got & want and got <= want)))
                law = a.split('(')[0]
                tally[(law, ok)] += 1
                tally[('all', ok)] += 1
                if args.verbose or not ok:
                    print(f"{'ok ' if ok else 'BAD'} {law} {side} {clause}: aligned with {sorted(got or []) or '-'} "
                          f"({kind}), gold {gold} — {note}")
    for law in sorted({k[0] for k in tally}, key=lambda x: x == 'all'):
        n = tally[(law, True)] + tally[(law, False)]
        print(f'{law}: {tally[(law, True)]}/{n} = {tally[(law, True)] / n:.3f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
