#!/usr/bin/python3
"""The real `openai` Python client against POST /v1/chat/completions and GET /v1/models: answers with citations
(extra fields), streaming, follow-up turns, errors as the client's exceptions. Skips (77) without the client.

usage: test_http_openai.py path/to/clauseqa"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_MD, DEMO_PDF, Checks, Server  # noqa: E402

try:
    import openai
except ImportError:
    print('skip: the openai package is not installed (tools/setup.sh installs it)')
    sys.exit(77)

T = Checks('test_http_openai')
check = T.check


def extra(obj, name):
    return (getattr(obj, 'model_extra', None) or {}).get(name)


def main():
    s = Server(sys.argv[1])
    try:
        s.start()
        s.post('/api/v1/kbs', {'name': 'laws'})
        s.post('/api/v1/kbs', {'name': 'other'})
        for f in (DEMO_PDF, DEMO_MD):
            s.wait_job(s.upload('laws', f).json()['job']['id'])
        r = s.cli('keys', 'create', '--role', 'reader', '--kb', 'laws', '--json')
        key = json.loads(r.stdout)['key']
        admin_key = json.loads(s.cli('keys', 'create', '--role', 'admin', '--json').stdout)['key']
        time.sleep(1.2)  # auth turns on within a second of the first key
        client = openai.OpenAI(base_url=f'http://127.0.0.1:{s.port}/v1', api_key=key, max_retries=0, timeout=60)

        models = [m.id for m in client.models.list()]
        check('models are the KBs the key reads', models == ['laws'], models)

        q = '劳动法第四十四条规定了什么？'
        c = client.chat.completions.create(model='laws', messages=[{'role': 'user', 'content': q}])
        msg = c.choices[0].message
        check('answer', c.object == 'chat.completion' and msg.role == 'assistant' and '百分之一百五十' in msg.content,
              c)
        check('finish reason', c.choices[0].finish_reason == 'stop', c)
        cites = extra(c, 'citations') or []
        check('citations in an extra field', cites and cites[0]['clause'] == '第四十四条' and cites[0]['page'] == 4, c)
        check('citations on the message', (extra(msg, 'citations') or [{}])[0].get('clause') == '第四十四条', msg)
        check('timings', (extra(c, 'timings') or {}).get('retrieve_ms') is not None, c)
        check('usage', c.usage is not None and c.usage.completion_tokens == 0, c.usage)

        # streaming: deltas, then a last chunk with the citations and finish_reason
        text, stream_cites, finish, n = '', None, None, 0
        for chunk in client.chat.completions.create(model='laws', messages=[{'role': 'user', 'content': q}],
                                                    stream=True):
            n += 1
            check('chunk object', chunk.object == 'chat.completion.chunk')
            if chunk.choices:
                text += chunk.choices[0].delta.content or ''
                finish = chunk.choices[0].finish_reason or finish
            stream_cites = extra(chunk, 'citations') or stream_cites
        check('stream text = answer', text == msg.content, (text[:60], msg.content[:60]))
        check('stream in pieces', n > 4, n)
        check('stream citations', stream_cites and stream_cites[0]['clause'] == '第四十四条', stream_cites)
        check('stream finish', finish == 'stop', finish)

        # follow-up turns: with the citations the client kept, and without them
        follow = [{'role': 'user', 'content': q},
                  {'role': 'assistant', 'content': msg.content, 'citations': extra(msg, 'citations')},
                  {'role': 'user', 'content': '那第二款呢？'}]
        c2 = client.chat.completions.create(model='laws', messages=follow)
        check('follow-up resolved', '第四十四条第二款' in (extra(c2, 'resolved_question') or ''), c2)
        plain = [{'role': 'system', 'content': 'Answer from the documents.'}, {'role': 'user', 'content': q},
                 {'role': 'assistant', 'content': msg.content}, {'role': 'user', 'content': '那第五十条呢？'}]
        c3 = client.chat.completions.create(model='laws', messages=plain)
        check('follow-up without citations', (extra(c3, 'citations') or [{}])[0].get('clause') == '第五十条', c3)
        parts = [{'role': 'user', 'content': [{'type': 'text', 'text': 'What does Section 5.2 say?'}]}]
        c4 = client.chat.completions.create(model='laws', messages=parts)
        check('content as parts', (extra(c4, 'citations') or [{}])[0].get('clause') == 'Section 5.2', c4)
        c5 = client.chat.completions.create(model='laws', messages=[{'role': 'user', 'content':
                                                                    '火星上的量子引力如何影响足球比赛的转播权？'}])
        check('abstains', extra(c5, 'abstained') is True and extra(c5, 'citations') == [], c5)

        admin = openai.OpenAI(base_url=f'http://127.0.0.1:{s.port}/v1', api_key=admin_key, max_retries=0, timeout=60)

        def raises(what, exc, via=client, **kw):
            try:
                via.chat.completions.create(**kw)
            except exc:
                return check(what, True)
            except Exception as e:  # another exception than the expected one
                return check(what, False, repr(e))
            return check(what, False, 'no exception')

        raises('unknown model: 404', openai.NotFoundError, via=admin, model='nope',
               messages=[{'role': 'user', 'content': 'x'}])
        raises('a model the key may not read: 403', openai.PermissionDeniedError, model='nope',
               messages=[{'role': 'user', 'content': 'x'}])
        raises('other KB: 403', openai.PermissionDeniedError, model='other',
               messages=[{'role': 'user', 'content': 'x'}])
        raises('last message not the user: 400', openai.BadRequestError, model='laws',
               messages=[{'role': 'assistant', 'content': 'x'}])
        raises('no messages: 400', openai.BadRequestError, model='laws', messages=[])
        bad = openai.OpenAI(base_url=f'http://127.0.0.1:{s.port}/v1', api_key='cq_' + '1' * 40, max_retries=0)
        try:
            bad.models.list()
            check('bad key: 401', False, 'no exception')
        except openai.AuthenticationError:
            check('bad key: 401', True)
        check('server healthy', s.get('/api/v1/health').status == 200)
        check('server exits 0', s.stop() == 0, s.log_text())
    except Exception as e:
        check('no exception', False, f'{e!r}\n{s.log_text()}')
        raise
    finally:
        s.close()
    T.finish()


if __name__ == '__main__':
    main()
