#!/usr/bin/env python3
"""A TCP relay in front of PostgreSQL that slows or breaks EVERY connection through it (an
instance's whole database link, not only its LISTEN connection as pgproxy.py does). The control
file's first line is read every 20 ms:
  pass        forward at once
  delay 0.3   forward each chunk from the server 0.3 s after it came (latency, not throughput:
              chunks are scheduled, not slept one after the other), on the connections open when
              the line was written (an instance's pool slowed; new connections are not, so the
              pool's connect timeout does not empty it)
  delayall 0.03  (attack6) the same on every connection, new ones included (a link that is slow
              for the whole instance, e.g. a database in another region)
  freeze      forward nothing either way, keep every connection open (silent death)
  storm       end every connection (shutdown, then close with RST) and every new one at once
              (reads fail)
Usage: pgslow.py LISTEN_PORT CONTROL_FILE [UPSTREAM_PORT, default 5432]"""
import collections, socket, struct, sys, threading, time
LPORT, CTL = int(sys.argv[1]), sys.argv[2]
UPSTREAM = int(sys.argv[3]) if len(sys.argv) > 3 else 5432  # attack13: e.g. pgproxy.py in front of PostgreSQL
state = {"mode": "pass", "delay": 0.0, "since": 0.0}
conns = set()
lock = threading.Lock()


def watch():
    while True:
        try:
            w = (open(CTL).readline().split() or ["pass"])
            if w[0] == "delay" and state["mode"] != "delay":
                state["since"] = time.time()
            if w[0] == "delayall":
                state["since"] = float("inf")
            state["mode"] = w[0]
            state["delay"] = float(w[1]) if w[0] in ("delay", "delayall") else 0.0
            if w[0] == "storm":
                with lock:
                    for s in list(conns):
                        rst(s)
        except (OSError, ValueError):
            pass
        time.sleep(0.02)


def rst(s):
    # shutdown first: close() alone does not end a socket another thread is blocked reading (the
    # first version of this relay did that and so froze the connections instead of ending them)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
    conns.discard(s)


def pipe(src, dst, down, born):
    q = collections.deque()
    cv = threading.Condition()

    def writer():
        while True:
            with cv:
                while not q:
                    cv.wait()
                t, data = q.popleft()
            if data is None:
                break
            while True:
                if state["mode"] == "freeze":
                    time.sleep(0.05); continue
                wait = t + (state["delay"] if down and born < state["since"] else 0) - time.time()
                if wait <= 0:
                    break
                time.sleep(min(wait, 0.02))
            try:
                dst.sendall(data)
            except OSError:
                break
    threading.Thread(target=writer, daemon=True).start()
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            with cv:
                q.append((time.time(), data)); cv.notify()
    except OSError:
        pass
    with cv:
        q.append((time.time(), None)); cv.notify()
    if state["mode"] != "freeze":
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve():
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", LPORT)); ls.listen(128)
    while True:
        c, _ = ls.accept()
        if state["mode"] == "storm":
            rst(c); continue
        u = socket.create_connection(("127.0.0.1", UPSTREAM))
        # No Nagle, as in pgproxy.py: a relay that holds a small write until the last one is
        # ACKed adds 40 ms (delayed ACK) stalls that the server's direct link never has.
        for s in (c, u):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with lock:
            conns.update((c, u))
        threading.Thread(target=pipe, args=(c, u, False, time.time()), daemon=True).start()
        threading.Thread(target=pipe, args=(u, c, True, time.time()), daemon=True).start()


threading.Thread(target=watch, daemon=True).start()
serve()
