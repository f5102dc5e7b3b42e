#!/usr/bin/python3
"""Admission of asks (issue 15): at most --max-asks questions are answered at once, up to --max-waiting-asks more
wait their turn (first come, first served) and are answered, and a question beyond those is refused at once with
503, error code "busy" and a Retry-After header, before anything is streamed; /metrics shows the numbers.
Each answer is held for a while by the test delay CLAUSEQA_FAULT_DELAY=ask-answering:MS (core/fault.h), so that the
asks overlap whatever the machine's speed.

usage: test_http_admission.py path/to/clauseqa"""
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_MD, Checks, Server  # noqa: E402

T = Checks('test_http_admission')
check = T.check
HOLD_MS = 1500
QUESTION = {'question': 'What is the term of the agreement?'}


def metric(s, name):
    text = s.get('/metrics').body.decode()
    m = re.search('^' + re.escape(name) + r' ([0-9.e+-]+)$', text, re.M)
    return float(m.group(1)) if m else None


def wait_metric(s, name, value, timeout_s=20):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if metric(s, name) == value:
            return True
        time.sleep(0.05)
    return False


def ask_in_background(s, results, i, stream=False):
    def run():
        t0 = time.time()
        if stream:
            r, ev = s.events('/api/v1/kbs/k/ask', QUESTION)
            results[i] = (r, time.time() - t0, ev)
        else:
            r = s.post('/api/v1/kbs/k/ask', QUESTION)
            results[i] = (r, time.time() - t0, None)
    t = threading.Thread(target=run)
    t.start()
    return t


def main():
    binary = sys.argv[1]
    s = Server(binary, args=['--max-asks', '1', '--max-waiting-asks', '1'])
    s.env = {'CLAUSEQA_FAULT_DELAY': f'ask-answering:{HOLD_MS}'}
    try:
        s.start()
        check('a KB', s.post('/api/v1/kbs', {'name': 'k'}).status in (200, 201))
        job = s.upload('k', DEMO_MD).json()['job']['id']
        check('the document is ready', s.wait_job(job)['state'] == 'ready')
        check('metrics: the limits', metric(s, 'clauseqa_asks_active_max') == 1 and
              metric(s, 'clauseqa_asks_waiting_max') == 1)
        results = [None] * 4
        threads = [ask_in_background(s, results, 0)]
        check('the first ask is being answered', wait_metric(s, 'clauseqa_asks_active', 1))
        threads.append(ask_in_background(s, results, 1, stream=True))
        check('the second waits its turn', wait_metric(s, 'clauseqa_asks_waiting', 1))
        t0 = time.time()
        r3 = s.post('/api/v1/kbs/k/ask', QUESTION)
        dt = time.time() - t0
        check(f'the third is refused at once ({dt:.2f} s)', r3.status == 503 and dt < HOLD_MS / 1000 / 2,
              (r3.status, dt))
        check('with error code busy and a message', r3.error_code() == 'busy' and
              'try again' in r3.json()['error']['message'], r3)
        ra = r3.header('Retry-After')
        check('and a Retry-After header in whole seconds', ra is not None and ra.isdigit() and int(ra) >= 1, ra)
        r4, ev4 = s.events('/api/v1/kbs/k/ask', QUESTION)
        check('a streaming ask is refused the same way, before any event', r4.status == 503 and not ev4 and
              r4.error_code() == 'busy', (r4, ev4))
        for t in threads:
            t.join(60)
        (r1, d1, _), (r2, d2, ev2) = results[0], results[1]
        check('the first is answered', r1.status == 200 and r1.json().get('answer'), r1)
        check(f'the waiting one is answered after it ({d2:.2f} s)',
              r2.status == 200 and any(e == 'done' for e, _ in ev2) and d2 >= 1.5 * HOLD_MS / 1000, (r2, d2))
        check('metrics: admitted 2, refused 2 (queue full), none waiting or active',
              metric(s, 'clauseqa_asks_admitted_total') == 2 and
              metric(s, 'clauseqa_asks_refused_total{why="full"}') == 2 and
              metric(s, 'clauseqa_asks_active') == 0 and metric(s, 'clauseqa_asks_waiting') == 0)
        check('metrics: the wait and the hold are counted', metric(s, 'clauseqa_asks_wait_seconds_total') > 0.5 and
              metric(s, 'clauseqa_asks_hold_seconds') >= HOLD_MS / 1000 * 0.9)
        after = s.post('/api/v1/kbs/k/ask', QUESTION)
        check('once the server is free, asks are answered again', after.status == 200, after)
    finally:
        s.close()
    s = Server(binary, args=['--max-asks', '0'])
    try:
        s.start()
        check('--max-asks 0 is refused', False, 'started')
    except RuntimeError as e:
        check('--max-asks 0 is refused', 'max-asks' in str(e), str(e)[-300:])
    finally:
        s.close()
    T.finish()


if __name__ == '__main__':
    main()
