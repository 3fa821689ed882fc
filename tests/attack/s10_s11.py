#!/usr/bin/env python3
"""S-10 / S-11: requests the HTTP parser rejects, sent over raw sockets.

Env: HOST (127.0.0.1), PORT. Each case prints the status line, whether the body is the JSON
error body with code invalid_request, and the first bytes of the body. A case "ok" when the
answer is a 4xx with the JSON error body (or 2xx/404 where the request is legal)."""
import json, os, socket, sys, time

HOST, PORT = os.environ.get("HOST", "127.0.0.1"), int(os.environ["PORT"])


def exchange(chunks, delay=0.0, read_timeout=12.0, shut=False):
    s = socket.create_connection((HOST, PORT), timeout=read_timeout)
    t0 = time.time()
    try:
        for c in chunks:
            s.sendall(c)
            if delay:
                time.sleep(delay)
        if shut:
            s.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError) as e:
        pass
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except socket.timeout:
        data += b"<<timeout>>"
    except ConnectionResetError:
        data += b"<<reset>>"
    s.close()
    return data, time.time() - t0


def parse(data):
    """List of (status line, headers, body) for each answer in data."""
    out = []
    rest = data
    while rest.startswith(b"HTTP/"):
        head, _, rest = rest.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        hdrs = {}
        for l in lines[1:]:
            k, _, v = l.partition(b":")
            hdrs[k.strip().lower().decode()] = v.strip().decode()
        n = int(hdrs.get("content-length", "0") or 0)
        if hdrs.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line.split(b";")[0] or b"0", 16)
                if size == 0:
                    rest = rest.partition(b"\r\n")[2]
                    break
                body += rest[:size]
                rest = rest[size + 2:]
        else:
            body, rest = rest[:n], rest[n:]
        out.append((lines[0].decode(), hdrs, body))
    return out, rest


def verdict(answers, expect):
    """expect: a status code (the error body required) or 'served' (any non-5xx answer)."""
    if not answers:
        return "NO ANSWER"
    st, hdrs, body = answers[0]
    code = int(st.split()[1])
    if code >= 500:
        return f"5xx! {st}"
    if expect == "served":
        return "ok" if code < 400 else f"refused {code}: {body[:80]!r}"
    if code != expect:
        return f"status {code} != {expect}"
    try:
        j = json.loads(body)
        if j["error"]["code"] != "invalid_request":
            return "code " + j["error"]["code"]
    except Exception:
        return f"NOT the error body: {body[:80]!r}"
    return "ok"


CASES = []


def case(name, expect, **kw):
    def deco(f):
        CASES.append((name, expect, f, kw))
        return f
    return deco


def req(line, headers=(), body=b""):
    h = "".join(f"{k}: {v}\r\n" for k, v in headers)
    return (line + "\r\n" + h + "\r\n").encode() + body


@case("100 kB query", 414)
def _():
    return exchange([req("GET /api/v1/leads?q=" + "a" * 100_000 + " HTTP/1.1", [("Host", "x")])])


@case("request line 16384 bytes exactly (legal)", "served")
def _():
    pre, post = "GET /healthz?q=", " HTTP/1.1"
    return exchange([req(pre + "a" * (16384 - len(pre) - len(post)) + post, [("Host", "x")])])


@case("request line 16385 bytes", 414)
def _():
    pre, post = "GET /healthz?q=", " HTTP/1.1"
    return exchange([req(pre + "a" * (16385 - len(pre) - len(post)) + post, [("Host", "x")])])


@case("200 headers", 431)
def _():
    return exchange([req("GET /healthz HTTP/1.1", [(f"X-H{i}", "v") for i in range(200)])])


@case("97 headers (the ruling allows up to 100)", "served")
def _():
    return exchange([req("GET /healthz HTTP/1.1", [("Host", "x")] + [(f"X-H{i}", "v") for i in range(96)])])


@case("100 headers (the ruling allows 100)", "served")
def _():
    return exchange([req("GET /healthz HTTP/1.1", [("Host", "x")] + [(f"X-H{i}", "v") for i in range(99)])])


@case("101 headers", 431)
def _():
    return exchange([req("GET /healthz HTTP/1.1", [("Host", "x")] + [(f"X-H{i}", "v") for i in range(100)])])


@case("one 40 kB header", 431)
def _():
    return exchange([req("GET /healthz HTTP/1.1", [("Host", "x"), ("X-Big", "b" * 40_000)])])


@case("headers 32 KiB in 8 KiB pieces, bare LF", 431)
def _():
    return exchange([("GET /healthz HTTP/1.1\n" + "".join(f"X-{i}: {'c' * 8000}\n" for i in range(5)) + "\n").encode()])


@case("slow headers (1 byte/s)", 408, )
def _():
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"z" * 20
    return exchange([head[i:i + 1] for i in range(len(head))], delay=0.5, read_timeout=20)


@case("first byte then silence", 408)
def _():
    return exchange([b"G"], read_timeout=15)


@case("garbage", 400)
def _():
    return exchange([b"\x16\x03\x01\x00garbage\r\n\r\n"])


@case("HTTP/2 preface on h1", 400)
def _():
    return exchange([b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"])


@case("HTTP/1.2", 400)
def _():
    return exchange([req("GET /healthz HTTP/1.2", [("Host", "x")])])


@case("space before colon", 400)
def _():
    return exchange([b"GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n"])


@case("control char in header value", 400)
def _():
    return exchange([b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n"])


@case("Content-Length: abc", 400)
def _():
    return exchange([req("POST /api/v1/webhook-endpoints HTTP/1.1", [("Host", "x"), ("Content-Length", "abc")], b"{}")], read_timeout=8)


@case("Content-Length: -1", 400)
def _():
    return exchange([req("POST /api/v1/webhook-endpoints HTTP/1.1", [("Host", "x"), ("Content-Length", "-1")])], read_timeout=8)


@case("Content-Length: +2", 400)
def _():
    return exchange([req("POST /api/v1/webhook-endpoints HTTP/1.1", [("Host", "x"), ("Content-Length", "+2")], b"{}")], read_timeout=8)


@case("Content-Length 2 and 3", 400)
def _():
    return exchange([req("POST /api/v1/webhook-endpoints HTTP/1.1", [("Host", "x"), ("Content-Length", "2"), ("Content-Length", "3")], b"{}x")], read_timeout=8)


@case("Content-Length 99999999999999999999999", 400)
def _():
    return exchange([req("POST /api/v1/webhook-endpoints HTTP/1.1", [("Host", "x"), ("Content-Length", "99999999999999999999999")], b"{}")], read_timeout=8)


@case("Content-Length and chunked", 400)
def _():
    return exchange([req("POST /api/v1/webhook-endpoints HTTP/1.1", [("Host", "x"), ("Content-Length", "5"), ("Transfer-Encoding", "chunked")], b"0\r\n\r\n")], read_timeout=8)


@case("Transfer-Encoding: chunkedx", 400)
def _():
    return exchange([req("POST /api/v1/webhook-endpoints HTTP/1.1", [("Host", "x"), ("Transfer-Encoding", "chunkedx")], b"0\r\n\r\n")], read_timeout=8)


@case("Transfer-Encoding: gzip, chunked", 400)
def _():
    return exchange([req("POST /api/v1/webhook-endpoints HTTP/1.1", [("Host", "x"), ("Transfer-Encoding", "gzip, chunked")], b"0\r\n\r\n")], read_timeout=8)


@case("bad chunk size (authenticated POST)", 400)
def _():
    return exchange([req("POST /api/v1/webhook-endpoints HTTP/1.1", [("Host", "x"), ("Authorization", "Bearer " + os.environ.get("TOKEN", "")), ("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")], b"zz\r\nhello\r\n0\r\n\r\n")], read_timeout=8)


@case("chunked body, legal (authenticated POST)", "served")
def _():
    b = b'{"url":"https://example.com/h","events":["lead.created"]}'
    return exchange([req("POST /api/v1/webhook-endpoints HTTP/1.1", [("Host", "x"), ("Authorization", "Bearer " + os.environ.get("TOKEN", "")), ("Content-Type", "application/json"), ("Connection", "close"), ("Transfer-Encoding", "chunked")], b"%x\r\n" % len(b) + b + b"\r\n0\r\n\r\n")], read_timeout=8)


@case("non-UTF-8 path", 400)
def _():
    return exchange([b"GET /api/v1/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n"], read_timeout=8)


@case("absolute-form target", "served")
def _():
    return exchange([req("GET http://evil.example/healthz HTTP/1.1", [("Host", "x")])], read_timeout=8)


@case("pipelined: legal then 100 kB line (the legal one must be answered)", "served")
def _():
    a = req("GET /healthz HTTP/1.1", [("Host", "x")])
    b = req("GET /healthz?q=" + "a" * 100_000 + " HTTP/1.1", [("Host", "x")])
    return exchange([a + b])


@case("chunkedx body hides a 100 kB request line", 414)
def _():
    # the guard reads the first body as chunked, actix may not: the second head would escape the guard
    a = req("POST /healthz HTTP/1.1", [("Host", "x"), ("Transfer-Encoding", "xchunked")])
    b = req("GET /healthz?q=" + "a" * 100_000 + " HTTP/1.1", [("Host", "x")])
    return exchange([a, b], delay=0.3, read_timeout=8)


@case("keep-alive: second head slow (first byte then silence)", 408)
def _():
    # the first answer is parsed off below; the verdict is on the second
    return exchange([req("GET /healthz HTTP/1.1", [("Host", "x")]), b"G"], delay=0.2, read_timeout=15)


@case("slow body: Content-Length 100, 1 byte every 2 s (informational: no rule)", "served")
def _():
    head = req("POST /api/v1/webhook-endpoints HTTP/1.1", [("Host", "x"), ("Authorization", "Bearer " + os.environ.get("TOKEN", "")), ("Content-Type", "application/json"), ("Content-Length", "100")])
    return exchange([head] + [b" "] * 12, delay=2.0, read_timeout=40)


def main():
    only = sys.argv[1:]
    bad = 0
    for name, expect, f, _ in CASES:
        if only and not any(o in name for o in only):
            continue
        data, took = f()
        answers, rest = parse(data)
        if name.startswith("keep-alive") and len(answers) > 1:
            answers = answers[1:]
        v = verdict(answers, expect)
        bad += v != "ok"
        sts = [a[0] for a in answers]
        body = answers[0][2][:90] if answers else data[:90]
        print(f"{'OK ' if v == 'ok' else 'BAD'} {name:62} {took:5.1f}s {sts} {v} body={body!r} extra={rest[:40]!r}")
    print("RESULT", bad, "bad")


if __name__ == "__main__":
    main()
