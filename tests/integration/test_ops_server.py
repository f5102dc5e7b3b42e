"""Running the server as an operator does (issue 17): the access log (text and JSON lines, reopened on SIGHUP for
log rotation), clauseqa.conf driving `serve` with flags winning, a busy port reported as one, the start-up log short
with the address last, /api/v1/health saying which model files were loaded from where, and the ingest progress line
cut by display width on a terminal (with the pages of a PDF read so far).

usage: test_ops_server.py path/to/clauseqa"""
import json
import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_MD, DEMO_PDF, SOURCE_DIR, Checks, Server, binary_without_models  # noqa: E402

T = Checks('test_ops_server')
TEXT_LINE = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (\S+) (\S+) (\S+) (\d{3}) (\d+) (\d+\.\d)ms (\S+)$')


def lines_of(path):
    return [ln for ln in open(path, encoding='utf-8').read().splitlines() if ln]


def access_log(binary, work):
    log = os.path.join(work, 'access.log')
    s = Server(binary, args=['--access-log', log])
    try:
        s.start()
        s.post('/api/v1/kbs', {'name': '法规'})
        s.upload('法规', DEMO_MD)
        health = s.get('/api/v1/health')
        s.get('/api/v1/kbs/nope/documents')
        s.get('/api/v1/kbs/%E6%B3%95%E8%A7%84/documents', headers={'X-Forwarded-For': '203.0.113.7'})
        time.sleep(0.2)
        got = lines_of(log)
        parsed = [TEXT_LINE.match(ln) for ln in got]
        T.check('text: every line has its fields', got and all(parsed), got)
        T.check('text: one line a request', len(got) >= 5, got)
        h = [m for m in parsed if m and m.group(3) == '/api/v1/health']
        T.check('text: health line (client, method, status, bytes)',
                h and h[-1].group(1) == '127.0.0.1' and h[-1].group(2) == 'GET' and h[-1].group(4) == '200'
                and int(h[-1].group(5)) == len(health.body), got)
        T.check('text: 404 logged', any(m and m.group(4) == '404' for m in parsed), got)
        T.check('text: a CJK path percent-encoded', any(m and m.group(3) == '/api/v1/kbs/%E6%B3%95%E8%A7%84/documents'
                                                        for m in parsed), got)
        # Rotation: move the file away, SIGHUP, the next line goes to a new file.
        os.rename(log, log + '.1')
        s.proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        s.get('/api/v1/health')
        time.sleep(0.2)
        T.check('SIGHUP: a new file after rotation', os.path.exists(log) and len(lines_of(log)) == 1)
        T.check('SIGHUP: the server goes on', s.get('/api/v1/health').status == 200)
        T.check('SIGHUP: logged', 'access log reopened' in s.log_text(), s.log_text()[-500:])
    finally:
        s.close()

    s = Server(binary, args=['--access-log', '-', '--access-log-format', 'json'])
    try:
        s.start()
        s.get('/api/v1/health', headers={'X-Forwarded-For': '203.0.113.7'})
        s.post('/api/v1/kbs', {'name': 'k"q'})
        s.get('/api/v1/kbs/%E6%B3%95/documents')
        s.get('/api/v1/kbs/%FF%E6%B3/documents')  # a decoded path that is not UTF-8: its line stays valid JSON
        time.sleep(0.2)
        s.stop()
        out = [ln for ln in open(s.log_path, 'rb').read().splitlines() if ln.startswith(b'{')]
        rows = []
        for ln in out:
            try:
                rows.append(json.loads(ln.decode('utf-8')))  # strictly: valid UTF-8 JSON
            except ValueError:
                T.check('json: every line is UTF-8 JSON', False, ln)
        T.check('json: a line a request on stdout', len(rows) >= 3, out)
        T.check('json: the fields', rows and set(rows[0]) >= {'time', 'client', 'method', 'path', 'status', 'bytes',
                                                               'duration_ms'}, rows)
        T.check('json: forwarded_for', any(r.get('forwarded_for') == '203.0.113.7' for r in rows), rows)
        T.check('json: the path decoded', any(r['path'] == '/api/v1/kbs/法/documents' for r in rows), rows)
        T.check('json: invalid UTF-8 in a path written as U+FFFD',
                any(r['path'].startswith('/api/v1/kbs/\ufffd') and r['path'].endswith('/documents') for r in rows),
                [r['path'] for r in rows])
    finally:
        s.close()
    r = subprocess.run([binary, 'serve', '--port', '0', '--data', os.path.join(work, 'x'), '--access-log',
                        '/nonexistent/dir/a.log', '--answers', 'extractive'], capture_output=True, text=True, timeout=60)
    T.check('an access log that cannot be opened stops the start', r.returncode == 1 and 'access log' in r.stderr,
            r.stderr)


def busy_port(binary, work):
    holder = socket.socket()
    holder.bind(('127.0.0.1', 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    t0 = time.time()
    r = subprocess.run([binary, 'serve', '--data', os.path.join(work, 'busy'), '--port', str(port)],
                       capture_output=True, text=True, timeout=60)
    holder.close()
    T.check('busy port: exit 1', r.returncode == 1, r)
    T.check('busy port: says so', f'port {port} on 127.0.0.1 is in use' in r.stderr, r.stderr)
    T.check('busy port: suggests --port and PORT=', '--port N' in r.stderr and 'PORT=N' in r.stderr, r.stderr)
    T.check('busy port: no CivetWeb noise', 'Failed to setup' not in r.stderr, r.stderr)
    T.check('busy port: said before loading models', time.time() - t0 < 5 and 'answers:' not in r.stderr, r.stderr)
    r = subprocess.run([binary, 'serve', '--data', os.path.join(work, 'busy'), '--host', '192.0.2.1', '--port', '0'],
                       capture_output=True, text=True, timeout=60)
    T.check('a foreign --host: exit 2 with the reason',
            r.returncode == 2 and 'not an address of this machine' in r.stderr, r.stderr)


def config_and_startup(binary, work):
    data = os.path.join(work, 'conf-data')
    conf = os.path.join(work, 'clauseqa.conf')
    port_file = os.path.join(work, 'port')
    log = os.path.join(work, 'conf-access.log')
    with open(conf, 'w') as f:
        f.write(f'data = {data}\n[serve]\nport = 0\nthreads = 4\nanswers = extractive\naccess-log = {log}\n'
                f'access-log-format = json\nocr = force\n')
    env = dict(os.environ, CLAUSEQA_CONFIG=conf)
    p = subprocess.Popen([binary, 'serve', '--port-file', port_file, '--access-log-format', 'text'],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.time() + 30
        while time.time() < deadline and not (os.path.exists(port_file) and open(port_file).read().strip()):
            time.sleep(0.05)
        port = int(open(port_file).read())
        import http.client
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
        c.request('GET', '/api/v1/health')
        health = json.loads(c.getresponse().read())
        T.check('config: data = used', os.path.exists(os.path.join(data, 'clauseqa.db')))
        T.check('config: answers = extractive', health['models']['answers'] == 'extractive', health)
        T.check('config: ocr = force', (health.get('ocr') or {}).get('default') == 'force', health)
        time.sleep(0.2)
        T.check('config: access-log = used; --access-log-format text wins over json',
                lines_of(log) and TEXT_LINE.match(lines_of(log)[0]), lines_of(log) if os.path.exists(log) else None)
    finally:
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=30)[0]
    start = []
    for ln in out.splitlines():
        if 'SIGTERM' in ln:
            break
        start.append(ln)
    T.check('start-up: a few lines', len(start) <= 5, start)
    T.check('start-up: the address last', start and 'serving http://127.0.0.1:' in start[-1], start)
    T.check('start-up: 4 threads from the file', start and '4 threads' in start[-1], start)
    T.check('start-up: names the configuration file', start and f'configuration: {conf}' in start[-1], start)
    T.check('start-up: dense retrieval in one line', sum('dense' in ln for ln in start) <= 1, start)


def health_models(binary, work):
    s = Server(binary)  # the build tree's binary: the source tree's models
    try:
        s.start()
        m = s.get('/api/v1/health').json()['models']
        files = m.get('files', {})
        enc = files.get('encoder') or {}
        T.check('health: encoder weights found apart from the data directory',
                enc.get('from') in ('source tree', 'install') and enc.get('path', '').endswith('models/ssm'), m)
        T.check('health: the folders searched, DATA/models first',
                m['searched'][0] == {'dir': os.path.join(s.data, 'models'), 'from': 'data directory'}, m)
        model = os.path.join(SOURCE_DIR, 'data', 'models', 'gemma-3-270m-q4_k_m.gguf')
        if os.path.exists(model):
            T.check('health: the decoder file and its folder', (files.get('decoder') or {}).get('from') == 'source tree', m)
        gpu = os.path.join(SOURCE_DIR, 'data', 'models', 'qwen2.5-coder-1.5b-instruct-q4_k_m.gguf')
        T.check('health: the GPU reader file and its folder when there',
                (files.get('decoder_gpu') or {}).get('path', '').endswith('qwen2.5-coder-1.5b-instruct-q4_k_m.gguf')
                if os.path.exists(gpu) else files.get('decoder_gpu') is None, m)
    finally:
        s.close()
    bare = tempfile.mkdtemp(prefix='cq-bare-', dir=work)
    s = Server(binary_without_models(binary, bare), args=['--answers', 'auto'])
    try:
        s.start()
        m = s.get('/api/v1/health').json()['models']
        T.check('health without models: null files', m['files'] == {'decoder': None, 'decoder_gpu': None, 'encoder': None}, m)
        warnings = [ln for ln in s.log_text().splitlines() if 'warning' in ln and 'decoder' in ln]
        T.check('without models: one warning with the fix', len(warnings) == 1 and 'make setup' in warnings[0]
                and '--models' in warnings[0], s.log_text())
    finally:
        s.close()


def display_width(s):
    return sum(2 if unicodedata.east_asian_width(ch) in 'WF' else 0 if unicodedata.combining(ch) else 1 for ch in s)


def bars_on_a_terminal(binary, work, path):
    """The progress lines `clauseqa ingest` draws on a terminal for path, or None (a failed check) when they are not
    UTF-8."""
    master, slave = pty.openpty()
    p = subprocess.Popen([binary, 'ingest', '--data', os.path.join(work, 'tty'), '--kb', 'k', path],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out = b''
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    p.wait(timeout=60)
    os.close(master)
    try:
        text = out.decode('utf-8')
    except UnicodeDecodeError as e:
        T.check('progress: valid UTF-8 (never cut inside a character)', False, repr(out[:300]) + str(e))
        return None
    bars = [seg for seg in re.split(r'[\r\n]', text) if seg.startswith('[')]
    T.check('progress: drawn on a terminal', bars, text)
    return bars


def progress_on_a_terminal(binary, work):
    name = '中华人民共和国劳动合同法实施条例及其配套规定汇编二零二四年修订版本.md'
    path = os.path.join(work, name)
    shutil.copy(os.path.join(SOURCE_DIR, 'data', 'demo', '劳动合同法(2012-12-28).md'), path)
    bars = bars_on_a_terminal(binary, work, path)
    if bars is None:
        return
    first = bars[0] if bars else ''
    shown = first.split(' ', 2)[2] if first.count(' ') >= 2 else ''
    T.check('progress: the name cut to 40 columns with an ellipsis', display_width(shown) == 40 and '…' in shown,
            (shown, display_width(shown)))
    T.check('progress: the name begins as it should', shown.startswith('中华人民共和国'), shown)
    # a PDF: the pages read of the file being read follow its name, which keeps its 40 columns
    bars = bars_on_a_terminal(binary, work, DEMO_PDF) or []
    paged = [b for b in bars if re.search(r' \(page \d+/9\)$', b)]
    cell = paged[-1].split(' ', 2)[2].rsplit(' (page', 1)[0] if paged else ''
    T.check('progress: the pages read after the name', paged and display_width(cell) == 40, bars[-3:])


def main():
    binary = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix='cq-ops-')
    os.environ['CLAUSEQA_CONFIG'] = os.path.join(work, 'empty.conf')  # never this machine's /etc/clauseqa
    open(os.environ['CLAUSEQA_CONFIG'], 'w').close()
    try:
        access_log(binary, work)
        busy_port(binary, work)
        config_and_startup(binary, work)
        health_models(binary, work)
        progress_on_a_terminal(binary, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    T.finish()


if __name__ == '__main__':
    main()
