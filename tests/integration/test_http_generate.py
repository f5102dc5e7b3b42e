#!/usr/bin/python3
"""Generated answers through the server with the real decoder (Gemma-3-270M on the CPU): health and metrics say
so, a lay question gets an answer the decoder wrote that is a verbatim span of the clause it cites, SSE streams it
token by token as it is written (the pieces make the final answer), a clause named by number is still recited,
and `--answers generate` without weights refuses to start. Skipped (77) when the model is not installed
(tools/fetch_model.sh puts it in data/models/).

usage: test_http_generate.py path/to/clauseqa"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_PDF, SOURCE_DIR, Checks, Server  # noqa: E402

MODEL = os.path.join(SOURCE_DIR, 'data', 'models', 'gemma-3-270m-q4_k_m.gguf')
T = Checks('test_http_generate')
check = T.check

QUESTION = '休息日安排劳动者工作又不能安排补休的，用人单位应当支付多少工资报酬？'


def clause_text(s, clause_id):
    r = s.get(f'/api/v1/clauses/{clause_id}')
    return (r.json() or {}).get('text', '') if r.status == 200 else ''


def main():
    binary = sys.argv[1]
    if not os.path.exists(MODEL):
        print(f'skipped: {MODEL} is not installed (tools/fetch_model.sh)')
        sys.exit(77)
    # the base model and its few-shot prompt, whatever adapter the tree holds (health then says there is none)
    s = Server(binary, args=['--answers', 'generate', '--model', MODEL, '--device', 'cpu', '--adapter', 'none'])
    try:
        s.start(timeout_s=60)
        h = s.get('/api/v1/health').json()
        m = h['models']
        check('health: generated answers', m['answers'] == 'generated' and m['decoder_loaded'] is True
              and m.get('decoder_device') == 'cpu' and 'adapter' in m and m['adapter'] is None, m)
        s.post('/api/v1/kbs', {'name': 'laws'})
        r = s.upload('laws', DEMO_PDF)
        job = s.wait_job(r.json()['job']['id'])
        check('upload ready', job.get('state') == 'ready', job)

        r = s.post('/api/v1/kbs/laws/ask', {'question': QUESTION}, timeout_s=120)
        a = r.json() or {}
        check('ask answers', r.status == 200 and not a.get('abstained'), r)
        check('the decoder wrote it', a.get('generated') is True and a.get('tokens_generated', 0) > 0
              and a.get('prompt_tokens', 0) > 100, {k: v for k, v in a.items() if k != 'citations'})
        cites = a.get('citations') or []
        check('one citation quoting the answer', len(cites) == 1 and cites[0]['quote'] == a.get('answer'), cites)
        text = clause_text(s, cites[0]['clause_id']) if cites else ''
        check('the answer is a verbatim span of the cited clause',
              a.get('answer') and a['answer'] in text.replace('\n', ' '), (a.get('answer'), text[:200]))
        check('the answer is a span, not the whole clause', 0 < len(a.get('answer', '')) < len(text), a.get('answer'))
        check('it says how much', '百分之二百' in a.get('answer', ''), a.get('answer'))
        check('timings', a.get('timings', {}).get('generate_ms', 0) > 0, a.get('timings'))

        r, ev = s.events('/api/v1/kbs/laws/ask', {'question': QUESTION})
        names = [e[0] for e in ev]
        tokens = [e[1]['text'] for e in ev if e[0] == 'token']
        done = ev[-1][1] if ev else {}
        check('sse: token events, then citations and done', names[-2:] == ['citations', 'done'] and len(tokens) > 2,
              names)
        stages = [e[1].get('stage') for e in ev if e[0] == 'stage']
        check('sse: the decoder\'s stage is said before its first words', stages == ['retrieving', 'generating']
              and names.index('token') > max(i for i, n in enumerate(names) if n == 'stage'), (stages, names[:6]))
        check('sse: the streamed pieces make the answer', ''.join(tokens) == done.get('answer'),
              (''.join(tokens), done.get('answer')))
        check('sse: first token timed', done.get('timings', {}).get('first_token_ms', 0) > 0, done.get('timings'))

        r = s.post('/api/v1/kbs/laws/ask', {'question': '劳动法第四十四条规定了什么？'}, timeout_s=120)
        a = r.json() or {}
        check('a named clause is recited, not generated', a.get('generated') is False
              and (a.get('citations') or [{}])[0].get('clause') == '第四十四条' and '百分之一百五十' in a.get('answer', ''),
              a)
        metrics = s.get('/metrics').body.decode()
        check('metrics: decoder loaded', 'clauseqa_model_loaded{model="decoder"} 1' in metrics)
        gen = [ln for ln in metrics.splitlines() if ln.startswith('clauseqa_generated_tokens_total ')]
        check('metrics: tokens counted', gen and int(gen[0].split()[1]) > 0, gen)
        hist = {ln.split()[0]: float(ln.split()[1]) for ln in metrics.splitlines()
                if ln.startswith('clauseqa_decoder_batch_size_') or ln.startswith('clauseqa_decoder_kv_bytes{')}
        check('metrics: decode steps in the batch histogram', hist.get('clauseqa_decoder_batch_size_count', 0) > 0 and
              hist.get('clauseqa_decoder_batch_size_sum', 0) >= hist['clauseqa_decoder_batch_size_count'] and
              hist.get('clauseqa_decoder_batch_size_bucket{le="+Inf"}') == hist['clauseqa_decoder_batch_size_count'],
              hist)
        check('metrics: no sequence open between asks', hist.get('clauseqa_decoder_kv_bytes{state="open"}') == 0, hist)
        phase = {ln.split()[0]: float(ln.split()[1]) for ln in metrics.splitlines()
                 if ln.startswith('clauseqa_ask_phase_seconds_')}
        check('metrics: ask phases timed (service and decoder)',
              phase.get('clauseqa_ask_phase_seconds_count{phase="total"}', 0) >= 2 and
              phase.get('clauseqa_ask_phase_seconds_count{phase="prefill_run"}', 0) >= 1 and
              phase.get('clauseqa_ask_phase_seconds_count{phase="decode_run"}', 0) >= 1 and
              phase.get('clauseqa_ask_phase_seconds_sum{phase="decode_run"}', 0) > 0 and
              phase.get('clauseqa_ask_phase_seconds_bucket{phase="total",le="+Inf"}') ==
              phase.get('clauseqa_ask_phase_seconds_count{phase="total"}'), phase)
        check('metrics: generated answers used', 'clauseqa_answers_generated_total{outcome="used"} 2' in metrics,
              [ln for ln in metrics.splitlines() if 'answers_generated' in ln])
    finally:
        s.close()

    r = subprocess.run([binary, 'serve', '--port', '0', '--data', '/tmp/cq-no-such-dir-for-generate',
                        '--answers', 'generate', '--model', '/nonexistent/model.gguf'],
                       capture_output=True, text=True, timeout=60)
    check('generate without weights: refuses to start, says why', r.returncode == 1 and 'decoder' in r.stderr
          and 'model.gguf' in r.stderr, (r.returncode, r.stderr[-300:]))
    T.finish()


if __name__ == '__main__':
    main()
