"""Shared pieces of the black-box webhook grader (bbhooks.py).

Written from the contract documents only (/work/shared/spec: partner-api-spec.md, rulings.md,
operator-api.md, extensions.md). Nothing here knows the server's code.
"""

import base64
import collections
import datetime as dt
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
DATE_RE = re.compile(r"^\d{4}-\d\d-\d\d$")
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
INTERNAL_TOKEN = "bbhooks-internal-token-0123456789abcdefXYZ"
PEPPER = "bbhooks-pepper-0123456789abcdef0123456789"


def parse_ts(s):
    return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc).timestamp()


# ----------------------------------------------------------------------------- results
class Results:
    def __init__(self, path):
        self.path = path
        self.rows = []
        self.lock = threading.Lock()
        self.section = ""

    def sec(self, name):
        self.section = name
        print(f"\n=== {name}", flush=True)

    def check(self, name, ok, detail=""):
        ok = bool(ok)
        with self.lock:
            self.rows.append({"section": self.section, "name": name, "ok": ok, "detail": str(detail)[:1500]})
        print(f"  [{'PASS' if ok else 'FAIL'}] {name}" + ("" if ok else f"  -- {str(detail)[:600]}"), flush=True)
        return ok

    def note(self, name, detail):
        with self.lock:
            self.rows.append({"section": self.section, "name": name, "ok": None, "detail": str(detail)[:1500]})
        print(f"  [NOTE] {name}: {str(detail)[:600]}", flush=True)

    def guard(self, name, fn, *a, **kw):
        try:
            return fn(*a, **kw)
        except Exception as e:  # a crash in one block must not hide the others
            self.check(f"{name} (ran without error)", False, f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1200:]}")
            return None

    def save(self):
        with open(self.path, "w") as f:
            json.dump(self.rows, f, indent=1)
        fails = [r for r in self.rows if r["ok"] is False]
        print(f"\n{len(self.rows)} rows, {sum(1 for r in self.rows if r['ok'])} pass, {len(fails)} fail")
        for r in fails:
            print(f"FAIL [{r['section']}] {r['name']}: {r['detail'][:400]}")


# ----------------------------------------------------------------------------- receiver
class Receiver:
    """HTTPS receiver; behaviour by path (/r/<name>), every request logged with raw bytes."""

    def __init__(self, port, cert, key):
        self.port = port
        self.lock = threading.Lock()
        self.log = []
        self.behaviors = {}
        self.inflight = collections.Counter()
        self.maxinflight = collections.Counter()
        recv = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                path = self.path.split("?")[0]
                name = path[3:] if path.startswith("/r/") else path
                entry = {
                    "name": name, "path": self.path, "t": time.time(), "headers": list(self.headers.items()),
                    "body": body, "method": self.command,
                }
                with recv.lock:
                    recv.log.append(entry)
                    b = recv.behaviors.get(name, {})
                    seq = b.get("seq")
                    status = seq.pop(0) if seq else b.get("status", 200)
                    recv.inflight[name] += 1
                    recv.maxinflight[name] = max(recv.maxinflight[name], recv.inflight[name])
                try:
                    if b.get("delay"):
                        time.sleep(b["delay"])
                    if status == "close":
                        self.close_connection = True
                        try:
                            self.connection.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                        return
                    if b.get("trickle"):
                        self.send_response(status)
                        self.send_header("Content-Length", "100000")
                        self.end_headers()
                        self.wfile.write(b"x" * 10)
                        self.wfile.flush()
                        time.sleep(b["trickle"])
                        self.close_connection = True
                        return
                    hdrs = b.get("headers", {})
                    if callable(hdrs):
                        hdrs = hdrs()
                    out = b.get("body", b"ok")
                    self.send_response(status)
                    for k, v in hdrs.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                finally:
                    with recv.lock:
                        recv.inflight[name] -= 1

            do_GET = do_POST
            do_PUT = do_POST

        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        class Srv(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # clients that hang up (timeouts, closes) are expected here

        self.httpd = Srv(("127.0.0.1", port), H)
        self.httpd.daemon_threads = True
        self.httpd.socket = self.ctx.wrap_socket(self.httpd.socket, server_side=True)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, name, query=""):
        return f"https://127.0.0.1:{self.port}/r/{name}" + (f"?{query}" if query else "")

    def set(self, name, **b):
        with self.lock:
            self.behaviors[name] = b

    def got(self, name):
        with self.lock:
            return [e for e in self.log if e["name"] == name]

    def wait(self, name, n=1, timeout=15.0, pred=None):
        end = time.time() + timeout
        while time.time() < end:
            es = [e for e in self.got(name) if pred is None or pred(e)]
            if len(es) >= n:
                return es
            time.sleep(0.05)
        return [e for e in self.got(name) if pred is None or pred(e)]


def hdr(entry, name):
    """All values of a header (case-insensitive)."""
    return [v for k, v in entry["headers"] if k.lower() == name.lower()]


def hdr1(entry, name):
    v = hdr(entry, name)
    return v[0] if v else None


def body_json(entry):
    return json.loads(entry["body"])


# ----------------------------------------------------------------------------- server
class Server:
    def __init__(self, name, port, db, bindir, certdir, outdir, **env):
        self.name, self.port, self.db = name, port, db
        self.base = f"http://127.0.0.1:{port}"
        self.bin = bindir
        self.env = dict(os.environ)
        self.env.update({
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{db}",
            "PARTNER_BIND": f"127.0.0.1:{port}",
            "PARTNER_BASE_URL": f"http://127.0.0.1:{port}",
            "PARTNER_TOKEN_PEPPER": PEPPER,
            "PARTNER_INTERNAL_TOKEN": INTERNAL_TOKEN,
            "PARTNER_WEBHOOK_CA_FILE": f"{certdir}/ca.pem",
            "PARTNER_LOG_FORMAT": "json",
            "RUST_LOG": "info",
        })
        self.env.update({k: str(v) for k, v in env.items()})
        self.logpath = f"{outdir}/{name}.server.log"
        self.proc = None
        self.op = requests.Session()
        self.op.headers["Authorization"] = f"Bearer {INTERNAL_TOKEN}"

    def start(self):
        self.logf = open(self.logpath, "a")
        self.proc = subprocess.Popen([self.bin, "serve"], env=self.env, stdout=self.logf, stderr=subprocess.STDOUT)
        for _ in range(300):
            try:
                if requests.get(self.base + "/readyz", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"server {self.name} exited: see {self.logpath}")
            time.sleep(0.2)
        raise RuntimeError(f"server {self.name} did not become ready")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def opcall(self, method, path, body=None, **kw):
        return self.op.request(method, self.base + path, json=body, timeout=30, **kw)

    def partner(self, pid):
        r = self.opcall("PUT", f"/internal/v1/partners/{pid}", {
            "name": f"Partner {pid}", "email": f"{pid.lower()}@example.com", "active": True, "dnaAccess": False,
            "headlessLinks": False, "defaultLang": "en", "enabledLangs": ["en"],
            "careServices": {"subscriptionActive": False, "manualOverride": False, "yearlyBundle": False, "services": []},
        })
        assert r.status_code in (200, 201), r.text
        u = self.opcall("POST", "/internal/v1/users", {"email": f"u-{pid.lower()}@example.com", "partnerId": pid, "admin": False})
        assert u.status_code == 201, u.text
        t = self.opcall("POST", f"/internal/v1/users/{u.json()['data']['id']}/tokens", {})
        assert t.status_code == 201, t.text
        return Client(self.base, t.json()["data"]["token"], pid)

    def lead(self, pid, **kw):
        body = {"partnerId": pid, "firstName": "Ann", "lastName": "Lee", "email": "ann@example.com", "emailConsent": True,
                "phone": "+1 555 0100", "smsConsent": True, "origin": "managed-website", "location": "Austin, TX"}
        body.update(kw)
        body = {k: v for k, v in body.items() if v is not None or k == "questionId"}
        return self.opcall("POST", "/internal/v1/leads", body)

    def payout(self, pid, amount=12.5, **kw):
        body = {"partnerId": pid, "payoutDate": "2026-11-20", "payoutAmount": amount, "status": "paid"}
        body.update(kw)
        return self.opcall("POST", "/internal/v1/payouts", body)

    def order(self, pid, oid, **kw):
        body = {"orderId": oid, "partnerId": pid, "createdDate": "2026-11-21T10:00:00.000Z", "product": "Semaglutide",
                "amount": 199.5, "commission": 40, "status": "shipped", "isTest": False, "source": "shop"}
        body.update(kw)
        return self.opcall("POST", "/internal/v1/orders", body)


class Client:
    def __init__(self, base, token, pid):
        self.base, self.token, self.pid = base, token, pid
        self.s = requests.Session()
        self.s.headers["Authorization"] = f"Bearer {token}"

    def call(self, method, path, body=None, headers=None, raw=None):
        kw = {"headers": headers or {}, "timeout": 30}
        if raw is not None:
            kw["data"] = raw
            kw["headers"]["Content-Type"] = "application/json"
        elif body is not None:
            kw["json"] = body
        return self.s.request(method, self.base + path, **kw)

    def mkep(self, url, events=("lead.created", "lead.enriched", "order.created", "payout.created"), secret=True, **kw):
        body = {"url": url, "events": list(events)}
        if secret:
            body["secret"] = True
        body.update(kw)
        r = self.call("POST", "/api/v1/webhook-endpoints", body)
        assert r.status_code == 201, f"{r.status_code} {r.text}"
        return r.json()["data"]

    def deliveries(self, **q):
        qs = "&".join(f"{k}={v}" for k, v in q.items())
        r = self.call("GET", "/api/v1/webhook-deliveries" + (f"?{qs}" if qs else ""))
        assert r.status_code == 200, f"{r.status_code} {r.text}"
        return r.json()

    def delivery(self, did):
        return self.call("GET", f"/api/v1/webhook-deliveries/{did}")

    def endpoint(self, eid):
        for e in self.call("GET", "/api/v1/webhook-endpoints").json()["data"]:
            if e["id"] == eid:
                return e
        return None


def wait_until(pred, timeout=15.0, step=0.1):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


def b64(b):
    return base64.b64encode(b).decode()


class TcpProxy:
    """A TCP proxy to PostgreSQL that can be taken down (every connection cut, new ones refused)."""

    def __init__(self, port, target=("127.0.0.1", 5432)):
        self.target = target
        self.up_flag = threading.Event()
        self.up_flag.set()
        self.conns = []
        self.lock = threading.Lock()
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", port))
        self.ls.listen(128)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            c, _ = self.ls.accept()
            if not self.up_flag.is_set():
                c.close()
                continue
            try:
                u = socket.create_connection(self.target)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for x in (a, b):
            try:
                x.close()
            except OSError:
                pass

    def down(self):
        self.up_flag.clear()
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    c.close()
                except OSError:
                    pass
            self.conns = []

    def up(self):
        self.up_flag.set()


class Blackhole:
    """Accepts TCP connections and never answers (no TLS handshake)."""

    def __init__(self, port):
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", port))
        self.ls.listen(128)
        self.held = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            c, _ = self.ls.accept()
            self.held.append(c)


class PlainHttp:
    """A plain-HTTP server, answering 200 (for an https:// URL pointed at it)."""

    def __init__(self, port):
        self.hits = 0
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                outer.hits += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), H)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
