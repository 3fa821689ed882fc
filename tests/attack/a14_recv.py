#!/usr/bin/env python3
"""attack14's HTTPS receiver: answers 500 with probability --fail (else 200) after a random
delay up to --delay seconds, and logs one line per POST: "<time> <status> <X-Partner-Delivery>
<path>". Paths containing /ok always answer 200."""
import argparse, os, random, ssl, threading, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--fail", type=float, default=0.3)
ap.add_argument("--delay", type=float, default=0.03)
d = os.path.dirname(os.path.abspath(__file__))
ap.add_argument("--cert", default=os.path.join(d, "certs/leaf.pem"))
ap.add_argument("--key", default=os.path.join(d, "certs/leaf.key"))
a = ap.parse_args()
lock = threading.Lock()
out = open(a.log, "a", buffering=1)


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        t = time.time()
        status = 200 if "/ok" in self.path or random.random() >= a.fail else 500
        with lock:
            out.write(f"{t:.6f} {status} {self.headers.get('X-Partner-Delivery')} {self.path}\n")
        if a.delay:
            time.sleep(random.random() * a.delay)
        try:
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
        except OSError:
            pass


srv = ThreadingHTTPServer(("127.0.0.1", a.port), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(a.cert, a.key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.daemon_threads = True
srv.serve_forever()
