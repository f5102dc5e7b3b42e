#!/usr/bin/python3
"""`clauseqa eval --reader-margin off,inf,0.5` (issue 26, reader passages pruned by rerank margin) on the demo
documents, CPU, mode router,bm25,rerank, the trained adapter the tree holds:

- one score line per setting, each naming its margin, with the same retrieval scores (the reranks are shared);
- every question answered under every setting, once each: an answer line, or a line saying which earlier setting's
  answer it is (`same_as`, only where the reader was shown the same clauses);
- the clauses the reader is shown follow the rule: off offers up to 5; inf only the reranked ones (3 on the CPU); 0.5
  the first and those whose relevance is at most 0.5 below it; an answer cites one of them;
- `--k 2`: the reader is shown the first 2 clauses, the retrieval scores unchanged;
- a margin that is not off, inf or positive is refused.

Skipped (77) when the model or the adapter is not installed.

usage: test_eval_reader_margin.py path/to/clauseqa"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import SOURCE_DIR, Checks, require_models  # noqa: E402

MODELS = os.path.join(SOURCE_DIR, 'data', 'models')
T = Checks('test_eval_reader_margin')
check = T.check
QUESTIONS = [
    {'id': 'demo-1', 'question': '员工加班费怎么算？', 'type': 'span_qa', 'answerable': True,
     'gold': [{'doc': '劳动法(2018-12-29)', 'text': '支付不低于工资的百分之一百五十的工资报酬'}],
     'answers': ['不低于工资的百分之一百五十的工资报酬']},
    {'id': 'demo-2', 'question': '休息日安排劳动者工作又不能安排补休的，用人单位应当支付多少工资报酬？', 'type': 'span_qa',
     'answerable': True, 'gold': [{'doc': '劳动法(2018-12-29)', 'text': '支付不低于工资的百分之二百的工资报酬'}],
     'answers': ['不低于工资的百分之二百的工资报酬']},
    {'id': 'demo-3', 'question': '公司的注册资本最低限额是多少？', 'type': 'span_qa', 'answerable': False, 'gold': [],
     'answers': []},
]


def main():
    binary = os.path.abspath(sys.argv[1])
    require_models('gemma-3-270m-q4_k_m.gguf', os.path.join('answer', 'adapter.safetensors'))
    work = tempfile.mkdtemp(prefix='cq-margin-')
    try:
        suite = os.path.join(work, 'demo-suite')
        os.makedirs(os.path.join(suite, 'docs'))
        demo = os.path.join(SOURCE_DIR, 'data', 'demo')
        for name in os.listdir(demo):
            if name.endswith(('.pdf', '.md')):
                os.symlink(os.path.join(demo, name), os.path.join(suite, 'docs', name))
        with open(os.path.join(suite, 'questions.jsonl'), 'w', encoding='utf-8') as f:
            for q in QUESTIONS:
                f.write(json.dumps(q, ensure_ascii=False) + '\n')
        data = os.path.join(work, 'data')
        out = os.path.join(work, 'lines.jsonl')
        cmd = [binary, 'eval', '--data', data, '--models', MODELS, '--kb', 'demo', '--suite', suite,
               '--mode', 'router,bm25,rerank', '--json', '--out', out]
        r = subprocess.run(cmd + ['--reader-margin', 'off,inf,0.5'], capture_output=True, text=True, timeout=580)
        check('eval ran', r.returncode == 0, r.stderr[-2000:])
        scores = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
        check('one score line a setting', [s.get('reader_margin') for s in scores] == [-1, None, 0.5],
              [s.get('reader_margin') for s in scores])
        retrieval = [{k: s['all'][k] for k in ('hit@1', 'hit@5', 'mrr', 'questions')} for s in scores]
        check('the same retrieval in every setting', all(x == retrieval[0] for x in retrieval), retrieval)

        lines = [json.loads(line) for line in open(out, encoding='utf-8')]
        by = {}
        for x in lines:
            m = x.get('reader_margin')
            by.setdefault(x['id'], {})[('inf' if m is None else m)] = x
        check('every question under every setting, once', len(lines) == 9 and
              all(sorted(map(str, v)) == ['-1', '0.5', 'inf'] for v in by.values()), [x['id'] for x in lines])
        for qid, v in sorted(by.items()):
            off = v[-1]
            check(qid + ': off answered in full', 'same_as' not in off and 'top' in off, off)
            top = off.get('top', [])
            check(qid + ': off offers the reader up to 5 clauses', 1 <= off.get('reader', 0) <= 5, off.get('reader'))
            judged = [h for h in top if 'relevance' in h]
            check(qid + ': the first three reranked on the CPU', len(judged) == min(3, len(top)), top)
            ref = top[0]['relevance'] if top else 0
            kept = [0] + [i for i in range(1, len(top)) if top[i].get('relevance', -1e9) >= ref - 0.5]
            want = {'inf': len(judged), 0.5: len(kept)}
            for m in ('inf', 0.5):
                x = v[m]
                if 'same_as' in x:
                    same = x['same_as']
                    prior = off if same == -1 else v.get('inf' if same is None else same, {})
                    check('%s %s: reused from a setting with the same clauses' % (qid, m),
                          'same_as' not in prior and prior.get('reader') == want[m], (x, prior.get('reader'), want))
                    continue
                check('%s %s: the reader shown %d clauses' % (qid, m, want[m]), x.get('reader') == want[m],
                      (x.get('reader'), want[m], top))
                cited = x.get('cited', 0)
                allowed = range(1, len(judged) + 1) if m == 'inf' else [i + 1 for i in kept]
                check('%s %s: the answer cites a clause the reader was shown' % (qid, m),
                      x['prediction'].get('abstained') or cited in allowed, (cited, list(allowed)))

        # --k: the answer step sees the first k clauses, as an ask with that k would; hit@10 still reported
        r = subprocess.run(cmd + ['--k', '2'], capture_output=True, text=True, timeout=580)
        check('eval --k 2 ran', r.returncode == 0, r.stderr[-2000:])
        lines = [json.loads(line) for line in open(out, encoding='utf-8')]
        check('--k 2: the reader shown the first 2 clauses', len(lines) == 3 and
              all(x.get('reader') == min(2, by[x['id']][-1].get('reader')) for x in lines),
              [(x['id'], x.get('reader')) for x in lines])
        check('--k 2: the same retrieval scores', [json.loads(r.stdout)['all'][k] for k in ('hit@1', 'mrr')] ==
              [scores[0]['all'][k] for k in ('hit@1', 'mrr')], r.stdout[-500:])

        bad = subprocess.run(cmd + ['--reader-margin', '0'], capture_output=True, text=True, timeout=60)
        check('margin 0 refused', bad.returncode == 2 and 'reader-margin' in bad.stderr, bad.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    T.finish()


if __name__ == '__main__':
    main()
