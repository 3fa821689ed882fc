#!/usr/bin/env python3
"""A TCP proxy in front of PostgreSQL that can silently blackhole chosen connections (no FIN, no
RST: what a NAT/firewall that forgot the flow, a paused VM or a partition looks like to both
ends). Connections whose upstream local port (pg_stat_activity.client_port) is listed in the
freeze file stop forwarding in both directions and stay open; `PORT:up` freezes only what the
client sends, `PORT:down` only what the server sends; `PORT:delay0.4` does not freeze but holds
each chunk the server sends 0.4 s before forwarding it (a slow, not dead, flow).
Usage: pgproxy.py LISTEN_PORT FREEZE_FILE"""
import socket, sys, threading, time
LPORT, FREEZE = int(sys.argv[1]), sys.argv[2]
frozen = set()
delayed = {}


def watch():
    while True:
        try:
            for x in open(FREEZE).read().split():
                port, _, way = x.partition(":")
                if way.startswith("delay"):
                    delayed[int(port)] = float(way[5:])
                    continue
                frozen.update((int(port), w) for w in ((way,) if way else ("up", "down")))
        except (OSError, ValueError):
            pass
        time.sleep(0.05)


def pipe(src, dst, port, way):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            while (port, way) in frozen:
                time.sleep(0.1)
            if way == "down" and port in delayed:
                time.sleep(delayed[port])
            dst.sendall(data)
    except OSError:
        pass
    if (port, way) not in frozen:
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
        u = socket.create_connection(("127.0.0.1", 5432))
        # No Nagle: a relay that holds a small write until the last one is ACKed adds 40 ms
        # (delayed ACK) stalls that the server's direct link never has (2026-11-27, patch22: six
        # `PATCH`es of endpoints measured 82-92 ms through it, 12-15 ms with this, 10-13 ms direct).
        for s in (c, u):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        port = u.getsockname()[1]
        threading.Thread(target=pipe, args=(c, u, port, "up"), daemon=True).start()
        threading.Thread(target=pipe, args=(u, c, port, "down"), daemon=True).start()


threading.Thread(target=watch, daemon=True).start()
serve()
