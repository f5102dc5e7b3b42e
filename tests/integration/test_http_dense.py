#!/usr/bin/python3
"""Dense retrieval through the server, with random (untrained) encoder weights written by this test: the server
loads them at start, its ingestion worker encodes uploads into the KB's vector index, `mode: dense` and fused modes
answer from it on the HTTP threads' own connections, deleted and replaced documents and deleted KBs leave nothing
behind in the index, a restart serves the same results from the saved FAISS file, and a server without weights
refuses dense with a clear 400. Random weights make the ranking arbitrary: the checks are about plumbing and
consistency (every dense hit is a live clause of the right KB), not about quality.

usage: test_http_dense.py path/to/clauseqa"""
import json
import os
import random
import shutil
import sqlite3
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_MD, DEMO_PDF, Checks, Server, binary_without_models, quote  # noqa: E402

T = Checks('test_http_dense')
check = T.check

# A small model with the text vocabulary (32768 tokens, which text-level encoding needs); see docs/SSM.md.
CONFIG = {'format': 'clauseqa-ssm', 'version': 1, 'tokenizer': 'cq-hash-v1', 'vocab_size': 32768, 'd_model': 16,
          'n_layer': 2, 'd_state': 4, 'd_conv': 4, 'expand': 2, 'dt_rank': 2, 'd_embed': 8,
          'bidirectional': False, 'norm_eps': 1e-5}


def write_random_model(directory, seed=7, doc_window=64):
    """ssm.json + ssm.safetensors (F32) with the tensor names and shapes of docs/SSM.md, random values; with
    doc_window, a document head too (doc_head.safetensors and ssm.json's manifest entry, as train.py --doc-head
    exports them)."""
    rng = random.Random(seed)
    c = CONFIG
    d, di, n, r, k, e = c['d_model'], c['expand'] * c['d_model'], c['d_state'], c['dt_rank'], c['d_conv'], c['d_embed']

    def normal(count, scale=1.0, mean=0.0):
        return [mean + scale * rng.gauss(0, 1) for _ in range(count)]

    tensors = [('embedding.weight', [c['vocab_size'], d], normal(c['vocab_size'] * d))]
    for layer in range(c['n_layer']):
        p = f'layers.{layer}.'
        tensors += [
            (p + 'norm.weight', [d], normal(d, 0.1, 1.0)),
            (p + 'mixer.in_proj.weight', [2 * di, d], normal(2 * di * d, d ** -0.5)),
            (p + 'mixer.conv1d.weight', [di, 1, k], normal(di * k, k ** -0.5)),
            (p + 'mixer.conv1d.bias', [di], normal(di, 0.1)),
            (p + 'mixer.x_proj.weight', [r + 2 * n, di], normal((r + 2 * n) * di, di ** -0.5)),
            (p + 'mixer.dt_proj.weight', [di, r], normal(di * r, r ** -0.5)),
            (p + 'mixer.dt_proj.bias', [di], normal(di, 0.5, -2.0)),
            (p + 'mixer.A_log', [di, n], [0.5 * rng.random() + 0.1 * j for _ in range(di) for j in range(n)]),
            (p + 'mixer.D', [di], normal(di, 0.1, 1.0)),
            (p + 'mixer.out_proj.weight', [d, di], normal(d * di, di ** -0.5)),
        ]
    tensors += [('norm_f.weight', [d], normal(d, 0.1, 1.0)), ('pool.weight', [e, 2 * d], normal(e * 2 * d, 0.3)),
                ('pool.bias', [e], normal(e, 0.1))]
    os.makedirs(directory, exist_ok=True)
    write_safetensors(os.path.join(directory, 'ssm.safetensors'), tensors)
    cfg = dict(c)
    if doc_window:
        write_safetensors(os.path.join(directory, 'doc_head.safetensors'),
                          [('doc_head.weight', [e, 2 * d], normal(e * 2 * d, 0.5)), ('doc_head.bias', [e], normal(e, 0.1))])
        cfg['manifest'] = {'doc_head': {'file': 'doc_head.safetensors', 'window_tokens': doc_window}}
    with open(os.path.join(directory, 'ssm.json'), 'w') as f:
        json.dump(cfg, f)


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, shape, values in tensors:
        blob = struct.pack(f'<{len(values)}f', *values)
        header[name] = {'dtype': 'F32', 'shape': shape, 'data_offsets': [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    h = json.dumps(header).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))


def db_rows(data, sql, *args):
    con = sqlite3.connect(os.path.join(data, 'clauseqa.db'))
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def live_clauses(data, kb):
    return {row[0] for row in db_rows(data, 'SELECT c.id FROM clauses c JOIN documents d ON d.id = c.doc_id '
                                            'JOIN kbs k ON k.id = d.kb_id WHERE k.name = ?', kb)}


def retrieve(s, kb, question, mode, k=20):
    r = s.post(f'/api/v1/kbs/{quote(kb)}/retrieve', {'question': question, 'k': k, 'mode': mode})
    return r, (r.json() or {}).get('results', []) if r.status == 200 else []


def upload_ready(s, kb, path, replace=False):
    r = s.upload(kb, path, replace=replace)
    job = s.wait_job(r.json()['job']['id']) if r.status == 202 else {}
    check(f'upload {os.path.basename(path)} ready', job.get('state') == 'ready', job or r)
    return job.get('document', {}).get('id')


def since_start(s):
    """The server log since its last start."""
    log = s.log_text()
    return log[log.rfind('serving http'):]


def dense_ids_valid(s, kb, question, what):
    """Dense hits come back, all of them live clauses of kb; returns their ids in order."""
    r, res = retrieve(s, kb, question, 'dense')
    ids = [x['clause_id'] for x in res]
    live = live_clauses(s.data, kb)
    check(f'{what}: dense answers', r.status == 200 and len(ids) > 0, r)
    check(f'{what}: every dense hit is a live clause of {kb}', set(ids) <= live, sorted(set(ids) - live))
    check(f'{what}: dense hits are marked dense', all(x.get('source') == 'dense' for x in res), res[:2])
    return ids


def main():
    binary = sys.argv[1]
    os.environ['CLAUSEQA_DENSE'] = 'on'  # random weights on the CPU: dense is opt-in there (docs/SSM.md)
    s = Server(binary)
    write_random_model(os.path.join(s.data, 'models', 'ssm'))
    try:
        s.start()
        h = s.get('/api/v1/health').json()
        check('health: encoder loaded', h['models']['encoder_loaded'] is True, h)
        dev = h['models'].get('encoder_device')
        check('health: the device the encoder runs on', dev in ('cuda', 'cpu', 'reference'), h)
        check('the log names that device, and why not the GPU when not',
              ('SSM encoder on the GPU' in s.log_text()) == (dev == 'cuda')
              and (dev == 'cuda' or 'no GPU encoder: ' in s.log_text()), s.log_text()[-600:])
        check('metrics: encoder loaded', 'clauseqa_model_loaded{model="encoder"} 1' in s.get('/metrics').body.decode())
        check('create kb', s.post('/api/v1/kbs', {'name': 'laws'}).status == 201)
        check('create kb 2', s.post('/api/v1/kbs', {'name': 'other'}).status == 201)
        pdf_id = upload_ready(s, 'laws', DEMO_PDF)
        md_id = upload_ready(s, 'laws', DEMO_MD)
        upload_ready(s, 'other', DEMO_MD)
        n_laws = len(live_clauses(s.data, 'laws'))
        vec_rows = db_rows(s.data, 'SELECT count(*) FROM clause_vectors v JOIN kbs k ON k.id = v.kb_id '
                                   'WHERE k.name = ?', 'laws')[0][0]
        check('ingestion stored a vector per clause', vec_rows == n_laws and n_laws > 50, (vec_rows, n_laws))
        check('ingestion stored a document vector per document (the weights have a document head)',
              db_rows(s.data, 'SELECT count(*) FROM doc_vectors')[0][0] == 3)

        q = '用人单位安排劳动者延长工作时间的，应当支付多少工资报酬？'
        first = dense_ids_valid(s, 'laws', q, 'laws')
        again = dense_ids_valid(s, 'laws', q, 'laws again')
        check('dense is deterministic', first == again, (first, again))
        other = dense_ids_valid(s, 'other', 'termination for convenience', 'other kb')
        check('KBs do not mix', not set(other) & live_clauses(s.data, 'laws'))
        r, res = retrieve(s, 'laws', '劳动法第四十四条', 'router,bm25,dense', k=5)
        check('fusion keeps the router hit first', r.status == 200 and res and res[0]['clause'] == '第四十四条'
              and res[0]['source'] == 'router', res[:1])
        r, res = retrieve(s, 'laws', q, 'bm25,dense', k=10)
        check('fusion answers', r.status == 200 and len(res) == 10 and {x['source'] for x in res} <= {'bm25', 'dense'},
              r)
        r = s.post('/api/v1/kbs/laws/ask', {'question': q, 'mode': 'hybrid,dense'})
        check('ask with dense', r.status == 200 and 'answer' in (r.json() or {}), r)
        # "fusion": rrf is what these weights (no fitted fusion in their ssm.json) use anyway; keep needs parameters
        # they lack (400 saying so); anything else is refused (400).
        body = {'question': q, 'k': 10, 'mode': 'bm25,dense'}
        r_rrf = s.post('/api/v1/kbs/laws/retrieve', dict(body, fusion='rrf'))
        check('fusion rrf = the weights\' default', r_rrf.status == 200
              and [x['clause_id'] for x in r_rrf.json()['results']] == [x['clause_id'] for x in res], r_rrf)
        r = s.post('/api/v1/kbs/laws/retrieve', dict(body, fusion='keep'))
        check('fusion keep without fitted parameters: 400', r.status == 400 and 'fusion' in r.body.decode(), r)
        r = s.post('/api/v1/kbs/laws/ask', dict(body, fusion='borda'))
        check('unknown fusion: 400', r.status == 400 and 'fusion' in r.body.decode(), r)
        r = s.post('/api/v1/kbs/laws/retrieve', dict(body, fusion=3))
        check('fusion not a string: 400', r.status == 400, r)

        # Deleting a document takes its clauses out of the index at once.
        pdf_clauses = {row[0] for row in db_rows(s.data, 'SELECT id FROM clauses WHERE doc_id = ?', pdf_id)}
        check('delete pdf', s.delete(f'/api/v1/documents/{pdf_id}').status == 200)
        after = dense_ids_valid(s, 'laws', q, 'after delete')
        check('deleted clauses are not served', not set(after) & pdf_clauses)
        log = s.log_text()
        check('no stale hits needed skipping', 'stale FAISS hits' not in log, log[-500:])

        # Replacing a document: the old clauses leave, the new ones are searchable.
        old_md = {row[0] for row in db_rows(s.data, 'SELECT id FROM clauses WHERE doc_id = ?', md_id)}
        s.upload('laws', None, filename=os.path.basename(DEMO_MD),
                 content=open(DEMO_MD, 'rb').read() + b'\n\n## 99. Extra\n\nA clause added in the new version.\n',
                 replace=True)
        jobs = s.get('/api/v1/kbs/laws/jobs').json()
        job = s.wait_job(max(j['id'] for j in jobs['jobs']))
        check('replacement ready', job.get('state') == 'ready', job)
        replaced = dense_ids_valid(s, 'laws', 'A clause added in the new version', 'after replace')
        check('replaced clauses are not served', not set(replaced) & old_md)
        n_vec = db_rows(s.data, 'SELECT count(*) FROM clause_vectors')[0][0]
        n_cl = db_rows(s.data, 'SELECT count(*) FROM clauses')[0][0]
        check('vectors follow clauses', n_vec == n_cl, (n_vec, n_cl))

        # Deleting a KB empties its index; a new KB of the same name starts clean.
        check('delete kb', s.delete('/api/v1/kbs/laws').status == 200)
        check('recreate kb', s.post('/api/v1/kbs', {'name': 'laws'}).status == 201)
        r, res = retrieve(s, 'laws', q, 'dense')
        check('recreated kb has no dense hits', r.status == 200 and res == [], r)
        upload_ready(s, 'laws', DEMO_PDF)
        before_restart = dense_ids_valid(s, 'laws', q, 'recreated')
        other_before = dense_ids_valid(s, 'other', 'termination for convenience', 'other before restart')

        # A restart serves the same results from the saved index files.
        check('graceful stop', s.stop() == 0)
        s.start()
        check('same dense results after restart', dense_ids_valid(s, 'laws', q, 'restarted') == before_restart)
        check('same other-kb results after restart',
              dense_ids_valid(s, 'other', 'termination for convenience', 'other restarted') == other_before)
        check('no index rebuild needed after a clean stop', 'rebuilt from SQLite' not in since_start(s), since_start(s))

        # A stale index file (vectors changed behind the server's back) is rebuilt, never served as is.
        s.stop()
        faiss = [f for f in os.listdir(os.path.join(s.data, 'vectors')) if f.endswith('.faiss')]
        check('index files saved', len(faiss) >= 2, faiss)
        con = sqlite3.connect(os.path.join(s.data, 'clauseqa.db'))
        cur = con.execute("DELETE FROM clause_vectors WHERE clause_id IN (SELECT clause_id FROM clause_vectors "
                          "WHERE kb_id = (SELECT id FROM kbs WHERE name = 'laws') ORDER BY clause_id LIMIT 5)")
        check('vectors deleted behind the server', cur.rowcount == 5, cur.rowcount)
        con.commit()
        con.close()
        s.start()
        ids = dense_ids_valid(s, 'laws', q, 'after repair')
        check('mismatched index rebuilt', 'rebuilt from SQLite' in since_start(s), since_start(s))
        check('repaired index serves only stored vectors',
              set(ids) <= {row[0] for row in db_rows(s.data, 'SELECT clause_id FROM clause_vectors')})
        s.stop()
    finally:
        s.close()

    # Dense not turned on without a GPU (auto): weights installed, but ingestion does not encode and dense is a 400.
    del os.environ['CLAUSEQA_DENSE']
    s = Server(binary)
    write_random_model(os.path.join(s.data, 'models', 'ssm'))
    try:
        s.start()
        if s.get('/api/v1/health').json()['models']['encoder_loaded'] is False:  # no GPU here
            check('auto without a GPU: the log says how to turn dense on', 'CLAUSEQA_DENSE=on' in s.log_text())
            s.post('/api/v1/kbs', {'name': 'kb'})
            upload_ready(s, 'kb', DEMO_MD)
            check('auto without a GPU: nothing encoded',
                  db_rows(s.data, 'SELECT count(*) FROM clause_vectors')[0][0] == 0)
            r, _ = retrieve(s, 'kb', 'termination', 'dense')
            check('auto without a GPU: dense is a 400 that says how', r.status == 400
                  and 'CLAUSEQA_DENSE=on' in r.body.decode(), r)
    finally:
        s.close()

    # Without weights (a binary that finds none: not the build tree's, which finds the source tree's): dense is refused
    # with a message, the rest works.
    bare = tempfile.mkdtemp(prefix='cq-bare-')
    s = Server(binary_without_models(binary, bare))
    try:
        s.start()
        h = s.get('/api/v1/health').json()
        check('no weights: encoder not loaded', h['models']['encoder_loaded'] is False, h)
        check('no weights: no encoder device', 'encoder_device' not in h['models'], h)
        s.post('/api/v1/kbs', {'name': 'kb'})
        upload_ready(s, 'kb', DEMO_MD)
        r, _ = retrieve(s, 'kb', 'termination', 'dense')
        check('no weights: dense is a 400 that says why', r.status == 400 and 'weights' in r.body.decode(), r)
        r, res = retrieve(s, 'kb', 'termination', 'hybrid')
        check('no weights: hybrid still answers', r.status == 200 and res, r)
        check('no weights: no vectors stored', db_rows(s.data, 'SELECT count(*) FROM clause_vectors')[0][0] == 0)
    finally:
        s.close()
        shutil.rmtree(bare, ignore_errors=True)
    T.finish()


if __name__ == '__main__':
    main()
