#!/usr/bin/env python3
"""HTTPS webhook receiver: logs every POST (path, headers, body, time) as one JSON line to
--log; answers with the status in --mode-file (first line: "<status> [delay_seconds]"),
default 200. Threaded, so concurrent deliveries are served."""
import argparse, json, socket, ssl, threading, time, os
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--mode-file", default=None)
ap.add_argument("--cert", default=os.path.join(os.path.dirname(__file__), "certs/leaf.pem"))
ap.add_argument("--key", default=os.path.join(os.path.dirname(__file__), "certs/leaf.key"))
a = ap.parse_args()
lock = threading.Lock()

def mode():
    try:
        with open(a.mode_file) as f:
            parts = f.read().split()
            return int(parts[0]), float(parts[1]) if len(parts) > 1 else 0.0
    except Exception:
        return 200, 0.0

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def setup(self):
        super().setup()
        # The answer in one segment, at once: headers and body written apart met Nagle and the
        # sender's delayed ACK, ~40 ms a delivery (attack16).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        status, delay = mode()
        if "/gone" in self.path:
            status = 410
        rec = {"t": time.time(), "path": self.path, "headers": [[k, v] for k, v in self.headers.items()],
               "body": body.decode("utf-8", "replace"), "status": status}
        with lock:
            with open(a.log, "a") as f:
                f.write(json.dumps(rec) + "\n")
        if delay:
            time.sleep(delay)
        try:
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self._headers_buffer.append(b"\r\nok")
            self.flush_headers()
        except OSError:
            pass  # the sender gave up (its timeout)

srv = ThreadingHTTPServer(("127.0.0.1", a.port), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(a.cert, a.key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.daemon_threads = True
srv.serve_forever()
