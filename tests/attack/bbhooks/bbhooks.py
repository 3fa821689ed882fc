#!/usr/bin/env python3
"""Black-box grader of the webhooks, from the contract documents alone.

    /tmp/bbhooks-venv/bin/python tests/attack/bbhooks/bbhooks.py [--bin /work/bin/partner-server-main]
        [--only A,B,C,D]

Needs `pip install stripe standardwebhooks requests` (the official SDKs verify the signatures),
PostgreSQL on 127.0.0.1:5432 (databases pp_bbhooks_a..d are dropped and re-created), openssl,
and ports 18550-18599. Four servers, one at a time:
  A  schedule 1s,2s,3s,4s,5s,6s, timeout 2s, private addresses allowed (most checks)
  B  schedule 2s x6, PARTNER_WEBHOOK_DISABLE_AFTER=5s, PARTNER_WEBHOOK_SECRET_OVERLAP=0
  C  defaults, private addresses NOT allowed (URL validation at save)
  D  defaults (10s,1m,... schedule; 10s timeout), private addresses allowed
Writes out/results.json next to this file; RESULTS.md is written by hand from it.
"""

import argparse
import base64
import datetime as dt
import email.utils
import json
import os
import subprocess
import sys
import time
import uuid

import standardwebhooks
import stripe

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from lib import (TS_RE, UUID_RE, Blackhole, PlainHttp, Receiver, TcpProxy, Results, Server, body_json, hdr, hdr1,  # noqa: E402
                 parse_ts, wait_until)

ALL4 = ["lead.created", "lead.enriched", "order.created", "payout.created"]
LEAD_KEYS = {"id", "partnerId", "subId", "firstName", "lastName", "email", "phone", "origin", "location",
             "questionId", "createdAt", "updatedAt", "isTest", "testSource"}
ORDER_KEYS = {"orderId", "createdDate", "subAccount", "product", "amount", "commission", "status", "isTest"}
PAYOUT_KEYS = {"recordId", "email", "createdAt", "payoutDate", "payoutAmount", "status"}
DELIVERY_KEYS = {"id", "endpointId", "event", "status", "attempts", "nextAttemptAt", "lastAttemptAt",
                 "lastStatusCode", "lastError", "createdAt", "deliveredAt"}
ATTEMPT_KEYS = {"attemptedAt", "statusCode", "durationMs", "error"}
ENDPOINT_KEYS = {"id", "url", "events", "leadCreatedDelay", "customHeader", "hasSecret", "createdAt", "status",
                 "disabledReason", "disabledAt", "previousSecretExpiresAt"}
RECV_PORT = 18560
DEAD_PORT = 18599  # nothing listens here: connection refused
OUT = os.path.join(HERE, "out")
res = Results(os.path.join(OUT, "results.json"))
check, note = res.check, res.note


# ----------------------------------------------------------------------------- signature helpers
def stripe_ok(entry, secret, tolerance=300):
    try:
        stripe.WebhookSignature.verify_header(entry["body"].decode(), hdr1(entry, "X-Partner-Signature"), secret, tolerance)
        stripe.Webhook.construct_event(entry["body"], hdr1(entry, "X-Partner-Signature"), secret, tolerance=tolerance)
        return True
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def sw_ok(entry, secret):
    h = {k: v for k, v in entry["headers"] if k.lower() in ("webhook-id", "webhook-timestamp", "webhook-signature")}
    try:
        standardwebhooks.Webhook(secret).verify(entry["body"], h)
        return True
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def sig_parts(entry):
    h = hdr1(entry, "X-Partner-Signature")
    if h is None:
        return None, []
    items = [p.split("=", 1) for p in h.split(",")]
    t = [v for k, v in items if k == "t"]
    return (int(t[0]) if t else None), [v for k, v in items if k == "v1"]


def fire_payout(S, pid, amount=10):
    r = S.payout(pid, amount)
    assert r.status_code == 201, r.text
    return r.json()["data"], time.time()


def one_delivery(c, eid, event=None, timeout=10):
    def get():
        q = {"endpointId": eid}
        if event:
            q["event"] = event
        d = c.deliveries(**q)["data"]
        return d
    return wait_until(get, timeout)


def gaps(entries):
    return [round(b["t"] - a["t"], 2) for a, b in zip(entries, entries[1:])]


# ============================================================================= server A
def crud(S, R):
    res.sec("A1 endpoint CRUD and validation (partner API)")
    c = S.partner("PCRUD")
    url = R.url("crud")
    r = c.call("POST", "/api/v1/webhook-endpoints", {"url": url.replace("https://", "http://"), "events": ALL4})
    check("http:// URL rejected 400 invalid_request", r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text)
    r = c.call("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ALL4, "secret": True})
    check("create with secret: 201", r.status_code == 201, r.text)
    ep = r.json()["data"]
    check("create answer: endpoint fields + secret", set(ep) == ENDPOINT_KEYS | {"secret"}, sorted(set(ep) ^ (ENDPOINT_KEYS | {"secret"})))
    sec = ep.get("secret", "")
    check("secret is whsec_ + std base64 of 24 bytes (32 chars)", sec.startswith("whsec_") and len(sec) == 38 and len(base64.b64decode(sec[6:], validate=True)) == 24, sec[:10])
    check("create: hasSecret true, status enabled, reasons null", ep.get("hasSecret") is True and ep.get("status") == "enabled"
          and ep.get("disabledReason") is None and ep.get("disabledAt") is None and ep.get("previousSecretExpiresAt") is None, ep)
    check("create: createdAt ms Z", TS_RE.match(ep.get("createdAt", "")), ep.get("createdAt"))
    check("create: leadCreatedDelay/customHeader null, events echoed", ep.get("leadCreatedDelay") is None and ep.get("customHeader") is None and sorted(ep.get("events", [])) == sorted(ALL4), ep)
    check("create answer carries rate-limit headers", all(h in r.headers for h in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")), dict(r.headers))
    check("create answer Cache-Control no-store", "no-store" in r.headers.get("Cache-Control", ""), r.headers.get("Cache-Control"))
    lst = c.call("GET", "/api/v1/webhook-endpoints").json()["data"]
    check("list: no secret field, same keys", all(set(e) == ENDPOINT_KEYS for e in lst), [sorted(e) for e in lst])
    r = c.call("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ["order.created"]})
    check("create without secret: hasSecret false, no secret key", r.status_code == 201 and r.json()["data"]["hasSecret"] is False and "secret" not in r.json()["data"], r.text)
    nosec = r.json()["data"]

    bad = [
        ("events empty", {"url": url, "events": []}),
        ("events missing", {"url": url}),
        ("events unknown", {"url": url, "events": ["lead.deleted"]}),
        ("events ping", {"url": url, "events": ["ping"]}),
        ("url missing", {"events": ALL4}),
        ("url not a URL", {"url": "not a url", "events": ALL4}),
        ("url ftp", {"url": "ftp://127.0.0.1/x", "events": ALL4}),
        ("delay 2m", {"url": url, "events": ALL4, "leadCreatedDelay": "2m"}),
        ("delay 60s", {"url": url, "events": ALL4, "leadCreatedDelay": "60s"}),
        ("delay 1M", {"url": url, "events": ALL4, "leadCreatedDelay": "1M"}),
        ("delay number", {"url": url, "events": ALL4, "leadCreatedDelay": 60}),
    ]
    reserved = ["Content-Type", "content-length", "HOST", "Transfer-Encoding", "Connection", "User-Agent", "Authorization",
                "X-Partner-Signature", "x-partner-anything", "X_Partner_Event", "webhook-id", "webhook-timestamp", "Webhook-Signature",
                "webhook-other", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade", "Expect", "Content-Encoding",
                "Proxy-Authorization", "Cookie", "Forwarded", "X-Forwarded-For", "x_forwarded_host", "X-Real-IP", "content_type"]
    for n in reserved:
        bad.append((f"customHeader reserved {n}", {"url": url, "events": ALL4, "customHeader": {"name": n, "value": "v"}}))
    bad += [
        ("customHeader name 65 chars", {"url": url, "events": ALL4, "customHeader": {"name": "X" * 65, "value": "v"}}),
        ("customHeader name with space", {"url": url, "events": ALL4, "customHeader": {"name": "X Bad", "value": "v"}}),
        ("customHeader name with colon", {"url": url, "events": ALL4, "customHeader": {"name": "X:Bad", "value": "v"}}),
        ("customHeader name empty", {"url": url, "events": ALL4, "customHeader": {"name": "", "value": "v"}}),
        ("customHeader value 1025", {"url": url, "events": ALL4, "customHeader": {"name": "X-Ok", "value": "a" * 1025}}),
        ("customHeader value newline", {"url": url, "events": ALL4, "customHeader": {"name": "X-Ok", "value": "a\r\nX-Evil: 1"}}),
        ("customHeader value tab", {"url": url, "events": ALL4, "customHeader": {"name": "X-Ok", "value": "a\tb"}}),
        ("customHeader value non-ASCII", {"url": url, "events": ALL4, "customHeader": {"name": "X-Ok", "value": "caf\u00e9"}}),
        ("customHeader missing value", {"url": url, "events": ALL4, "customHeader": {"name": "X-Ok"}}),
    ]
    for name, body in bad:
        r = c.call("POST", "/api/v1/webhook-endpoints", body)
        check(f"reject {name}: 400 invalid_request", r.status_code == 400 and r.json().get("error", {}).get("code") == "invalid_request", f"{r.status_code} {r.text[:200]}")
    good = [
        ("delay 1m", {"leadCreatedDelay": "1m"}), ("delay 5m", {"leadCreatedDelay": "5m"}), ("delay 1h", {"leadCreatedDelay": "1h"}),
        ("customHeader name 64 chars, value 1024", {"customHeader": {"name": "X" * 64, "value": "b" * 1024}}),
    ]
    made = []
    for name, extra in good:
        r = c.call("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ALL4, **extra})
        ok = r.status_code == 201
        if ok:
            made.append(r.json()["data"])
            if "leadCreatedDelay" in extra:
                ok = r.json()["data"]["leadCreatedDelay"] == extra["leadCreatedDelay"]
        check(f"accept {name}", ok, f"{r.status_code} {r.text[:200]}")
    # custom header write-only: value on the answer that set it; valueHint elsewhere
    r = c.call("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ALL4, "customHeader": {"name": "X-Api-Key", "value": "abcdefghijkl"}})
    ch = r.json()["data"]
    made.append(ch)
    check("POST answer carries customHeader {name, value}", ch.get("customHeader") == {"name": "X-Api-Key", "value": "abcdefghijkl"}, ch.get("customHeader"))
    got = c.endpoint(ch["id"])
    check("list carries customHeader {name, valueHint: …ijkl}", got and got["customHeader"] == {"name": "X-Api-Key", "valueHint": "\u2026ijkl"}, got and got["customHeader"])
    n = len(c.call("GET", "/api/v1/webhook-endpoints").json()["data"])
    # 10 per account
    while n < 10:
        r = c.call("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ["payout.created"]})
        assert r.status_code == 201, r.text
        n += 1
    r = c.call("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ["payout.created"]})
    check("11th endpoint 400 invalid_request", r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", f"{r.status_code} {r.text}")
    # PATCH
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ch['id']}", {"events": ["order.created"]})
    check("PATCH events: 200", r.status_code == 200, r.text)
    d = r.json().get("data", {})
    check("PATCH events writes only events (url, header kept)", d.get("events") == ["order.created"] and d.get("url") == url and d.get("customHeader", {}).get("name") == "X-Api-Key", d)
    check("PATCH not naming customHeader answers valueHint", d.get("customHeader") == {"name": "X-Api-Key", "valueHint": "\u2026ijkl"}, d.get("customHeader"))
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ch['id']}", {"customHeader": {"name": "X-Short", "value": "12345678"}})
    check("PATCH setting customHeader answers its value", r.status_code == 200 and r.json()["data"]["customHeader"] == {"name": "X-Short", "value": "12345678"}, r.text)
    got = c.endpoint(ch["id"])
    check("valueHint of an 8-char value is just …", got["customHeader"] == {"name": "X-Short", "valueHint": "\u2026"}, got["customHeader"])
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ch['id']}", {"customHeader": {"name": "X-Nine", "value": "123456789"}})
    got = c.endpoint(ch["id"])
    check("valueHint of a 9-char value is …6789", got["customHeader"] == {"name": "X-Nine", "valueHint": "\u20266789"}, got["customHeader"])
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ch['id']}", {"url": url.replace("https", "http")})
    check("PATCH http:// url 400", r.status_code == 400, r.text)
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ch['id']}", {"customHeader": {"name": "Cookie", "value": "x"}})
    check("PATCH reserved header name 400", r.status_code == 400, r.text)
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ch['id']}", {"events": []})
    check("PATCH empty events 400", r.status_code == 400, r.text)
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ch['id']}", {"leadCreatedDelay": "1h"})
    check("PATCH leadCreatedDelay 1h then null", r.status_code == 200 and r.json()["data"]["leadCreatedDelay"] == "1h"
          and c.call("PATCH", f"/api/v1/webhook-endpoints/{ch['id']}", {"leadCreatedDelay": None}).json()["data"]["leadCreatedDelay"] is None, r.text)
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ch['id']}", {"customHeader": None})
    check("PATCH customHeader null removes it", r.status_code == 200 and r.json()["data"]["customHeader"] is None, r.text)
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{uuid.uuid4()}", {"events": ALL4})
    check("PATCH unknown id 404 not_found", r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text)
    r = c.call("PATCH", "/api/v1/webhook-endpoints/not-a-uuid", {"events": ALL4})
    note("PATCH malformed id", f"{r.status_code} {r.text[:120]}")
    r = c.call("DELETE", f"/api/v1/webhook-endpoints/{ch['id']}")
    check("DELETE 200 {data:{ok:true}}", r.status_code == 200 and r.json() == {"data": {"ok": True}}, r.text)
    check("DELETE removes it from the list", c.endpoint(ch["id"]) is None)
    r = c.call("DELETE", f"/api/v1/webhook-endpoints/{ch['id']}")
    check("DELETE again 404", r.status_code == 404, r.text)
    # idempotency key on create
    c2 = S.partner("PIDEM")
    k = {"Idempotency-Key": "bbhooks-create-1"}
    r1 = c2.call("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ALL4, "secret": True}, headers=dict(k))
    r2 = c2.call("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ALL4, "secret": True}, headers=dict(k))
    check("Idempotency-Key replay of create: same status/body, Idempotent-Replayed", r1.status_code == 201 and r2.status_code == 201
          and r1.json() == r2.json() and r2.headers.get("Idempotent-Replayed") == "true", f"{r2.status_code} {r2.headers.get('Idempotent-Replayed')}")
    check("Idempotency-Key replay created one endpoint", len(c2.call("GET", "/api/v1/webhook-endpoints").json()["data"]) == 1)
    r3 = c2.call("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ["order.created"]}, headers=dict(k))
    check("same key other body 422 idempotency_key_reused", r3.status_code == 422 and r3.json()["error"]["code"] == "idempotency_key_reused", r3.text)
    r = c2.call("POST", "/api/v1/webhook-endpoints", {"url": "https://user:pw@127.0.0.1:%d/r/crud" % RECV_PORT, "events": ALL4})
    note("URL with userinfo", f"{r.status_code} {r.text[:160]}")
    r = c2.call("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ["order.created", "order.created"]})
    note("duplicate event names", f"{r.status_code} {r.text[:160]}")
    r = c2.call("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ALL4, "bogus": 1})
    note("unknown body field on partner POST", f"{r.status_code} {r.text[:160]}")
    return nosec


def payloads(S, R, ctx):
    res.sec("A2 event payloads, headers, Stripe and Standard Webhooks signatures")
    c = S.partner("PPAY")
    ctx["PPAY"] = c
    r = c.call("POST", "/api/v1/sub-accounts", {"subId": "7", "nickname": "Staff Seven"})
    assert r.status_code == 201, r.text
    R.set("pay-all")
    R.set("pay-orders")
    e_all = c.mkep(R.url("pay-all"), customHeader={"name": "X-Custom-Token", "value": "cust-value-123456"})
    e_ord = c.mkep(R.url("pay-orders"), events=["order.created"], secret=False)
    ctx.update(e_all=e_all, e_ord=e_ord)
    s0 = e_all["secret"]
    co = S.partner("PORIG")
    R.set("orig")
    co.mkep(R.url("orig"), events=["lead.created"])
    for i, origin in enumerate(("public-link", "sub-account-form", "some-new-source")):
        S.lead("PORIG", email=f"o{i}@example.com", origin=origin)
        got = R.wait("orig", i + 1, 5)
        check(f"origin {origin} is webhook-enabled: lead.created sent", len(got) > i and body_json(got[i])["data"]["lead"]["origin"] == origin,
              len(got) > i and body_json(got[i])["data"]["lead"])
    t0 = time.time()
    l1 = S.lead("PPAY", subId="7", email="l1@example.com").json()["data"]
    lat = R.wait("pay-all", 1, 5)
    check("lead.created arrives promptly (< 2 s after commit)", lat and lat[0]["t"] - t0 < 2.0, lat and round(lat[0]["t"] - t0, 3))
    l2 = S.lead("PPAY", email="l2@example.com", emailConsent=False, smsConsent=False).json()["data"]
    r = S.lead("PPAY", origin="headless_intake", location="Weight Loss", email="l3@example.com")
    l3 = r.json()["data"]
    l4r = S.lead("PPAY", email="l4@example.com", phone=None)
    l4 = l4r.json()["data"]
    r = S.lead("PPAY", email="l5@example.com", isTest=True, testSource="simulation")
    check("isTest on a webhook-enabled origin: 400", r.status_code == 400, r.text[:200])
    S.opcall("PATCH", f"/internal/v1/leads/{l1['id']}", {"phone": "+1 555 0199"})
    S.opcall("PATCH", f"/internal/v1/leads/{l1['id']}", {"phone": "+1 555 0199"})  # same: no event
    S.opcall("PATCH", f"/internal/v1/leads/{l3['id']}", {"phone": "+1 555 0333"})  # headless: no event
    S.opcall("PATCH", f"/internal/v1/leads/{l4['id']}", {"phone": "+1 555 0144"})
    S.opcall("PATCH", f"/internal/v1/leads/{l2['id']}", {"phone": "+1 555 0122"})
    o1 = S.order("PPAY", "ORD-1001", subId="7", customerName="Carl Cust", customerEmail="carl@example.com")
    check("order ingest 201", o1.status_code == 201, o1.text)
    S.order("PPAY", "ORD-1002", isTest=True, source="provider")
    p1, _ = fire_payout(S, "PPAY", 12.5)
    es = R.wait("pay-all", 9, 15)
    time.sleep(2.0)
    es = R.got("pay-all")
    eo = R.got("pay-orders")
    kinds = [body_json(e)["event"] for e in es]
    check("subscribed-to-all endpoint got exactly 3 lead.created, 3 lead.enriched, 2 order.created, 1 payout.created",
          sorted(kinds) == sorted(["lead.created"] * 3 + ["lead.enriched"] * 3 + ["order.created"] * 2 + ["payout.created"]), kinds)
    check("order-only endpoint got exactly the 2 order.created", sorted(body_json(e)["event"] for e in eo) == ["order.created"] * 2, [body_json(e)["event"] for e in eo])
    ids = set()
    for e in es:
        b = body_json(e)
        ev = b["event"]
        tag = f"{ev} {b.get('id', '')[-6:]}"
        check(f"{tag}: body keys exactly id,event,created_at,data", set(b) == {"id", "event", "created_at", "data"}, sorted(b))
        check(f"{tag}: Content-Type application/json", (hdr1(e, "Content-Type") or "").split(";")[0].strip() == "application/json", hdr1(e, "Content-Type"))
        check(f"{tag}: X-Partner-Event = event", hdr(e, "X-Partner-Event") == [ev], hdr(e, "X-Partner-Event"))
        check(f"{tag}: X-Partner-Delivery = body id (UUID)", hdr(e, "X-Partner-Delivery") == [b["id"]] and UUID_RE.match(b["id"]), hdr(e, "X-Partner-Delivery"))
        check(f"{tag}: X-Partner-Event-Id is a UUID", UUID_RE.match(hdr1(e, "X-Partner-Event-Id") or ""), hdr1(e, "X-Partner-Event-Id"))
        check(f"{tag}: created_at ms Z", TS_RE.match(b["created_at"]), b["created_at"])
        check(f"{tag}: custom header sent", hdr(e, "X-Custom-Token") == ["cust-value-123456"], hdr(e, "X-Custom-Token"))
        t, v1 = sig_parts(e)
        check(f"{tag}: X-Partner-Signature t=<unix>,v1=<64 hex> (one v1)", t is not None and len(v1) == 1 and len(v1[0]) == 64
              and all(ch in "0123456789abcdef" for ch in v1[0]), hdr1(e, "X-Partner-Signature"))
        check(f"{tag}: t within 5 s of receipt", t is not None and abs(e["t"] - t) < 5, (t, e["t"]))
        check(f"{tag}: Stripe SDK verifies (tolerance 300)", stripe_ok(e, s0) is True, stripe_ok(e, s0))
        check(f"{tag}: Stripe SDK rejects a wrong secret", stripe_ok(e, "whsec_" + base64.b64encode(os.urandom(24)).decode()) is not True)
        check(f"{tag}: webhook-id = delivery id, webhook-timestamp = t", hdr(e, "webhook-id") == [b["id"]] and hdr(e, "webhook-timestamp") == [str(t)],
              (hdr(e, "webhook-id"), hdr(e, "webhook-timestamp")))
        check(f"{tag}: standardwebhooks verifies", sw_ok(e, s0) is True, sw_ok(e, s0))
        check(f"{tag}: webhook-signature has one v1", len((hdr1(e, "webhook-signature") or "").split(" ")) == 1, hdr1(e, "webhook-signature"))
        ids.add(b["id"])
        d = b["data"]
        if ev in ("lead.created", "lead.enriched"):
            lead = d.get("lead", {})
            check(f"{tag}: data.lead has exactly the LeadRow fields", set(lead) == LEAD_KEYS, sorted(set(lead) ^ LEAD_KEYS))
            check(f"{tag}: lead createdAt/updatedAt ms Z", TS_RE.match(lead.get("createdAt", "")) and TS_RE.match(lead.get("updatedAt", "")), lead)
            check(f"{tag}: lead isTest false, testSource null", lead.get("isTest") is False and lead.get("testSource") is None, lead)
            if ev == "lead.created":
                check(f"{tag}: data keys exactly lead", set(d) == {"lead"}, sorted(d))
            else:
                check(f"{tag}: data keys exactly lead, previousPhone, currentPhone", set(d) == {"lead", "previousPhone", "currentPhone"}, sorted(d))
        elif ev == "order.created":
            check(f"{tag}: data keys exactly source, order", set(d) == {"source", "order"}, sorted(d))
            check(f"{tag}: order has exactly the spec's Order fields (no customer PII)", set(d.get("order", {})) == ORDER_KEYS, sorted(set(d.get("order", {})) ^ ORDER_KEYS))
        elif ev == "payout.created":
            check(f"{tag}: data keys exactly payout", set(d) == {"payout"}, sorted(d))
            check(f"{tag}: payout has exactly the Payout fields", set(d.get("payout", {})) == PAYOUT_KEYS, sorted(set(d.get("payout", {})) ^ PAYOUT_KEYS))
    check("every delivery id distinct", len(ids) == len(es))
    by = {}
    for e in es:
        b = body_json(e)
        by.setdefault(b["event"], []).append(b)
    lc = {b["data"]["lead"]["email"]: b["data"]["lead"] for b in by.get("lead.created", [])}
    L1 = lc.get("l1@example.com")
    check("lead.created L1: fields as ingested (subId 7, origin, location, questionId null)", L1 and L1["id"] == l1["id"] and L1["partnerId"] == "PPAY"
          and L1["subId"] == "7" and L1["origin"] == "managed-website" and L1["location"] == "Austin, TX" and L1["questionId"] is None
          and L1["firstName"] == "Ann" and L1["phone"] == "+1 555 0100", L1)
    check("lead.created L1 equals the API's LeadRow at creation", L1 == l1, (L1, l1))
    L2 = lc.get("No Consent")
    check("lead.created without consents: email and phone 'No Consent'", L2 and L2["phone"] == "No Consent", list(lc))
    L4 = [v for v in lc.values() if v["id"] == l4["id"]]
    note("lead.created without phone: phone field", L4 and repr(L4[0].get("phone", "<absent>")))
    note("lead.created without sub-account: subId", L4 and repr(L4[0].get("subId")))
    enr = {b["data"]["lead"]["id"]: b["data"] for b in by.get("lead.enriched", [])}
    d1 = enr.get(l1["id"])
    check("lead.enriched L1: previousPhone old, currentPhone new, lead.phone new", d1 and d1["previousPhone"] == "+1 555 0100"
          and d1["currentPhone"] == "+1 555 0199" and d1["lead"]["phone"] == "+1 555 0199", d1)
    d4 = enr.get(l4["id"])
    check("lead.enriched L4 (phone filled in): previousPhone empty string, currentPhone new", d4 and d4["previousPhone"] == "" and d4["currentPhone"] == "+1 555 0144", d4)
    d2 = enr.get(l2["id"])
    check("lead.enriched without SMS consent: previous/current 'No Consent'", d2 and d2["previousPhone"] == "No Consent" and d2["currentPhone"] == "No Consent", d2)
    check("no event for headless_intake lead (create or phone)", all(b["data"]["lead"]["id"] != l3["id"] for k in ("lead.created", "lead.enriched") for b in by.get(k, [])))
    orders = {b["data"]["order"]["orderId"]: b["data"] for b in by.get("order.created", [])}
    O1 = orders.get("ORD-1001")
    check("order.created O1: source, subAccount nickname, amount, commission, status, createdDate", O1 and O1["source"] == "shop"
          and O1["order"]["subAccount"] == "Staff Seven" and O1["order"]["amount"] == 199.5 and O1["order"]["commission"] == 40
          and O1["order"]["status"] == "shipped" and O1["order"]["isTest"] is False and O1["order"]["product"] == "Semaglutide"
          and TS_RE.match(O1["order"]["createdDate"]), O1)
    O2 = orders.get("ORD-1002")
    check("order.created test order: isTest true, source provider, subAccount empty", O2 and O2["order"]["isTest"] is True and O2["source"] == "provider"
          and O2["order"]["subAccount"] == "", O2)
    api_orders = {o["orderId"]: o for o in c.call("GET", "/api/v1/orders").json()["data"]}
    check("order.created order equals GET /orders row", O1 and O1["order"] == api_orders.get("ORD-1001"), (O1 and O1["order"], api_orders.get("ORD-1001")))
    P = by.get("payout.created", [{}])[0].get("data", {}).get("payout", {})
    today = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    check("payout.created: recordId, email, createdAt today, payoutDate, payoutAmount 12.5, status", P.get("recordId") == p1["recordId"]
          and P.get("email") == "ppay@example.com" and P.get("createdAt") == today and P.get("payoutDate") == "2026-11-20"
          and P.get("payoutAmount") == 12.5 and P.get("status") == "paid", P)
    # no-secret endpoint
    for e in eo:
        check("no-secret endpoint: no X-Partner-Signature, no webhook-signature", not hdr(e, "X-Partner-Signature") and not hdr(e, "webhook-signature"),
              [k for k, _ in e["headers"]])
    ev_ids = {}
    for e in es + eo:
        b = body_json(e)
        if b["event"] == "order.created":
            ev_ids.setdefault(b["data"]["order"]["orderId"], set()).add((hdr1(e, "X-Partner-Event-Id"), b["id"]))
    check("one event, two endpoints: same X-Partner-Event-Id, different delivery ids",
          all(len({x for x, _ in v}) == 1 and len({y for _, y in v}) == 2 for v in ev_ids.values()), ev_ids)
    # events feed
    feed = c.call("GET", "/api/v1/events?limit=200")
    check("events feed 200", feed.status_code == 200, feed.text[:200])
    fd = feed.json().get("data", [])
    fids = [f["id"] for f in fd]
    hdr_ids = {hdr1(e, "X-Partner-Event-Id") for e in es}
    check("events feed holds exactly the 9 events (no headless)", set(fids) == hdr_ids and len(fids) == 9, (len(fids), len(hdr_ids)))
    check("events feed oldest first", [f["created_at"] for f in fd] == sorted(f["created_at"] for f in fd))
    fo = {f["data"]["order"]["orderId"]: f for f in fd if f["event"] == "order.created"}
    check("feed order.created data equals webhook data", O1 and fo.get("ORD-1001", {}).get("data") == O1, fo.get("ORD-1001"))
    check("feed event has keys id,event,created_at,data", all(set(f) == {"id", "event", "created_at", "data"} for f in fd))
    ctx["evid_o1"] = fo.get("ORD-1001", {}).get("id")
    # delivery log ids = X-Partner-Delivery
    log = c.deliveries(endpointId=e_all["id"], limit=200)["data"]
    check("delivery log ids = X-Partner-Delivery values", {d["id"] for d in log} == ids, (len(log), len(ids)))
    check("delivery log: all delivered, attempts 1, lastStatusCode 200, deliveredAt set", all(d["status"] == "delivered" and d["attempts"] == 1
          and d["lastStatusCode"] == 200 and d["deliveredAt"] and d["lastError"] is None for d in log), log[:2])
    # ping
    r = c.call("POST", f"/api/v1/webhook-endpoints/{e_all['id']}/test")
    check("test: 202 {data: WebhookDelivery} event ping pending", r.status_code == 202 and r.json()["data"]["event"] == "ping"
          and set(r.json()["data"]) == DELIVERY_KEYS and r.json()["data"]["status"] == "pending", r.text)
    pe = R.wait("pay-all", 1, 10, pred=lambda e: body_json(e)["event"] == "ping")
    if check("ping delivered", pe):
        b = body_json(pe[0])
        check("ping body {id, event: ping, created_at, data: {endpointId}}", set(b) == {"id", "event", "created_at", "data"} and b["event"] == "ping"
              and b["data"] == {"endpointId": e_all["id"]} and b["id"] == r.json()["data"]["id"], b)
        check("ping signed (Stripe) and SW-signed", stripe_ok(pe[0], s0) is True and sw_ok(pe[0], s0) is True)
        check("ping: X-Partner-Event ping, custom header", hdr(pe[0], "X-Partner-Event") == ["ping"] and hdr(pe[0], "X-Custom-Token") == ["cust-value-123456"])
        note("ping X-Partner-Event-Id", hdr(pe[0], "X-Partner-Event-Id"))
    fd2 = c.call("GET", "/api/v1/events?limit=200").json()["data"]
    check("ping never in the events feed", all(f["event"] != "ping" for f in fd2) and len(fd2) == 9, len(fd2))
    r = c.call("GET", "/api/v1/webhook-deliveries?event=ping")
    check("delivery log filter event=ping", r.status_code == 200 and [d["event"] for d in r.json()["data"]] == ["ping"], r.text[:300])
    ctx["pay_entries"] = es
    n = len(R.got("pay-all"))
    S.opcall("POST", "/internal/v1/analytics-events", {"runId": "bbrun1", "partnerId": "PPAY", "event": "order_completed", "product": "Semaglutide",
                                                        "amount": 99, "occurredAt": "2026-11-27T10:00:00.000Z", "testSource": "simulation"})
    time.sleep(2)
    sim = [body_json(e) for e in R.got("pay-all")[n:]]
    note("simulated order TEST-SIM-bbrun1 (listed by GET /orders): order.created sent?", [b["event"] for b in sim] or "none")


def rotation(S, R, ctx):
    res.sec("A3 secret rotation with overlap")
    c = S.partner("PROT")
    R.set("rot")
    ep = c.mkep(R.url("rot"), events=["payout.created"])
    s0 = ep["secret"]

    def fire_get():
        n = len(R.got("rot"))
        fire_payout(S, "PROT")
        es = R.wait("rot", n + 1, 10)
        return es[n] if len(es) > n else None

    e = fire_get()
    check("before rotation: one v1, verifies with s0", e and len(sig_parts(e)[1]) == 1 and stripe_ok(e, s0) is True)
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"secret": True})
    d = r.json().get("data", {})
    s1 = d.get("secret")
    check("rotate: 200 with a new whsec_ secret", r.status_code == 200 and s1 and s1 != s0 and s1.startswith("whsec_"), r.text[:200])
    pse = d.get("previousSecretExpiresAt")
    check("rotate: previousSecretExpiresAt ~ now + 24h", pse and abs(parse_ts(pse) - (time.time() + 86400)) < 120, pse)
    g = c.endpoint(ep["id"])
    check("GET after rotation: previousSecretExpiresAt shown, no secret", g and g.get("previousSecretExpiresAt") == pse and "secret" not in g, g)
    e = fire_get()
    if check("delivery after rotation arrives", e):
        t, v1 = sig_parts(e)
        check("overlap: X-Partner-Signature t=..,v1=<new>,v1=<old>", len(v1) == 2, hdr1(e, "X-Partner-Signature"))
        check("overlap: Stripe SDK accepts the new secret", stripe_ok(e, s1) is True, stripe_ok(e, s1))
        check("overlap: Stripe SDK accepts the old secret", stripe_ok(e, s0) is True, stripe_ok(e, s0))
        import hmac as _h
        import hashlib as _hl
        want_new = _h.new(s1.encode(), f"{t}.".encode() + e["body"], _hl.sha256).hexdigest()
        check("overlap: first v1 is the new secret's", v1 and v1[0] == want_new)
        ws = (hdr1(e, "webhook-signature") or "").split(" ")
        check("overlap: webhook-signature has two v1 values", len(ws) == 2, ws)
        check("overlap: standardwebhooks accepts new and old", sw_ok(e, s1) is True and sw_ok(e, s0) is True, (sw_ok(e, s1), sw_ok(e, s0)))
        key = base64.b64decode(s1[6:])
        want = "v1," + base64.b64encode(_h.new(key, f"{hdr1(e, 'webhook-id')}.{t}.".encode() + e["body"], _hl.sha256).digest()).decode()
        check("overlap: webhook-signature lists the current secret's first", ws[0] == want, ws)
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"secret": True})
    s2 = r.json()["data"]["secret"]
    e = fire_get()
    if e:
        check("second rotation: two v1 = s2 and s1", len(sig_parts(e)[1]) == 2 and stripe_ok(e, s2) is True and stripe_ok(e, s1) is True,
              (stripe_ok(e, s2), stripe_ok(e, s1)))
        check("second rotation: s0 no longer accepted (Stripe and SW)", stripe_ok(e, s0) is not True and sw_ok(e, s0) is not True)
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"secret": True, "expirePrevious": True})
    d = r.json().get("data", {})
    s3 = d.get("secret")
    check("expirePrevious: 200, new secret, previousSecretExpiresAt null", r.status_code == 200 and s3 and d.get("previousSecretExpiresAt") is None, r.text[:300])
    e = fire_get()
    if e:
        check("after expirePrevious: exactly one v1, verifies with s3", len(sig_parts(e)[1]) == 1 and stripe_ok(e, s3) is True, hdr1(e, "X-Partner-Signature"))
        check("after expirePrevious: s2 rejected (Stripe, SW)", stripe_ok(e, s2) is not True and sw_ok(e, s2) is not True)
        check("after expirePrevious: one webhook-signature value", len((hdr1(e, "webhook-signature") or "").split(" ")) == 1)
    # a secret added to an endpoint that had none
    R.set("rot-nosec")
    ep2 = c.mkep(R.url("rot-nosec"), events=["payout.created"], secret=False)
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep2['id']}", {"secret": True})
    s = r.json()["data"].get("secret")
    check("secret added later: hasSecret true, previousSecretExpiresAt null", r.json()["data"]["hasSecret"] is True and r.json()["data"]["previousSecretExpiresAt"] is None, r.text[:300])
    fire_payout(S, "PROT")
    es = R.wait("rot-nosec", 1, 10)
    if es:
        check("secret added later: one v1, Stripe + SW verify", len(sig_parts(es[0])[1]) == 1 and stripe_ok(es[0], s) is True and sw_ok(es[0], s) is True,
              hdr1(es[0], "X-Partner-Signature"))
    R.got("rot")  # drain
    # rotation between two attempts of one delivery: the retry is signed with the new secret
    R.set("rot-retry", seq=[500, 200])
    ep3 = c.mkep(R.url("rot-retry"), events=["payout.created"])
    fire_payout(S, "PROT")
    R.wait("rot-retry", 1, 10)
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep3['id']}", {"secret": True})
    n1 = r.json()["data"]["secret"]
    es = R.wait("rot-retry", 2, 10)
    if check("retry after a rotation arrives", len(es) == 2):
        check("retry after a rotation: signed with the new secret and the old", stripe_ok(es[1], n1) is True and stripe_ok(es[1], ep3["secret"]) is True,
              hdr1(es[1], "X-Partner-Signature"))
        check("retry after a rotation: same body bytes, same delivery id", es[0]["body"] == es[1]["body"]
              and hdr(es[0], "X-Partner-Delivery") == hdr(es[1], "X-Partner-Delivery"))


RETRY = [1, 2, 3, 4, 5, 6]


def retries_start(S, R, ctx):
    res.sec("A4 retries, backoff, errors (setup)")
    now_http = lambda s: email.utils.formatdate(time.time() + s, usegmt=True)  # noqa: E731
    sc = {
        "r500": dict(b=dict(status=500, body=b"RECEIVERBODYSECRET"), url=None),
        "rto": dict(b=dict(status=200, delay=3.5), url=None),
        "rred": dict(b=dict(status=302, headers={"Location": R.url("redtarget")}), url=None),
        "rref": dict(b=None, url=f"https://127.0.0.1:{DEAD_PORT}/r/rref?token=SUPERSECRETQS"),
        "r400": dict(b=dict(status=400), url=None),
        "r404": dict(b=dict(status=404), url=None),
        "r204": dict(b=dict(status=204, body=b""), url=None),
        "r201": dict(b=dict(status=201), url=None),
        "r299": dict(b=dict(status=299), url=None),
        "rseq": dict(b=dict(seq=[500, 500, 200]), url=None),
        "ra503": dict(b=dict(seq=[503, 200], headers={"Retry-After": "5"}), url=None),
        "ra429d": dict(b=dict(seq=[429, 200], headers=lambda: {"Retry-After": now_http(6)}), url=None),
        "ra500": dict(b=dict(seq=[500, 200], headers={"Retry-After": "5"}), url=None),
        "rasmall": dict(b=dict(seq=[500, 503, 200], headers={"Retry-After": "1"}), url=None),
        "rahuge": dict(b=dict(status=503, headers={"Retry-After": "999999"}), url=None),
        "r410": dict(b=dict(status=410), url=None),
        "rclose": dict(b=dict(status="close"), url=None),
        "rslow1": dict(b=dict(status=200, delay=1.0), url=None),
    }
    R.set("redtarget")
    made = {}
    for name, v in sc.items():
        if v["b"] is not None:
            R.set(name, **v["b"])
        c = S.partner("R" + name.upper())
        ep = c.mkep(v["url"] or R.url(name), events=["payout.created"])
        made[name] = (c, ep)
    t0 = time.time()
    for name, (c, ep) in made.items():
        fire_payout(S, c.pid)
    ctx["retry"] = made
    ctx["retry_t0"] = t0


def retries_check(S, R, ctx):
    res.sec("A4 retries, backoff, errors")
    made = ctx["retry"]

    def dl(name):
        c, ep = made[name]
        d = c.deliveries(endpointId=ep["id"])["data"]
        return d[0] if d else None

    def wait_status(name, st, timeout):
        return wait_until(lambda: (lambda d: d if d and d["status"] == st else None)(dl(name)), timeout, 0.5)

    d = wait_status("r500", "failed", 40)
    es = R.got("r500")
    check("5xx: 1 + 6 attempts then failed", d and d["attempts"] == 7 and len(es) == 7, (d, len(es)))
    g = gaps(es)
    note("measured gaps of the 1..6 s schedule (jitter visible?)", g)
    ok = len(g) == 6 and all(0.9 * s - 0.05 <= x <= 1.1 * s + 0.6 for x, s in zip(g, RETRY))
    check("5xx: gaps follow the schedule 1,2,3,4,5,6 s (+-10% jitter)", ok, g)
    if d:
        check("5xx: lastStatusCode 500, lastError 'status 500'", d["lastStatusCode"] == 500 and d["lastError"] == "status 500", d)
        check("failed: deliveredAt null", d["deliveredAt"] is None, d)
        note("failed delivery's nextAttemptAt", d["nextAttemptAt"])
        check("lastError never echoes the receiver's body", "RECEIVERBODYSECRET" not in json.dumps(d))
    check("every attempt: same X-Partner-Delivery and same body bytes", len({hdr1(e, "X-Partner-Delivery") for e in es}) == 1 and len({e["body"] for e in es}) == 1)
    check("every attempt: same webhook-id, webhook-timestamp = t, SW verifies", len({hdr1(e, "webhook-id") for e in es}) == 1
          and all(hdr1(e, "webhook-timestamp") == str(sig_parts(e)[0]) and sw_ok(e, made["r500"][1]["secret"]) is True for e in es))
    ts = [sig_parts(e)[0] for e in es]
    check("every attempt signed afresh: t tracks the attempt time (within 2 s)", all(t is not None and abs(e["t"] - t) <= 2 for t, e in zip(ts, es)), list(zip(ts, [round(e["t"]) for e in es])))
    c, ep = made["r500"]
    check("every attempt verifies with the Stripe SDK", all(stripe_ok(e, ep["secret"]) is True for e in es))
    full = c.delivery(d["id"]).json()["data"] if d else {}
    al = full.get("attemptLog", [])
    check("attemptLog: 7 entries, keys attemptedAt,statusCode,durationMs,error, oldest first", len(al) == 7 and all(set(a) == ATTEMPT_KEYS for a in al)
          and [a["attemptedAt"] for a in al] == sorted(a["attemptedAt"] for a in al), al[:2])
    check("attemptLog: statusCode 500, error 'status 500', durationMs integer", all(a["statusCode"] == 500 and a["error"] == "status 500"
          and isinstance(a["durationMs"], int) for a in al), al[:2])
    check("detail = list item + attemptLog", set(full) == DELIVERY_KEYS | {"attemptLog"}, sorted(full))
    d = wait_status("rto", "failed", 50)
    check("timeout: 7 attempts, failed, lastError 'timeout', lastStatusCode null", d and d["attempts"] == 7 and d["lastError"] == "timeout"
          and d["lastStatusCode"] is None, d)
    es = R.got("rto")
    check("timeout: the receiver saw 7 attempts", len(es) == 7, len(es))
    if d:
        al = made["rto"][0].delivery(d["id"]).json()["data"]["attemptLog"]
        check("timeout: attemptLog durationMs ~ 2000 (the configured timeout)", all(1800 <= a["durationMs"] <= 3000 for a in al), [a["durationMs"] for a in al])
    d = wait_status("rred", "failed", 20)
    check("redirect: not followed, 7 attempts, lastError 'redirect'", d and d["attempts"] == 7 and d["lastError"] == "redirect", d)
    check("redirect target never contacted", len(R.got("redtarget")) == 0, len(R.got("redtarget")))
    note("redirect lastStatusCode", d and d["lastStatusCode"])
    d = wait_status("rref", "failed", 20)
    check("connection refused: 7 attempts, lastError 'connection refused', lastStatusCode null", d and d["attempts"] == 7
          and d["lastError"] == "connection refused" and d["lastStatusCode"] is None, d)
    if d:
        full = made["rref"][0].delivery(d["id"]).json()["data"]
        check("lastError/attemptLog never carry the URL's query string", "SUPERSECRETQS" not in json.dumps(full), json.dumps(full)[:300])
    for n in ("r400", "r404"):
        d = wait_status(n, "failed", 20)
        check(f"{n[1:]}: retried like any non-2xx (7 attempts), lastError 'status {n[1:]}'", d and d["attempts"] == 7 and d["lastError"] == f"status {n[1:]}"
              and d["lastStatusCode"] == int(n[1:]), d)
    for n in ("r204", "r201", "r299"):
        d = wait_status(n, "delivered", 10)
        check(f"{n[1:]}: a 2xx ends it (delivered after 1 attempt)", d and d["attempts"] == 1 and len(R.got(n)) == 1, (d, len(R.got(n))))
    d = wait_status("rslow1", "delivered", 10)
    check("slow (1 s) 200 within timeout delivered once", d and d["attempts"] == 1, d)
    d = wait_status("rseq", "delivered", 20)
    es = R.got("rseq")
    check("500,500,200: delivered after 3 attempts; deliveredAt set", d and d["attempts"] == 3 and d["deliveredAt"] and len(es) == 3, d)
    if d:
        check("delivered: lastStatusCode 200, lastError null", d["lastStatusCode"] == 200 and d["lastError"] is None, d)
        al = made["rseq"][0].delivery(d["id"]).json()["data"]["attemptLog"]
        check("attemptLog of 500,500,200", [a["statusCode"] for a in al] == [500, 500, 200] and al[-1]["error"] is None, al)
    es = R.got("ra503")
    check("503 + Retry-After: 5 -> next attempt no earlier than 5 s (schedule says 1 s)", len(es) == 2 and 4.9 <= es[1]["t"] - es[0]["t"] <= 7.5, gaps(es))
    es = R.got("ra429d")
    check("429 + Retry-After HTTP date (+6 s) -> next attempt >= 5 s later", len(es) == 2 and 5.0 <= es[1]["t"] - es[0]["t"] <= 8.5, gaps(es))
    es = R.got("ra500")
    check("500 + Retry-After ignored (only 429/503): next attempt after ~1 s", len(es) == 2 and es[1]["t"] - es[0]["t"] < 2.5, gaps(es))
    es = R.got("rasmall")
    check("Retry-After shorter than the schedule: schedule wins (gaps ~1 s, ~2 s)", len(es) == 3 and 1.75 <= es[2]["t"] - es[1]["t"] <= 2.9, gaps(es))
    d = dl("rahuge")
    if d:
        na = parse_ts(d["nextAttemptAt"]) if d["nextAttemptAt"] else None
        check("Retry-After 999999 capped at 24 h", d["status"] == "pending" and na and 86400 - 120 <= na - time.time() <= 86400 + 5,
              (d, na and round(na - time.time())))
    c, ep = made["r410"]
    d = wait_status("r410", "failed", 10)
    check("410: delivery failed after one attempt", d and d["attempts"] == 1 and d["lastStatusCode"] == 410, d)
    g = c.endpoint(ep["id"])
    check("410: endpoint disabled, reason gone, disabledAt set", g and g["status"] == "disabled" and g["disabledReason"] == "gone" and TS_RE.match(g["disabledAt"] or ""), g)
    fire_payout(S, c.pid)
    time.sleep(1.5)
    check("410: no new delivery queued while disabled", len(c.deliveries(endpointId=ep["id"])["data"]) == 1 and len(R.got("r410")) == 1)
    r = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/test")
    check("test on a disabled endpoint: 400", r.status_code == 400, r.text[:200])
    r = c.call("POST", f"/api/v1/webhook-deliveries/{d['id']}/resend") if d else None
    check("resend on a disabled endpoint: 400", r is not None and r.status_code == 400, r is not None and r.text[:200])
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"enabled": True})
    check("PATCH enabled:true: enabled, reason/disabledAt null", r.status_code == 200 and r.json()["data"]["status"] == "enabled"
          and r.json()["data"]["disabledReason"] is None and r.json()["data"]["disabledAt"] is None, r.text[:300])
    time.sleep(1.0)
    check("re-enabling makes no failed delivery pending", all(x["status"] == "failed" for x in c.deliveries(endpointId=ep["id"])["data"]))
    d = wait_until(lambda: (lambda x: x if x and x["status"] == "failed" else None)(dl("rclose")), 40, 0.5)
    note("connection closed without answer: lastError / lastStatusCode", d and (d["lastError"], d["lastStatusCode"], d["attempts"]))
    ctx["r500_delivery"] = dl("r500")


def health(S, R, ctx):
    res.sec("A5 endpoint disable/enable, recover")
    c = S.partner("PDIS")
    R.set("dis", status=500)
    ep = c.mkep(R.url("dis"), events=["payout.created"])
    fire_payout(S, "PDIS")
    R.wait("dis", 1, 10)
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"enabled": False})
    check("PATCH enabled:false: disabled, reason null, disabledAt set", r.status_code == 200 and r.json()["data"]["status"] == "disabled"
          and r.json()["data"]["disabledReason"] is None and r.json()["data"]["disabledAt"], r.text[:300])
    d = wait_until(lambda: (lambda x: x if x and x[0]["status"] == "failed" else None)(c.deliveries(endpointId=ep["id"])["data"]), 10, 0.3)
    check("pending delivery of a disabled endpoint ends failed, lastError 'endpoint disabled'", d and d[0]["lastError"] == "endpoint disabled", d)
    n = len(R.got("dis"))
    time.sleep(2)
    check("no further attempts after disabling", len(R.got("dis")) == n, (n, len(R.got("dis"))))
    fire_payout(S, "PDIS")
    time.sleep(1)
    check("no new delivery queued for a disabled endpoint", len(c.deliveries(endpointId=ep["id"])["data"]) == 1)
    now = dt.datetime.now(dt.timezone.utc)
    iso = lambda x: x.strftime("%Y-%m-%dT%H:%M:%S.") + f"{x.microsecond // 1000:03d}Z"  # noqa: E731
    r = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/recover", {"since": iso(now - dt.timedelta(hours=1))})
    check("recover on a disabled endpoint: 400", r.status_code == 400, r.text[:200])
    r = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/test")
    check("test on a disabled endpoint: 400 invalid_request", r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text[:200])
    c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"enabled": True})
    R.set("dis", status=200)
    for label, since in (("older than 7 days", now - dt.timedelta(days=7, minutes=1)), ("in the future", now + dt.timedelta(minutes=5))):
        r = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/recover", {"since": iso(since)})
        check(f"recover since {label}: 400", r.status_code == 400, r.text[:200])
    r = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/recover", {"since": "yesterday"})
    check("recover since malformed: 400", r.status_code == 400, r.text[:200])
    r = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/recover", {})
    check("recover without since: 400", r.status_code == 400, r.text[:200])
    r = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/recover", {"since": iso(now - dt.timedelta(hours=1))})
    check("recover: 202 {data: {requeued: 1, remaining: 0}}", r.status_code == 202 and r.json()["data"] == {"requeued": 1, "remaining": 0}, r.text)
    d = wait_until(lambda: (lambda x: x if x and x[0]["status"] == "delivered" else None)(c.deliveries(endpointId=ep["id"])["data"]), 10, 0.3)
    check("recovered delivery delivered", d, c.deliveries(endpointId=ep["id"])["data"])
    if d:
        check("recover keeps counting attempts", d[0]["attempts"] >= 2, d[0])
    es = R.got("dis")
    check("recovered delivery: same id and body as its first attempt", len({hdr1(e, "X-Partner-Delivery") for e in es}) == 1 and len({e["body"] for e in es}) == 1)
    r = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/recover", {"since": iso(now - dt.timedelta(hours=1))})
    check("recover again: nothing failed left, requeued 0", r.status_code == 202 and r.json()["data"]["requeued"] == 0, r.text)


def delivery_log(S, R, ctx):
    res.sec("A6 delivery log: listing, filters, pagination, resend")
    c = ctx["PPAY"]
    e_all, e_ord = ctx["e_all"], ctx["e_ord"]
    allr = c.deliveries(limit=200)
    items = allr["data"]
    check("list: keys exactly the WebhookDelivery fields", all(set(d) == DELIVERY_KEYS for d in items), [sorted(set(d) ^ DELIVERY_KEYS) for d in items][:1])
    check("list: page {nextCursor, limit}", set(allr.get("page", {})) == {"nextCursor", "limit"} and allr["page"]["limit"] == 200, allr.get("page"))
    check("list: newest first", [d["createdAt"] for d in items] == sorted((d["createdAt"] for d in items), reverse=True))
    check("list: timestamps ms Z", all(TS_RE.match(d["createdAt"]) and (d["deliveredAt"] is None or TS_RE.match(d["deliveredAt"]))
                                      and (d["lastAttemptAt"] is None or TS_RE.match(d["lastAttemptAt"])) for d in items))
    check("default limit 50", c.deliveries()["page"]["limit"] == 50)
    x = c.deliveries(event="order.created")["data"]
    check("filter event=order.created", x and all(d["event"] == "order.created" for d in x) and len(x) == 4, len(x))
    x = c.deliveries(endpointId=e_ord["id"])["data"]
    check("filter endpointId", len(x) == 2 and all(d["endpointId"] == e_ord["id"] for d in x), len(x))
    x = c.deliveries(status="delivered")["data"]
    check("filter status=delivered", x and all(d["status"] == "delivered" for d in x))
    x = c.deliveries(status="pending,failed")["data"]
    check("filter status=pending,failed (none here)", x == [], x)
    seen, cur, pages = [], None, 0
    while pages < 20:
        q = {"limit": 3}
        if cur:
            q["cursor"] = cur
        p = c.deliveries(**q)
        seen += [d["id"] for d in p["data"]]
        pages += 1
        cur = p["page"]["nextCursor"]
        if not cur:
            break
    check("pagination limit=3: every delivery once, ends with nextCursor null", seen == [d["id"] for d in items] and cur is None, (len(seen), len(items), cur))
    for q in ("limit=0", "limit=201", "limit=abc", "limit=1.5", "status=bogus", "status=delivered,bogus", "event=bogus", "event=lead.deleted",
              "endpointId=not-a-uuid", "cursor=garbage"):
        r = c.call("GET", f"/api/v1/webhook-deliveries?{q}")
        check(f"invalid {q}: 400 invalid_request", r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", f"{r.status_code} {r.text[:120]}")
    r = c.call("GET", f"/api/v1/webhook-deliveries?endpointId={uuid.uuid4()}")
    note("endpointId filter naming an unknown endpoint", f"{r.status_code} {r.text[:120]}")
    r = c.delivery(str(uuid.uuid4()))
    check("GET unknown delivery id: 404", r.status_code == 404, r.text[:200])
    r = c.delivery("not-a-uuid")
    note("GET malformed delivery id", f"{r.status_code} {r.text[:120]}")
    # resend a delivered one
    pay = [d for d in items if d["event"] == "payout.created" and d["endpointId"] == e_all["id"]][0]
    before = [e for e in ctx["pay_entries"] if hdr1(e, "X-Partner-Delivery") == pay["id"]][0]
    n = len(R.got("pay-all"))
    time.sleep(1.1)  # so a fresh signature time is visible
    r = c.call("POST", f"/api/v1/webhook-deliveries/{pay['id']}/resend")
    check("resend: 202 {data: WebhookDelivery} pending, same id", r.status_code == 202 and r.json()["data"]["id"] == pay["id"]
          and r.json()["data"]["status"] == "pending" and set(r.json()["data"]) == DELIVERY_KEYS, r.text[:300])
    es = R.wait("pay-all", n + 1, 10)
    if check("resent delivery arrives", len(es) > n):
        e = es[n]
        check("resend: same X-Partner-Delivery, same body bytes", hdr1(e, "X-Partner-Delivery") == pay["id"] and e["body"] == before["body"])
        check("resend: fresh signature time", sig_parts(e)[0] > sig_parts(before)[0], (sig_parts(e)[0], sig_parts(before)[0]))
        check("resend: verifies (Stripe, SW)", stripe_ok(e, e_all["secret"]) is True and sw_ok(e, e_all["secret"]) is True)
        check("resend: same X-Partner-Event-Id", hdr1(e, "X-Partner-Event-Id") == hdr1(before, "X-Partner-Event-Id"))
    d = wait_until(lambda: (lambda x: x if x["status"] == "delivered" and x["attempts"] == 2 else None)(c.delivery(pay["id"]).json()["data"]), 10, 0.3)
    check("resend: delivered again, attempts 2", d, c.delivery(pay["id"]).json()["data"])
    # resend of a failed delivery: fresh budget of 1 + 6
    r5 = ctx.get("r500_delivery")
    if r5:
        cc = ctx["retry"]["r500"][0]
        r = cc.call("POST", f"/api/v1/webhook-deliveries/{r5['id']}/resend")
        check("resend failed delivery: 202", r.status_code == 202, r.text[:200])
        ctx["r500_resent_at"] = time.time()


def resend_budget_check(S, R, ctx):
    res.sec("A6b resend budget")
    r5 = ctx.get("r500_delivery")
    if not r5:
        return
    cc = ctx["retry"]["r500"][0]
    d = wait_until(lambda: (lambda x: x if x["status"] == "failed" and x["attempts"] == 14 else None)(cc.delivery(r5["id"]).json()["data"]), 40, 0.5)
    check("resend gives a fresh budget: 7 more attempts (14 in all), then failed", d and len(R.got("r500")) == 14, (cc.delivery(r5["id"]).json()["data"], len(R.got("r500"))))
    cc.call("POST", f"/api/v1/webhook-deliveries/{r5['id']}/resend")
    d = wait_until(lambda: (lambda x: x if x["status"] == "failed" and x["attempts"] == 21 else None)(cc.delivery(r5["id"]).json()["data"]), 40, 0.5)
    full = cc.delivery(r5["id"]).json()["data"]
    check("attemptLog shows the last 20 attempts at most (21 made)", d and len(full["attemptLog"]) == 20 and full["attempts"] == 21, (full["attempts"], len(full["attemptLog"])))


def isolation(S, R, ctx):
    res.sec("A7 cross-partner isolation")
    c1 = ctx["PPAY"]
    c2 = S.partner("POTHER")
    R.set("other")
    ep2 = c2.mkep(R.url("other"))
    e1 = ctx["e_all"]
    d1 = c1.deliveries(limit=1)["data"][0]
    check("other partner's endpoint not listed", all(e["id"] != e1["id"] for e in c2.call("GET", "/api/v1/webhook-endpoints").json()["data"]))
    for m, p, b in (("PATCH", f"/api/v1/webhook-endpoints/{e1['id']}", {"events": ALL4}), ("DELETE", f"/api/v1/webhook-endpoints/{e1['id']}", None),
                    ("POST", f"/api/v1/webhook-endpoints/{e1['id']}/test", None),
                    ("POST", f"/api/v1/webhook-endpoints/{e1['id']}/recover", {"since": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")}),
                    ("GET", f"/api/v1/webhook-deliveries/{d1['id']}", None), ("POST", f"/api/v1/webhook-deliveries/{d1['id']}/resend", None),
                    ("GET", f"/api/v1/events/{ctx.get('evid_o1')}", None)):
        r = c2.call(m, p, b)
        check(f"other partner {m} {p.split('/api/v1/')[1][:40]}: 404 not_found", r.status_code == 404 and r.json()["error"]["code"] == "not_found", f"{r.status_code} {r.text[:120]}")
    r = c2.call("GET", f"/api/v1/webhook-deliveries?endpointId={e1['id']}")
    check("other partner's endpointId as a filter: 404 or empty", r.status_code == 404 or (r.status_code == 200 and r.json()["data"] == []), r.text[:200])
    note("other partner's endpointId as a filter", f"{r.status_code}")
    check("other partner's deliveries not listed", all(d["endpointId"] == ep2["id"] for d in c2.deliveries(limit=200)["data"]))
    check("endpoint still there after the other partner's DELETE", c1.endpoint(e1["id"]) is not None)
    check("PPAY's events never reached the other partner's endpoint", len(R.got("other")) == 0, len(R.got("other")))
    S.lead("POTHER", email="o@example.com")
    R.wait("other", 1, 5)
    check("other partner's own lead reaches only its endpoint", len(R.got("other")) == 1 and all(body_json(e)["data"]["lead"]["partnerId"] == "PPAY"
          for e in R.got("pay-all") if body_json(e)["event"].startswith("lead.")))
    r = S.opcall("GET", "/internal/v1/partners/PPAY/webhook-deliveries?limit=5")
    check("operator delivery listing: 200, WebhookDelivery shape", r.status_code == 200 and r.json()["data"] and all(set(d) >= (DELIVERY_KEYS - {"lastAttemptAt"}) for d in r.json()["data"]),
          r.text[:300])
    note("operator delivery listing keys", sorted(r.json()["data"][0]) if r.status_code == 200 and r.json()["data"] else r.text[:100])
    r = S.opcall("PATCH", f"/internal/v1/partners/POTHER/webhook-endpoints/{e1['id']}", {"events": ALL4})
    check("operator PATCH of an endpoint under the wrong partner: 404", r.status_code == 404, r.text[:200])
    r = S.opcall("GET", "/internal/v1/partners/PPAY/webhook-endpoints")
    check("operator endpoint listing shows customHeader as valueHint", r.status_code == 200 and any(
        e.get("customHeader") == {"name": "X-Custom-Token", "valueHint": "\u20263456"} for e in r.json()["data"]), r.text[:400])
    r = S.opcall("GET", f"/internal/v1/partners/PPAY/webhook-deliveries/{d1['id']}")
    check("operator GET delivery: 200 with attemptLog", r.status_code == 200 and "attemptLog" in r.json().get("data", {}), r.text[:200])
    r = S.opcall("POST", f"/internal/v1/partners/PPAY/webhook-deliveries/{d1['id']}/resend")
    check("operator resend: 202", r.status_code == 202, r.text[:200])
    r = S.opcall("POST", f"/internal/v1/partners/PPAY/webhook-endpoints/{e1['id']}/test")
    check("operator test: 202", r.status_code == 202, r.text[:200])
    r = S.opcall("POST", f"/internal/v1/partners/PPAY/webhook-endpoints/{e1['id']}/recover",
                 {"since": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")})
    check("operator recover: 202 {requeued, remaining}", r.status_code == 202 and set(r.json()["data"]) == {"requeued", "remaining"}, r.text[:200])
    r = S.opcall("POST", "/internal/v1/partners/POTHER/webhook-endpoints", {"url": R.url("other2"), "events": ["payout.created"], "secret": True})
    check("operator create with secret: 201 carries the secret once", r.status_code == 201 and r.json()["data"].get("secret", "").startswith("whsec_"), r.text[:200])
    oid = r.json()["data"]["id"]
    r = S.opcall("PATCH", f"/internal/v1/partners/POTHER/webhook-endpoints/{oid}", {"secret": True})
    check("operator rotation: 200 carries the new secret", r.status_code == 200 and r.json()["data"].get("secret", "").startswith("whsec_"), r.text[:200])
    for path in ("/api/v1/webhook-deliveries", f"/api/v1/webhook-deliveries/{d1['id']}", "/api/v1/events"):
        r = c1.call("GET", path)
        check(f"rate-limit headers on GET {path[:40]}", all(h in r.headers for h in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")), dict(r.headers))
    r = S.opcall("GET", f"/internal/v1/partners/POTHER/webhook-deliveries/{d1['id']}")
    check("operator GET delivery under the wrong partner: 404", r.status_code == 404, f"{r.status_code} {r.text[:200]}")


def fairness(S, R, ctx):
    res.sec("A8 fair delivery, per-endpoint concurrency")
    cs = S.partner("PSLOW")
    cf = S.partner("PFAST")
    R.set("slow", status=200, delay=1.5)
    R.set("fast")
    cs.mkep(R.url("slow"), events=["payout.created"])
    cf.mkep(R.url("fast"), events=["payout.created"])
    for _ in range(12):
        fire_payout(S, "PSLOW")
    time.sleep(0.3)
    _, t = fire_payout(S, "PFAST")
    es = R.wait("fast", 1, 10)
    check("a slow endpoint with 12 queued does not delay another endpoint (< 1 s)", es and es[0]["t"] - t < 1.0, es and round(es[0]["t"] - t, 3))
    R.wait("slow", 12, 20)
    time.sleep(2)
    check("at most 4 attempts in flight to one endpoint", R.maxinflight["slow"] <= 4, R.maxinflight["slow"])
    sl = R.got("slow")
    lag = [round(e["t"] - sig_parts(e)[0], 2) for e in sl]
    check("queued behind the per-endpoint limit: each attempt still signed when sent (lag < 2 s)", max(lag) < 2.0, lag)
    check("12 payouts to the slow endpoint: 12 receipts, no duplicates", len(sl) == 12 and len({hdr1(e, "X-Partner-Delivery") for e in sl}) == 12, len(sl))
    note("max in flight to the slow endpoint", R.maxinflight["slow"])
    # a hanging endpoint (past the timeout) next to a healthy one of the same partner
    ch = S.partner("PHANG")
    R.set("hang", status=200, delay=5)
    R.set("hang-ok")
    ch.mkep(R.url("hang"), events=["payout.created"])
    ch.mkep(R.url("hang-ok"), events=["payout.created"])
    for _ in range(6):
        fire_payout(S, "PHANG")
    es = R.wait("hang-ok", 6, 5)
    check("same partner: a hanging endpoint does not delay its sibling (6 in < 5 s)", len(es) == 6, len(es))


def portal(S, R, ctx):
    res.sec("A9 portal sessions (API)")
    c = ctx["PPAY"]
    r = c.call("POST", "/api/v1/portal-sessions")
    check("portal-sessions: 201 {url, expiresAt}", r.status_code == 201 and set(r.json()["data"]) == {"url", "expiresAt"}, r.text[:200])
    d = r.json()["data"]
    check("portal url {base_url}/portal#code=…", d["url"].startswith(S.base + "/portal#code="), d["url"])
    check("portal link valid 10 minutes", abs(parse_ts(d["expiresAt"]) - time.time() - 600) < 60, d["expiresAt"])
    code = d["url"].split("#code=")[1]
    import requests
    r = requests.post(S.base + "/portal/v1/sessions", json={"code": code})
    check("exchange: 201 {token, expiresAt ~ 1 h}", r.status_code == 201 and abs(parse_ts(r.json()["data"]["expiresAt"]) - time.time() - 3600) < 60, r.text[:200])
    tok = r.json()["data"]["token"]
    r2 = requests.post(S.base + "/portal/v1/sessions", json={"code": code})
    check("exchange twice: 400 invalid_request", r2.status_code == 400 and r2.json()["error"]["code"] == "invalid_request", r2.text[:200])
    r2 = requests.post(S.base + "/portal/v1/sessions", json={"code": "nope"})
    check("unknown code: 400", r2.status_code == 400, r2.text[:200])
    from lib import Client
    p = Client(S.base, tok, "PPAY")
    r = p.call("GET", "/api/v1/webhook-endpoints")
    check("portal token lists endpoints; customHeader as valueHint", r.status_code == 200 and any(e.get("customHeader") == {"name": "X-Custom-Token", "valueHint": "\u20263456"}
          for e in r.json()["data"]), r.text[:300])
    r = p.call("GET", "/api/v1/webhook-deliveries?limit=2")
    check("portal token lists deliveries", r.status_code == 200 and len(r.json()["data"]) == 2, r.text[:200])
    for m, path in (("GET", "/api/v1/leads"), ("GET", "/api/v1/orders"), ("POST", "/api/v1/portal-sessions"), ("GET", "/api/v1/sub-accounts")):
        r = p.call(m, path)
        check(f"portal token {m} {path}: 403 forbidden", r.status_code == 403 and r.json()["error"]["code"] == "forbidden", f"{r.status_code} {r.text[:120]}")
    r = p.call("GET", "/api/v1/events")
    note("portal token GET /api/v1/events (not a §1-3 call)", f"{r.status_code}")
    r = p.call("POST", f"/api/v1/webhook-endpoints/{ctx['e_ord']['id']}/test")
    check("portal token may send a test event", r.status_code == 202, r.text[:200])
    r = p.call("PATCH", f"/api/v1/webhook-endpoints/{ctx['e_ord']['id']}", {"secret": True})
    check("portal token may rotate a secret (shown once)", r.status_code == 200 and r.json()["data"].get("secret", "").startswith("whsec_"), r.text[:200])
    other = S.partner("PPORT2")
    oep = other.mkep(R.url("pport2"), events=["payout.created"])
    r = p.call("PATCH", f"/api/v1/webhook-endpoints/{oep['id']}", {"enabled": False})
    check("portal token: another partner's endpoint 404", r.status_code == 404, r.text[:200])


def restart(S, R, ctx):
    res.sec("A10 at-least-once across a restart")
    c = S.partner("PREST")
    R.set("rest", status=500)
    c.mkep(R.url("rest"), events=["payout.created"])
    fire_payout(S, "PREST")
    R.wait("rest", 1, 10)
    S.stop()
    R.set("rest", status=200)
    n = len(R.got("rest"))
    time.sleep(2)
    S.start()
    es = R.wait("rest", n + 1, 15)
    check("a pending delivery is sent after a restart", len(es) > n, len(es))
    d = wait_until(lambda: (lambda x: x if x and x[0]["status"] == "delivered" else None)(c.deliveries()["data"]), 10, 0.3)
    check("…and ends delivered", d, c.deliveries()["data"])
    # SIGTERM with an attempt in flight: the process ends within the attempt timeout, nothing lost
    c = S.partner("PTERM")
    R.set("term", status=200, delay=1.5)
    c.mkep(R.url("term"), events=["payout.created"])
    fire_payout(S, "PTERM")
    R.wait("term", 1, 5)
    t = time.time()
    S.stop()
    el = time.time() - t
    note("SIGTERM with an attempt in flight: process exit after (s; includes the 1 s drain and idle keep-alive connections)", round(el, 2))
    S.start()
    d = wait_until(lambda: (lambda x: x if x and x[0]["status"] == "delivered" else None)(c.deliveries()["data"]), 15, 0.3)
    check("…the in-flight delivery ends delivered (finished or retried after restart)", d, c.deliveries()["data"])
    note("SIGTERM in flight: receipts / attempts", (len(R.got("term")), d and d[0]["attempts"]))


def delayed_start(S, R, ctx):
    c = S.partner("PDLY")
    R.set("dly")
    c.mkep(R.url("dly"), events=["lead.created", "lead.enriched"], leadCreatedDelay="1m")
    r = S.lead("PDLY", email="d@example.com", phone=None)
    ctx["dly"] = (c, r.json()["data"], time.time())
    time.sleep(2)
    S.opcall("PATCH", f"/internal/v1/leads/{r.json()['data']['id']}", {"phone": "+1 555 0142"})
    ctx["dly_patch"] = time.time()
    d = c.deliveries(event="lead.created")["data"]
    ctx["dly_log"] = d


def delayed_check(S, R, ctx):
    res.sec("A11 delayed lead.created (1m)")
    c, lead, t0 = ctx["dly"]
    d = ctx["dly_log"]
    if d:
        na = parse_ts(d[0]["nextAttemptAt"]) if d[0]["nextAttemptAt"] else None
        check("delayed lead.created: pending, nextAttemptAt ~ created + 60 s", d[0]["status"] == "pending" and na and abs(na - t0 - 60) < 5, d[0])
    else:
        note("delayed lead.created not in the delivery log before it is due", "no row")
    es = R.wait("dly", 1, 90, pred=lambda e: body_json(e)["event"] == "lead.created")
    if check("delayed lead.created arrives", es):
        e = es[0]
        check("…no earlier than 60 s after the lead (and < 70 s)", 59.5 <= e["t"] - t0 <= 70, round(e["t"] - t0, 2))
        check("…built when sent: carries the phone supplied during the delay", body_json(e)["data"]["lead"]["phone"] == "+1 555 0142", body_json(e)["data"]["lead"])
    en = [e for e in R.got("dly") if body_json(e)["event"] == "lead.enriched"]
    note("lead.enriched during a lead.created delay", en and f"sent {round(en[0]['t'] - t0, 1)} s after the lead" or "not sent")


def transport(S, R, ctx):
    res.sec("A12 transport: TLS trust, blackhole, trickling answer, other redirects, odd Retry-After")
    rogue = os.path.join(OUT, "certs-rogue")
    subprocess.run(["bash", os.path.join(HERE, "certs.sh"), rogue], check=True)
    R2 = Receiver(18561, f"{rogue}/leaf.pem", f"{rogue}/leaf.key")
    Blackhole(18562)
    ph = PlainHttp(18563)
    now_http = lambda s: email.utils.formatdate(time.time() + s, usegmt=True)  # noqa: E731
    sc = {
        "rogue": ("https://127.0.0.1:18561/r/rogue", None),
        "bhole": ("https://127.0.0.1:18562/r/bhole", None),
        "plain": ("https://127.0.0.1:18563/r/plain", None),
        "trickle": (None, dict(status=200, trickle=8)),
        "r301": (None, dict(status=301, headers={"Location": R.url("redtarget2")})),
        "r307": (None, dict(status=307, headers={"Location": R.url("redtarget2")})),
        "r308": (None, dict(status=308, headers={"Location": R.url("redtarget2")})),
        "r429plain": (None, dict(seq=[429, 500, 200])),
        "ragarbage": (None, dict(seq=[503, 500, 200], headers={"Retry-After": "soon"})),
        "rapast": (None, dict(seq=[503, 500, 200], headers=lambda: {"Retry-After": now_http(-3600)})),
        "ra503neg": (None, dict(seq=[503, 500, 200], headers={"Retry-After": "-5"})),
    }
    R.set("redtarget2")
    made = {}
    for name, (url, b) in sc.items():
        if b is not None:
            R.set(name, **b)
        c = S.partner("T" + name.upper())
        made[name] = (c, c.mkep(url or R.url(name), events=["payout.created"]))
    for name, (c, _) in made.items():
        fire_payout(S, c.pid)

    def dl(name):
        c, ep = made[name]
        d = c.deliveries(endpointId=ep["id"])["data"]
        return d[0] if d else None

    def attempts(name):
        c, _ = made[name]
        d = dl(name)
        return c.delivery(d["id"]).json()["data"]["attemptLog"] if d else []

    time.sleep(12)
    d = dl("rogue")
    check("receiver with an untrusted certificate: never delivered", d and d["status"] != "delivered" and d["lastStatusCode"] is None
          and len(R2.got("rogue")) == 0, (d, len(R2.got("rogue"))))
    note("untrusted certificate lastError", d and d["lastError"])
    al = attempts("bhole")
    check("TCP blackhole (no TLS answer): attempts end 'timeout' within the 2 s timeout", al and all(a["error"] == "timeout" and a["durationMs"] <= 2600 for a in al),
          [(a["error"], a["durationMs"]) for a in al])
    d = dl("plain")
    check("plain HTTP server behind an https URL: never delivered", d and d["status"] != "delivered" and ph.hits == 0, (d, ph.hits))
    note("plain HTTP lastError", d and d["lastError"])
    al = attempts("trickle")
    check("answer whose body trickles: the attempt is bounded by the timeout", al and all(a["durationMs"] <= 2600 for a in al), [(a["statusCode"], a["error"], a["durationMs"]) for a in al])
    note("trickling 200: outcome", dl("trickle") and (dl("trickle")["status"], dl("trickle")["lastError"], dl("trickle")["attempts"]))
    for n in ("r301", "r307", "r308"):
        al = attempts(n)
        check(f"{n[1:]}: not followed, error 'redirect'", al and all(a["error"] == "redirect" for a in al), [(a["statusCode"], a["error"]) for a in al])
    check("redirect targets never contacted", len(R.got("redtarget2")) == 0)
    es = R.got("r429plain")
    check("429 without Retry-After: schedule (gap ~1 s)", len(es) >= 2 and es[1]["t"] - es[0]["t"] < 2.5, gaps(es))
    for n in ("ragarbage", "rapast", "ra503neg"):
        es = R.got(n)
        check(f"{n}: unusable Retry-After falls back to the schedule (gap ~1 s)", len(es) >= 2 and es[1]["t"] - es[0]["t"] < 2.5, gaps(es))

    # 410 while other deliveries of the endpoint are pending
    c = S.partner("PGONE2")
    R.set("gone2", seq=[500, 500, 500], status=410)
    ep = c.mkep(R.url("gone2"), events=["payout.created"])
    for _ in range(3):
        fire_payout(S, "PGONE2")
    time.sleep(4)
    ds = c.deliveries(endpointId=ep["id"])["data"]
    g = c.endpoint(ep["id"])
    check("410 on a retry: endpoint disabled (gone)", g["status"] == "disabled" and g["disabledReason"] == "gone", g)
    check("410: the other pending deliveries end failed 'endpoint disabled'", sorted(d["lastError"] for d in ds).count("endpoint disabled") >= 2
          and all(d["status"] == "failed" for d in ds), [(d["status"], d["lastError"]) for d in ds])
    note("410: lastError of the delivery answered 410 (design: 'endpoint disabled', tests/api/webhook_control.rs)",
         [(d["lastStatusCode"], d["lastError"]) for d in ds if d["lastStatusCode"] == 410])
    # DELETE with a retry pending
    c = S.partner("PDEL")
    R.set("del", status=500)
    ep = c.mkep(R.url("del"), events=["payout.created"])
    fire_payout(S, "PDEL")
    R.wait("del", 1, 5)
    c.call("DELETE", f"/api/v1/webhook-endpoints/{ep['id']}")
    time.sleep(5)
    check("deleting an endpoint stops its pending retries", len(R.got("del")) == 1, len(R.got("del")))
    r = c.call("GET", "/api/v1/webhook-deliveries")
    note("delivery log after the endpoint's deletion", f"{r.status_code} {[(d['status'], d['lastError']) for d in r.json().get('data', [])]}")
    # test/resend/recover budget: 20 per minute per partner
    c = S.partner("PRL")
    R.set("rl")
    ep = c.mkep(R.url("rl"), events=["payout.created"])
    codes = [c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/test").status_code for _ in range(20)]
    r = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/test")
    check("20 test calls admitted", codes == [202] * 20, codes)
    check("21st test/resend/recover call in a minute: 429 rate_limited with Retry-After", r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
          and r.headers.get("Retry-After", "").isdigit(), f"{r.status_code} {r.headers.get('Retry-After')} {r.text[:100]}")
    r = S.opcall("POST", f"/internal/v1/partners/PRL/webhook-endpoints/{ep['id']}/test")
    check("operator test call not limited by the partner's budget", r.status_code == 202, r.text[:200])
    es = R.wait("rl", 21, 10)
    check("21 pings delivered", len(es) == 21, len(es))
    # secret removal
    c = S.partner("PSECOFF")
    ep = c.mkep(R.url("secoff"), events=["payout.created"])
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"secret": False})
    note("PATCH secret:false", f"{r.status_code} {r.text[:200]}")
    ua = hdr(R.got("pay-all")[0], "User-Agent") if R.got("pay-all") else None
    note("User-Agent of deliveries", ua)


def extras(S, R, ctx):
    res.sec("A14 extras: replayed rotation, recover bounds and budget, overlap on ping/resend, non-ASCII body")
    c = S.partner("PEXT")
    R.set("ext")
    ep = c.mkep(R.url("ext"))
    s0 = ep["secret"]
    r = c.call("POST", "/api/v1/webhook-endpoints", {"url": R.url("ext").replace("https://", "HTTPS://"), "events": ALL4})
    note("upper-case scheme HTTPS://", f"{r.status_code} {r.text[:120]}")
    if r.status_code == 201:
        c.call("DELETE", f"/api/v1/webhook-endpoints/{r.json()['data']['id']}")
    k = {"Idempotency-Key": "bbhooks-rotate-1"}
    r1 = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"secret": True}, headers=dict(k))
    r2 = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"secret": True}, headers=dict(k))
    s1 = r1.json()["data"]["secret"]
    check("rotation replayed with its Idempotency-Key: same secret, Idempotent-Replayed", r2.json()["data"].get("secret") == s1
          and r2.headers.get("Idempotent-Replayed") == "true", (r2.status_code, r2.headers.get("Idempotent-Replayed")))
    S.lead("PEXT", firstName="Jos\u00e9", lastName="M\u00fcller \U0001f600", email="jose@example.com")
    es = R.wait("ext", 1, 5)
    if check("non-ASCII lead delivered", es):
        e = es[0]
        check("non-ASCII body: rotation replay did not rotate twice (two v1 = s1, s0)", stripe_ok(e, s1) is True and stripe_ok(e, s0) is True, hdr1(e, "X-Partner-Signature"))
        check("non-ASCII body verifies with Stripe and SW", stripe_ok(e, s1) is True and sw_ok(e, s1) is True)
        check("non-ASCII names intact", body_json(e)["data"]["lead"]["firstName"] == "Jos\u00e9" and body_json(e)["data"]["lead"]["lastName"] == "M\u00fcller \U0001f600",
              body_json(e)["data"]["lead"])
    r = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/test")
    es = R.wait("ext", 2, 5)
    if len(es) == 2:
        check("ping during the overlap carries both signatures", len(sig_parts(es[1])[1]) == 2 and stripe_ok(es[1], s0) is True and stripe_ok(es[1], s1) is True)
    did = body_json(es[0])["id"]
    c.call("POST", f"/api/v1/webhook-deliveries/{did}/resend")
    es = R.wait("ext", 3, 5)
    if len(es) == 3:
        check("resend during the overlap carries both signatures", len(sig_parts(es[2])[1]) == 2 and stripe_ok(es[2], s0) is True and stripe_ok(es[2], s1) is True)
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"expirePrevious": True})
    n = len(R.got("ext"))
    S.lead("PEXT", email="after-expire@example.com")
    es = R.wait("ext", n + 1, 5)
    note("PATCH {expirePrevious: true} alone during an overlap", f"{r.status_code} previousSecretExpiresAt={r.json().get('data', {}).get('previousSecretExpiresAt')}"
         f" next delivery v1 count={len(sig_parts(es[n])[1]) if len(es) > n else None} {r.text[:80] if r.status_code != 200 else ''}")
    # Idempotency-Key on test and resend: a replay sends nothing more
    n = len(R.got("ext"))
    k = {"Idempotency-Key": "bbhooks-test-1"}
    a = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/test", headers=dict(k))
    b = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/test", headers=dict(k))
    time.sleep(1.5)
    check("test replayed with its Idempotency-Key: same answer, one ping sent", a.status_code == 202 and b.json() == a.json()
          and b.headers.get("Idempotent-Replayed") == "true" and len(R.got("ext")) == n + 1, (b.status_code, len(R.got("ext")) - n))
    n = len(R.got("ext"))
    k = {"Idempotency-Key": "bbhooks-resend-1"}
    a = c.call("POST", f"/api/v1/webhook-deliveries/{did}/resend", headers=dict(k))
    time.sleep(1.5)
    b = c.call("POST", f"/api/v1/webhook-deliveries/{did}/resend", headers=dict(k))
    time.sleep(1.5)
    check("resend replayed with its Idempotency-Key: one resend only", a.status_code == 202 and b.status_code == 202
          and b.headers.get("Idempotent-Replayed") == "true" and len(R.got("ext")) == n + 1, (b.status_code, len(R.got("ext")) - n))
    check("deliveries are POSTs", all(e["method"] == "POST" for e in R.got("ext")))
    # delivery cursors: bound to the partner, stable while deliveries are added
    p1 = c.deliveries(limit=2)
    other = S.partner("PEXT2")
    r = other.call("GET", f"/api/v1/webhook-deliveries?cursor={p1['page']['nextCursor']}")
    check("another partner's delivery cursor: 400", r.status_code == 400, f"{r.status_code} {r.text[:100]}")
    all_before = [d["id"] for d in c.deliveries(limit=200)["data"]]
    S.lead("PEXT", email="late@example.com")
    R.wait("ext", len(R.got("ext")) + 1, 5)
    rest, cur = [], p1["page"]["nextCursor"]
    while cur:
        p = c.deliveries(limit=2, cursor=cur)
        rest += [d["id"] for d in p["data"]]
        cur = p["page"]["nextCursor"]
    check("keyset pages: a delivery added meanwhile neither repeats nor hides older ones", [d["id"] for d in p1["data"]] + rest == all_before, (len(rest), len(all_before)))
    # secret removed: no signature any more
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"secret": False})
    n = len(R.got("ext"))
    S.lead("PEXT", email="nosig@example.com")
    es = R.wait("ext", n + 1, 5)
    if len(es) > n:
        check("secret removed (PATCH secret:false): no X-Partner-Signature, no webhook-signature", not hdr(es[n], "X-Partner-Signature")
              and not hdr(es[n], "webhook-signature"), [k for k, _ in es[n]["headers"]])
    r = S.opcall("POST", "/internal/v1/partners/PEXT/webhook-endpoints", {"url": R.url("ext2"), "events": ALL4,
                                                                         "customHeader": {"name": "X-Op", "value": "operator-value-1"}})
    check("operator POST that sets customHeader answers its value; listing answers valueHint", r.status_code == 201
          and r.json()["data"]["customHeader"] == {"name": "X-Op", "value": "operator-value-1"}
          and c.endpoint(r.json()["data"]["id"])["customHeader"] == {"name": "X-Op", "valueHint": "\u2026ue-1"}, r.text[:200])
    now = dt.datetime.now(dt.timezone.utc)
    iso = lambda x: x.strftime("%Y-%m-%dT%H:%M:%S.") + f"{x.microsecond // 1000:03d}Z"  # noqa: E731
    r = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/recover", {"since": iso(now - dt.timedelta(days=7) + dt.timedelta(minutes=2))})
    check("recover since just under 7 days: 202", r.status_code == 202, r.text[:200])
    # 4xx answers count toward the 20/minute budget of test/resend/recover (fresh partner)
    c3 = S.partner("PEXT3")
    ep3 = c3.mkep(R.url("ext3"), events=["payout.created"])
    for _ in range(3):
        c3.call("POST", f"/api/v1/webhook-endpoints/{ep3['id']}/test")
    codes = [c3.call("POST", f"/api/v1/webhook-endpoints/{ep3['id']}/recover", {"since": "bogus"}).status_code for _ in range(17)]
    r = c3.call("POST", f"/api/v1/webhook-endpoints/{ep3['id']}/test")
    check("4xx answers count toward the 20/minute budget: 21st call 429", codes == [400] * 17 and r.status_code == 429, (codes, r.status_code))


def ingest_replays(S, R, ctx):
    res.sec("A16 ingest replays and odd fields")
    c = S.partner("PREPL")
    R.set("repl")
    c.mkep(R.url("repl"))
    r1 = S.order("PREPL", "ORD-R1")
    R.wait("repl", 1, 5)
    r2 = S.order("PREPL", "ORD-R1")
    r3 = S.order("PREPL", "ORD-R1", amount=1)
    time.sleep(1.5)
    check("order ingest replayed (200) or conflicting (409): still one order.created", (r1.status_code, r2.status_code, r3.status_code) == (201, 200, 409)
          and len(R.got("repl")) == 1, ((r1.status_code, r2.status_code, r3.status_code), len(R.got("repl"))))
    S.lead("PREPL", questionId="q-123", email="q@example.com")
    es = R.wait("repl", 2, 5)
    check("lead.created carries questionId", len(es) == 2 and body_json(es[1])["data"]["lead"]["questionId"] == "q-123", len(es) == 2 and body_json(es[1])["data"]["lead"])
    k = {"Idempotency-Key": "bbhooks-lead-1"}
    body = {"partnerId": "PREPL", "firstName": "Kay", "lastName": "Lee", "email": "k@example.com", "emailConsent": True, "phone": "1",
            "smsConsent": True, "origin": "managed-website", "location": "X"}
    a = S.opcall("POST", "/internal/v1/leads", body, headers=k)
    b = S.opcall("POST", "/internal/v1/leads", body, headers=k)
    time.sleep(1.5)
    check("operator lead POST replayed with its Idempotency-Key: one lead.created", a.status_code == 201 and b.headers.get("Idempotent-Replayed") == "true"
          and len(R.got("repl")) == 3, (a.status_code, b.status_code, len(R.got("repl"))))


def ordering(S, R, ctx):
    res.sec("A17 ordering of one lead's lead.created and lead.enriched (the documents promise none)")
    c = S.partner("PORD")
    R.set("ord")
    c.mkep(R.url("ord"), events=["lead.created", "lead.enriched"])
    ids = []
    for i in range(20):
        lead = S.lead("PORD", email=f"ord{i}@example.com", phone=None).json()["data"]
        S.opcall("PATCH", f"/internal/v1/leads/{lead['id']}", {"phone": f"+1 555 01{i:02d}"})
        ids.append(lead["id"])
    es = R.wait("ord", 40, 15)
    seen = {}
    for e in es:
        b = body_json(e)
        seen.setdefault(b["data"]["lead"]["id"], []).append(b["event"])
    swapped = sum(1 for i in ids if seen.get(i, [])[:1] == ["lead.enriched"])
    check("40 deliveries for 20 leads", len(es) == 40, len(es))
    note("leads whose lead.enriched arrived before their lead.created (of 20)", swapped)


def races(S, R, ctx):
    res.sec("A15 races: the 10-endpoint cap under concurrent creates")
    import concurrent.futures as cf
    for rnd in range(3):
        c = S.partner(f"PRACE{rnd}")
        for _ in range(rnd * 3):
            c.mkep(R.url("race"), events=["payout.created"], secret=False)
        with cf.ThreadPoolExecutor(16) as ex:
            codes = list(ex.map(lambda _: c.call("POST", "/api/v1/webhook-endpoints", {"url": R.url("race"), "events": ["payout.created"]}).status_code, range(16)))
        n = len(c.call("GET", "/api/v1/webhook-endpoints").json()["data"])
        check(f"16 concurrent creates with {rnd * 3} existing: exactly 10 endpoints, the rest 400", n == 10 and codes.count(201) == 10 - rnd * 3
              and codes.count(400) == 16 - (10 - rnd * 3), (n, sorted(codes)))


def send_time_setup(S, R, ctx):
    c = S.partner("PSENDT")
    R.set("sendt")
    ctx["sendt"] = (c, c.mkep(R.url("sendt"), events=["payout.created"]))


def send_time_check(binp, certs, R, ctx):
    res.sec("A13 internal address refused at send time (same database, private addresses no longer allowed)")
    S = Server("A2", 18550, "pp_bbhooks_a", binp, certs, OUT, PARTNER_WEBHOOK_RETRY_SCHEDULE="1s,1s,1s,1s,1s,1s", PARTNER_WEBHOOK_TIMEOUT="2s")
    S.start()
    try:
        c, ep = ctx["sendt"]
        fire_payout(S, "PSENDT")
        d = wait_until(lambda: (lambda x: x if x and x[0]["status"] == "failed" else None)(c.deliveries()["data"]), 15, 0.5)
        check("send time: delivery to 127.0.0.1 refused, lastError 'address not allowed', receiver untouched", d and d[0]["lastError"] == "address not allowed"
              and len(R.got("sendt")) == 0, (c.deliveries()["data"], len(R.got("sendt"))))
        note("send-time refusal attempts", d and d[0]["attempts"])
    finally:
        S.stop()


def db_outage(binp, certs, R):
    res.sec("E1 PostgreSQL unreachable and back (extensions 11)")
    px = TcpProxy(18570)
    S = Server("E", 18558, "pp_bbhooks_e", binp, certs, OUT, PARTNER_WEBHOOK_RETRY_SCHEDULE="1s,2s,3s,4s,5s,6s", PARTNER_WEBHOOK_TIMEOUT="2s",
               PARTNER_WEBHOOK_ALLOW_PRIVATE="true")
    S.env["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/pp_bbhooks_e"
    S.start()  # create the database directly, then restart through the proxy
    S.stop()
    S.env["DATABASE_URL"] = "postgres://postgres@127.0.0.1:18570/pp_bbhooks_e"
    S.start()
    try:
        c = S.partner("EOUT")
        R.set("eout")
        c.mkep(R.url("eout"), events=["lead.created", "payout.created"])
        fire_payout(S, "EOUT")
        R.wait("eout", 1, 5)
        R.set("eout", seq=[500], status=200)
        fire_payout(S, "EOUT")
        R.wait("eout", 2, 5)  # the 500; its retry is due in ~1 s, during the outage
        px.down()
        t = time.time()
        r = c.call("GET", "/api/v1/webhook-endpoints")
        el = time.time() - t
        check("DB down: partner call answers 503 unavailable within 1 s, Retry-After: 1", r.status_code == 503 and r.json()["error"]["code"] == "unavailable"
              and r.headers.get("Retry-After") == "1" and el <= 1.2, f"{r.status_code} {round(el, 2)} {r.headers.get('Retry-After')} {r.text[:100]}")
        import requests
        check("DB down: /readyz 503", requests.get(S.base + "/readyz", timeout=5).status_code == 503)
        time.sleep(4)
        px.up()
        tu = time.time()
        ok = wait_until(lambda: c.call("GET", "/api/v1/webhook-endpoints").status_code == 200, 10, 0.05)
        check("DB back: partner calls answer again within ~1 s", ok and time.time() - tu <= 1.5, round(time.time() - tu, 2))
        es = R.wait("eout", 3, 8)
        check("DB back: the retry that fell due during the outage is sent", len(es) >= 3, len(es))
        time.sleep(2)
        n = len(R.got("eout"))
        t = time.time()
        S.lead("EOUT", email="after@example.com")
        es = R.wait("eout", n + 1, 10)
        check("DB back: a new event is delivered at once (wake-ups recovered, < 1.5 s)", len(es) > n and es[n]["t"] - t < 1.5, len(es) > n and round(es[n]["t"] - t, 2))
    finally:
        S.stop()


def server_a(binp, certs, R):
    S = Server("A", 18550, "pp_bbhooks_a", binp, certs, OUT, PARTNER_METRICS_BIND="127.0.0.1:18551",
               PARTNER_WEBHOOK_RETRY_SCHEDULE=",".join(f"{s}s" for s in RETRY), PARTNER_WEBHOOK_TIMEOUT="2s",
               PARTNER_WEBHOOK_ALLOW_PRIVATE="true", PARTNER_WEBHOOK_DISABLE_AFTER="0")
    S.start()
    ctx = {}
    try:
        res.guard("delayed start", delayed_start, S, R, ctx)
        res.guard("crud", crud, S, R)
        res.guard("payloads", payloads, S, R, ctx)
        res.guard("rotation", rotation, S, R, ctx)
        res.guard("retries start", retries_start, S, R, ctx)
        res.guard("fairness", fairness, S, R, ctx)
        res.guard("health", health, S, R, ctx)
        if "retry" in ctx:
            res.guard("retries", retries_check, S, R, ctx)
        if "PPAY" in ctx:
            res.guard("delivery log", delivery_log, S, R, ctx)
            res.guard("isolation", isolation, S, R, ctx)
            res.guard("portal", portal, S, R, ctx)
        if "dly" in ctx:
            res.guard("delayed", delayed_check, S, R, ctx)
        res.guard("resend budget", resend_budget_check, S, R, ctx)
        res.guard("transport", transport, S, R, ctx)
        res.guard("extras", extras, S, R, ctx)
        res.guard("races", races, S, R, ctx)
        res.guard("ordering", ordering, S, R, ctx)
        res.guard("ingest replays", ingest_replays, S, R, ctx)
        res.guard("send-time setup", send_time_setup, S, R, ctx)
        res.guard("restart", restart, S, R, ctx)
    finally:
        S.stop()
    if "sendt" in ctx:
        res.guard("send time", send_time_check, binp, certs, R, ctx)


# ============================================================================= server B
def server_b(binp, certs, R):
    S = Server("B", 18552, "pp_bbhooks_b", binp, certs, PARTNER_WEBHOOK_RETRY_SCHEDULE="2s,2s,2s,2s,2s,2s", PARTNER_WEBHOOK_TIMEOUT="2s",
               PARTNER_WEBHOOK_ALLOW_PRIVATE="true", PARTNER_WEBHOOK_DISABLE_AFTER="5s", PARTNER_WEBHOOK_SECRET_OVERLAP="0",
               PARTNER_PORTAL_CODE_TTL="2s", PARTNER_PORTAL_SESSION_TTL="3s", outdir=OUT)
    S.start()
    try:
        res.sec("B1 disable after failing (5s), overlap 0")
        c = S.partner("BFAIL")
        R.set("bfail", status=500)
        ep = c.mkep(R.url("bfail"), events=["payout.created"])
        fire_payout(S, "BFAIL")
        g = wait_until(lambda: (lambda x: x if x and x["status"] == "disabled" else None)(c.endpoint(ep["id"])), 20, 0.5)
        check("failing for 5 s: endpoint disabled, reason failing", g and g["disabledReason"] == "failing" and g["disabledAt"], c.endpoint(ep["id"]))
        es = R.got("bfail")
        note("attempts before disable (failing)", f"{len(es)} attempts, gaps {gaps(es)}")
        d = wait_until(lambda: (lambda x: x if x and x[0]["status"] == "failed" else None)(c.deliveries()["data"]), 10, 0.5)
        note("delivery of the endpoint disabled as failing", d and (d[0]["status"], d[0]["lastError"], d[0]["attempts"]))
        fire_payout(S, "BFAIL")
        time.sleep(1)
        check("failing-disabled endpoint gets no new deliveries", len(c.deliveries()["data"]) == 1)
        r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"events": ["payout.created", "order.created"]})
        check("a PATCH not naming enabled keeps the health state", r.json()["data"]["status"] == "disabled" and r.json()["data"]["disabledReason"] == "failing", r.text[:300])
        # re-enabling resets the run of failures: one more failure does not disable it at once
        r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"enabled": True})
        fire_payout(S, "BFAIL")
        n = len(R.got("bfail"))
        R.wait("bfail", n + 1, 5)
        time.sleep(1)
        g = c.endpoint(ep["id"])
        check("after re-enabling, the first failure does not disable it again (run reset)", g["status"] == "enabled", g)
        g = wait_until(lambda: (lambda x: x if x["status"] == "disabled" else None)(c.endpoint(ep["id"])), 15, 0.5)
        check("…but failing for 5 s again disables it (failing)", g and g["disabledReason"] == "failing", c.endpoint(ep["id"]))
        # success in between: never disabled
        c2 = S.partner("BMIX")
        R.set("bmix", seq=[500, 200] * 10)
        ep2 = c2.mkep(R.url("bmix"), events=["payout.created"])
        for _ in range(8):
            fire_payout(S, "BMIX")
            time.sleep(1)
        time.sleep(3)
        g = c2.endpoint(ep2["id"])
        check("an endpoint with successes in between stays enabled", g["status"] == "enabled", g)
        # overlap 0
        c3 = S.partner("BROT")
        R.set("brot")
        ep3 = c3.mkep(R.url("brot"), events=["payout.created"])
        r = c3.call("PATCH", f"/api/v1/webhook-endpoints/{ep3['id']}", {"secret": True})
        s1 = r.json()["data"]["secret"]
        note("overlap 0: previousSecretExpiresAt after rotation", r.json()["data"]["previousSecretExpiresAt"])
        fire_payout(S, "BROT")
        es = R.wait("brot", 1, 10)
        if es:
            check("overlap 0: one v1, the new secret; old rejected", len(sig_parts(es[0])[1]) == 1 and stripe_ok(es[0], s1) is True
                  and stripe_ok(es[0], ep3["secret"]) is not True, hdr1(es[0], "X-Partner-Signature"))
            check("overlap 0: one webhook-signature value", len(hdr1(es[0], "webhook-signature").split(" ")) == 1)
        check("overlap 0: GET previousSecretExpiresAt null", c3.endpoint(ep3["id"])["previousSecretExpiresAt"] is None, c3.endpoint(ep3["id"]))
        res.sec("B2 portal code and session lifetimes (2 s, 3 s)")
        import requests
        u = c3.call("POST", "/api/v1/portal-sessions").json()["data"]["url"]
        time.sleep(2.5)
        r = requests.post(S.base + "/portal/v1/sessions", json={"code": u.split("#code=")[1]})
        check("expired portal code: 400 invalid_request", r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text[:200])
        u = c3.call("POST", "/api/v1/portal-sessions").json()["data"]["url"]
        tok = requests.post(S.base + "/portal/v1/sessions", json={"code": u.split("#code=")[1]}).json()["data"]["token"]
        h = {"Authorization": f"Bearer {tok}"}
        check("portal session works at first", requests.get(S.base + "/api/v1/webhook-endpoints", headers=h).status_code == 200)
        time.sleep(3.5)
        r = requests.get(S.base + "/api/v1/webhook-endpoints", headers=h)
        check("expired portal session: 401", r.status_code == 401, f"{r.status_code} {r.text[:150]}")
    finally:
        S.stop()


# ============================================================================= server C
def server_c(binp, certs, R):
    S = Server("C", 18554, "pp_bbhooks_c", binp, certs, outdir=OUT)
    S.start()
    try:
        res.sec("C1 internal addresses refused at save (PARTNER_WEBHOOK_ALLOW_PRIVATE unset)")
        c = S.partner("CPRIV")
        urls = ["https://127.0.0.1/h", "https://127.1.2.3/h", "https://localhost/h", "https://localhost./h", "https://LOCALHOST/h",
                "https://10.1.2.3/h", "https://172.16.5.4/h", "https://192.168.1.1/h", "https://169.254.169.254/latest", "https://0.0.0.0/h",
                "https://100.64.0.1/h", "https://[::1]/h", "https://[fd00::1]/h", "https://[fe80::1]/h", "https://[::ffff:127.0.0.1]/h",
                "https://[::ffff:10.0.0.1]/h", "https://[64:ff9b::a00:1]/h", "https://[64:ff9b:1::1]/h", "https://[2002:a00:1::1]/h",
                "https://[2001::1]/h", "https://[fec0::1]/h", "https://[100::1]/h", "https://[::]/h", "https://224.0.0.1/h",
                "https://255.255.255.255/h", "https://2130706433/h", "https://0x7f000001/h", "https://017700000001/h",
                "https://vm/h", "https://runsc./h", "https://VM:8443/h"]
        for u in urls:
            r = c.call("POST", "/api/v1/webhook-endpoints", {"url": u, "events": ALL4})
            check(f"refused at save: {u}", r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", f"{r.status_code} {r.text[:150]}")
        r = c.call("POST", "/api/v1/webhook-endpoints", {"url": "https://127.0.0.1.nip.io/h", "events": ALL4})
        note("a name that does not resolve here (no DNS in this sandbox) at save", f"{r.status_code} {r.text[:100]}")
        r = c.call("POST", "/api/v1/webhook-endpoints", {"url": "https://93.184.216.34/hook", "events": ALL4})
        check("a global address is accepted: https://93.184.216.34/hook", r.status_code == 201, r.text[:200])
        if r.status_code == 201:
            eid = r.json()["data"]["id"]
            r = c.call("PATCH", f"/api/v1/webhook-endpoints/{eid}", {"url": "https://10.0.0.5/h"})
            check("PATCH to an internal address refused", r.status_code == 400, r.text[:200])
        r = S.opcall("POST", "/internal/v1/partners/CPRIV/webhook-endpoints", {"url": "https://127.0.0.1/h", "events": ALL4})
        check("operator API refuses internal address too", r.status_code == 400, r.text[:200])
    finally:
        S.stop()


# ============================================================================= server D
def overlap_short(S, R):
    res.sec("D2 rotation overlap of 3 s (PARTNER_WEBHOOK_SECRET_OVERLAP=3s)")
    c = S.partner("DOVL")
    R.set("dovl")
    ep = c.mkep(R.url("dovl"), events=["payout.created"])
    s0 = ep["secret"]
    r = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"secret": True})
    s1 = r.json()["data"]["secret"]
    pse = r.json()["data"]["previousSecretExpiresAt"]
    check("overlap 3s: previousSecretExpiresAt ~ now + 3 s", pse and abs(parse_ts(pse) - time.time() - 3) < 1.5, pse)
    fire_payout(S, "DOVL")
    es = R.wait("dovl", 1, 5)
    check("within the overlap: two v1, both verify", es and len(sig_parts(es[0])[1]) == 2 and stripe_ok(es[0], s0) is True and stripe_ok(es[0], s1) is True)
    time.sleep(4)
    fire_payout(S, "DOVL")
    es = R.wait("dovl", 2, 5)
    if check("after the overlap: delivery arrives", len(es) == 2):
        check("after the overlap: one v1 (new); the old secret rejected", len(sig_parts(es[1])[1]) == 1 and stripe_ok(es[1], s1) is True
              and stripe_ok(es[1], s0) is not True and sw_ok(es[1], s0) is not True, hdr1(es[1], "X-Partner-Signature"))
    note("GET previousSecretExpiresAt after the overlap ended", c.endpoint(ep["id"])["previousSecretExpiresAt"])


def server_d(binp, certs, R):
    S = Server("D", 18556, "pp_bbhooks_d", binp, certs, PARTNER_WEBHOOK_ALLOW_PRIVATE="true", PARTNER_WEBHOOK_SECRET_OVERLAP="3s", outdir=OUT)
    S.start()
    try:
        res.sec("D1 default schedule (10 s, 1 min, 6 min, ...) and 10 s timeout")
        c = S.partner("DDEF")
        R.set("ddef", status=500)
        c.mkep(R.url("ddef"), events=["payout.created"])
        ct = S.partner("DTO")
        R.set("dto", status=200, delay=12)
        ct.mkep(R.url("dto"), events=["payout.created"])
        fire_payout(S, "DDEF")
        fire_payout(S, "DTO")
        R.wait("ddef", 1, 5)
        time.sleep(0.5)
        d = c.deliveries()["data"][0]
        la, na = parse_ts(d["lastAttemptAt"]), parse_ts(d["nextAttemptAt"])
        check("after attempt 1: nextAttemptAt = lastAttemptAt + 10 s (+-10%)", 9 <= na - la <= 11.1, round(na - la, 2))
        cs = []
        for i in range(20):
            ci = S.partner(f"DJ{i}")
            R.set(f"dj{i}", status=500)
            ci.mkep(R.url(f"dj{i}"), events=["payout.created"])
            cs.append(ci)
        for ci in cs:
            fire_payout(S, ci.pid)
        time.sleep(1)
        planned = []
        for ci in cs:
            d = ci.deliveries()["data"][0]
            planned.append(parse_ts(d["nextAttemptAt"]) - parse_ts(d["lastAttemptAt"]))
        res.guard("overlap 3s", overlap_short, S, R)
        res.sec("D1 default schedule (continued)")
        es = R.wait("ddef", 3, 80)
        g = gaps(es)
        note("default schedule measured gaps", g)
        check("default gaps: ~10 s then ~60 s (+-10%)", len(g) == 2 and 8.9 <= g[0] <= 11.5 and 53.9 <= g[1] <= 66.5, g)
        time.sleep(0.5)
        d = c.deliveries()["data"][0]
        la, na = parse_ts(d["lastAttemptAt"]), parse_ts(d["nextAttemptAt"])
        check("after attempt 3: next in 6 min (+-10%)", 324 <= na - la <= 396.5, round(na - la, 1))
        jg, late = [], []
        for ci, p in zip(cs, planned):
            d = ci.deliveries()["data"][0]
            al = ci.delivery(d["id"]).json()["data"]["attemptLog"]
            g = parse_ts(al[1]["attemptedAt"]) - parse_ts(al[0]["attemptedAt"])
            jg.append(round(g - al[0]["durationMs"] / 1000, 2))
            late.append(round(g - p, 3))
        check("20 first retries: from the end of attempt 1, every gap within 10 s +-10% (9-11 s, +50 ms)", all(9.0 <= g <= 11.05 for g in jg), sorted(jg))
        check("20 first retries: each sent within 0.15 s of its nextAttemptAt", all(x <= 0.15 for x in late), sorted(late))
        dd = ct.deliveries()["data"][0]
        al = ct.delivery(dd["id"]).json()["data"]["attemptLog"]
        check("default timeout 10 s: first attempt ends 'timeout' after ~10 s", al and al[0]["error"] == "timeout" and 9500 <= al[0]["durationMs"] <= 11500, al)
    finally:
        S.stop()


def bulk_recover(binp, certs, R):
    res.sec("F1 recover is bounded: 1,000 per call, oldest first, remaining")
    S = Server("F", 18550, "pp_bbhooks_f", binp, certs, OUT, PARTNER_WEBHOOK_RETRY_SCHEDULE="1m", PARTNER_WEBHOOK_TIMEOUT="2s",
               PARTNER_WEBHOOK_ALLOW_PRIVATE="true")
    S.start()
    try:
        c = S.partner("FBULK")
        ep = c.mkep(f"https://127.0.0.1:{DEAD_PORT}/r/bulk", events=["payout.created"])
        for i in range(1003):
            assert S.payout("FBULK", 1 + i % 50).status_code == 201
        c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"enabled": False})
        time.sleep(2)
        c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"enabled": True})
        R.set("bulk")
        c.call("PATCH", f"/api/v1/webhook-endpoints/{ep['id']}", {"url": R.url("bulk")})
        since = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        r1 = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/recover", {"since": since})
        check("recover of 1,003 failed: requeued 1000, remaining 3", r1.status_code == 202 and r1.json()["data"] == {"requeued": 1000, "remaining": 3}, r1.text)
        left = c.deliveries(endpointId=ep["id"], status="failed", limit=200)["data"]
        newest = c.deliveries(endpointId=ep["id"], limit=3)["data"]
        check("recover requeues the oldest first: the 3 left are the 3 newest", sorted(d["id"] for d in left) == sorted(d["id"] for d in newest), (len(left),))
        r2 = c.call("POST", f"/api/v1/webhook-endpoints/{ep['id']}/recover", {"since": since})
        check("calling again continues: requeued 3, remaining 0", r2.status_code == 202 and r2.json()["data"] == {"requeued": 3, "remaining": 0}, r2.text)
        es = R.wait("bulk", 1003, 60)
        check("all 1,003 delivered after recovery", len({hdr1(e, "X-Partner-Delivery") for e in es}) == 1003, len(es))
        amounts = [body_json(e)["data"]["payout"]["payoutAmount"] for e in R.got("bulk")]
        note("recover bulk: first amounts received", amounts[:5])
        res.sec("F2 a hanging endpoint with 300 queued does not delay another")
        ch = S.partner("FHANG")
        cf = S.partner("FFAST")
        R.set("fhang", status=200, delay=5)
        R.set("ffast")
        ch.mkep(R.url("fhang"), events=["payout.created"])
        cf.mkep(R.url("ffast"), events=["payout.created"])
        for _ in range(300):
            S.payout("FHANG", 3)
        lat = []
        for i in range(5):
            _, t = fire_payout(S, "FFAST")
            es = R.wait("ffast", i + 1, 10)
            lat.append(round(es[i]["t"] - t, 3) if len(es) > i else None)
            time.sleep(0.5)
        check("300 queued for a hanging endpoint: another endpoint's deliveries < 1 s", all(x is not None and x < 1.0 for x in lat), lat)
        # Each attempt holds its slot for the whole 2 s timeout (the receiver, still asleep, cannot
        # tell when the client gave up), so no 1.8 s window may hold more than 4 attempt starts.
        ts = sorted(e["t"] for e in R.got("fhang"))
        most = max((sum(1 for u in ts if t <= u < t + 1.8) for t in ts), default=0)
        check("…and the hanging endpoint never has more than 4 in flight (starts per 1.8 s)", most <= 4, (most, len(ts)))
        lag = [round(e["t"] - sig_parts(e)[0], 2) for e in R.got("fhang")]
        check("attempts queued behind the hanging endpoint are signed when sent (lag < 2 s)", lag and max(lag) < 2.0, (len(lag), max(lag) if lag else None))
    finally:
        S.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="/work/bin/partner-server-main")
    ap.add_argument("--only", default="A,B,C,D,E")
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    certs = os.path.join(OUT, "certs")
    subprocess.run(["bash", os.path.join(HERE, "certs.sh"), certs], check=True)
    for db in ("pp_bbhooks_a", "pp_bbhooks_b", "pp_bbhooks_c", "pp_bbhooks_d", "pp_bbhooks_e", "pp_bbhooks_f"):
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"DROP DATABASE IF EXISTS {db}"], check=True)
    R = Receiver(RECV_PORT, f"{certs}/leaf.pem", f"{certs}/leaf.key")
    only = a.only.split(",")
    try:
        for k, fn in (("A", server_a), ("B", server_b), ("C", server_c), ("D", server_d), ("E", db_outage), ("F", bulk_recover)):
            if k in only:
                res.guard(f"server {k}", fn, a.bin, certs, R)
    finally:
        res.save()


if __name__ == "__main__":
    main()
