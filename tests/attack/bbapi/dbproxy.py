#!/usr/bin/env python3
"""A TCP proxy to PostgreSQL that can be cut: the control file's content "down" closes every
proxied connection and refuses new ones (connection refused), "up" serves again.
Usage: dbproxy.py LISTEN_PORT TARGET_PORT CONTROL_FILE"""
import socket
import sys
import threading
import time

LPORT, TPORT, CTL = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
conns, lock = set(), threading.Lock()


def state():
    try:
        return open(CTL).read().strip() or "up"
    except OSError:
        return "up"


def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.close()
        except OSError:
            pass


def serve(ls):
    while True:
        try:
            c, _ = ls.accept()
        except OSError:
            return
        try:
            u = socket.create_connection(("127.0.0.1", TPORT))
        except OSError:
            c.close()
            continue
        with lock:
            conns.update((c, u))
        threading.Thread(target=pipe, args=(c, u), daemon=True).start()
        threading.Thread(target=pipe, args=(u, c), daemon=True).start()


ls, cur = None, None
while True:
    want = state()
    if want == "up" and ls is None:
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", LPORT))
        ls.listen(128)
        threading.Thread(target=serve, args=(ls,), daemon=True).start()
    elif want == "down" and ls is not None:
        ls.close()
        ls = None
        with lock:
            for s in list(conns):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass
            conns.clear()
    time.sleep(0.02)
