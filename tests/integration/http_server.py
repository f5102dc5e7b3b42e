"""Helpers for the HTTP tests: a `clauseqa serve` on a free loopback port, requests, multipart bodies, checks.

Only the standard library; every request goes to 127.0.0.1."""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

SOURCE_DIR = os.environ.get('CLAUSEQA_SOURCE_DIR') or os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SHARED_DIR = os.environ.get('CLAUSEQA_SHARED') or os.path.join(SOURCE_DIR, '..', 'shared')
DEMO_PDF = os.path.join(SOURCE_DIR, 'data', 'demo', '劳动法(2018-12-29).pdf')
DEMO_MD = os.path.join(SOURCE_DIR, 'data', 'demo', 'sample-services-agreement.md')


def require_models(*names):
    """Exit 77 (skipped) unless every file of names is in data/models (the model and adapter `make setup` fetches)."""
    models = os.path.join(SOURCE_DIR, 'data', 'models')
    for need in names:
        if not os.path.exists(os.path.join(models, need)):
            print(f'skipped: {need} is not in {models} (make setup)')
            sys.exit(77)
    return models


class Checks:
    """Counts checks; a failure is reported and the test goes on."""

    def __init__(self, name):
        self.name, self.passed, self.failed = name, 0, 0

    def check(self, what, ok, detail=''):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f'FAIL: {what}' + (f' -- {detail}' if detail else ''), flush=True)
        return ok

    def finish(self):
        print(f'{self.name}: {self.passed} passed, {self.failed} failed', flush=True)
        sys.exit(1 if self.failed else 0)


class Response:
    def __init__(self, status, headers, body, reason=''):
        self.status, self.headers, self.body, self.reason = status, headers, body, reason

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def error_code(self):
        j = self.json()
        return j['error']['code'] if isinstance(j, dict) and isinstance(j.get('error'), dict) else None

    def __repr__(self):
        return f'<{self.status} {self.body[:300]!r}>'


def binary_without_models(binary, folder):
    """A copy of the binary in folder (not a build tree, not <prefix>/bin): it finds models only in DATA/models and
    --models, as an installation without any would (app/models.h)."""
    copy = os.path.join(folder, 'clauseqa')
    shutil.copy2(binary, copy)
    return copy


class Server:
    def __init__(self, binary, data_dir=None, args=()):
        self.binary = os.path.abspath(binary)
        self.tmp = tempfile.mkdtemp(prefix='cq-http-')
        self.data = data_dir or os.path.join(self.tmp, 'data')
        # Extractive answers unless a test asks for others: the build tree's binary finds the decoder that set-up
        # fetched (app/models.h), and the tests of generated answers say so (test_http_generate.py).
        self.args = list(args) if '--answers' in args else ['--answers', 'extractive'] + list(args)
        self.proc = None
        self.port = None
        self.key = None
        self.log_path = os.path.join(self.tmp, 'server.log')
        self.env = None  # extra environment variables of the next start (e.g. CLAUSEQA_FAULT, core/fault.h)

    def start(self, timeout_s=30):
        port_file = os.path.join(self.tmp, 'port')
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.log = open(self.log_path, 'ab')
        self.proc = subprocess.Popen([self.binary, 'serve', '--data', self.data, '--port', '0', '--port-file',
                                      port_file] + self.args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **self.env) if self.env else None)
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError('server exited: ' + self.log_text())
            if os.path.exists(port_file) and open(port_file).read().strip():
                self.port = int(open(port_file).read())
                break
            time.sleep(0.05)
        else:
            raise RuntimeError('server did not start: ' + self.log_text())
        while time.time() < deadline:
            try:
                if self.get('/api/v1/health').status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError('server not healthy: ' + self.log_text())

    def stop(self, sig=signal.SIGTERM, timeout_s=30):
        if not self.proc:
            return None
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc = None
        self.log.close()
        return rc

    def close(self):
        if self.proc:
            self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def log_text(self):
        try:
            return open(self.log_path, encoding='utf-8', errors='replace').read()[-4000:]
        except OSError:
            return ''

    def cli(self, *args, input_text=None):
        return subprocess.run([self.binary] + list(args) + ['--data', self.data], capture_output=True, text=True,
                              input=input_text, timeout=60)

    def request(self, method, path, body=None, headers=None, key='default', timeout_s=60, source=None):
        """source: the client address (any 127.x.y.z), for the limits per client address."""
        conn = http.client.HTTPConnection('127.0.0.1', self.port, timeout=timeout_s,
                                          source_address=(source, 0) if source else None)
        h = dict(headers or {})
        use_key = self.key if key == 'default' else key
        if use_key:
            h['Authorization'] = 'Bearer ' + use_key
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault('Content-Type', 'application/json')
        elif isinstance(body, str):
            body = body.encode()
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            return Response(r.status, r.getheaders(), r.read(), r.reason)
        finally:
            conn.close()

    def get(self, path, **kw):
        return self.request('GET', path, **kw)

    def post(self, path, body=None, **kw):
        return self.request('POST', path, body, **kw)

    def delete(self, path, **kw):
        return self.request('DELETE', path, **kw)

    def upload(self, kb, path, filename=None, content=None, replace=False, headers=None, **kw):
        """Multipart upload of a file (or of content under filename)."""
        data = content if content is not None else open(path, 'rb').read()
        name = filename if filename is not None else os.path.basename(path)
        body, ctype = multipart({'replace': 'true'} if replace else {}, ('file', name, data))
        h = {'Content-Type': ctype}
        h.update(headers or {})
        return self.post(f'/api/v1/kbs/{quote(kb)}/documents', body, headers=h, **kw)

    def wait_job(self, job_id, timeout_s=120, **kw):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            r = self.get(f'/api/v1/jobs/{job_id}', **kw)
            j = r.json()
            if r.status != 200 or j['state'] not in ('queued', 'running'):
                return j if r.status == 200 else r
            time.sleep(0.1)
        raise RuntimeError(f'job {job_id} did not end')

    def events(self, path, body, headers=None, key='default'):
        """POSTs body and reads a text/event-stream: a list of (event, data) with data parsed as JSON where it is."""
        h = {'Accept': 'text/event-stream'}
        h.update(headers or {})
        r = self.post(path, body, headers=h, key=key)
        if r.status != 200:
            return r, []
        out = []
        for block in r.body.decode('utf-8').split('\n\n'):
            if not block.strip():
                continue
            name, data = 'message', []
            for line in block.split('\n'):
                if line.startswith('event:'):
                    name = line[6:].strip()
                elif line.startswith('data:'):
                    data.append(line[5:].lstrip())
            text = '\n'.join(data)
            try:
                out.append((name, json.loads(text)))
            except ValueError:
                out.append((name, text))
        return r, out


class RawResponse:
    """A response read off a socket: status, headers (lower-case names), body bytes."""

    def __init__(self, status, headers, body, reason=''):
        self.status, self.headers, self.body, self.reason = status, headers, body, reason

    def strict_json(self):
        """The body as JSON, or None when it is not valid UTF-8 JSON."""
        try:
            return json.loads(self.body.decode('utf-8'))
        except ValueError:
            return None

    def __repr__(self):
        return f'<raw {self.status} {self.body[:300]!r}>'


def read_response(sock, timeout_s=10):
    """Reads one HTTP response from sock; None when the connection closes (or times out) before a status line."""
    sock.settimeout(timeout_s)
    data = b''
    try:
        while b'\r\n\r\n' not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        if b'\r\n\r\n' not in data:
            return None
        head, body = data.split(b'\r\n\r\n', 1)
        lines = head.decode('latin-1').split('\r\n')
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(':')
            headers[k.strip().lower()] = v.strip()
        length = int(headers.get('content-length', '-1'))
        while length >= 0 and len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return RawResponse(status, headers, body[:length] if length >= 0 else body)
    except (socket.timeout, ConnectionError):
        return None


def raw_request(port, data, timeout_s=10, source='127.0.0.1'):
    """Sends data as it is (from the address source) and reads the answer."""
    sock = socket.create_connection(('127.0.0.1', port), timeout=timeout_s, source_address=(source, 0))
    try:
        sock.sendall(data)
        return read_response(sock, timeout_s)
    finally:
        sock.close()


def quote(s):
    from urllib.parse import quote as q
    return q(s, safe='')


def multipart(fields, *files):
    boundary = 'cq' + uuid.uuid4().hex
    parts = []
    for k, v in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode())
    for field, name, data in files:
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{name}"\r\n'
                     'Content-Type: application/octet-stream\r\n\r\n'.encode() + data + b'\r\n')
    parts.append(f'--{boundary}--\r\n'.encode())
    return b''.join(parts), 'multipart/form-data; boundary=' + boundary


def png_size(data):
    """(width, height) of a PNG, or None when data is not one."""
    if data[:8] != b'\x89PNG\r\n\x1a\n' or data[12:16] != b'IHDR':
        return None
    return int.from_bytes(data[16:20], 'big'), int.from_bytes(data[20:24], 'big')
