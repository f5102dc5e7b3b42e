#!/usr/bin/python3
"""deploy/prometheus/clauseqa-alerts.yml: a Prometheus rules file (groups of rules, each with alert, expr, for,
labels.severity and annotations.summary), whose expressions name only metric families a running server exposes
(scraped after an answer and a rating: clauseqa_quality_*{kb,day}), and which `promtool check rules` accepts when
promtool is installed (Debian's prometheus package; skipped otherwise).

usage: test_alert_rules.py path/to/clauseqa"""
import os
import re
import shutil
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_PDF, Checks, Server  # noqa: E402

T = Checks('test_alert_rules')
check = T.check
RULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'deploy', 'prometheus',
                     'clauseqa-alerts.yml')


def main():
    doc = yaml.safe_load(open(RULES, encoding='utf-8'))
    groups = doc.get('groups') if isinstance(doc, dict) else None
    check('groups: a list', isinstance(groups, list) and groups, doc)
    rules = [r for g in groups or [] for r in g.get('rules') or []]
    check('rules in every group', all(g.get('name') and g.get('rules') for g in groups or []), groups)
    names = set()
    for r in rules:
        ok = (isinstance(r.get('alert'), str) and re.fullmatch(r'[A-Za-z][A-Za-z0-9]*', r['alert'])
              and isinstance(r.get('expr'), str) and r['expr'].strip()
              and re.fullmatch(r'\d+[smh]', str(r.get('for', '')))
              and (r.get('labels') or {}).get('severity') in ('info', 'warning', 'critical')
              and (r.get('annotations') or {}).get('summary'))
        check(f"rule {r.get('alert')}: alert, expr, for, severity, summary", ok, r)
        names |= set(re.findall(r'\bclauseqa_[a-z_]+\b', r.get('expr', '')))
    check('the rules watch the five quality signals', {
        'clauseqa_quality_abstentions', 'clauseqa_quality_fallbacks', 'clauseqa_quality_low_confidence',
        'clauseqa_quality_thumbs_down', 'clauseqa_quality_cited_deleted'} <= names, names)

    s = Server(sys.argv[1])
    try:
        s.start()
        s.post('/api/v1/kbs', {'name': 'laws'})
        s.wait_job(s.upload('laws', DEMO_PDF).json()['job']['id'])
        cid = s.post('/api/v1/kbs/laws/ask', {'question': '劳动法第四十四条规定了什么？'}).json()['conversation_id']
        s.post(f'/api/v1/conversations/{cid}/turns/1/feedback', {'rating': 'down'})
        metrics = s.get('/metrics').body.decode()
        exposed = set(re.findall(r'^(clauseqa_[a-z_]+)\{kb="laws",day="\d{4}-\d\d-\d\d"\}', metrics, re.M))
        check('every metric the rules name is exposed with kb and day labels', names <= exposed, names - exposed)
    finally:
        check('server exits 0', s.stop() == 0, s.log_text())
        s.close()

    promtool = shutil.which('promtool')
    if promtool:
        p = subprocess.run([promtool, 'check', 'rules', RULES], capture_output=True, text=True, timeout=60)
        check('promtool check rules', p.returncode == 0, p.stdout + p.stderr)
    else:
        print('note: promtool is not installed; the rules were checked for shape only')
    T.finish()


if __name__ == '__main__':
    main()
