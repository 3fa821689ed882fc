#!/usr/bin/env python3
"""HTTPS webhook receiver like receiver.py, but a hostile one: every TLS handshake is held
--hold seconds after the TCP connection is accepted (or taken from --hold-file's first line), and
every connection is closed after one answer, so each delivery needs a fresh handshake. What an
old URL's owner (the reason a partner moves or disables an endpoint) can do to stretch the time
between the worker's endpoint-row check and the request's arrival."""
import argparse, json, os, ssl, threading, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--hold", type=float, default=3.0)
ap.add_argument("--hold-file", default=None)
d = os.path.dirname(os.path.abspath(__file__))
a = ap.parse_args()
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(os.path.join(d, "certs/leaf.pem"), os.path.join(d, "certs/leaf.key"))
lock = threading.Lock()


def hold():
    try:
        return float(open(a.hold_file).read().split()[0])
    except Exception:
        return a.hold


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one answer per connection

    def log_message(self, *args):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        rec = {"t": time.time(), "accepted": self.server_accepted, "path": self.path,
               "headers": [[k, v] for k, v in self.headers.items()],
               "body": body.decode("utf-8", "replace"), "status": 200}
        with lock:
            with open(a.log, "a") as f:
                f.write(json.dumps(rec) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"ok")


class S(ThreadingHTTPServer):
    daemon_threads = True

    def finish_request(self, request, client_address):
        accepted = time.time()
        time.sleep(hold())
        try:
            tls = ctx.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        h = H.__new__(H)
        h.server_accepted = accepted
        H.__init__(h, tls, client_address, self)


S(("127.0.0.1", a.port), H).serve_forever()
