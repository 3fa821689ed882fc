#!/usr/bin/env python3
"""Black-box conformance checks of the partner API, written from the contract documents only
(/work/shared/spec: partner-api-spec.md, rulings.md, operator-api.md, extensions.md).

Phases (each against a server started by run.sh on the same database):
  main       seed through /internal/v1, then check the REST surface (state saved to --state)
  rate       server with PARTNER_RATE_LIMIT=4/60s, PARTNER_PUBLIC_RATE=1
  careoff    server with CARE_SERVICES_API_ENABLED=false
  nopepper   server without PARTNER_TOKEN_PEPPER
  nointernal server without PARTNER_INTERNAL_TOKEN

Every check prints PASS/FAIL with the document it comes from; the exit status is the number of
failures (capped at 100). --pace adds a delay between requests (quiet windows).
"""
import argparse
import csv
import datetime as dt
import io
import json
import re
import socket
import sys
import time
import uuid

import requests

TS_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
TOKEN_RE = re.compile(r"^pk_live_[A-Za-z0-9]{40,}$")

RESULTS = []
SEEN = []
SECTION = ["-"]
PACE = [0.0]


def section(name):
    SECTION[0] = name
    print(f"\n== {name}", flush=True)


def check(name, ok, detail="", ref=""):
    RESULTS.append((SECTION[0], name, bool(ok), detail, ref))
    tag = "PASS" if ok else "FAIL"
    extra = "" if ok else f"  -- {detail}"
    print(f"  {tag} {name}{'  [' + ref + ']' if ref and not ok else ''}{extra}", flush=True)
    return bool(ok)


def now():
    return dt.datetime.now(dt.timezone.utc)


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


class Client:
    def __init__(self, base, internal=None):
        self.base = base.rstrip("/")
        self.internal = internal
        self.s = requests.Session()

    def raw(self, method, path, token=None, headers=None, auth_header=None, **kw):
        h = dict(headers or {})
        if auth_header is not None:
            h["Authorization"] = auth_header
        elif token is not None:
            h["Authorization"] = f"Bearer {token}"
        if PACE[0]:
            time.sleep(PACE[0])
        r = self.s.request(method, self.base + path, headers=h, timeout=30, **kw)
        self._auto(method, path, r)
        return r

    def op(self, method, path, body=None, **kw):
        kw.setdefault("json", body) if body is not None else None
        return self.raw(method, "/internal/v1" + path, token=self.internal, **kw)

    def _auto(self, method, path, r):
        # Global rules, checked on every answer.
        p = path.split("?")[0]
        SEEN.append((method, p, r.status_code, r.headers.get("Content-Type", "")))
        if r.status_code >= 500 and r.status_code != 503:
            check(f"no 5xx: {method} {path[:80]}", False, f"{r.status_code} {r.text[:200]}",
                  "spec Errors / task: no 5xx ever")
        if r.status_code >= 400 and (p.startswith("/api") or p.startswith("/internal")):
            ok = False
            try:
                b = r.json()
                e = b.get("error")
                ok = (isinstance(e, dict) and isinstance(e.get("code"), str)
                      and isinstance(e.get("message"), str) and list(b.keys()) == ["error"])
            except Exception:
                pass
            if not ok:
                check(f"error body shape: {method} {path[:80]} -> {r.status_code}", False,
                      r.text[:200], "spec Error body; rulings Wire conventions")
        if (p.startswith("/api/v1") or p.startswith("/internal/v1")) and r.status_code != 204:
            ct = r.headers.get("Content-Type", "")
            if not (ct.startswith("application/json") or (ct.startswith("text/csv") and r.status_code == 200)):
                check(f"JSON content type: {method} {path[:80]} -> {r.status_code}", False, ct, "spec Format")
            if ct.startswith("application/json") and "openapi" not in p:
                try:
                    bad = []
                    walk_ts(r.json(), bad)
                    if bad:
                        check(f"timestamps RFC3339 ms Z: {method} {path[:60]}", False, str(bad[:3]),
                              "rulings Wire conventions")
                except ValueError:
                    check(f"JSON parses: {method} {path[:60]}", False, r.text[:100])
        if r.status_code >= 400:
            low = r.text.lower()
            for leak in ("select ", "postgres", "diesel", "panicked", "syntax error", "sqlstate", "backtrace"):
                if leak in low:
                    check(f"error message free of internals ({leak}): {method} {path[:60]}", False, r.text[:200],
                          "rulings Wire conventions")
        if (p.startswith("/api/v1") or p.startswith("/internal/v1")) and "openapi" not in p:
            cc = r.headers.get("Cache-Control", "")
            if "no-store" not in cc:
                check(f"Cache-Control no-store: {method} {path[:80]} -> {r.status_code}", False,
                      repr(cc), "extensions §7")


TS_KEYS = {"createdAt", "updatedAt", "createdDate", "created_at", "expiresAt", "redeemedAt", "revokedAt",
           "lastUsedAt", "disabledAt", "nextAttemptAt", "lastAttemptAt", "deliveredAt", "attemptedAt",
           "previousSecretExpiresAt", "occurredAt"}


def walk_ts(o, bad, parent=None):
    if isinstance(o, dict):
        payout = "payoutDate" in o
        for k, v in o.items():
            if k in TS_KEYS and isinstance(v, str) and not (payout and k == "createdAt"):
                if not TS_MS.match(v):
                    bad.append((k, v))
            elif k in ("payoutDate",) or (payout and k == "createdAt"):
                if not (isinstance(v, str) and DATE.match(v)):
                    bad.append((k, v))
            else:
                walk_ts(v, bad, k)
    elif isinstance(o, list):
        for x in o:
            walk_ts(x, bad, parent)


def ecode(r):
    try:
        return r.json()["error"]["code"]
    except Exception:
        return None


def expect(name, r, status, code=None, ref=""):
    ok = r.status_code == status and (code is None or ecode(r) == code)
    return check(name, ok, f"got {r.status_code} {r.text[:300]}", ref)


def data(r):
    try:
        return r.json().get("data")
    except Exception:
        return None


# ---------------------------------------------------------------- seed

A, B, C = "bbA", "bbB", "bbC"
M1, M2, M3 = (str(uuid.UUID(int=i)) for i in (0xA1, 0xA2, 0xA3))
D1, D2 = str(uuid.UUID(int=0xD1)), str(uuid.UUID(int=0xD2))
CS1, CS2, CS3 = (str(uuid.UUID(int=i)) for i in (0xC1, 0xC2, 0xC3))


def partner_body(active=True, dna=True, headless=True, care=True, services=None, default="en",
                 langs=("en", "es")):
    return {"name": "Partner", "email": "ops@example.test", "active": active, "dnaAccess": dna,
            "headlessLinks": headless, "defaultLang": default, "enabledLangs": list(langs),
            "careServices": {"subscriptionActive": care, "manualOverride": False,
                             "yearlyBundle": care, "services": services or []}}


def must(r, what, status=(200, 201, 202)):
    if r.status_code not in status:
        print(f"SEED FAILED: {what}: {r.status_code} {r.text[:500]}")
        sys.exit(100)
    return data(r)


def seed(c):
    st = {}
    for pid, kw in ((A, {}), (B, dict(dna=False, headless=False, care=False)), (C, {})):
        must(c.op("PUT", f"/partners/{pid}", partner_body(**kw)), f"partner {pid}")
    users = {}
    for name, pid, admin in (("a", A, False), ("adm", A, True), ("b", B, False), ("c", C, False),
                             ("del", A, False), ("rev", A, False), ("rot", A, False),
                             ("exp", A, False), ("bdm", B, True)):
        u = must(c.op("POST", "/users", {"email": f"{name}@example.test", "partnerId": pid,
                                          "admin": admin}), f"user {name}")
        users[name] = u["id"]
    st["users"] = users
    tok = {}
    for name, uid in users.items():
        body = {}
        if name == "exp":
            body = {"expiresAt": iso(now() + dt.timedelta(seconds=3))}
        t = must(c.op("POST", f"/users/{uid}/tokens", body), f"token {name}")
        tok[name] = t["token"]
        tok[name + "_id"] = t["id"]
        st.setdefault("token_objs", {})[name] = t
    st["tok"] = tok
    # catalog
    tiers = [{"key": "m1", "label": "1 month", "months": 1, "minPrice": 100, "maxPrice": 300,
              "recommendedPrice": 199.5, "commission": 40},
             {"key": "m3", "label": "3 months", "months": 3, "minPrice": 250, "maxPrice": 900,
              "recommendedPrice": 1299 if False else 549, "commission": 90.25}]
    med = lambda name, cats, slug, active, tiers_: {
        "name": name, "categories": cats, "details": "In stock", "imageUrl": "https://img.example/x.png",
        "imageFileId": str(uuid.uuid4()), "imageSourceUrl": "https://img.example/src.png",
        "active": active, "legacyPath": f"legacy/{name.lower()}", "selfHostedSlug": slug,
        "selfHostedLangs": ["en", "es"] if slug else [], "suggestedPrices": "$199 - $549",
        "tiers": tiers_}
    must(c.op("PUT", f"/medical-products/{M1}", med("Sema", ["weight-loss"], "sema", True, tiers)), "M1")
    t6 = tiers + [{"key": "m6", "label": "6 months", "months": 6, "minPrice": 1000, "maxPrice": 2000,
                   "recommendedPrice": 1299, "commission": 100}]
    must(c.op("PUT", f"/medical-products/{M2}", med("Tadal", ["mens-health", "wellness"], None, True, t6)), "M2")
    must(c.op("PUT", f"/medical-products/{M3}", med("Gone", ["weight-loss"], None, False, tiers)), "M3")
    must(c.op("PUT", f"/partners/{A}/medical-prices/{M1}", {"tierPrices": {"m1": 249}}), "price")
    dna = {"productName": "DNA Kit", "description": "Test", "intakePath": "dna/kit",
           "productImageUrl": "https://img.example/d.png", "minimumPrice": 99, "recommendedPrice": 129,
           "maximumPrice": 199, "parentProduct": ["dna"], "available": True}
    must(c.op("PUT", f"/dna-products/{D1}", dna), "D1")
    must(c.op("PUT", f"/partners/{A}/dna-prices/{D1}", {"userSetPrice": 119}), "dna price")
    cs = lambda svc, slug, months: {
        "service": svc, "slug": slug, "productName": svc.title(), "description": "d",
        "imageUrl": "https://img.example/c.png",
        "tiers": [{"key": f"m{m}", "label": f"{m} mo", "months": m, "userPrice": 10 * m,
                   "commission": m} for m in months]}
    must(c.op("PUT", f"/care-service-products/{CS1}", cs("primary-care", "primary", [1, 3, 12])), "CS1")
    must(c.op("PUT", f"/care-service-products/{CS2}", cs("urgent-care", "urgent-care", [1, 6])), "CS2")
    must(c.op("PUT", f"/care-service-products/{CS3}", cs("mental-health", "behavior", [1])), "CS3")
    # sub-accounts through the partner API
    sa = {}
    for pid, t, sub, nick in ((A, tok["a"], "7", "Staff Seven"), (A, tok["a"], "12", "Affiliate"),
                              (B, tok["b"], "7", "B Seven")):
        r = c.raw("POST", "/api/v1/sub-accounts", t, json={"subId": sub, "nickname": nick})
        sa[f"{pid}.{sub}"] = must(r, f"sub-account {pid}.{sub}")
    st["sa"] = sa
    # leads
    leads = {"A": [], "B": [], "A_test": [], "A_headless": [], "A_nonheadless": []}
    base = {"firstName": "Ann", "lastName": "Lee", "email": "ann@example.test", "emailConsent": True,
            "phone": "+1 555 0100", "smsConsent": True, "origin": "managed-website", "location": "Austin"}

    def lead(pid, key, **over):
        b = dict(base, partnerId=pid)
        b.update(over)
        d = must(c.op("POST", "/leads", b), f"lead {over}")
        leads[key].append(d)
        return d

    for i in range(52):
        d = lead(A, "A", firstName=f"N{i}")
        leads["A_nonheadless"].append(d["id"])
    d = lead(A, "A", emailConsent=False, smsConsent=False, firstName="NoConsent")
    leads["A_nonheadless"].append(d["id"])
    st["noconsent"] = d["id"]
    d = lead(A, "A", origin="headless_intake", location="Weight Loss", phone=None)
    leads["A_headless"].append(d["id"])
    d = lead(A, "A_test", origin="headless_intake", location="Weight Loss", isTest=True,
             testSource="provider_test_mode")
    d = lead(A, "A_test", origin="headless_intake", location="Weight Loss", isTest=True,
             testSource="simulation")
    d = lead(A, "A", subId="7", firstName="Subbed")
    leads["A_nonheadless"].append(d["id"])
    st["sub_lead"] = d["id"]
    for i in range(3):
        lead(B, "B", firstName=f"B{i}")
    st["leads"] = leads
    # orders
    o = lambda oid, pid, **kw: dict({"orderId": oid, "partnerId": pid, "createdDate": iso(now()),
                                     "product": "Sema", "amount": 199.5, "commission": 40,
                                     "status": "shipped", "isTest": False, "source": "checkout",
                                     "customerName": "Cus Tomer",
                                     "customerEmail": "cus@example.test"}, **kw)
    st["orders"] = {
        "A_real": must(c.op("POST", "/orders", o("ORD-A-1", A, subId="7")), "order A1"),
        "A_real2": must(c.op("POST", "/orders", o("ORD-A-2", A, amount=40, commission=4.1)), "order A2"),
        "A_test": must(c.op("POST", "/orders", o("ORD-A-T", A, isTest=True)), "order AT"),
        "B_real": must(c.op("POST", "/orders", o("ORD-B-1", B)), "order B1"),
    }
    must(c.op("POST", "/analytics-events", {"runId": "run1", "partnerId": A, "event": "order_completed",
                                            "product": "Sema", "amount": 249, "occurredAt": iso(now()),
                                            "testSource": "simulation"}), "analytics")
    must(c.op("POST", "/analytics-events", {"runId": "runB", "partnerId": B, "event": "order_completed",
                                            "product": "Sema", "amount": 249, "occurredAt": iso(now()),
                                            "testSource": "simulation"}), "analytics B")
    st["payouts"] = {
        "A": must(c.op("POST", "/payouts", {"partnerId": A, "payoutDate": "2026-11-01", "payoutAmount": 1234.5,
                                            "status": "paid", "receiptUrl": "https://r.example/1",
                                            "note": "secret note"}), "payout A"),
        "B": must(c.op("POST", "/payouts", {"partnerId": B, "payoutDate": "2026-11-02", "payoutAmount": 10,
                                            "status": "paid"}), "payout B"),
    }
    # coupons
    bo = lambda pid, **kw: dict({"partnerId": pid, "productSlug": "primary", "months": 3, "quantity": 5,
                                 "unitPriceCents": 4500, "purchaserEmail": "buyer@example.test",
                                 "purchaserSource": "+cmd|calc", "notes": '=HYPERLINK("x") say "hi"'}, **kw)
    ca = must(c.op("POST", "/care-services-coupons/bulk-orders", bo(A, subAccountId="7")), "bulk A")
    ce = must(c.op("POST", "/care-services-coupons/bulk-orders",
                   bo(A, quantity=2, productSlug="vet-care", months=1, notes=None, purchaserSource="web",
                      expiresAt=iso(now() + dt.timedelta(seconds=3)))), "bulk A exp")
    cb = must(c.op("POST", "/care-services-coupons/bulk-orders", bo(B, quantity=2, notes="b")), "bulk B")
    st["coupons"] = {"A": ca, "Aexp": ce, "B": cb}
    return st


# ---------------------------------------------------------------- checks

def keys_exact(obj, expected):
    return set(obj.keys()) == set(expected), f"keys {sorted(obj.keys())} vs {sorted(expected)}"


LEAD_KEYS = ["id", "partnerId", "subId", "firstName", "lastName", "email", "phone", "origin", "location",
             "questionId", "createdAt", "updatedAt", "isTest", "testSource"]
ORDER_KEYS = ["orderId", "createdDate", "subAccount", "product", "amount", "commission", "status", "isTest"]
PAYOUT_KEYS = ["recordId", "email", "createdAt", "payoutDate", "payoutAmount", "status"]
SA_KEYS = ["id", "email", "subId", "nickname", "createdAt", "updatedAt"]
COUPON_KEYS = ["id", "code", "partnerId", "productSlug", "months", "status", "expiresAt", "redeemedAt",
               "redeemedEmail", "redeemedProviderPrimaryExternalId", "bulkOrderId", "purchaserEmail",
               "purchaserSource", "unitPriceCents", "notes", "createdAt"]
CSV_COLS = ["code", "product_slug", "months", "status", "partner_id", "sub_account_id", "unit_price_cents",
            "bulk_order_id", "purchaser_email", "purchaser_source", "created_at", "expires_at", "redeemed_at",
            "redeemed_email", "redeemed_provider_primary_external_id", "notes"]


def money_ok(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and round(v, 2) == v


def check_auth(c, st):
    section("authentication (spec Authentication; rulings Tokens)")
    tok = st["tok"]
    r = c.raw("GET", "/api/v1/leads")
    expect("no header -> 401 missing_bearer", r, 401, "missing_bearer")
    for h in ("Basic Zm9vOmJhcg==", "Bearer", "Bearer ", "Token " + tok["a"]):
        r = c.raw("GET", "/api/v1/leads", auth_header=h)
        expect(f"Authorization {h[:12]!r} -> 401 missing_bearer", r, 401, "missing_bearer", "rulings Tokens")
    for h in ("Bearer garbage", "Bearer pk_live_short", "Bearer pk_test_" + "a" * 43,
              "Bearer pk_live_" + "A" * 43, "Bearer " + tok["a"] + "x", "Bearer " + tok["a"][:-1] + "!"):
        r = c.raw("GET", "/api/v1/leads", auth_header=h)
        expect(f"Authorization {h[:22]!r}... -> 401 invalid_token", r, 401, "invalid_token", "rulings Tokens")
        if tok["a"][:20] in r.text:
            check("error message never echoes the token", False, r.text[:200], "rulings Wire conventions")
    r = c.raw("GET", "/api/v1/leads", auth_header="bearer " + tok["a"])
    check("scheme is case-insensitive (RFC 7235: 'bearer')", r.status_code == 200, f"{r.status_code}",
          "RFC 7235 §2.1 (soft)")
    r = c.raw("GET", "/api/v1/leads", token=tok["a"])
    expect("valid token -> 200", r, 200)
    check("token text pk_live_ + >=40 base62", all(TOKEN_RE.match(tok[k]) for k in ("a", "b", "adm")),
          tok["a"][:12], "rulings Tokens")
    # token listing
    r = c.op("GET", f"/users/{st['users']['a']}/tokens")
    d = data(r) or []
    check("token list never carries the token text",
          r.status_code == 200 and tok["a"] not in r.text and all("token" not in t for t in d), r.text[:200])
    if d:
        ok, det = keys_exact(d[0], ["id", "tokenPrefix", "createdAt", "expiresAt", "revokedAt", "lastUsedAt"])
        check("token list fields", ok, det, "operator-api Accounts and tokens")
    tobj = st["token_objs"]["a"]
    ok, det = keys_exact(tobj, ["id", "token", "tokenPrefix", "createdAt", "expiresAt"])
    check("token creation fields", ok, det, "operator-api Accounts and tokens")
    check("tokenPrefix is a prefix of the token", tobj["token"].startswith(tobj["tokenPrefix"]), tobj["tokenPrefix"])
    # revoke
    r = c.raw("GET", "/api/v1/orders", token=tok["rev"])
    expect("token works before revocation", r, 200)
    expect("DELETE /tokens/{id} -> 200 ok", c.op("DELETE", f"/tokens/{tok['rev_id']}"), 200)
    r = c.raw("GET", "/api/v1/orders", token=tok["rev"])
    expect("revoked token -> 401 invalid_token at once", r, 401, "invalid_token")
    r = c.op("DELETE", f"/tokens/{uuid.uuid4()}")
    check("DELETE unknown token -> 404", r.status_code == 404, f"{r.status_code}")
    # rotate
    r = c.op("POST", f"/tokens/{tok['rot_id']}/rotate")
    expect("rotate -> 201", r, 201)
    new = (data(r) or {}).get("token", "")
    expect("old token after rotate -> 401 invalid_token", c.raw("GET", "/api/v1/orders", token=tok["rot"]), 401,
           "invalid_token")
    expect("new token after rotate -> 200", c.raw("GET", "/api/v1/orders", token=new), 200)
    r = c.op("POST", f"/tokens/{tok['rot_id']}/rotate")
    check("rotating a revoked token is refused (4xx)", 400 <= r.status_code < 500, f"{r.status_code}")
    # user deleted
    expect("DELETE user -> 200", c.op("DELETE", f"/users/{st['users']['del']}"), 200)
    expect("token of deleted user -> 401 unknown_user", c.raw("GET", "/api/v1/leads", token=tok["del"]), 401,
           "unknown_user", "spec Authentication 5")
    # inactive partner
    c.op("PUT", f"/partners/{C}", partner_body(active=False))
    expect("inactive partner -> 403 forbidden", c.raw("GET", "/api/v1/leads", token=tok["c"]), 403, "forbidden")
    expect("inactive partner -> 403 even with invalid limit (403 before 400)",
           c.raw("GET", "/api/v1/leads?limit=0", token=tok["c"]), 403, "forbidden", "rulings order of checks")
    # expired token (created with expiresAt now+3s at seed)
    wait = st["t0"] + 4 - time.time()
    if wait > 0:
        time.sleep(wait)
    expect("expired token -> 401 invalid_token", c.raw("GET", "/api/v1/leads", token=tok["exp"]), 401,
           "invalid_token")
    r = c.op("POST", f"/users/{st['users']['a']}/tokens", {"expiresAt": "2000-01-01T00:00:00.000Z"})
    expect("token with past expiresAt -> 400", r, 400, "invalid_request", "operator-guide")
    r = c.op("POST", f"/users/{uuid.uuid4()}/tokens", {})
    check("token for unknown user -> 404", r.status_code == 404, f"{r.status_code}")


def page_all(c, tok, path, limit, maxpages=50):
    rows, cur, pages = [], None, 0
    while pages < maxpages:
        sep = "&" if "?" in path else "?"
        url = f"{path}{sep}limit={limit}" + (f"&cursor={requests.utils.quote(cur)}" if cur else "")
        r = c.raw("GET", url, token=tok)
        if r.status_code != 200:
            return rows, f"status {r.status_code} {r.text[:200]}"
        b = r.json()
        rows += b["data"]
        pages += 1
        cur = b["page"]["nextCursor"]
        if cur is None:
            return rows, None
    return rows, "too many pages"


def check_leads(c, st):
    section("GET /api/v1/leads (spec; rulings Leads)")
    tok = st["tok"]
    r = c.raw("GET", "/api/v1/leads", token=tok["a"])
    b = r.json()
    check("envelope {data, page:{nextCursor, limit}}", set(b) == {"data", "page"} and
          set(b["page"]) == {"nextCursor", "limit"}, str(list(b)))
    check("default limit 50", b["page"]["limit"] == 50 and len(b["data"]) == 50, f"{b['page']} {len(b['data'])}")
    rows = b["data"]
    for row in rows[:60]:
        ok = set(row) <= set(LEAD_KEYS) and set(LEAD_KEYS) - set(row) <= {"phone"}
        if not ok:
            check("LeadRow field set", False, f"{sorted(row)}")
            break
    else:
        check("LeadRow field set (phone may be absent)", True)
    check("createdAt/updatedAt RFC3339 ms Z", all(TS_MS.match(x["createdAt"]) and TS_MS.match(x["updatedAt"])
                                                 for x in rows), rows[0]["createdAt"])
    check("partnerId is own", all(x["partnerId"] == A for x in rows))
    keyset = [(x["createdAt"], x["id"]) for x in rows]
    check("newest first (createdAt desc, id desc)", keyset == sorted(keyset, reverse=True), "")
    check("no test rows without includeTest", all(x["isTest"] is False and x["testSource"] is None for x in rows))
    all_rows, err = page_all(c, tok["a"], "/api/v1/leads", 7)
    ids = [x["id"] for x in all_rows]
    expected = len(st["leads"]["A"])
    check(f"cursor walk (limit 7) returns every real lead once ({expected})",
          err is None and len(ids) == expected and len(set(ids)) == expected, f"{err} {len(ids)} {len(set(ids))}")
    ks = [(x["createdAt"], x["id"]) for x in all_rows]
    check("cursor walk globally ordered", ks == sorted(ks, reverse=True))
    all_t, err = page_all(c, tok["a"], "/api/v1/leads?includeTest=true", 200)
    tests = [x for x in all_t if x["isTest"]]
    check("includeTest=true adds the test rows", err is None and len(tests) == 2 and
          len(all_t) == expected + 2, f"{err} {len(all_t)} {len(tests)}")
    check("testSource non-null exactly when isTest",
          all((x["testSource"] is not None) == x["isTest"] for x in all_t) and
          {x["testSource"] for x in tests} == {"provider_test_mode", "simulation"})
    check("test rows keep origin headless_intake", all(x["origin"] == "headless_intake" for x in tests))
    for v in ("True", "1", "yes", "TRUE", "false", ""):
        r = c.raw("GET", f"/api/v1/leads?limit=200&includeTest={v}", token=tok["a"])
        check(f"includeTest={v!r} -> only real rows", r.status_code == 200 and
              all(not x["isTest"] for x in r.json()["data"]), f"{r.status_code} {r.text[:120]}",
              "spec leads includeTest; rulings")
    for v in ("1", "200"):
        r = c.raw("GET", f"/api/v1/leads?limit={v}", token=tok["a"])
        check(f"limit={v} accepted", r.status_code == 200 and r.json()["page"]["limit"] == int(v) and
              len(r.json()["data"]) == min(int(v), expected), r.text[:100])
    for v in ("0", "201", "abc", "1.5", "", "-1", "1e2", "%2B5", "9999999999999999999999", " 5"):
        r = c.raw("GET", f"/api/v1/leads?limit={v}", token=tok["a"])
        expect(f"limit={v!r} -> 400 invalid_request", r, 400, "invalid_request", "rulings Leads limit")
    r = c.raw("GET", "/api/v1/leads?limit=5&limit=6", token=tok["a"])
    check("duplicate limit param does not 5xx", r.status_code in (200, 400), f"{r.status_code}")
    for cur in ("garbage", "AAAA", "%00", "eyJ0IjoiMjAyNiJ9", "x" * 5000):
        r = c.raw("GET", f"/api/v1/leads?cursor={cur}", token=tok["a"])
        expect(f"malformed cursor {cur[:12]!r} -> 400", r, 400, "invalid_request", "rulings Leads cursor")
    r = c.raw("GET", "/api/v1/leads?limit=3", token=tok["a"])
    cur = r.json()["page"]["nextCursor"]
    if cur:
        tampered = cur[:-2] + ("A" if cur[-2] != "A" else "B") + cur[-1]
        r = c.raw("GET", f"/api/v1/leads?cursor={requests.utils.quote(tampered)}", token=tok["a"])
        expect("tampered cursor -> 400", r, 400, "invalid_request", "rulings Leads cursor")
        # A's cursor used by B
        r = c.raw("GET", f"/api/v1/leads?cursor={requests.utils.quote(cur)}", token=tok["b"])
        check("A's cursor in B's hands: 400 or only B's rows",
              r.status_code == 400 or all(x["partnerId"] == B for x in r.json().get("data", [])),
              r.text[:200], "task: isolation")
    st["leads_cursor"] = cur
    # B sees only B
    r = c.raw("GET", "/api/v1/leads?limit=200&includeTest=true", token=tok["b"])
    check("B sees only its 3 leads", r.status_code == 200 and len(r.json()["data"]) == 3 and
          all(x["partnerId"] == B for x in r.json()["data"]), r.text[:200])
    # admin token does not widen leads
    r = c.raw("GET", f"/api/v1/leads?limit=200&partner_id={B}", token=tok["adm"])
    check("admin ?partner_id on leads does not show B", r.status_code in (200, 400) and
          all(x["partnerId"] == A for x in (r.json().get("data") or [])), r.text[:200])
    # consent rendering
    row = next((x for x in all_rows if x["id"] == st["noconsent"]), None)
    check("No Consent rendering of email and phone", row and row["email"] == "No Consent" and
          row["phone"] == "No Consent", str(row))
    row = next((x for x in all_rows if x["id"] == st["sub_lead"]), None)
    check("lead subId as string '7'", row and row["subId"] == "7", str(row))
    row = next((x for x in all_rows if x["origin"] == "headless_intake"), None)
    check("headless lead without phone: phone absent or empty",
          row is not None and row.get("phone", "") in ("", None) and "phone" not in row or (row and row.get("phone") == ""),
          str(row))
    check("lead subId is a string everywhere", all(isinstance(x["subId"], str) for x in all_rows),
          str({type(x["subId"]).__name__ for x in all_rows}))
    # by id (extensions 8.2)
    section("GET /api/v1/leads/{id} (extensions §8.2)")
    lid = all_rows[5]["id"]
    r = c.raw("GET", f"/api/v1/leads/{lid}", token=tok["a"])
    check("own lead by id == listing row", r.status_code == 200 and data(r) == all_rows[5], r.text[:200])
    r = c.raw("GET", f"/api/v1/leads/{tests[0]['id']}", token=tok["a"])
    check("test lead found by id (widest filter)", r.status_code == 200 and data(r) == tests[0], r.text[:200])
    bl = st["leads"]["B"][0]["id"]
    expect("B's lead by A's token -> 404", c.raw("GET", f"/api/v1/leads/{bl}", token=tok["a"]), 404, "not_found")
    expect("B's lead by A's admin token -> 404", c.raw("GET", f"/api/v1/leads/{bl}", token=tok["adm"]), 404,
           "not_found", "extensions §8 settled points")
    expect("unknown uuid -> 404", c.raw("GET", f"/api/v1/leads/{uuid.uuid4()}", token=tok["a"]), 404, "not_found")
    for bad in ("123", "not-a-uuid", lid + "0", "%20" + lid):
        expect(f"malformed lead id {bad[:14]!r} -> 400", c.raw("GET", f"/api/v1/leads/{bad}", token=tok["a"]), 400,
               "invalid_request", "extensions §8.2")
    expect("lead by id without token -> 401", c.raw("GET", f"/api/v1/leads/{lid}"), 401, "missing_bearer")
    up = lid.upper()
    r = c.raw("GET", f"/api/v1/leads/{up}", token=tok["a"])
    check("upper-case uuid: 200 same row or 400 (not 404/5xx)", r.status_code in (200, 400), f"{r.status_code}")


def check_orders(c, st):
    section("GET /api/v1/orders (spec; rulings Orders)")
    tok = st["tok"]
    r = c.raw("GET", "/api/v1/orders", token=tok["a"])
    expect("200", r, 200)
    b = r.json()
    check("envelope {data} only", list(b) == ["data"], str(list(b)))
    rows = b["data"]
    ids = [x["orderId"] for x in rows]
    check("A sees real, test and simulated orders, not B's",
          set(ids) == {"ORD-A-1", "ORD-A-2", "ORD-A-T", "TEST-SIM-run1"}, str(ids))
    for x in rows:
        ok, det = keys_exact(x, ORDER_KEYS)
        if not ok:
            check("non-admin order fields exactly the spec's", False, det, "rulings Orders")
            break
    else:
        check("non-admin order fields exactly the spec's", True)
    check("createdDate RFC3339 ms Z", all(TS_MS.match(x["createdDate"]) for x in rows), rows[0]["createdDate"])
    check("money as numbers with <= 2 decimals", all(money_ok(x["amount"]) and money_ok(x["commission"]) for x in rows))
    ks = [x["createdDate"] for x in rows]
    check("newest first", ks == sorted(ks, reverse=True), str(ks))
    by = {x["orderId"]: x for x in rows}
    sim = by.get("TEST-SIM-run1", {})
    check("simulated order: status Simulated, commission 0, isTest true, amount from event",
          sim.get("status") == "Simulated" and sim.get("commission") == 0 and sim.get("isTest") is True and
          sim.get("amount") == 249 and sim.get("product") == "Sema", str(sim))
    check("stored test order isTest true", by.get("ORD-A-T", {}).get("isTest") is True)
    check("real order isTest false, status shipped", by.get("ORD-A-1", {}).get("isTest") is False and
          by.get("ORD-A-1", {}).get("status") == "shipped")
    check("subAccount = nickname of the sub-account", by.get("ORD-A-1", {}).get("subAccount") == "Staff Seven",
          str(by.get("ORD-A-1")))
    check("subAccount empty when none", by.get("ORD-A-2", {}).get("subAccount") == "", str(by.get("ORD-A-2")))
    check("amount 199.5 / commission 4.1 exact", by.get("ORD-A-1", {}).get("amount") == 199.5 and
          by.get("ORD-A-2", {}).get("commission") == 4.1)
    r = c.raw("GET", "/api/v1/orders", token=tok["adm"])
    rows = data(r) or []
    for x in rows:
        ok, det = keys_exact(x, ORDER_KEYS + ["partnerId", "customerName", "customerEmail"])
        if not ok:
            check("admin order fields = spec + partnerId, customerName, customerEmail", False, det)
            break
    else:
        check("admin order fields = spec + partnerId, customerName, customerEmail", bool(rows))
    check("admin orders still only own partner", all(x.get("partnerId") == A for x in rows), str(rows[:1]))
    section("GET /api/v1/orders/{orderId} (extensions §8.2)")
    for oid in ("ORD-A-1", "TEST-SIM-run1", "ORD-A-T"):
        r = c.raw("GET", f"/api/v1/orders/{oid}", token=tok["a"])
        check(f"order {oid} by id == listing", r.status_code == 200 and data(r) == by.get(oid), r.text[:200])
    r = c.raw("GET", "/api/v1/orders/ORD-A-1", token=tok["adm"])
    check("admin by id carries admin fields", r.status_code == 200 and "customerEmail" in (data(r) or {}), r.text[:200])
    expect("B's order by A -> 404", c.raw("GET", "/api/v1/orders/ORD-B-1", token=tok["a"]), 404, "not_found")
    expect("B's simulated order by A -> 404", c.raw("GET", "/api/v1/orders/TEST-SIM-runB", token=tok["a"]), 404,
           "not_found")
    expect("B's order by A's admin -> 404", c.raw("GET", "/api/v1/orders/ORD-B-1", token=tok["adm"]), 404, "not_found")
    expect("unknown order -> 404", c.raw("GET", "/api/v1/orders/NOPE-1", token=tok["a"]), 404, "not_found")
    expect("unknown simulated -> 404", c.raw("GET", "/api/v1/orders/TEST-SIM-nope", token=tok["a"]), 404, "not_found")
    r = c.raw("GET", "/api/v1/orders/" + "x" * 101, token=tok["a"])
    expect("malformed orderId (101 chars) -> 400", r, 400, "invalid_request", "extensions §8.2")
    r = c.raw("GET", "/api/v1/orders/a%20b", token=tok["a"])
    expect("malformed orderId (space) -> 400", r, 400, "invalid_request", "extensions §8.2")
    section("orders ingest and commission (operator-api Activity)")
    body = {"orderId": "ORD-A-1", "partnerId": A, "subId": "7", "createdDate": by["ORD-A-1"]["createdDate"],
            "product": "Sema", "amount": 199.5, "commission": 40, "status": "shipped", "isTest": False,
            "source": "checkout", "customerName": "Cus Tomer", "customerEmail": "cus@example.test"}
    r = c.op("POST", "/orders", body)
    expect("same order body again -> 200", r, 200)
    today = now().strftime("%Y-%m-%d")
    r = c.op("GET", f"/partners/{A}/commission-summary?from=2026-01-01&to={today}")
    d = data(r) or {}
    check("commission summary counts real orders only, excludes stored test + simulated",
          d.get("orderCount") == 2 and d.get("commissionTotal") == 44.1 and d.get("excludedTestOrders") == 2,
          str(d))
    r = c.op("POST", "/orders", dict(body, amount=1))
    expect("other body under existing orderId -> 409 invalid_request", r, 409, "invalid_request")
    r = c.op("POST", "/orders", dict(body, orderId="TEST-SIM-x"))
    expect("orderId TEST-SIM- reserved -> 400", r, 400, "invalid_request")
    r = c.op("POST", "/orders", dict(body, orderId="ORD-A-9", amount=1.234))
    expect("amount with 3 decimals -> 400", r, 400, "invalid_request")
    r = c.op("POST", "/orders", dict(body, orderId="ORD-A-9", amount=-1))
    expect("negative amount -> 400", r, 400, "invalid_request")
    r = c.op("POST", "/orders", dict(body, orderId="ORD-A-9", partnerId="nobody"))
    expect("unknown partner -> 404", r, 404, "not_found")
    r = c.op("POST", "/orders", dict(body, orderId="ORD-A-9", subId="99", commission=0))
    check("order with unknown subId: 201 (decisions.md: ingest need not find the sub-account) or 4xx",
          r.status_code in (201, 400, 404), f"{r.status_code}")
    if r.status_code == 201:
        st["orders"]["A_unknown_sub"] = data(r)
    r = c.op("GET", f"/partners/{A}/commission-summary?from=2026-01-01")
    expect("commission summary without to -> 400", r, 400, "invalid_request")
    r = c.op("GET", f"/partners/{A}/commission-summary?from=2026-13-01&to=2026-01-01")
    expect("commission summary bad date -> 400", r, 400, "invalid_request")


def check_payouts(c, st):
    section("GET /api/v1/payouts (spec)")
    tok = st["tok"]
    r = c.raw("GET", "/api/v1/payouts", token=tok["a"])
    rows = data(r) or []
    check("A sees exactly its payout", r.status_code == 200 and len(rows) == 1, r.text[:200])
    if rows:
        p = rows[0]
        ok, det = keys_exact(p, PAYOUT_KEYS)
        check("payout fields exactly the spec's (no receipt/note)", ok, det)
        check("createdAt and payoutDate are YYYY-MM-DD", DATE.match(p["createdAt"] or "") and
              p["payoutDate"] == "2026-11-01", str(p))
        check("createdAt is today UTC", p["createdAt"] == now().strftime("%Y-%m-%d"), p["createdAt"])
        check("payoutAmount 1234.5 number", p["payoutAmount"] == 1234.5, str(p["payoutAmount"]))
        check("email is partner's", p["email"] == "ops@example.test", p["email"])
        check("no note text leaks", "secret note" not in r.text)
        r2 = c.raw("GET", f"/api/v1/payouts/{p['recordId']}", token=tok["a"])
        check("payout by id == listing", r2.status_code == 200 and data(r2) == p, r2.text[:200])
    bp = st["payouts"]["B"]["recordId"]
    expect("B's payout by A -> 404", c.raw("GET", f"/api/v1/payouts/{bp}", token=tok["a"]), 404, "not_found")
    expect("malformed payout id -> 400", c.raw("GET", "/api/v1/payouts/xyz", token=tok["a"]), 400, "invalid_request")
    r = c.op("POST", "/payouts", {"partnerId": f"{A}.7", "payoutDate": "2026-11-01", "payoutAmount": 1,
                                 "status": "paid"})
    expect("payout with sub-account code -> 400", r, 400, "invalid_request", "operator-guide Payouts")
    r = c.op("POST", "/payouts", {"partnerId": A, "payoutDate": "2026-11-01T00:00:00Z", "payoutAmount": 1,
                                 "status": "paid"})
    expect("payoutDate not a date -> 400", r, 400, "invalid_request")


def check_subaccounts(c, st):
    section("sub-accounts (spec; rulings Sub-accounts)")
    tok = st["tok"]
    r = c.raw("GET", "/api/v1/sub-accounts", token=tok["a"])
    rows = data(r) or []
    check("A lists its 2 sub-accounts", r.status_code == 200 and len(rows) == 2 and list(r.json()) == ["data"],
          r.text[:300])
    for x in rows:
        ok, det = keys_exact(x, SA_KEYS)
        if not ok:
            check("PortalSubAccount fields", False, det)
            break
    else:
        check("PortalSubAccount fields", True)
    check("timestamps ms Z", all(TS_MS.match(x["createdAt"]) and TS_MS.match(x["updatedAt"]) for x in rows))
    sa = st["sa"][f"{A}.7"]
    check("POST answer matches listing", sa in rows, str(sa))
    p = "/api/v1/sub-accounts"
    r = c.raw("POST", p, tok["a"], json={"subId": "30", "nickname": "  Thirty  "})
    expect("create -> 201", r, 201)
    d = data(r) or {}
    check("nickname trimmed", d.get("nickname") == "Thirty", str(d))
    st["sa30"] = d
    bad = [({"subId": "0", "nickname": "x"}, "subId 0"), ({"subId": "251", "nickname": "x"}, "subId 251"),
           ({"subId": "07", "nickname": "x"}, "subId leading zero"), ({"subId": "abc", "nickname": "x"}, "subId abc"),
           ({"subId": 8, "nickname": "x"}, "subId number"), ({"subId": "", "nickname": "x"}, "subId empty"),
           ({"subId": " 8", "nickname": "x"}, "subId with space"), ({"subId": "8"}, "nickname missing"),
           ({"nickname": "x"}, "subId missing"), ({"subId": "8", "nickname": "   "}, "nickname blank"),
           ({"subId": "8", "nickname": "a" * 65}, "nickname 65"), ({"subId": "8", "nickname": "a\u0007b"}, "control char"),
           ({"subId": "8", "nickname": None}, "nickname null"), ({"subId": "-1", "nickname": "x"}, "subId -1"),
           ({"subId": "8", "nickname": "x", "extra": 1}, "unknown field (soft)")]
    for body, what in bad:
        r = c.raw("POST", p, tok["a"], json=body)
        if what.endswith("(soft)"):
            check(f"create {what}: 201 or 400", r.status_code in (201, 400), f"{r.status_code}")
            if r.status_code == 201:
                c.raw("DELETE", p, tok["a"], json={"recordId": data(r)["id"]})
            continue
        expect(f"create with {what} -> 400 invalid_request", r, 400, "invalid_request", "rulings Sub-accounts")
    r = c.raw("POST", p, tok["a"], json={"subId": "8", "nickname": "a" * 64})
    expect("nickname 64 chars -> 201", r, 201)
    r = c.raw("POST", p, tok["a"], json={"subId": "250", "nickname": "ñandú 🎉"})
    expect("subId 250 + unicode nickname -> 201", r, 201)
    r = c.raw("POST", p, tok["a"], json={"subId": "7", "nickname": "dup"})
    expect("duplicate subId -> 409 invalid_request", r, 409, "invalid_request", "spec POST /sub-accounts")
    r = c.raw("POST", p, tok["b"], json={"subId": "12", "nickname": "B twelve"})
    expect("B may use a subId A uses -> 201", r, 201)
    r = c.raw("POST", p, tok["a"], data="{not json", headers={"Content-Type": "application/json"})
    expect("malformed JSON -> 400 invalid_request", r, 400, "invalid_request", "rulings Wire conventions")
    r = c.raw("POST", p, tok["a"], data='["x"]', headers={"Content-Type": "application/json"})
    expect("JSON array body -> 400", r, 400, "invalid_request")
    r = c.raw("POST", p, tok["a"], data='{"subId":"9","nickname":"n"}', headers={"Content-Type": "text/plain"})
    check("text/plain content type: 201 or 4xx with error body", r.status_code in (201, 400, 415), f"{r.status_code}")
    r = c.raw("POST", p, tok["a"])
    expect("no body -> 400", r, 400, "invalid_request")
    r = c.raw("POST", p, tok["a"], data=b'{"subId":"9","nickname":"' + b"a" * (1024 * 1024 + 10) + b'"}',
              headers={"Content-Type": "application/json"})
    expect("body over 1 MiB -> 413 invalid_request", r, 413, "invalid_request", "rulings Wire conventions")
    # delete
    bsa = st["sa"][f"{B}.7"]
    r = c.raw("DELETE", p, tok["a"], json={"recordId": bsa["id"]})
    expect("A deletes B's sub-account -> 404", r, 404, "not_found", "rulings Sub-accounts")
    r = c.raw("GET", p, tok["b"])
    check("B's sub-account still there", any(x["id"] == bsa["id"] for x in data(r) or []))
    expect("delete unknown -> 404", c.raw("DELETE", p, tok["a"], json={"recordId": str(uuid.uuid4())}), 404, "not_found")
    expect("delete missing recordId -> 400", c.raw("DELETE", p, tok["a"], json={}), 400, "invalid_request")
    expect("delete bad recordId -> 400", c.raw("DELETE", p, tok["a"], json={"recordId": "nope"}), 400,
           "invalid_request")
    expect("delete recordId number -> 400", c.raw("DELETE", p, tok["a"], json={"recordId": 5}), 400, "invalid_request")
    expect("delete no body -> 400", c.raw("DELETE", p, tok["a"]), 400, "invalid_request")
    r = c.raw("DELETE", p, tok["a"], json={"recordId": st["sa30"]["id"]})
    check("delete own -> 200 {data:{ok:true}}", r.status_code == 200 and r.json() == {"data": {"ok": True}}, r.text)
    expect("delete again -> 404", c.raw("DELETE", p, tok["a"], json={"recordId": st["sa30"]["id"]}), 404, "not_found")
    for m in ("GET", "POST", "DELETE"):
        expect(f"{m} sub-accounts without token -> 401", c.raw(m, p, json={}), 401, "missing_bearer")
    section("GET /api/v1/sub-accounts/{id} (extensions §8.2)")
    r = c.raw("GET", f"{p}/{sa['id']}", token=tok["a"])
    check("own by id == listing", r.status_code == 200 and data(r) == sa, r.text[:200])
    expect("B's by A -> 404", c.raw("GET", f"{p}/{bsa['id']}", token=tok["a"]), 404, "not_found")
    expect("deleted -> 404", c.raw("GET", f"{p}/{st['sa30']['id']}", token=tok["a"]), 404, "not_found")
    expect("malformed -> 400", c.raw("GET", f"{p}/7", token=tok["a"]), 400, "invalid_request")


def qs(url):
    from urllib.parse import urlsplit, parse_qsl
    return parse_qsl(urlsplit(url).query, keep_blank_values=True)


def qd(url):
    return dict(qs(url))


def check_links(c, st):
    tok = st["tok"]
    section("GET /api/v1/dna-links (spec)")
    r = c.raw("GET", "/api/v1/dna-links", token=tok["a"])
    d = data(r) or []
    check("200 with one product", r.status_code == 200 and len(d) == 1 and list(r.json()) == ["data"], r.text[:200])
    if d:
        ok, det = keys_exact(d[0], ["recordId", "email", "partnerId", "productName", "description", "intakeUrl",
                                    "productImageUrl", "minimumPrice", "recommendedPrice", "maximumPrice",
                                    "userSetPrice", "parentProduct", "available"])
        check("DnaProductLink fields", ok, det)
        check("intakeUrl carries partner_id", qd(d[0]["intakeUrl"]).get("partner_id") == A, d[0]["intakeUrl"])
        check("userSetPrice is partner's 119", d[0]["userSetPrice"] == 119, str(d[0]["userSetPrice"]))
    expect("B (no DNA access) -> 403 forbidden", c.raw("GET", "/api/v1/dna-links", token=tok["b"]), 403, "forbidden")
    expect("no token -> 401", c.raw("GET", "/api/v1/dna-links"), 401, "missing_bearer")
    r = c.raw("GET", "/api/v1/dna-links?foo=bar", token=tok["a"])
    check("unknown query param on dna-links tolerated or 400", r.status_code in (200, 400), f"{r.status_code}")

    section("GET /api/v1/medical-intake-links (spec; rulings Links)")
    r = c.raw("GET", "/api/v1/medical-intake-links", token=tok["a"])
    b = r.json()
    check("envelope {data, sub:null}", r.status_code == 200 and set(b) == {"data", "sub"} and b["sub"] is None,
          r.text[:200])
    d = {x["productName"]: x for x in b.get("data", [])}
    check("active products only (Sema, Tadal)", set(d) == {"Sema", "Tadal"}, str(list(d)))
    for x in d.values():
        ok, det = keys_exact(x, ["recordId", "email", "partnerId", "productName", "details", "url", "legacyUrl",
                                 "urlStyle", "imageUrl", "category", "suggestedPrices", "tiers"])
        if not ok:
            check("PartnerProductLink fields", False, det)
            break
        for t in x["tiers"]:
            ok, det = keys_exact(t, ["key", "label", "minPrice", "maxPrice", "userPrice", "commission"])
            if not ok:
                check("medical Tier fields", False, det)
                break
    else:
        check("PartnerProductLink and Tier fields", True)
    s = d.get("Sema", {})
    check("headless product: urlStyle headless, url self-hosted, legacyUrl provider",
          s.get("urlStyle") == "headless" and s.get("url", "").startswith("https://intake.example.com/sema") and
          s.get("legacyUrl", "").startswith("https://legacy-intake.example.com/legacy/sema"), str(s)[:300])
    t = d.get("Tadal", {})
    check("legacy product: urlStyle legacy, url == legacyUrl", t.get("urlStyle") == "legacy" and
          t.get("url") == t.get("legacyUrl"), str(t)[:300])
    check("partner_id on url and legacyUrl", all(qd(x["url"]).get("partner_id") == A and
                                                 qd(x["legacyUrl"]).get("partner_id") == A for x in d.values()))
    st_t = {tt["key"]: tt for tt in s.get("tiers", [])}
    check("tier userPrice: partner price 249 for m1, recommended 549 for m3",
          st_t.get("m1", {}).get("userPrice") == 249 and st_t.get("m3", {}).get("userPrice") == 549, str(st_t))
    check("category array", s.get("category") == ["weight-loss"], str(s.get("category")))
    r = c.raw("GET", "/api/v1/medical-intake-links?sub=7", token=tok["a"])
    b = r.json()
    check("sub=7 echoed as string '7'", b.get("sub") == "7", str(b.get("sub")))
    urls = [x["url"] for x in b.get("data", [])] + [x["legacyUrl"] for x in b.get("data", [])]
    check("sub: partner_id rewritten, no sub param on medical links",
          all(qd(u).get("partner_id") not in (None, A) and "sub" not in qd(u) for u in urls), str(urls[:2]))
    st["sub_code"] = qd(urls[0]).get("partner_id") if urls else None
    for v in ("0", "251", "abc", "99", "", "7.0", "-7", "07"):
        expect(f"sub={v!r} -> 400", c.raw("GET", f"/api/v1/medical-intake-links?sub={v}", token=tok["a"]), 400,
               "invalid_request", "spec medical links sub")
    expect("sub=12 of A used by B (B has no 12? it has) isolation: sub=7 of B ok",
           c.raw("GET", "/api/v1/medical-intake-links?sub=7", token=tok["b"]), 200)
    r = c.raw("GET", "/api/v1/medical-intake-links?lang=es", token=tok["a"])
    s = {x["productName"]: x for x in data(r) or []}.get("Sema", {})
    check("lang=es on headless url", qd(s.get("url", "")).get("lang") == "es", s.get("url"))
    r = c.raw("GET", "/api/v1/medical-intake-links?lang=xx", token=tok["a"])
    check("lang=xx falls back (200, no lang=xx)", r.status_code == 200 and "lang=xx" not in r.text, r.text[:200])
    r = c.raw("GET", "/api/v1/medical-intake-links?lang=en", token=tok["a"])
    s = {x["productName"]: x for x in data(r) or []}.get("Sema", {})
    check("lang=en requested explicitly carries lang=en", qd(s.get("url", "")).get("lang") == "en", s.get("url"),
          "rulings lang")
    r = c.raw("GET", "/api/v1/medical-intake-links", token=tok["b"])
    d = data(r) or []
    check("B (headlessLinks off): every link legacy", r.status_code == 200 and all(
        x["urlStyle"] == "legacy" and x["url"] == x["legacyUrl"] for x in d), r.text[:200])
    for x in data(c.raw("GET", "/api/v1/medical-intake-links?sub=7&lang=es", token=tok["a"])) or []:
        for u in (x["url"], x["legacyUrl"]):
            keys = [k for k, _ in qs(u)]
            allowed = {"partner_id", "sub", "m", "lang", "redeem", "utm_source", "utm_medium", "utm_campaign",
                       "utm_term", "utm_content", "gclid", "fbclid", "msclkid"}
            if not set(keys) <= allowed or len(keys) != len(set(keys)):
                check("only documented params, no duplicates", False, u)
                break
    check("medical links sanitized (documented params only)", True)

    section("GET /api/v1/care-service-links (spec; rulings Links)")
    p = "/api/v1/care-service-links"
    r = c.raw("GET", p, token=tok["a"])
    b = r.json()
    check("envelope {data, sub, service, duration} all null", set(b) == {"data", "sub", "service", "duration"} and
          b["sub"] is None and b["service"] is None and b["duration"] is None, str({k: b.get(k) for k in b if k != "data"}))
    d = {x["service"]: x for x in b.get("data", [])}
    check("A sees primary-care, urgent-care, mental-health", set(d) == {"primary-care", "urgent-care", "mental-health"},
          str(list(d)))
    for x in d.values():
        ok, det = keys_exact(x, ["recordId", "service", "productName", "description", "imageUrl", "url", "redeemUrl",
                                 "tiers"])
        if not ok:
            check("CareServiceLink fields", False, det)
            break
        for t in x["tiers"]:
            ok, det = keys_exact(t, ["key", "label", "userPrice", "commission", "url"])
            if not ok:
                check("care Tier fields", False, det)
                break
    else:
        check("CareServiceLink and Tier fields", True)
    pc = d.get("primary-care", {})
    check("url has partner_id, no m", qd(pc.get("url", "")).get("partner_id") == A and "m" not in qd(pc.get("url", "")),
          pc.get("url"))
    check("redeemUrl has redeem=true, no m", qd(pc.get("redeemUrl", "")).get("redeem") == "true" and
          "m" not in qd(pc.get("redeemUrl", "")), pc.get("redeemUrl"))
    check("tier urls carry m=<months>", [qd(t["url"]).get("m") for t in pc.get("tiers", [])] == ["1", "3", "12"],
          str([t.get("url") for t in pc.get("tiers", [])]))
    check("url starts at care_services_url/slug", pc.get("url", "").startswith("https://care.example.com/primary"),
          pc.get("url"))
    r = c.raw("GET", f"{p}?service=primary-care&sub=7&duration=3", token=tok["a"])
    b = r.json()
    check("echo sub '7', service string, duration int 3", b.get("sub") == "7" and b.get("service") == "primary-care" and
          b.get("duration") == 3, str({k: b.get(k) for k in b if k != "data"}))
    dd = b.get("data", [])
    check("service filter", [x["service"] for x in dd] == ["primary-care"], str([x["service"] for x in dd]))
    if dd:
        x = dd[0]
        check("duration: url gets m=3, tiers reduced to 3", qd(x["url"]).get("m") == "3" and
              [qd(t["url"]).get("m") for t in x["tiers"]] == ["3"], str(x)[:300])
        check("sub=7 on every url", all(qd(u).get("sub") == "7" for u in [x["url"], x["redeemUrl"]] +
                                        [t["url"] for t in x["tiers"]]))
        check("redeemUrl never carries m even with duration", "m" not in qd(x["redeemUrl"]), x["redeemUrl"])
    r = c.raw("GET", f"{p}?duration=6", token=tok["a"])
    check("duration=6: products without a 6-month tier left out",
          [x["service"] for x in data(r) or []] == ["urgent-care"], str([x["service"] for x in data(r) or []]))
    for q in ("service=dentistry", "service=", "sub=0", "sub=251", "sub=99", "sub=x", "duration=2", "duration=0",
              "duration=abc", "duration=", "duration=3.0"):
        expect(f"{q} -> 400", c.raw("GET", f"{p}?{q}", token=tok["a"]), 400, "invalid_request")
    r = c.raw("GET", p, token=tok["b"])
    check("B without subscription: empty list, not error", r.status_code == 200 and data(r) == [], r.text[:200])
    r = c.raw("GET", f"{p}?lang=es", token=tok["a"])
    check("care links lang=es carried", all(qd(x["url"]).get("lang") == "es" for x in data(r) or []),
          str([x["url"] for x in data(r) or []][:1]))
    # feature flag off
    r = c.op("PUT", "/care-services/feature-flags", {"urgent-care": False})
    check("feature flags answer all five", r.status_code == 200 and len(data(r) or {}) == 5, r.text[:200])
    r = c.raw("GET", p, token=tok["a"])
    check("flag off hides urgent-care", "urgent-care" not in [x["service"] for x in data(r) or []])
    c.op("PUT", "/care-services/feature-flags", {"urgent-care": True})
    r = c.op("PUT", "/care-services/feature-flags", {"dentistry": True})
    expect("unknown flag key -> 400", r, 400, "invalid_request")


def check_coupons(c, st):
    section("GET /api/v1/care-services-coupons JSON (spec; rulings Coupons)")
    tok = st["tok"]
    p = "/api/v1/care-services-coupons"
    ca = st["coupons"]["A"]["coupons"]
    # redeem one, void one (operator)
    code0 = ca[0]["code"]
    messy = " " + "-".join([code0[:4].lower(), code0[4:8], code0[8:]]) + " "
    r = c.op("POST", "/care-services-coupons/redeem", {"code": messy, "productSlug": "primary", "months": 3,
                                                        "email": "pat@example.test",
                                                        "providerPrimaryExternalId": "ext-1"})
    expect("redeem with messy code -> 200", r, 200)
    red = data(r) or {}
    check("redeemed fields recorded", red.get("status") == "redeemed" and red.get("redeemedEmail") == "pat@example.test"
          and red.get("redeemedProviderPrimaryExternalId") == "ext-1" and TS_MS.match(red.get("redeemedAt") or ""),
          str(red))
    r = c.op("POST", "/care-services-coupons/redeem", {"code": code0, "productSlug": "primary", "months": 3,
                                                        "email": "p2@example.test", "providerPrimaryExternalId": "e"})
    expect("redeem again -> 409 invalid_request", r, 409, "invalid_request")
    r = c.op("POST", "/care-services-coupons/redeem", {"code": ca[1]["code"], "productSlug": "primary", "months": 6,
                                                        "email": "p2@example.test", "providerPrimaryExternalId": "e"})
    expect("redeem wrong months -> 400", r, 400, "invalid_request")
    r = c.op("POST", "/care-services-coupons/redeem", {"code": "ZZZZZZZZZZZ1", "productSlug": "primary", "months": 3,
                                                        "email": "p2@example.test", "providerPrimaryExternalId": "e"})
    expect("redeem unknown code -> 404", r, 404, "not_found")
    r = c.op("POST", f"/care-services-coupons/{ca[1]['id']}/void")
    expect("void -> 200", r, 200)
    r = c.op("POST", f"/care-services-coupons/{ca[1]['id']}/void")
    expect("void again -> 409", r, 409)
    r = c.op("POST", "/care-services-coupons/redeem", {"code": ca[1]["code"], "productSlug": "primary", "months": 3,
                                                        "email": "p2@example.test", "providerPrimaryExternalId": "e"})
    expect("redeem void -> 409", r, 409, "invalid_request")
    # bulk order validation
    bo = {"partnerId": A, "productSlug": "primary", "months": 3, "quantity": 1, "unitPriceCents": 1,
          "purchaserEmail": "b@example.test", "purchaserSource": "x"}
    for over, what in (({"quantity": 0}, "quantity 0"), ({"quantity": 10001}, "quantity 10001"),
                       ({"months": 2}, "months 2"), ({"productSlug": "nope"}, "bad slug"),
                       ({"expiresAt": "2020-01-01T00:00:00.000Z"}, "past expiresAt"),
                       ({"subAccountId": "99"}, "unknown subAccountId"), ({"subAccountId": 7}, "subAccountId number"),
                       ({"unitPriceCents": 1.5}, "fractional cents"), ({"bogus": 1}, "unknown field")):
        expect(f"bulk order {what} -> 400", c.op("POST", "/care-services-coupons/bulk-orders", dict(bo, **over)), 400,
               "invalid_request")
    expect("bulk order unknown partner -> 404",
           c.op("POST", "/care-services-coupons/bulk-orders", dict(bo, partnerId="nobody")), 404, "not_found")
    # listing
    r = c.raw("GET", p, token=tok["a"])
    b = r.json()
    check("envelope {data,total,limit,offset}", set(b) == {"data", "total", "limit", "offset"}, str(list(b)))
    check("defaults limit 100 offset 0, total 7", b.get("limit") == 100 and b.get("offset") == 0 and b.get("total") == 7,
          str({k: b.get(k) for k in ("total", "limit", "offset")}))
    rows = b.get("data", [])
    for x in rows:
        ok, det = keys_exact(x, COUPON_KEYS + ["subAccountId"])
        ok = ok and (x["subAccountId"] is None or isinstance(x["subAccountId"], str))
        if not ok:
            check("CareServiceCoupon fields", False, det)
            break
    else:
        check("CareServiceCoupon fields (+ subAccountId string/null, rulings Coupons)", True)
    check("codes are 12 of A-Z0-9", all(re.fullmatch(r"[A-Z0-9]{12}", x["code"]) for x in rows))
    check("only A's coupons", all(x["partnerId"] == A for x in rows))
    check("notes JSON unchanged (no formula prefix in JSON)", any(x["notes"] == '=HYPERLINK("x") say "hi"' for x in rows),
          str([x["notes"] for x in rows][:2]))
    check("unitPriceCents integer", all(isinstance(x["unitPriceCents"], int) for x in rows))
    by = {x["code"]: x for x in rows}
    ce = st["coupons"]["Aexp"]["coupons"]
    check("active past expiresAt reads expired", all(by.get(x["code"], {}).get("status") == "expired" for x in ce),
          str([by.get(x["code"], {}).get("status") for x in ce]))
    check("void reads void", by.get(ca[1]["code"], {}).get("status") == "void")
    r = c.raw("GET", f"{p}?status=expired", token=tok["a"])
    check("status=expired filter finds the 2", r.status_code == 200 and len(data(r) or []) == 2 and r.json()["total"] == 2,
          r.text[:200])
    r = c.raw("GET", f"{p}?status=active", token=tok["a"])
    check("status=active excludes expired ones", r.status_code == 200 and r.json()["total"] == 3 and
          all(x["status"] == "active" for x in data(r) or []), r.text[:200])
    r = c.raw("GET", f"{p}?status=redeemed,void", token=tok["a"])
    check("status=redeemed,void -> 2", r.status_code == 200 and r.json()["total"] == 2, r.text[:200])
    for q in ("status=bogus", "status=active,", "product_slug=nope", "product_slug=", "limit=0", "limit=501",
              "limit=abc", "offset=-1", "offset=abc", "offset=1.5", "format=xml", "partner_id=bad%20id",
              "partner_id=" + "x" * 65):
        expect(f"{q} -> 400", c.raw("GET", f"{p}?{q}", token=tok["a"]), 400, "invalid_request")
    r = c.raw("GET", f"{p}?product_slug=vet-care", token=tok["a"])
    check("product_slug filter", r.status_code == 200 and r.json()["total"] == 2, r.text[:200])
    r = c.raw("GET", f"{p}?limit=2&offset=1", token=tok["a"])
    b = r.json()
    check("limit/offset echoed and applied", b.get("limit") == 2 and b.get("offset") == 1 and len(b["data"]) == 2 and
          b["total"] == 7, str({k: b.get(k) for k in ("total", "limit", "offset")}))
    r = c.raw("GET", f"{p}?limit=500&offset=100", token=tok["a"])
    check("offset past end: empty page, total kept", r.status_code == 200 and r.json()["data"] == [] and
          r.json()["total"] == 7, r.text[:200])
    expect("non-admin own partner_id -> 200", c.raw("GET", f"{p}?partner_id={A}", token=tok["a"]), 200)
    expect("non-admin other partner_id -> 403", c.raw("GET", f"{p}?partner_id={B}", token=tok["a"]), 403, "forbidden",
           "rulings Coupons")
    expect("non-admin unknown partner_id -> 403", c.raw("GET", f"{p}?partner_id=zzz", token=tok["a"]), 403, "forbidden",
           "rulings Coupons")
    r = c.raw("GET", f"{p}?partner_id={B}", token=tok["adm"])
    check("admin partner_id=B sees B's coupons", r.status_code == 200 and r.json()["total"] == 2 and
          all(x["partnerId"] == B for x in data(r) or []), r.text[:200])
    r = c.raw("GET", f"{p}?partner_id=nobody", token=tok["adm"])
    check("admin unknown partner -> empty list", r.status_code == 200 and data(r) == [] and r.json()["total"] == 0,
          r.text[:200])
    c.raw("GET", f"{p}?partner_id={A}", token=tok["adm"])
    c.raw("GET", f"{p}?partner_id={B}&format=csv", token=tok["adm"])
    r = c.raw("GET", f"{p}?partner_id={A}&limit=1", token=tok["bdm"])
    check("B's admin token may list A's coupons", r.status_code == 200 and r.json().get("total") == 7, r.text[:100])
    r = c.raw("GET", p, token=tok["adm"])
    check("admin default: own partner only", r.status_code == 200 and r.json()["total"] == 7, r.text[:200])
    expect("no token -> 401", c.raw("GET", p), 401, "missing_bearer")

    section("coupons CSV (spec; rulings Coupons; extensions §7)")
    r = c.raw("GET", f"{p}?format=csv", token=tok["a"])
    check("200 text/csv", r.status_code == 200 and r.headers.get("Content-Type", "").startswith("text/csv"),
          f"{r.status_code} {r.headers.get('Content-Type')}")
    cd = r.headers.get("Content-Disposition", "")
    fname = f"care-services-coupons-{now().strftime('%Y-%m-%d')}.csv"
    check("attachment filename with UTC date", cd.startswith("attachment") and fname in cd, cd)
    check("X-Total-Count 7", r.headers.get("X-Total-Count") == "7", str(r.headers.get("X-Total-Count")))
    check("Cache-Control no-store on CSV", "no-store" in r.headers.get("Cache-Control", ""))
    raw = r.content
    check("no BOM", not raw.startswith(b"\xef\xbb\xbf"))
    lines = raw.decode().splitlines()
    check("header row quoted, columns in order", lines and lines[0] == ",".join(f'"{x}"' for x in CSV_COLS), lines[:1])
    quoted = all(re.fullmatch(r'("([^"]|"")*")(,"([^"]|"")*")*', ln) for ln in lines)
    check("every value quoted", quoted, "\n".join(lines[:3]))
    rows = list(csv.DictReader(io.StringIO(raw.decode())))
    check("7 data rows", len(rows) == 7, str(len(rows)))
    if rows:
        x = next((y for y in rows if y["notes"]), rows[0])
        check("formula-leading value prefixed with ' (notes)", x["notes"] == "'=HYPERLINK(\"x\") say \"hi\"", x["notes"],
              "extensions §7")
        check("formula-leading purchaser_source prefixed", any(y["purchaser_source"] == "'+cmd|calc" for y in rows),
              str({y["purchaser_source"] for y in rows}))
        check("embedded quotes doubled in raw line", '""x""' in raw.decode())
        check("sub_account_id is subId '7'", any(y["sub_account_id"] == "7" for y in rows),
              str({y["sub_account_id"] for y in rows}))
        check("null is empty string", any(y["redeemed_at"] == "" for y in rows))
        check("CSV status expired for past expiresAt", sum(y["status"] == "expired" for y in rows) == 2)
        check("CSV timestamps ms Z", all(TS_MS.match(y["created_at"]) for y in rows), rows[0]["created_at"])
    r = c.raw("GET", f"{p}?format=csv&limit=2&offset=6", token=tok["a"])
    check("CSV paging limit/offset", r.status_code == 200 and len(r.text.splitlines()) == 2 and
          r.headers.get("X-Total-Count") == "7", r.text[:200])
    r = c.raw("GET", f"{p}?format=csv&limit=501", token=tok["a"])
    expect("CSV limit 501 -> 400", r, 400, "invalid_request")
    r = c.raw("GET", f"{p}?format=csv&status=bogus", token=tok["a"])
    check("CSV error is JSON error body", r.status_code == 400 and ecode(r) == "invalid_request", r.text[:200])
    r = c.raw("GET", f"{p}?format=JSON", token=tok["a"])
    check("format=JSON (case) -> 200 or 400", r.status_code in (200, 400), f"{r.status_code}")

    section("GET /api/v1/care-services-coupons/{code} (extensions §8.2)")
    c1 = ca[2]["code"]
    rj = by.get(c1)
    r = c.raw("GET", f"{p}/{c1}", token=tok["a"])
    check("by code == listing", r.status_code == 200 and data(r) == rj, r.text[:200])
    r = c.raw("GET", f"{p}/{c1.lower()[:4]}-{c1[4:8]}-{c1[8:]}", token=tok["a"])
    check("by code normalized (lower, hyphens)", r.status_code == 200 and data(r) == rj, r.text[:200])
    r = c.raw("GET", f"{p}/%20{c1[:6]}%20{c1[6:]}%20", token=tok["a"])
    check("by code normalized (spaces)", r.status_code == 200 and data(r) == rj, r.text[:200])
    bc = st["coupons"]["B"]["coupons"][0]["code"]
    expect("B's code by A -> 404", c.raw("GET", f"{p}/{bc}", token=tok["a"]), 404, "not_found")
    expect("B's code by A's admin -> 404", c.raw("GET", f"{p}/{bc}", token=tok["adm"]), 404, "not_found",
           "extensions §8 settled")
    expect("unknown code -> 404", c.raw("GET", f"{p}/ZZZZZZZZZZZ1", token=tok["a"]), 404, "not_found")
    for bad in ("SHORT", "ZZZZZZZZZZZZZ", "ZZZZZZZZZZZ!"):
        expect(f"malformed code {bad} -> 400", c.raw("GET", f"{p}/{bad}", token=tok["a"]), 400, "invalid_request")
    r = c.raw("GET", f"{p}/{ce[0]['code']}", token=tok["a"])
    check("expired by code reads expired", r.status_code == 200 and (data(r) or {}).get("status") == "expired",
          r.text[:200])


def check_catalog(c, st):
    section("public catalog (spec; rulings Links/Public catalog)")
    cats = ["weight-loss", "mens-health", "womens-health", "hair-loss", "wellness", "all-products"]
    expect_names = {"weight-loss": ["Sema"], "mens-health": ["Tadal"], "womens-health": [], "hair-loss": [],
                    "wellness": ["Tadal"], "all-products": ["Sema", "Tadal"]}

    def hdrs(r, what):
        h = r.headers
        cc = {x.strip() for x in h.get("Cache-Control", "").split(",")}
        ok = ({"no-store", "no-cache", "must-revalidate", "proxy-revalidate"} <= cc and
              h.get("Cdn-Cache-Control") == "no-store" and
              h.get("Access-Control-Allow-Methods", "").replace(" ", "") == "GET,OPTIONS" and
              h.get("Access-Control-Allow-Headers") == "Content-Type" and
              h.get("Content-Type", "").startswith("application/json"))
        check(f"catalog headers on {what}", ok, str({k: h.get(k) for k in ("Cache-Control", "Cdn-Cache-Control",
                                                                          "Access-Control-Allow-Methods",
                                                                          "Access-Control-Allow-Headers",
                                                                          "Content-Type")}))

    for cat in cats:
        r = c.raw("GET", f"/api/{cat}?partner_id={A}")
        b = r.json() if r.status_code == 200 else {}
        names = sorted(x["name"] for x in b.get("products", []))
        check(f"/api/{cat}: 200, active products of the category, count", r.status_code == 200 and
              names == sorted(expect_names[cat]) and b.get("count") == len(names) and set(b) == {"products", "count"},
              f"{r.status_code} {names} {b.get('count')}")
        if cat == "all-products":
            hdrs(r, "200")
            for x in b.get("products", []):
                ok, det = keys_exact(x, ["id", "name", "image", "imageKind", "imageFileId", "imageSourceUrl",
                                         "intakeUrl", "price1Month", "price3Month", "price6Month", "details"])
                check(f"CatalogProduct fields ({x['name']})", ok, det)
                check(f"price text format ({x['name']})", all(re.fullmatch(r"\$\d+\.\d{2}", x[k]) for k in
                                                              ("price1Month", "price3Month", "price6Month")),
                      str([x[k] for k in ("price1Month", "price3Month", "price6Month")]))
                check(f"intakeUrl carries partner_id ({x['name']})", qd(x["intakeUrl"]).get("partner_id") == A,
                      x["intakeUrl"])
            by = {x["name"]: x for x in b.get("products", [])}
            s = by.get("Sema", {})
            check("Sema prices: partner m1 249, m3 549, no 6-month $0.00",
                  (s.get("price1Month"), s.get("price3Month"), s.get("price6Month")) == ("$249.00", "$549.00", "$0.00"),
                  str(s))
            check("Tadal 6-month $1299.00 (no thousands separator)", by.get("Tadal", {}).get("price6Month") == "$1299.00",
                  str(by.get("Tadal")))
            check("catalog intakeUrl == medical link url (headless for A)",
                  s.get("intakeUrl", "").startswith("https://intake.example.com/sema"), s.get("intakeUrl"))
            check("imageKind 'file'", all(x["imageKind"] == "file" for x in b.get("products", [])))
    for q, st_, code, what in (("", 400, "invalid_request", "missing partner_id"),
                               ("?partner_id=", 400, "invalid_request", "empty partner_id"),
                               ("?partner_id=bad%20id", 400, "invalid_request", "malformed partner_id"),
                               ("?partner_id=nobody", 404, "not_found", "unknown partner"),
                               (f"?partner_id={C}", 404, "not_found", "inactive partner")):
        r = c.raw("GET", f"/api/weight-loss{q}")
        expect(f"catalog {what} -> {st_}", r, st_, code)
        hdrs(r, what)
    r = c.raw("OPTIONS", f"/api/weight-loss?partner_id={A}")
    check("OPTIONS -> 204 with the CORS headers", r.status_code == 204 and
          r.headers.get("Access-Control-Allow-Methods", "").replace(" ", "") == "GET,OPTIONS", f"{r.status_code} {dict(r.headers)}")
    r = c.raw("GET", f"/api/weight-loss?partner_id={A}.7")
    check("catalog with sub-account code: 200/400/404, never 5xx", r.status_code in (200, 400, 404), f"{r.status_code}")
    r = c.raw("GET", "/api/dentistry?partner_id=" + A)
    expect("unknown category -> 404 not_found", r, 404, "not_found")
    r = c.raw("POST", f"/api/weight-loss?partner_id={A}")
    expect("POST on catalog -> 405 invalid_request", r, 405, "invalid_request", "rulings Wire conventions")


def check_errors(c, st):
    section("routing errors, parser limits (rulings Wire conventions; extensions §12)")
    tok = st["tok"]
    expect("unknown route -> 404 not_found", c.raw("GET", "/api/v1/nope", token=tok["a"]), 404, "not_found")
    expect("unknown route without token -> 404", c.raw("GET", "/api/v1/nope"), 404, "not_found")
    expect("unknown top-level route -> 404", c.raw("GET", "/nope"), 404, "not_found")
    r = c.raw("PUT", "/api/v1/leads", token=tok["a"])
    expect("wrong method -> 405 invalid_request", r, 405, "invalid_request")
    r = c.raw("PATCH", "/api/v1/sub-accounts", token=tok["a"], json={})
    expect("PATCH sub-accounts -> 405", r, 405, "invalid_request")
    r = c.raw("DELETE", "/api/v1/orders", token=tok["a"])
    expect("DELETE orders -> 405", r, 405, "invalid_request")
    expect("healthz 200", c.raw("GET", "/healthz"), 200)
    expect("readyz 200", c.raw("GET", "/readyz"), 200)
    c.raw("GET", "/api/v1/leads?limit=5&zzqmark=1", token=tok["a"])
    r = c.raw("GET", "/api/v1/leads", token=tok["a"])
    check("X-Request-Id present", bool(r.headers.get("X-Request-Id")))
    host, port = c.base.split("//")[1].split(":")
    port = int(port)

    def rawsock(data_, wait=8.0):
        s = socket.create_connection((host, port), timeout=wait)
        s.sendall(data_)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
                if b"\r\n\r\n" in out:
                    head, _, rest = out.partition(b"\r\n\r\n")
                    m = re.search(rb"content-length:\s*(\d+)", head, re.I)
                    if m and len(rest) >= int(m.group(1)):
                        break
        except socket.timeout:
            pass
        s.close()
        return out

    def st_body(out):
        try:
            status = int(out.split(b" ", 2)[1])
        except Exception:
            return None, None
        body = out.partition(b"\r\n\r\n")[2]
        try:
            return status, json.loads(body)["error"]["code"]
        except Exception:
            return status, body[:100]

    out = rawsock(b"GET /api/v1/leads?x=" + b"a" * 17000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    s_, code = st_body(out)
    check("request line > 16 KiB -> 414 invalid_request", (s_, code) == (414, "invalid_request"), f"{s_} {code}")
    out = rawsock(b"GET /api/v1/leads HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 33000 + b"\r\n\r\n")
    s_, code = st_body(out)
    check("headers > 32 KiB -> 431 invalid_request", (s_, code) == (431, "invalid_request"), f"{s_} {code}")
    out = rawsock(b"GET /api/v1/leads HTTP/1.1\r\nHost: x\r\n" +
                  b"".join(b"X-H%d: v\r\n" % i for i in range(105)) + b"\r\n")
    s_, code = st_body(out)
    check("105 header fields -> 431 invalid_request", (s_, code) == (431, "invalid_request"), f"{s_} {code}")
    out = rawsock(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" +
                  b"".join(b"X-H%d: v\r\n" % i for i in range(97)) + b"\r\n")
    s_, code = st_body(out)
    check("98 header fields (<= 100) accepted", s_ == 200, f"{s_} {code}", "extensions §12 (100 fields)")
    t0 = time.time()
    out = rawsock(b"GET /healthz HTTP/1.1\r\nHost: x\r\n", wait=10)
    s_, code = st_body(out)
    check("head incomplete for 5 s -> 408 invalid_request", (s_, code) == (408, "invalid_request") and
          4 <= time.time() - t0 <= 8, f"{s_} {code} after {time.time() - t0:.1f}s")


def check_operator(c, st):
    section("operator API (operator-api.md)")
    r = c.raw("GET", f"/internal/v1/partners/{A}")
    expect("no token -> 401 missing_bearer", r, 401, "missing_bearer")
    r = c.raw("GET", f"/internal/v1/partners/{A}", token="x" * 40)
    expect("wrong token -> 401 invalid_token", r, 401, "invalid_token")
    r = c.raw("GET", f"/internal/v1/partners/{A}", token=st["tok"]["adm"])
    expect("partner admin token on operator API -> 401 invalid_token", r, 401, "invalid_token")
    r = c.op("GET", f"/partners/{A}")
    d = data(r) or {}
    check("GET partner: body + partnerId, createdAt, updatedAt", r.status_code == 200 and
          {"partnerId", "createdAt", "updatedAt", "careServices", "enabledLangs"} <= set(d), str(d)[:200])
    expect("GET unknown partner -> 404", c.op("GET", "/partners/nobody"), 404, "not_found")
    r = c.op("PUT", "/partners/newp", partner_body())
    expect("PUT new partner -> 201", r, 201)
    expect("PUT same partner -> 200", c.op("PUT", "/partners/newp", partner_body()), 200)
    for body, what in ((dict(partner_body(), defaultLang="es", enabledLangs=["en"]), "defaultLang not enabled"),
                       (dict(partner_body(), bogus=1), "unknown field"),
                       ({k: v for k, v in partner_body().items() if k != "name"}, "missing name"),
                       (dict(partner_body(), enabledLangs=["fr"]), "lang fr"),
                       (dict(partner_body(), active=None), "active null")):
        expect(f"PUT partner {what} -> 400", c.op("PUT", "/partners/newp", body), 400, "invalid_request")
    expect("PUT partner bad id -> 400", c.op("PUT", "/partners/bad%20id", partner_body()), 400, "invalid_request")
    expect("PUT partner 65-char id -> 400", c.op("PUT", "/partners/" + "x" * 65, partner_body()), 400, "invalid_request")
    expect("user for unknown partner -> 404", c.op("POST", "/users", {"email": "x@example.test", "partnerId": "nobody",
                                                                       "admin": False}), 404, "not_found")
    expect("user with unknown field -> 400", c.op("POST", "/users", {"email": "x@example.test", "partnerId": A,
                                                                      "admin": False, "role": "x"}), 400)
    lb = {"partnerId": A, "firstName": "X", "lastName": "Y", "email": "x@example.test", "emailConsent": True,
          "smsConsent": True, "origin": "managed-website", "location": "L"}
    r = c.op("POST", "/leads", dict(lb, partnerId=f"{A}.99"))
    check("lead with code of a missing sub-account: 201 (decisions.md) or 400", r.status_code in (201, 400), r.text[:200])
    if r.status_code == 201:
        st["leads"]["A"].append(data(r))
        st["leads"]["A_nonheadless"].append(data(r)["id"])
    for over, what in (({"isTest": True, "testSource": "simulation"}, "isTest on managed-website"),
                       ({"testSource": "simulation"}, "testSource without isTest"),
                       ({"origin": "headless_intake", "isTest": True}, "isTest without testSource"),
                       ({"origin": "headless_intake", "isTest": True, "testSource": "other"}, "bad testSource"),
                       ({"emailx": 1}, "unknown field"), ({"email": "not-an-email"}, "bad email"),
                       ({"origin": "Bad Origin"}, "bad origin"),
                       ({"partnerId": f"{A}.7", "subId": "12"}, "code and subId disagree"),
                       ({"phone": "call me"}, "bad phone"), ({"firstName": ""}, "empty firstName")):
        expect(f"lead ingest {what} -> 400", c.op("POST", "/leads", dict(lb, **over)), 400, "invalid_request")
    expect("lead ingest unknown partner -> 404", c.op("POST", "/leads", dict(lb, partnerId="nobody")), 404)
    if st.get("sub_code"):
        r = c.op("POST", "/leads", dict(lb, partnerId=st["sub_code"]))
        d = data(r) or {}
        check("lead ingest with link's sub-account code resolves (partnerId, subId)",
              r.status_code == 201 and d.get("partnerId") == A and d.get("subId") == "7", r.text[:200])
        st["leads"]["A"].append(d)
        st["leads"]["A_nonheadless"].append(d.get("id"))
    # patch
    lid = st["leads"]["A_headless"][0]
    r = c.op("PATCH", f"/leads/{lid}", {"phone": "+1 555 0199"})
    d = data(r) or {}
    check("PATCH lead sets phone, moves updatedAt", r.status_code == 200 and d.get("phone") == "+1 555 0199" and
          d.get("updatedAt") > d.get("createdAt", ""), r.text[:200])
    expect("PATCH lead empty body -> 400", c.op("PATCH", f"/leads/{lid}", {}), 400, "invalid_request")
    expect("PATCH unknown lead -> 404", c.op("PATCH", f"/leads/{uuid.uuid4()}", {"phone": "1"}), 404, "not_found")
    expect("PATCH lead unknown field -> 400", c.op("PATCH", f"/leads/{lid}", {"origin": "x"}), 400, "invalid_request")
    expect("operator unknown route -> 404", c.op("GET", "/nope"), 404, "not_found")
    r = c.op("GET", "/openapi.json")
    check("operator openapi behind token: 200", r.status_code == 200)
    expect("operator openapi without token -> 401", c.raw("GET", "/internal/v1/openapi.json"), 401, "missing_bearer")
    r = c.raw("GET", "/api/v1/openapi.json")
    check("partner openapi public 200 and 3.1", r.status_code == 200 and r.json().get("openapi", "").startswith("3.1"))
    expect("analytics event bad runId -> 400", c.op("POST", "/analytics-events", {
        "runId": "bad id", "partnerId": A, "event": "order_completed", "product": "x", "amount": 1,
        "occurredAt": iso(now()), "testSource": "simulation"}), 400, "invalid_request")
    r = c.op("POST", "/analytics-events", {"runId": "run1", "partnerId": A, "event": "order_completed", "product": "x",
                                           "amount": 5, "occurredAt": iso(now()), "testSource": "simulation"})
    check("second order_completed of a run accepted (202), ignored", r.status_code == 202, r.text[:200])
    r = c.raw("GET", "/api/v1/orders/TEST-SIM-run1", token=st["tok"]["a"])
    check("simulated order unchanged by the second event", (data(r) or {}).get("amount") == 249, r.text[:200])


def check_idempotency(c, st):
    section("Idempotency-Key (extensions §8.3)")
    tok = st["tok"]
    p = "/api/v1/sub-accounts"
    body = json.dumps({"subId": "40", "nickname": "Forty"})
    H = {"Content-Type": "application/json"}
    r1 = c.raw("POST", p, tok["a"], data=body, headers=dict(H, **{"Idempotency-Key": "k-1"}))
    expect("first keyed POST -> 201", r1, 201)
    r2 = c.raw("POST", p, tok["a"], data=body, headers=dict(H, **{"Idempotency-Key": "k-1"}))
    check("replay -> same status and body, Idempotent-Replayed: true", r2.status_code == 201 and r2.text == r1.text and
          r2.headers.get("Idempotent-Replayed") == "true", f"{r2.status_code} {r2.headers.get('Idempotent-Replayed')}")
    r = c.raw("GET", p, tok["a"])
    check("replay created nothing", sum(x["subId"] == "40" for x in data(r) or []) == 1)
    r = c.raw("POST", p, tok["a"], data=body.replace("Forty", "Fourty"), headers=dict(H, **{"Idempotency-Key": "k-1"}))
    expect("same key other body -> 422 idempotency_key_reused", r, 422, "idempotency_key_reused")
    r = c.raw("POST", p, tok["a"], data=body.replace(", ", ","), headers=dict(H, **{"Idempotency-Key": "k-1"}))
    expect("same key, body differing in whitespace only -> 422 (byte for byte)", r, 422, "idempotency_key_reused")
    r = c.raw("POST", p + "?x=1", tok["a"], data=body, headers=dict(H, **{"Idempotency-Key": "k-1"}))
    expect("same key, other query string -> 422", r, 422, "idempotency_key_reused")
    r = c.raw("POST", "/api/v1/webhook-endpoints", tok["a"], data=body, headers=dict(H, **{"Idempotency-Key": "k-1"}))
    expect("same key, other path -> 422", r, 422, "idempotency_key_reused")
    r = c.raw("POST", p, tok["b"], data=body, headers=dict(H, **{"Idempotency-Key": "k-1"}))
    check("B with A's key runs its own request (201, B's record)", r.status_code == 201 and
          r.headers.get("Idempotent-Replayed") is None and (data(r) or {}).get("id") != (data(r1) or {}).get("id"),
          f"{r.status_code} {r.text[:200]}")
    r = c.raw("POST", p, tok["adm"], data=body, headers=dict(H, **{"Idempotency-Key": "k-1"}))
    check("same partner, other token (admin) with the key: replay (caller is the partner)",
          r.status_code == 201 and r.headers.get("Idempotent-Replayed") == "true", f"{r.status_code} {r.text[:100]}")
    for k, what in (("", "empty"), ("a" * 256, "256 chars"), ("a b", "space"), ("é", "non-ASCII")):
        hv = k.encode("utf-8") if what == "non-ASCII" else k
        r = c.raw("POST", p, tok["a"], data=json.dumps({"subId": "41", "nickname": "x"}),
                  headers=dict(H, **{"Idempotency-Key": hv}))
        expect(f"key {what} -> 400 invalid_request", r, 400, "invalid_request")
    r = c.raw("POST", p, tok["a"], data=json.dumps({"subId": "41", "nickname": "x"}),
              headers=dict(H, **{"Idempotency-Key": "a" * 255}))
    expect("key 255 chars accepted -> 201", r, 201)
    r = c.raw("POST", p, None, data=body, headers=dict(H, **{"Idempotency-Key": "a b"}))
    expect("bad key without token -> 401 (auth first)", r, 401, "missing_bearer")
    bad = json.dumps({"subId": "0", "nickname": "x"})
    r1 = c.raw("POST", p, tok["a"], data=bad, headers=dict(H, **{"Idempotency-Key": "k-400"}))
    r2 = c.raw("POST", p, tok["a"], data=bad, headers=dict(H, **{"Idempotency-Key": "k-400"}))
    check("a kept 400 is replayed", r1.status_code == 400 and r2.status_code == 400 and
          r2.headers.get("Idempotent-Replayed") == "true", f"{r1.status_code} {r2.status_code} {r2.headers.get('Idempotent-Replayed')}")
    # DELETE is not POST/PATCH: key ignored or accepted, never breaks
    # operator API
    lb = json.dumps({"partnerId": B, "firstName": "Idem", "lastName": "P", "email": "i@example.test", "emailConsent": True,
                     "smsConsent": True, "origin": "managed-website", "location": "L"})
    r1 = c.raw("POST", "/internal/v1/leads", c.internal, data=lb, headers=dict(H, **{"Idempotency-Key": "op-1"}))
    r2 = c.raw("POST", "/internal/v1/leads", c.internal, data=lb, headers=dict(H, **{"Idempotency-Key": "op-1"}))
    check("operator keyed lead POST replayed: one lead", r1.status_code == 201 and r2.status_code == 201 and
          r1.text == r2.text and r2.headers.get("Idempotent-Replayed") == "true", f"{r1.status_code} {r2.status_code}")
    if r1.status_code == 201:
        st["leads"]["B"].append(data(r1))
    r = c.raw("POST", p, tok["b"], data=lb, headers=dict(H, **{"Idempotency-Key": "op-1"}))
    check("partner using operator's key never sees operator's answer", r.headers.get("Idempotent-Replayed") is None and
          "Idem" not in r.text, f"{r.status_code} {r.text[:200]}")


def check_webhook_endpoints(c, st):
    section("webhook endpoints (rulings Webhooks; extensions §7, §12)")
    tok = st["tok"]
    p = "/api/v1/webhook-endpoints"
    good = {"url": "https://hooks.example.invalid/h", "events": ["lead.created"]}
    r = c.raw("POST", p, tok["a"], json=dict(good, secret=True))
    d = data(r) or {}
    expect("create with secret -> 201", r, 201)
    check("secret returned once, whsec_ + 32 chars", re.fullmatch(r"whsec_[A-Za-z0-9+/]{32}", d.get("secret", "") or ""),
          str(d.get("secret")), "extensions §9")
    check("endpoint fields", {"id", "url", "events", "leadCreatedDelay", "customHeader", "hasSecret", "createdAt",
                              "status", "disabledReason", "disabledAt"} <= set(d), str(sorted(d)))
    eid = d.get("id")
    st["endpoint"] = eid
    r = c.raw("GET", p, tok["a"])
    check("listing never carries the secret", r.status_code == 200 and (d.get("secret") or "zz") not in r.text and
          all("secret" not in x for x in data(r) or []), r.text[:200])
    bad_urls = ["http://hooks.example.invalid/h", "https://127.0.0.1/h", "https://localhost/h", "https://localhost./h",
                "https://10.0.0.1/h", "https://169.254.169.254/h", "https://[::1]/h", "https://[64:ff9b::a00:1]/h",
                "https://[64:ff9b:1::1]/h", "https://[2002:7f00:1::1]/h", "https://[2001::1]/h",
                "https://[::ffff:0:7f00:1]/h", "https://[fec0::1]/h", "https://[100::1]/h", "https://[::ffff:127.0.0.1]/h",
                "https://0.0.0.0/h", "https://100.64.0.1/h", "https://[fd00::1]/h", "https://2130706433/h",
                "https://0x7f000001/h", "https://127.1/h"]
    for u in bad_urls:
        r = c.raw("POST", p, tok["a"], json=dict(good, url=u))
        expect(f"endpoint url {u} refused 400", r, 400, "invalid_request", "rulings Webhooks; extensions §7")
        if r.status_code == 201:
            c.raw("DELETE", f"{p}/{data(r)['id']}", tok["a"])
    for over, what in (({"events": []}, "empty events"), ({"events": ["lead.deleted"]}, "unknown event"),
                       ({"events": ["ping"]}, "ping event"), ({"leadCreatedDelay": "2m"}, "delay 2m"),
                       ({"customHeader": {"name": "X-Partner-Foo", "value": "v"}}, "reserved X-Partner-*"),
                       ({"customHeader": {"name": "x_forwarded_for", "value": "v"}}, "x_forwarded_for (_ -> -)"),
                       ({"customHeader": {"name": "Webhook-Id", "value": "v"}}, "webhook-id"),
                       ({"customHeader": {"name": "cookie", "value": "v"}}, "cookie"),
                       ({"customHeader": {"name": "Proxy_Authorization", "value": "v"}}, "Proxy_Authorization"),
                       ({"customHeader": {"name": "X-Real-IP", "value": "v"}}, "X-Real-IP"),
                       ({"customHeader": {"name": "Keep-Alive", "value": "v"}}, "Keep-Alive"),
                       ({"customHeader": {"name": "X-Ok", "value": "a\nb"}}, "value with newline"),
                       ({"customHeader": {"name": "X-Ok", "value": "a" * 1025}}, "value 1025 chars"),
                       ({"customHeader": {"name": "X Ok", "value": "v"}}, "name with space"),
                       ({"customHeader": {"name": "X" * 65, "value": "v"}}, "name 65 chars")):
        expect(f"endpoint {what} -> 400", c.raw("POST", p, tok["a"], json=dict(good, **over)), 400, "invalid_request")
    r = c.raw("POST", p, tok["a"], json=dict(good, customHeader={"name": "X-Api-Key", "value": "supersecretvalue1234"}))
    d = data(r) or {}
    check("POST answer carries the custom header value", (d.get("customHeader") or {}).get("value") ==
          "supersecretvalue1234", str(d.get("customHeader")))
    eid2 = d.get("id")
    r = c.raw("GET", p, tok["a"])
    ch = next((x.get("customHeader") for x in data(r) or [] if x["id"] == eid2), None)
    check("listing masks the value: {name, valueHint: '…1234'}", ch == {"name": "X-Api-Key", "valueHint": "…1234"} and
          "supersecretvalue1234" not in r.text, str(ch), "extensions §12")
    r = c.raw("PATCH", f"{p}/{eid2}", tok["a"], json={"leadCreatedDelay": "5m"})
    ch = (data(r) or {}).get("customHeader")
    check("other PATCH masks the value", r.status_code == 200 and ch == {"name": "X-Api-Key", "valueHint": "…1234"},
          f"{r.status_code} {ch}")
    r = c.op("GET", f"/partners/{A}/webhook-endpoints")
    check("operator listing masks the value", "supersecretvalue1234" not in r.text, r.text[:200])
    r = c.raw("POST", p, tok["a"], json=dict(good, customHeader={"name": "X-Short", "value": "12345678"}))
    ch = None
    if r.status_code == 201:
        rid = data(r)["id"]
        ch = next((x.get("customHeader") for x in data(c.raw("GET", p, tok["a"])) or [] if x["id"] == rid), None)
        c.raw("DELETE", f"{p}/{rid}", tok["a"])
    check("value of <= 8 chars masked as '…'", ch == {"name": "X-Short", "valueHint": "…"}, str(ch))
    c.raw("DELETE", f"{p}/{eid2}", tok["a"])
    # 10 endpoints max
    ids = []
    r = c.raw("GET", p, tok["a"])
    n = len(data(r) or [])
    for i in range(10 - n):
        r = c.raw("POST", p, tok["a"], json=good)
        if r.status_code == 201:
            ids.append(data(r)["id"])
    r = c.raw("POST", p, tok["a"], json=good)
    expect("11th endpoint -> 400 invalid_request", r, 400, "invalid_request")
    for i in ids:
        c.raw("DELETE", f"{p}/{i}", tok["a"])
    # isolation
    r = c.raw("POST", p, tok["b"], json=good)
    beid = (data(r) or {}).get("id")
    for m, path, body in (("PATCH", f"{p}/{beid}", {"leadCreatedDelay": None}), ("DELETE", f"{p}/{beid}", None),
                          ("POST", f"{p}/{beid}/test", None), ("POST", f"{p}/{beid}/recover",
                                                               {"since": iso(now() - dt.timedelta(hours=1))})):
        expect(f"A {m} {path.split('/')[-1][:8]} on B's endpoint -> 404", c.raw(m, path, tok["a"], json=body), 404,
               "not_found")
    r = c.raw("GET", p, tok["b"])
    check("B's endpoint survives A's attempts", any(x["id"] == beid for x in data(r) or []))
    expect("PATCH malformed id -> 400", c.raw("PATCH", f"{p}/xyz", tok["a"], json={"enabled": True}), 400, "invalid_request")
    r = c.raw("DELETE", f"{p}/{uuid.uuid4()}", tok["a"])
    expect("DELETE unknown endpoint -> 404", r, 404, "not_found")
    # test / deliveries
    r = c.raw("POST", f"{p}/{eid}/test", tok["a"])
    d = data(r) or {}
    check("test -> 202 ping delivery", r.status_code == 202 and d.get("event") == "ping" and d.get("status") == "pending",
          r.text[:200])
    st["ping"] = d.get("id")
    r = c.raw("GET", "/api/v1/webhook-deliveries", tok["a"])
    b = r.json()
    check("deliveries listing envelope", r.status_code == 200 and set(b) == {"data", "page"}, r.text[:200])
    if st.get("ping"):
        r = c.raw("GET", f"/api/v1/webhook-deliveries/{st['ping']}", tok["a"])
        check("delivery by id with attemptLog", r.status_code == 200 and "attemptLog" in (data(r) or {}), r.text[:200])
        expect("B reads A's delivery -> 404", c.raw("GET", f"/api/v1/webhook-deliveries/{st['ping']}", tok["b"]), 404,
               "not_found")
        expect("B resends A's delivery -> 404", c.raw("POST", f"/api/v1/webhook-deliveries/{st['ping']}/resend", tok["b"]),
               404, "not_found")
    for q in ("status=bogus", "event=nope", "limit=0", "limit=201", "endpointId=xyz", "cursor=garbage"):
        expect(f"deliveries {q} -> 400", c.raw("GET", f"/api/v1/webhook-deliveries?{q}", tok["a"]), 400, "invalid_request")
    r = c.raw("GET", f"/api/v1/webhook-deliveries?endpointId={beid}", tok["a"])
    check("deliveries filtered by B's endpointId: 404 or empty for A",
          r.status_code == 404 or (r.status_code == 200 and data(r) == []), r.text[:200])
    for since, what in ((iso(now() - dt.timedelta(days=8)), "8 days ago"), (iso(now() + dt.timedelta(hours=1)), "future")):
        expect(f"recover since {what} -> 400", c.raw("POST", f"{p}/{eid}/recover", tok["a"], json={"since": since}), 400,
               "invalid_request")
    r = c.raw("POST", f"{p}/{eid}/recover", tok["a"], json={"since": iso(now() - dt.timedelta(hours=1))})
    check("recover -> 202 {requeued, remaining}", r.status_code == 202 and set(data(r) or {}) == {"requeued", "remaining"},
          r.text[:200], "extensions §12")
    r = c.raw("PATCH", f"{p}/{eid}", tok["a"], json={"enabled": False})
    check("PATCH enabled:false -> disabled, reason null", r.status_code == 200 and (data(r) or {}).get("status") ==
          "disabled" and (data(r) or {}).get("disabledReason") is None, r.text[:200])
    expect("test on disabled endpoint -> 400", c.raw("POST", f"{p}/{eid}/test", tok["a"]), 400, "invalid_request")
    if st.get("ping"):
        expect("resend on disabled endpoint -> 400",
               c.raw("POST", f"/api/v1/webhook-deliveries/{st['ping']}/resend", tok["a"]), 400, "invalid_request")
    c.raw("PATCH", f"{p}/{eid}", tok["a"], json={"enabled": True})


def check_events(c, st):
    section("events feed (extensions §8.1)")
    tok = st["tok"]
    p = "/api/v1/events"
    r = c.raw("GET", f"{p}?limit=200", tok["a"])
    b = r.json()
    check("envelope {data, page}", r.status_code == 200 and set(b) == {"data", "page"}, r.text[:200])
    ev = b.get("data", [])
    for e in ev:
        ok, det = keys_exact(e, ["id", "event", "created_at", "data"])
        if not ok:
            check("Event fields {id,event,created_at,data}", False, det)
            break
    else:
        check("Event fields {id,event,created_at,data}", True)
    check("created_at ms Z", all(TS_MS.match(e["created_at"]) for e in ev))
    ks = [(e["created_at"]) for e in ev]
    check("oldest first", ks == sorted(ks))
    kinds = {}
    for e in ev:
        kinds[e["event"]] = kinds.get(e["event"], 0) + 1
    n_leads = len([x for x in st["leads"]["A_nonheadless"] if x])
    check(f"lead.created for every non-headless lead of A ({n_leads}), none for headless",
          kinds.get("lead.created") == n_leads and not any(
              e["data"].get("lead", {}).get("origin") == "headless_intake" for e in ev), str(kinds))
    check("no ping in the feed although a test was sent", "ping" not in kinds, str(kinds))
    check("payout.created present", kinds.get("payout.created") == 1, str(kinds))
    check("order.created for stored orders", kinds.get("order.created", 0) >= 2, str(kinds))
    check("only A's data", all(e["data"].get("lead", {}).get("partnerId", A) == A for e in ev))
    le = next((e for e in ev if e["event"] == "lead.created"), None)
    if le:
        ok, det = keys_exact(le["data"], ["lead"])
        check("lead.created data {lead: LeadRow}", ok and set(le["data"]["lead"]) - {"phone"} <= set(LEAD_KEYS), det)
    oe = next((e for e in ev if e["event"] == "order.created"), None)
    if oe:
        check("order.created data {source, order}", set(oe["data"]) == {"source", "order"} and
              set(oe["data"]["order"]) == set(ORDER_KEYS), str(oe["data"])[:300], "spec Events")
    pe = next((e for e in ev if e["event"] == "payout.created"), None)
    if pe:
        check("payout.created data {payout: Payout}", set(pe["data"]) == {"payout"} and
              set(pe["data"]["payout"]) == set(PAYOUT_KEYS), str(pe["data"])[:300])
    cur = b["page"]["nextCursor"]
    check("nextCursor never null", cur is not None)
    r = c.raw("GET", f"{p}?cursor={requests.utils.quote(cur)}", tok["a"])
    check("poll at end: empty page, same cursor", r.status_code == 200 and data(r) == [] and
          r.json()["page"]["nextCursor"] == cur, r.text[:200])
    r = c.op("POST", "/leads", {"partnerId": A, "firstName": "Late", "lastName": "L", "email": "l@example.test",
                                "emailConsent": True, "smsConsent": True, "origin": "public-link", "location": "x"})
    if r.status_code == 201:
        st["leads"]["A"].append(data(r))
        st["leads"]["A_nonheadless"].append(data(r)["id"])
    # The feed shows an event once every older transaction of the cluster has ended (docs/decisions.md,
    # "Events feed position"): usually at once, so poll a little.
    t0, d, polls = time.time(), [], 0
    while time.time() - t0 < 5:
        r = c.raw("GET", f"{p}?cursor={requests.utils.quote(cur)}", tok["a"])
        d = data(r) or []
        polls += 1
        if d:
            break
        time.sleep(0.05)
    st.setdefault("feed_lag", []).append(round(time.time() - t0, 3))
    check("poll after a new lead returns only it (within 5 s)", r.status_code == 200 and len(d) == 1 and
          d[0]["data"]["lead"]["firstName"] == "Late", r.text[:300])
    print(f"  INFO the new lead's event showed after {time.time() - t0:.3f}s ({polls} polls)")
    r = c.raw("GET", f"{p}?limit=3", tok["a"])
    walked, cur2, pages = [], None, 0
    while pages < 100:
        r = c.raw("GET", f"{p}?limit=7" + (f"&cursor={requests.utils.quote(cur2)}" if cur2 else ""), tok["a"])
        d = data(r) or []
        if not d:
            break
        walked += [e["id"] for e in d]
        cur2 = r.json()["page"]["nextCursor"]
        pages += 1
    check("cursor walk sees every event once", len(walked) == len(set(walked)) == len(ev) + 1,
          f"{len(walked)} {len(set(walked))} {len(ev) + 1}")
    r = c.raw("GET", f"{p}?types=payout.created,order.created", tok["a"])
    check("types filter", r.status_code == 200 and {e["event"] for e in data(r) or []} <= {"payout.created", "order.created"}
          and len(data(r) or []) >= 3, r.text[:200])
    for q in ("types=ping", "types=lead.created,", "types=nope", "limit=0", "limit=201", "since=yesterday",
              "cursor=garbage", "limit=abc"):
        expect(f"events {q} -> 400", c.raw("GET", f"{p}?{q}", tok["a"]), 400, "invalid_request")
    r = c.raw("GET", f"{p}?since={iso(now() + dt.timedelta(hours=1))}", tok["a"])
    check("since in future: empty, 200", r.status_code == 200 and data(r) == [], r.text[:200])
    r = c.raw("GET", f"{p}?since={requests.utils.quote(iso(now() - dt.timedelta(days=40)))}", tok["a"])
    expect("since older than the 30-day retention -> 410 cursor_expired", r, 410, "cursor_expired", "extensions §8.1")
    r = c.raw("GET", f"{p}?since={requests.utils.quote(iso(now() - dt.timedelta(days=29)))}", tok["a"])
    expect("since 29 days ago -> 200", r, 200)
    if ev:
        e0 = ev[0]
        r = c.raw("GET", f"{p}/{e0['id']}", tok["a"])
        check("event by id == feed entry", r.status_code == 200 and data(r) == e0, r.text[:300])
        expect("A's event by B -> 404", c.raw("GET", f"{p}/{e0['id']}", tok["b"]), 404, "not_found")
        expect("malformed event id -> 400", c.raw("GET", f"{p}/nope", tok["a"]), 400, "invalid_request")
    r = c.raw("GET", f"{p}?limit=200", tok["b"])
    check("B's feed holds only B's", r.status_code == 200 and all(
        e["data"].get("lead", {}).get("partnerId", B) == B for e in data(r) or []), r.text[:200])
    # cursors of one listing are not accepted by another
    lc = c.raw("GET", "/api/v1/leads?limit=1", tok["a"]).json()["page"]["nextCursor"]
    dc = c.raw("GET", "/api/v1/webhook-deliveries?limit=1", tok["a"]).json()["page"]["nextCursor"]
    expect("a leads cursor on the events feed -> 400", c.raw("GET", f"{p}?cursor={requests.utils.quote(lc)}", tok["a"]),
           400, "invalid_request")
    expect("an events cursor on leads -> 400", c.raw("GET", f"/api/v1/leads?cursor={requests.utils.quote(cur)}", tok["a"]),
           400, "invalid_request")
    if dc:
        expect("a deliveries cursor on leads -> 400",
               c.raw("GET", f"/api/v1/leads?cursor={requests.utils.quote(dc)}", tok["a"]), 400, "invalid_request")
        expect("a deliveries cursor on events -> 400", c.raw("GET", f"{p}?cursor={requests.utils.quote(dc)}", tok["a"]),
               400, "invalid_request")
    expect("an events cursor on deliveries -> 400",
           c.raw("GET", f"/api/v1/webhook-deliveries?cursor={requests.utils.quote(cur)}", tok["a"]), 400, "invalid_request")
    expect("a leads cursor on deliveries -> 400",
           c.raw("GET", f"/api/v1/webhook-deliveries?cursor={requests.utils.quote(lc)}", tok["a"]), 400, "invalid_request")
    # B using A's cursor
    r = c.raw("GET", f"{p}?cursor={requests.utils.quote(cur)}", tok["b"])
    check("A's events cursor in B's hands: 400 or only B's", r.status_code == 400 or all(
        e["data"].get("lead", {}).get("partnerId", B) == B for e in data(r) or []), r.text[:200])


def check_ratelimit_headers(c, st):
    section("rate-limit headers (rulings Rate limits)")
    tok = st["tok"]
    for path in ("/api/v1/leads", "/api/v1/leads?limit=0", "/api/v1/orders", "/api/v1/payouts",
                 "/api/v1/sub-accounts", "/api/v1/dna-links", "/api/v1/care-services-coupons?limit=0",
                 "/api/v1/webhook-endpoints", "/api/v1/events", f"/api/v1/leads/{uuid.uuid4()}"):
        r = c.raw("GET", path, tok["a"])
        h = r.headers
        ok = all(k in h for k in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"))
        ok = ok and h["X-RateLimit-Limit"].isdigit() and h["X-RateLimit-Remaining"].isdigit() and \
            h["X-RateLimit-Reset"].isdigit() and abs(int(h["X-RateLimit-Reset"]) - time.time()) < 4000
        check(f"{path[:40]} -> {r.status_code} carries X-RateLimit-* (Reset unix seconds)", ok,
              str({k: h.get(k) for k in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")}))
    r1 = c.raw("GET", "/api/v1/payouts", tok["a"])
    r2 = c.raw("GET", "/api/v1/payouts", tok["a"])
    try:
        check("Remaining decrements by one per call", int(r1.headers["X-RateLimit-Remaining"]) - 1 ==
              int(r2.headers["X-RateLimit-Remaining"]), f"{r1.headers.get('X-RateLimit-Remaining')} "
                                                        f"{r2.headers.get('X-RateLimit-Remaining')}")
    except Exception as e:
        check("Remaining decrements", False, str(e))
    r = c.raw("GET", "/api/v1/leads")
    check("401 (before the rate-limit step) carries no budget cost: no requirement; just no 5xx", r.status_code == 401)



def check_partner_variants(c, st):
    section("partner settings: lang default, DNA right, Care Services access (spec; rulings Links)")
    D = "bbD"
    must(c.op("PUT", f"/partners/{D}", partner_body(default="es", langs=("en", "es"), care=False)), "partner D")
    u = must(c.op("POST", "/users", {"email": "d@example.test", "partnerId": D, "admin": False}), "user D")
    t = must(c.op("POST", f"/users/{u['id']}/tokens", {}), "token D")["token"]
    r = c.raw("GET", "/api/v1/medical-intake-links", t)
    s = {x["productName"]: x for x in data(r) or []}
    check("partner default es: self-hosted url carries lang=es", qd(s.get("Sema", {}).get("url", "")).get("lang") == "es",
          s.get("Sema", {}).get("url"), "spec CareServiceLink params; rulings lang")
    check("legacy url never carries lang", "lang" not in qd(s.get("Tadal", {}).get("url", "x")),
          s.get("Tadal", {}).get("url"), "rulings Links (self-hosted ones also lang)")
    r = c.raw("GET", "/api/v1/medical-intake-links?lang=xx", t)
    s = {x["productName"]: x for x in data(r) or []}
    check("unrecognized lang falls back to partner default es", qd(s.get("Sema", {}).get("url", "")).get("lang") == "es",
          s.get("Sema", {}).get("url"))
    r = c.raw("GET", "/api/v1/medical-intake-links?lang=en", t)
    s = {x["productName"]: x for x in data(r) or []}
    check("lang=en requested: lang=en", qd(s.get("Sema", {}).get("url", "")).get("lang") == "en",
          s.get("Sema", {}).get("url"))
    r = c.raw("GET", "/api/v1/care-service-links", t)
    check("no subscription, no override: empty care list", r.status_code == 200 and data(r) == [], r.text[:200])
    body = partner_body(default="es", langs=("en", "es"), care=False)
    body["careServices"] = {"subscriptionActive": False, "manualOverride": True, "yearlyBundle": False,
                            "services": ["primary-care", "dermatology"]}
    must(c.op("PUT", f"/partners/{D}", body), "partner D care")
    r = c.raw("GET", "/api/v1/care-service-links", t)
    d = data(r) or []
    check("manual override + individual access: only primary-care", [x["service"] for x in d] == ["primary-care"],
          str([x["service"] for x in d]))
    check("care urls carry partner default lang=es", all(qd(x["url"]).get("lang") == "es" and
                                                        qd(x["redeemUrl"]).get("lang") == "es" for x in d), str(d)[:200])
    r = c.raw("GET", "/api/v1/care-service-links?service=urgent-care", t)
    check("service without access: empty list, echo service", r.status_code == 200 and data(r) == [] and
          r.json().get("service") == "urgent-care", r.text[:200])
    body2 = dict(body, enabledLangs=["en"], defaultLang="en")
    must(c.op("PUT", f"/partners/{D}", body2), "partner D en only")
    r = c.raw("GET", "/api/v1/care-service-links?lang=es", t)
    check("lang=es when es disabled: falls back (no lang=es)", r.status_code == 200 and "lang=es" not in r.text,
          r.text[:300])
    body3 = dict(body2, dnaAccess=False)
    must(c.op("PUT", f"/partners/{D}", body3), "partner D no dna")
    expect("DNA right withdrawn -> 403 at once", c.raw("GET", "/api/v1/dna-links", t), 403, "forbidden")
    must(c.op("PUT", f"/partners/{D}", dict(body3, active=False)), "partner D inactive")
    expect("partner deactivated -> 403 at once", c.raw("GET", "/api/v1/orders", t), 403, "forbidden")
    must(c.op("PUT", f"/partners/{D}", dict(body3, active=True)), "partner D active")
    expect("partner reactivated -> 200", c.raw("GET", "/api/v1/orders", t), 200)


def check_lead_enriched(c, st):
    section("lead.enriched and lead patches (spec Events; rulings Leads)")
    tok = st["tok"]
    fut = requests.utils.quote(iso(now() + dt.timedelta(days=1)))
    r = c.raw("GET", f"/api/v1/events?since={fut}", tok["a"])
    cur = r.json()["page"]["nextCursor"]
    check("empty page without cursor: nextCursor = current end of feed (not null)", cur is not None and data(r) == [],
          r.text[:200], "extensions §8.1")
    # newest-first listing -> take our no-consent lead and a normal one
    lid = st["leads"]["A"][0]["id"]
    r = c.op("PATCH", f"/leads/{lid}", {"phone": "+1 555 0100"})
    expect("PATCH same phone -> 200", r, 200)
    r = c.op("PATCH", f"/leads/{lid}", {"phone": "+1 555 0111"})
    expect("PATCH new phone -> 200", r, 200)
    r = c.op("PATCH", f"/leads/{st['noconsent']}", {"phone": "+1 555 0122"})
    r = c.op("PATCH", f"/leads/{lid}", {"firstName": "Renamed"})
    t0, ev = time.time(), []
    while time.time() - t0 < 5:
        r = c.raw("GET", f"/api/v1/events?cursor={requests.utils.quote(cur)}", tok["a"])
        ev = data(r) or []
        if len(ev) >= 2:
            break
        time.sleep(0.05)
    time.sleep(0.3)
    r = c.raw("GET", f"/api/v1/events?cursor={requests.utils.quote(cur)}", tok["a"])
    ev = data(r) or []
    enr = [e for e in ev if e["event"] == "lead.enriched"]
    check("lead.enriched only for real phone changes (2, not for same value or a name)",
          len(enr) == 2 and [e["event"] for e in ev] == ["lead.enriched", "lead.enriched"], str([e["event"] for e in ev]))
    if enr:
        d = enr[0]["data"]
        check("lead.enriched data {lead, previousPhone, currentPhone}", set(d) == {"lead", "previousPhone", "currentPhone"}
              and d["previousPhone"] == "+1 555 0100" and d["currentPhone"] == "+1 555 0111", str(d)[:300])
    if len(enr) > 1:
        d = enr[1]["data"]
        check("lead.enriched for a no-SMS-consent lead renders No Consent",
              d.get("previousPhone") == "No Consent" and d.get("currentPhone") == "No Consent" and
              d["lead"]["phone"] == "No Consent", str(d)[:300], "rulings Leads")
    r = c.raw("GET", f"/api/v1/leads/{lid}", tok["a"])
    check("patched lead reads new phone and name", (data(r) or {}).get("phone") == "+1 555 0111" and
          (data(r) or {}).get("firstName") == "Renamed", r.text[:200])
    # test rows do not leak through a cursor taken with includeTest
    r = c.raw("GET", "/api/v1/leads?includeTest=true&limit=2", tok["a"])
    cur = r.json()["page"]["nextCursor"]
    r = c.raw("GET", f"/api/v1/leads?limit=200&cursor={requests.utils.quote(cur)}", tok["a"])
    check("cursor from an includeTest page, used without includeTest: no test rows",
          r.status_code == 400 or all(not x["isTest"] for x in data(r) or []), r.text[:200])
    # sub-account deleted: orders show ""
    r = c.raw("POST", "/api/v1/sub-accounts", tok["a"], json={"subId": "77", "nickname": "Temp"})
    sid = (data(r) or {}).get("id")
    c.op("POST", "/orders", {"orderId": "ORD-A-77", "partnerId": f"{A}.77", "createdDate": iso(now()), "product": "P",
                             "amount": 1, "commission": 0, "status": "shipped", "isTest": False, "source": "s"})
    r = c.raw("GET", "/api/v1/orders/ORD-A-77", tok["a"])
    check("order via attribution code: subAccount nickname", (data(r) or {}).get("subAccount") == "Temp", r.text[:200])
    c.raw("DELETE", "/api/v1/sub-accounts", tok["a"], json={"recordId": sid})
    r = c.raw("GET", "/api/v1/orders/ORD-A-77", tok["a"])
    check("after the sub-account is deleted subAccount is '' (nickname at read time)",
          (data(r) or {}).get("subAccount") == "", r.text[:200])
    for q in ("offset=99999999999999999999", "limit=99999999999999999999", "offset=1e3"):
        r = c.raw("GET", f"/api/v1/care-services-coupons?{q}", tok["a"])
        expect(f"coupons {q} -> 400", r, 400, "invalid_request")


def wait_delivery(c, tok, did, want, secs=20):
    d = {}
    t0 = time.time()
    while time.time() - t0 < secs:
        r = c.raw("GET", f"/api/v1/webhook-deliveries/{did}", tok)
        d = data(r) or {}
        if d.get("status") == want:
            return d
        time.sleep(0.3)
    return d


def check_more(c, st):
    tok = st["tok"]
    section("leads: keyset stable under inserts; questionId; 405 on by-id")
    seen, cur = [], None
    r = c.raw("GET", "/api/v1/leads?limit=10", tok["a"])
    seen += [x["id"] for x in data(r) or []]
    cur = r.json()["page"]["nextCursor"]
    for i in range(3):
        c.op("POST", "/leads", {"partnerId": A, "firstName": f"Mid{i}", "lastName": "W", "email": "m@example.test",
                                "emailConsent": True, "smsConsent": False, "origin": "sub-account-form",
                                "location": "x", "questionId": "q-1"})
    rest, err, n = [], None, 0
    while cur and n < 30:
        r = c.raw("GET", f"/api/v1/leads?limit=10&cursor={requests.utils.quote(cur)}", tok["a"])
        if r.status_code != 200:
            err = r.text[:200]
            break
        rest += data(r)
        cur = r.json()["page"]["nextCursor"]
        n += 1
    # page_all appends &limit, and its own cursor after the first page
    allids = seen + [x["id"] for x in rest]
    before = {x["id"] for x in st["leads"]["A"]}
    check("walk with inserts mid-way: every older lead once, no new ones, no dupes",
          err is None and len(allids) == len(set(allids)) and set(allids) == before,
          f"{err} {len(allids)} {len(set(allids))} {len(before)} missing={len(before - set(allids))} extra={len(set(allids) - before)}",
          "rulings Leads keyset")
    r = c.raw("GET", "/api/v1/leads?limit=3", tok["a"])
    top = data(r) or []
    check("questionId string when given, null otherwise", top and top[0]["questionId"] == "q-1" and
          all(x["questionId"] is None for x in st["leads"]["A"][:5]), str([x["questionId"] for x in top]))
    check("origin sub-account-form kept as given", top and top[0]["origin"] == "sub-account-form")
    expect("limit=050 (leading zero) accepted (decisions.md)", c.raw("GET", "/api/v1/leads?limit=050", tok["a"]), 200)
    lid = top[0]["id"] if top else str(uuid.uuid4())
    expect("DELETE /leads/{id} -> 405", c.raw("DELETE", f"/api/v1/leads/{lid}", tok["a"]), 405, "invalid_request")
    expect("PUT /orders/{id} -> 405", c.raw("PUT", "/api/v1/orders/ORD-A-1", tok["a"], json={}), 405, "invalid_request")

    section("money on the wire (rulings Wire conventions)")
    E = "bbE"
    st["E"] = E
    must(c.op("PUT", f"/partners/{E}", partner_body()), "partner E")
    u = must(c.op("POST", "/users", {"email": "e@example.test", "partnerId": E, "admin": False}), "user E")
    te = must(c.op("POST", f"/users/{u['id']}/tokens", {}), "token E")["token"]
    st["tok"]["e"] = te
    for oid, amt, com in (("ORD-E-1", 19.99, 0.07), ("ORD-E-2", 12345678.91, 40), ("ORD-E-3", 0.1, 0.2)):
        must(c.op("POST", "/orders", {"orderId": oid, "partnerId": E, "createdDate": iso(now()), "product": "P",
                                      "amount": amt, "commission": com, "status": "shipped", "isTest": False,
                                      "source": "s"}), oid)
    r = c.raw("GET", "/api/v1/orders", te)
    t = r.text.replace(" ", "")
    check("19.99 / 0.07 / 12345678.91 / 0.1 / 0.2 written exactly", all(x in t for x in (
        '"amount":19.99', '"commission":0.07', '"amount":12345678.91', '"amount":0.1,', '"commission":0.2')), t[:400])
    check("integer money written as 40 (or 40.0)", '"commission":40,' in t or '"commission":40.0,' in t, t[:400])
    must(c.op("POST", "/payouts", {"partnerId": E, "payoutDate": "2026-11-03", "payoutAmount": 0.3, "status": "paid"}),
         "payout E")
    r = c.raw("GET", "/api/v1/payouts", te)
    check("payoutAmount 0.3 exactly", '"payoutAmount":0.3' in r.text.replace(" ", ""), r.text[:200])
    today = now().strftime("%Y-%m-%d")
    r = c.op("GET", f"/partners/{E}/commission-summary?from={today}&to={today}")
    check("commission total 40.27 exactly", '"commissionTotal":40.27' in r.text.replace(" ", ""), r.text[:200])

    section("coupons: defaults with 600 codes (spec Limits)")
    must(c.op("POST", "/care-services-coupons/bulk-orders", {
        "partnerId": E, "productSlug": "urgent-plus", "months": 12, "quantity": 600, "unitPriceCents": 0,
        "purchaserEmail": "b@example.test", "purchaserSource": "-x"}), "bulk E 600")
    r = c.raw("GET", "/api/v1/care-services-coupons", te)
    check("JSON default: 100 rows, total 600", r.status_code == 200 and len(data(r) or []) == 100 and
          r.json()["total"] == 600 and r.json()["limit"] == 100, r.text[:100])
    r = c.raw("GET", "/api/v1/care-services-coupons?format=csv", te)
    n = len(r.text.splitlines()) - 1
    check("CSV default: 500 rows, X-Total-Count 600", n == 500 and r.headers.get("X-Total-Count") == "600",
          f"{n} {r.headers.get('X-Total-Count')}")
    first = set(r.text.splitlines()[1:])
    r2 = c.raw("GET", "/api/v1/care-services-coupons?format=csv&offset=500", te)
    second = set(r2.text.splitlines()[1:])
    check("CSV offset=500: the other 100, joined = all 600", len(second) == 100 and not (first & second), f"{len(second)}")
    check("'-x' purchaser_source prefixed in CSV", '"\'-x"' in r.text, r.text.splitlines()[1][:200])
    r = c.raw("GET", "/api/v1/care-services-coupons?limit=500", te)
    check("JSON limit=500 accepted", r.status_code == 200 and len(data(r) or []) == 500)
    codes_json = [x["code"] for x in data(c.raw("GET", "/api/v1/care-services-coupons?limit=500", te)) or []]
    codes_json2 = [x["code"] for x in data(c.raw("GET", "/api/v1/care-services-coupons?limit=500&offset=500", te)) or []]
    check("JSON pages by offset are disjoint and complete (stable order)",
          len(set(codes_json) | set(codes_json2)) == 600, f"{len(set(codes_json) | set(codes_json2))}")

    section("catalog for a legacy partner (rulings Public catalog)")
    r = c.raw("GET", f"/api/all-products?partner_id={B}")
    by = {x["name"]: x for x in (r.json().get("products") or [])} if r.status_code == 200 else {}
    s_ = by.get("Sema", {})
    check("headlessLinks off: intakeUrl is the provider-hosted link", s_.get("intakeUrl", "").startswith(
        "https://legacy-intake.example.com/"), s_.get("intakeUrl"))
    check("no partner price: recommended $199.50", s_.get("price1Month") == "$199.50", str(s_))

    section("links isolation by sub")
    c.raw("POST", "/api/v1/sub-accounts", tok["b"], json={"subId": "200", "nickname": "B200"})
    expect("A asks sub=200 that only B has -> 400", c.raw("GET", "/api/v1/medical-intake-links?sub=200", tok["a"]), 400,
           "invalid_request")
    expect("A asks care sub=200 that only B has -> 400", c.raw("GET", "/api/v1/care-service-links?sub=200", tok["a"]), 400,
           "invalid_request")

    section("operator catalog validation (operator-api Catalog)")
    r = c.op("PUT", "/medical-products/not-a-uuid", {})
    expect("medical product non-UUID id -> 400", r, 400, "invalid_request")
    expect("medical price out of range -> 400", c.op("PUT", f"/partners/{A}/medical-prices/{M1}", {"tierPrices": {"m1": 99}}),
           400, "invalid_request")
    expect("medical price unknown tier -> 400", c.op("PUT", f"/partners/{A}/medical-prices/{M1}", {"tierPrices": {"m9": 150}}),
           400, "invalid_request")
    expect("medical price unknown product -> 404",
           c.op("PUT", f"/partners/{A}/medical-prices/{uuid.uuid4()}", {"tierPrices": {"m1": 150}}), 404, "not_found")
    expect("dna price out of range -> 400", c.op("PUT", f"/partners/{A}/dna-prices/{D1}", {"userSetPrice": 500}), 400,
           "invalid_request")
    expect("care product with months 2 -> 400", c.op("PUT", f"/care-service-products/{uuid.uuid4()}", {
        "service": "dermatology", "slug": "derm", "productName": "D", "description": "d", "imageUrl": "https://i.example/x",
        "tiers": [{"key": "m2", "label": "2", "months": 2, "userPrice": 1, "commission": 0}]}), 400, "invalid_request")
    expect("operator deliveries limit=501 -> 400", c.op("GET", f"/partners/{A}/webhook-deliveries?limit=501"), 400,
           "invalid_request")
    expect("operator deliveries limit=500 -> 200", c.op("GET", f"/partners/{A}/webhook-deliveries?limit=500"), 200)

    section("webhook endpoint PATCH, rotation, failing deliveries (rulings; extensions §1-§3, §12)")
    p = "/api/v1/webhook-endpoints"
    eid = st.get("endpoint")
    r = c.raw("PATCH", f"{p}/{eid}", tok["a"], json={"leadCreatedDelay": "1h"})
    d = data(r) or {}
    check("PATCH writes only the named field", r.status_code == 200 and d.get("leadCreatedDelay") == "1h" and
          d.get("events") == ["lead.created"] and d.get("url") == "https://hooks.example.invalid/h", str(d)[:300])
    for v in ("1m", "5m", None):
        r = c.raw("PATCH", f"{p}/{eid}", tok["a"], json={"leadCreatedDelay": v})
        check(f"leadCreatedDelay {v} accepted", r.status_code == 200 and (data(r) or {}).get("leadCreatedDelay") == v,
              r.text[:200])
    r = c.raw("PATCH", f"{p}/{eid}", tok["a"], json={"url": "http://x.example/h"})
    expect("PATCH url to http -> 400", r, 400, "invalid_request")
    r = c.raw("PATCH", f"{p}/{eid}", tok["a"], json={"secret": True})
    sec = (data(r) or {}).get("secret")
    check("rotation returns the new secret once", r.status_code == 200 and sec and sec.startswith("whsec_"), r.text[:200])
    r = c.raw("GET", p, tok["a"])
    e = next((x for x in data(r) or [] if x["id"] == eid), {})
    check("GET shows previousSecretExpiresAt during overlap, never the secret",
          TS_MS.match(e.get("previousSecretExpiresAt") or "") and sec not in r.text, str(e)[:300])
    r = c.raw("PATCH", f"{p}/{eid}", tok["a"], json={"secret": True, "expirePrevious": True})
    check("expirePrevious ends the overlap", r.status_code == 200 and (data(r) or {}).get("previousSecretExpiresAt") is None,
          r.text[:300])
    r = c.raw("POST", p, tok["a"], json={"url": "https://hooks.example.invalid/h?token=zzsecretq",
                                         "events": ["payout.created"]})
    e3 = (data(r) or {}).get("id")
    r = c.raw("POST", f"{p}/{e3}/test", tok["a"])
    did = (data(r) or {}).get("id")
    d = wait_delivery(c, tok["a"], did, "failed")
    check("ping to an unresolvable host ends failed after 1+2 attempts (schedule 50ms,50ms)",
          d.get("status") == "failed" and d.get("attempts") == 3, str(d)[:300])
    check("lastError short, without the URL's query; lastStatusCode null", d.get("lastError") and
          "zzsecretq" not in json.dumps(d) and d.get("lastStatusCode") is None, str(d)[:300], "extensions §1")
    log = d.get("attemptLog") or []
    check("attemptLog oldest first, 3 entries with attemptedAt/statusCode/durationMs/error",
          len(log) == 3 and all(set(x) == {"attemptedAt", "statusCode", "durationMs", "error"} for x in log) and
          [x["attemptedAt"] for x in log] == sorted(x["attemptedAt"] for x in log), str(log)[:300])
    c.raw("PATCH", f"{p}/{e3}", tok["a"], json={"enabled": False})
    c.raw("PATCH", f"{p}/{e3}", tok["a"], json={"enabled": True})
    r = c.raw("GET", f"/api/v1/webhook-deliveries/{did}", tok["a"])
    check("re-enabling makes no failed delivery pending", (data(r) or {}).get("status") == "failed", r.text[:200],
          "extensions §12")
    r = c.raw("POST", f"/api/v1/webhook-deliveries/{did}/resend", tok["a"])
    d = data(r) or {}
    check("resend -> 202 pending, same id", r.status_code == 202 and d.get("status") == "pending" and d.get("id") == did,
          r.text[:200])
    d = wait_delivery(c, tok["a"], did, "failed")
    r = c.raw("POST", f"{p}/{e3}/recover", tok["a"], json={"since": iso(now() - dt.timedelta(minutes=5))})
    check("recover requeues the failed delivery: {requeued: 1, remaining: 0}", r.status_code == 202 and
          data(r) == {"requeued": 1, "remaining": 0}, r.text[:200])
    r = c.raw("GET", f"/api/v1/webhook-deliveries?endpointId={e3}&event=ping&status=pending,failed", tok["a"])
    check("deliveries filtered by endpoint/event/status", r.status_code == 200 and
          [x["id"] for x in data(r) or []] == [did], r.text[:300])

    section("test/resend/recover: 20 calls per minute per partner (extensions §12)")
    r = c.raw("POST", p, tok["e"], json={"url": "https://hooks.example.invalid/e", "events": ["order.created"]})
    eeid = (data(r) or {}).get("id")
    codes = [c.raw("POST", f"{p}/{eeid}/test", tok["e"]).status_code for _ in range(20)]
    r = c.raw("POST", f"{p}/{eeid}/test", tok["e"])
    check("20 test calls admitted (fresh partner), the 21st 429 rate_limited with Retry-After",
          codes == [202] * 20 and r.status_code == 429 and ecode(r) == "rate_limited" and
          r.headers.get("Retry-After", "").isdigit(), f"{codes} {r.status_code} {r.headers.get('Retry-After')}")
    r = c.raw("POST", f"{p}/{eeid}/recover", tok["e"], json={"since": iso(now() - dt.timedelta(minutes=5))})
    expect("recover shares the bound -> 429", r, 429, "rate_limited")
    r = c.raw("POST", f"/api/v1/webhook-deliveries/{uuid.uuid4()}/resend", tok["e"])
    expect("resend shares the bound -> 429", r, 429, "rate_limited")
    r = c.op("POST", f"/partners/{E}/webhook-endpoints/{eeid}/test")
    expect("operator test call not bounded -> 202", r, 202)
    expect("deliveries listing not bounded -> 200", c.raw("GET", "/api/v1/webhook-deliveries", tok["e"]), 200)
    r = c.raw("GET", p, tok["b"])
    beid = next((x["id"] for x in data(r) or []), None)
    expect("another partner (B) is not affected by E's bound -> 202",
           c.raw("POST", f"{p}/{beid}/test", tok["b"]), 202)

    r = c.raw("GET", "/api/v1/webhook-deliveries?limit=1", tok["b"])
    bcur = r.json()["page"]["nextCursor"]
    bdel = (data(r) or [{}])[0].get("id")
    if bcur:
        r = c.raw("GET", f"/api/v1/webhook-deliveries?cursor={requests.utils.quote(bcur)}", tok["a"])
        check("B's deliveries cursor in A's hands: 400 or only A's", r.status_code == 400 or
              all(x["endpointId"] != beid for x in data(r) or []), r.text[:200], "task: isolation")
    if bdel:
        expect("B's delivery by A's admin token -> 404", c.raw("GET", f"/api/v1/webhook-deliveries/{bdel}", tok["adm"]),
               404, "not_found")
        expect("B's delivery resent by A -> 404", c.raw("POST", f"/api/v1/webhook-deliveries/{bdel}/resend", tok["a"]),
               404, "not_found")

    section("webhook portal (extensions §10)")
    r = c.raw("POST", "/api/v1/portal-sessions", tok["a"])
    d = data(r) or {}
    check("portal-sessions -> 201 {url, expiresAt}, url {base_url}/portal#code=", r.status_code == 201 and
          d.get("url", "").startswith(c.base + "/portal#code=") and TS_MS.match(d.get("expiresAt") or ""), r.text[:200])
    code = d.get("url", "#code=").split("#code=")[1]
    r = c.raw("POST", "/portal/v1/sessions", json={"code": code})
    pt = (data(r) or {}).get("token")
    check("code exchange -> 201 {token, expiresAt}", r.status_code == 201 and pt, r.text[:200])
    r = c.raw("POST", "/portal/v1/sessions", json={"code": code})
    expect("code used twice -> 400", r, 400, "invalid_request")
    expect("unknown code -> 400", c.raw("POST", "/portal/v1/sessions", json={"code": "nope"}), 400, "invalid_request")
    if pt:
        r = c.raw("GET", p, pt)
        check("portal token lists A's endpoints", r.status_code == 200 and any(x["id"] == eid for x in data(r) or []),
              r.text[:200])
        for path in ("/api/v1/leads", "/api/v1/orders", "/api/v1/events", "/api/v1/care-services-coupons",
                     f"/api/v1/leads/{lid}"):
            expect(f"portal token on {path[:30]} -> 403", c.raw("GET", path, pt), 403, "forbidden")
        expect("portal token minting a portal session -> 403", c.raw("POST", "/api/v1/portal-sessions", pt), 403,
               "forbidden")
        expect("portal token on B's endpoint -> 404", c.raw("PATCH", f"{p}/{beid}", pt, json={"enabled": True}), 404,
               "not_found")
        expect("portal token on operator API -> 401", c.raw("GET", f"/internal/v1/partners/{A}", pt), 401)
    r = c.raw("POST", "/api/v1/portal-sessions", tok["a"], json={"x": 1})
    check("portal-sessions with a body: 201 or 400", r.status_code in (201, 400), f"{r.status_code}")


def check_formats(c, st):
    tok = st["tok"]
    section("timestamps and ids in odd forms (rulings Wire conventions; extensions §8.2)")
    E = "bbE"
    te = tok["e"]
    odd = {"ORD/SLASH": None, "ORD?Q#H": None, "ORD%25P+Q": None, "ORD.dot": None, "ORD:colon@x": None}
    for oid in list(odd):
        raw_id = requests.utils.unquote(oid) if "%25" in oid else oid
        r = c.op("POST", "/orders", {"orderId": raw_id, "partnerId": E, "createdDate": "2026-11-20T12:00:00+02:00",
                                     "product": "P", "amount": 1, "commission": 0, "status": "shipped", "isTest": False,
                                     "source": "s"})
        odd[oid] = (raw_id, r.status_code)
    r = c.raw("GET", "/api/v1/orders", te)
    listed = {x["orderId"]: x for x in data(r) or []}
    for oid, (raw_id, code) in odd.items():
        if code != 201:
            check(f"order id {raw_id!r} refused at ingest ({code}) - then nothing to find", code == 400, f"{code}")
            continue
        q = requests.utils.quote(raw_id, safe="")
        r = c.raw("GET", f"/api/v1/orders/{q}", te)
        check(f"order {raw_id!r} in the listing is found by id (percent-encoded)", r.status_code == 200 and
              data(r) == listed.get(raw_id), f"{r.status_code} {r.text[:200]}", "extensions §8.2")
    x = listed.get("ORD.dot") or next(iter(listed.values()), {})
    check("createdDate with +02:00 offset rendered in UTC Z", x.get("createdDate") == "2026-11-20T10:00:00.000Z",
          str(x.get("createdDate")))
    r = c.op("POST", "/orders", {"orderId": "ORD-E-MICRO", "partnerId": E, "createdDate": "2026-11-20T10:00:00.123456Z",
                                 "product": "P", "amount": 1, "commission": 0, "status": "shipped", "isTest": False,
                                 "source": "s"})
    r = c.raw("GET", "/api/v1/orders/ORD-E-MICRO", te)
    check("createdDate with microseconds rendered with exactly ms", (data(r) or {}).get("createdDate") ==
          "2026-11-20T10:00:00.123Z", r.text[:200])
    r = c.op("POST", "/orders", {"orderId": "ORD-E-NOZ", "partnerId": E, "createdDate": "2026-11-20T10:00:00",
                                 "product": "P", "amount": 1, "commission": 0, "status": "shipped", "isTest": False,
                                 "source": "s"})
    expect("createdDate without offset -> 400 (not RFC 3339)", r, 400, "invalid_request")
    r = c.op("POST", "/care-services-coupons/bulk-orders", {
        "partnerId": E, "productSlug": "behavior", "months": 1, "quantity": 1, "unitPriceCents": 1,
        "purchaserEmail": "b@example.test", "purchaserSource": "x", "expiresAt": "2030-01-01T02:00:00+02:00"})
    cp = ((data(r) or {}).get("coupons") or [{}])[0]
    check("coupon expiresAt with offset rendered UTC Z", cp.get("expiresAt") == "2030-01-01T00:00:00.000Z", str(cp)[:200])
    r = c.op("POST", "/payouts", {"partnerId": E, "payoutDate": "2026-11-01", "payoutAmount": 1.234, "status": "paid"})
    expect("payoutAmount with 3 decimals -> 400", r, 400, "invalid_request")
    r = c.op("POST", "/payouts", {"partnerId": E, "payoutDate": "2026-02-30", "payoutAmount": 1, "status": "paid"})
    expect("payoutDate 2026-02-30 -> 400", r, 400, "invalid_request")

    section("bodies and content types (rulings Wire conventions)")
    r = c.raw("POST", "/api/v1/sub-accounts", te, data='{"subId":"3","nickname":"cs"}',
              headers={"Content-Type": "application/json; charset=utf-8"})
    expect("application/json; charset=utf-8 accepted -> 201", r, 201)
    big = b'{"subId":"4","nickname":"' + b"a" * (1024 * 1024 - 40) + b'"}'
    r = c.raw("POST", "/api/v1/sub-accounts", te, data=big, headers={"Content-Type": "application/json"})
    expect(f"body just under 1 MiB ({len(big)} bytes) -> 400 (validation), not 413", r, 400, "invalid_request")

    def gen():
        yield b'{"subId":"5","nickname":"'
        for _ in range(130):
            yield b"a" * 10000
        yield b'"}'
    r = c.raw("POST", "/api/v1/sub-accounts", te, data=gen(), headers={"Content-Type": "application/json"})
    expect("chunked body over 1 MiB -> 413 invalid_request", r, 413, "invalid_request")
    r = c.raw("POST", "/internal/v1/leads", c.internal, data=b'{"x":"' + b"a" * (1024 * 1024 + 10) + b'"}',
              headers={"Content-Type": "application/json"})
    expect("operator body over 1 MiB -> 413", r, 413, "invalid_request")
    r = c.raw("POST", f"/api/weight-loss?partner_id={A}")
    h = r.headers
    check("catalog 405 carries the catalog headers", r.status_code == 405 and h.get("Cdn-Cache-Control") == "no-store" and
          "no-store" in h.get("Cache-Control", ""), str(dict(h)), "rulings Public catalog")
    expect("admin malformed partner_id -> 400", c.raw("GET", "/api/v1/care-services-coupons?partner_id=a%20b", tok["adm"]),
           400, "invalid_request", "rulings Coupons")
    expect("status=ACTIVE (case) -> 400 or 200", c.raw("GET", "/api/v1/care-services-coupons?status=active,active",
                                                       tok["a"]), 200)

    section("operator API details (operator-api.md)")
    b = partner_body()
    b["careServices"]["bogus"] = True
    expect("nested unknown field (careServices.bogus) -> 400", c.op("PUT", "/partners/bbN", b), 400, "invalid_request")
    t1 = must(c.op("PUT", "/partners/bbN", partner_body()), "bbN")
    time.sleep(0.01)
    t2 = must(c.op("PUT", "/partners/bbN", dict(partner_body(), name="Renamed")), "bbN 2")
    check("replace keeps createdAt, moves updatedAt", t1["createdAt"] == t2["createdAt"] and
          t2["updatedAt"] > t1["updatedAt"] and t2["name"] == "Renamed", f"{t1} {t2}")
    pid = str(uuid.uuid4())
    body = {"name": "X", "categories": ["hair-loss"], "details": "d", "imageUrl": "https://i.example/x",
            "imageFileId": str(uuid.uuid4()), "imageSourceUrl": "https://i.example/y", "active": False,
            "legacyPath": "x", "selfHostedLangs": [], "suggestedPrices": "s",
            "tiers": [{"key": "m1", "label": "1", "months": 1, "minPrice": 1, "maxPrice": 2, "recommendedPrice": 1,
                       "commission": 0, "bogus": 1}]}
    expect("nested unknown tier field -> 400", c.op("PUT", f"/medical-products/{pid}", body), 400, "invalid_request")
    del body["tiers"][0]["bogus"]
    expect("medical product new -> 201", c.op("PUT", f"/medical-products/{pid}", body), 201)
    expect("medical product replace -> 200", c.op("PUT", f"/medical-products/{pid}", body), 200)
    uid = st["users"]["del"]
    r = c.op("DELETE", f"/users/{uid}")
    expect("delete user twice -> 404", r, 404, "not_found")
    expect("token for deleted user -> 404", c.op("POST", f"/users/{uid}/tokens", {}), 404, "not_found")
    exp = iso(now() + dt.timedelta(days=3))
    t = must(c.op("POST", f"/users/{st['users']['a']}/tokens", {"expiresAt": exp}), "token with expiry")
    r = c.op("POST", f"/tokens/{t['id']}/rotate")
    check("rotated token keeps its predecessor's expiry", (data(r) or {}).get("expiresAt") == t["expiresAt"],
          f"{t['expiresAt']} {r.text[:200]}", "operator-guide")
    r = c.op("POST", "/users/tokens", {})
    check("malformed user id in path -> 400/404/405", r.status_code in (400, 404, 405), f"{r.status_code}")
    expect("GET tokens of malformed user id -> 400", c.op("GET", "/users/xyz/tokens"), 400, "invalid_request")


def check_races(c, st):
    import concurrent.futures as cf
    section("races (rulings Coupons, Sub-accounts, Webhooks; extensions §8.1, §8.3)")
    G = "bbG"
    must(c.op("PUT", f"/partners/{G}", partner_body()), "partner G")
    u = must(c.op("POST", "/users", {"email": "g@example.test", "partnerId": G, "admin": False}), "user G")
    tg = must(c.op("POST", f"/users/{u['id']}/tokens", {}), "token G")["token"]
    ex = cf.ThreadPoolExecutor(16)

    def cl():
        return Client(c.base, c.internal)
    # sub-account same subId
    rs = list(ex.map(lambda _: cl().raw("POST", "/api/v1/sub-accounts", tg, json={"subId": "9", "nickname": "n"}).status_code,
                     range(12)))
    check("12 concurrent creates of one subId: one 201, the rest 409", sorted(rs) == [201] + [409] * 11, str(sorted(rs)))
    # webhook endpoints cap
    rs = list(ex.map(lambda _: cl().raw("POST", "/api/v1/webhook-endpoints", tg,
                                        json={"url": "https://hooks.example.invalid/g", "events": ["lead.created"]}).status_code,
                     range(14)))
    r = c.raw("GET", "/api/v1/webhook-endpoints", tg)
    check("14 concurrent endpoint creates: at most 10 exist", len(data(r) or []) == 10 and rs.count(201) == 10,
          f"{len(data(r) or [])} {sorted(rs)}")
    # coupon redemption
    bo = must(c.op("POST", "/care-services-coupons/bulk-orders", {
        "partnerId": G, "productSlug": "urgent-care", "months": 1, "quantity": 1, "unitPriceCents": 1,
        "purchaserEmail": "b@example.test", "purchaserSource": "x"}), "bulk G")
    code = bo["coupons"][0]["code"]
    rs = list(ex.map(lambda i: cl().op("POST", "/care-services-coupons/redeem", {
        "code": code, "productSlug": "urgent-care", "months": 1, "email": f"p{i}@example.test",
        "providerPrimaryExternalId": f"x{i}"}).status_code, range(12)))
    check("12 concurrent redemptions: exactly one 200, the rest 409", sorted(rs) == [200] + [409] * 11, str(sorted(rs)))
    # idempotency with a slow body
    body = json.dumps({"partnerId": G, "productSlug": "primary", "months": 1, "quantity": 10000, "unitPriceCents": 1,
                       "purchaserEmail": "b@example.test", "purchaserSource": "x"})
    H = {"Content-Type": "application/json", "Idempotency-Key": "race-bulk"}
    rs = list(ex.map(lambda _: cl().raw("POST", "/internal/v1/care-services-coupons/bulk-orders", c.internal, data=body,
                                        headers=H), range(6)))
    sts = sorted(r.status_code for r in rs)
    inuse = [r for r in rs if r.status_code == 409]
    print(f"  INFO 6 concurrent keyed bulk orders: {sts}, replayed: "
          f"{sum(r.headers.get('Idempotent-Replayed') == 'true' for r in rs)}")
    check("6 concurrent keyed bulk orders: 201s (first + replays) and 409 idempotency_key_in_use only",
          set(sts) <= {201, 409} and all(ecode(r) == "idempotency_key_in_use" for r in inuse) and 201 in sts, str(sts))
    r = c.raw("GET", f"/api/v1/care-services-coupons?product_slug=primary&limit=1", tg)
    check("... and exactly 10000 codes were created", r.json().get("total") == 10000, r.text[:100])
    # events feed: nothing committed behind a cursor
    import threading
    done = threading.Event()
    done_at = [0.0]
    polled, errs = [], []

    def poller():
        pc = cl()
        fut = requests.utils.quote(iso(now() + dt.timedelta(days=1)))
        cur = pc.raw("GET", f"/api/v1/events?since={fut}", tg).json()["page"]["nextCursor"]
        cur = None  # from the beginning: G's feed is empty of leads so far
        while True:
            last = done.is_set()
            url = "/api/v1/events?limit=200&types=lead.created" + (f"&cursor={requests.utils.quote(cur)}" if cur else "")
            r = pc.raw("GET", url, tg)
            if r.status_code != 200:
                errs.append(r.text[:200])
                return
            polled.extend(e["id"] for e in data(r))
            cur = r.json()["page"]["nextCursor"]
            if last and (len(polled) >= 120 or time.time() - done_at[0] > 10):
                return
            time.sleep(0.01)
    th = threading.Thread(target=poller)
    th.start()

    def ingest(i):
        return cl().op("POST", "/leads", {"partnerId": G, "firstName": f"R{i}", "lastName": "x", "email": "r@example.test",
                                         "emailConsent": True, "smsConsent": True, "origin": "managed-website",
                                         "location": "x"}).status_code
    rs = list(ex.map(ingest, range(120)))
    done_at[0] = time.time()
    done.set()
    th.join(60)
    t0 = time.time()
    while time.time() - t0 < 10:
        r = c.raw("GET", "/api/v1/events?limit=200&types=lead.created", tg)
        full = [e["id"] for e in data(r) or []]
        if len(full) >= 120:
            break
        time.sleep(0.1)
    check("events polled with cursors during 120 concurrent ingests: every event once, none skipped",
          not errs and rs.count(201) == 120 and len(full) == 120 and sorted(polled) == sorted(full),
          f"errs={errs[:1]} ingested={rs.count(201)} full={len(full)} polled={len(polled)} uniq={len(set(polled))} "
          f"missing={len(set(full) - set(polled))}", "extensions §8.1")
    # leads listing during inserts (keyset) with concurrent writers
    ex.shutdown()


def check_edges(c, st):
    tok = st["tok"]
    section("pagination edges (spec leads nextCursor; extensions §8.1 since)")
    allr, err = page_all(c, tok["a"], "/api/v1/leads", 200)
    n = len(allr)
    r = c.raw("GET", f"/api/v1/leads?limit={n}", tok["a"])
    check(f"limit == number of rows ({n}): nextCursor null (no further page)",
          r.status_code == 200 and len(data(r) or []) == n and r.json()["page"]["nextCursor"] is None,
          f"{len(data(r) or [])} {r.json()['page']['nextCursor']!r:.40}", "spec GET /leads")
    r = c.raw("GET", f"/api/v1/leads?limit={n - 1}", tok["a"])
    cur = r.json()["page"]["nextCursor"]
    r2 = c.raw("GET", f"/api/v1/leads?limit={n - 1}&cursor={requests.utils.quote(cur or '')}", tok["a"])
    check("limit n-1: second page has 1 row and a null cursor", len(data(r2) or []) == 1 and
          r2.json()["page"]["nextCursor"] is None, r2.text[:200])
    r = c.raw("GET", "/api/v1/events?limit=3", tok["a"])
    ev = data(r) or []
    check("events default/explicit limit echoed", r.json()["page"]["limit"] == 3 and len(ev) == 3)
    r = c.raw("GET", "/api/v1/events", tok["a"])
    check("events default limit 50", r.json()["page"]["limit"] == 50, str(r.json().get("page")))
    if len(ev) == 3:
        since = ev[1]["created_at"]
        r = c.raw("GET", f"/api/v1/events?since={requests.utils.quote(since)}&limit=200", tok["a"])
        d = data(r) or []
        check("since is inclusive (event created at since is returned), nothing older",
              d and all(e["created_at"] >= since for e in d) and ev[1]["id"] in [e["id"] for e in d], r.text[:200])
    r = c.raw("GET", "/api/v1/webhook-deliveries", tok["a"])
    check("deliveries default limit 50", r.status_code == 200 and r.json()["page"]["limit"] == 50, r.text[:100])
    for v in ("٥", "５", "+7", "7 ", "0x10"):
        expect(f"leads limit={v!r} (non-ASCII/odd digits) -> 400",
               c.raw("GET", f"/api/v1/leads?limit={requests.utils.quote(v)}", tok["a"]), 400, "invalid_request")

    section("sub-account field edges (rulings Sub-accounts)")
    te = tok["e"]
    for sub, what in (("+7", "+7"), ("٧", "Arabic-Indic 7"), ("７", "fullwidth 7"), ("7\u0000", "NUL")):
        expect(f"subId {what} -> 400", c.raw("POST", "/api/v1/sub-accounts", te, json={"subId": sub, "nickname": "x"}),
               400, "invalid_request")
    r = c.raw("POST", "/api/v1/sub-accounts", te, json={"subId": "60", "nickname": "🎉" * 64})
    expect("nickname of 64 emoji (64 characters) -> 201", r, 201)
    r = c.raw("POST", "/api/v1/sub-accounts", te, json={"subId": "61", "nickname": "🎉" * 65})
    expect("nickname of 65 emoji -> 400", r, 400, "invalid_request")
    for nick, what in (("a\tb", "tab"), ("a\u0085b", "C1 control NEL"), ("a\u202eb", "bidi override (soft)")):
        r = c.raw("POST", "/api/v1/sub-accounts", te, json={"subId": "62", "nickname": nick})
        if "soft" in what:
            check(f"nickname with {what}: 201 or 400", r.status_code in (201, 400), f"{r.status_code}")
            if r.status_code == 201:
                c.raw("DELETE", "/api/v1/sub-accounts", te, json={"recordId": data(r)["id"]})
        else:
            expect(f"nickname with {what} -> 400", r, 400, "invalid_request")

    section("coupon state edges (rulings Coupons; extensions §7)")
    E = "bbE"
    bo = must(c.op("POST", "/care-services-coupons/bulk-orders", {
        "partnerId": E, "productSlug": "primary-family-plan", "months": 6, "quantity": 3, "unitPriceCents": 1,
        "purchaserEmail": "b@example.test", "purchaserSource": "x", "notes": "@SUM(1)",
        "expiresAt": iso(now() + dt.timedelta(seconds=2))}), "bulk E exp")
    cs = bo["coupons"]
    must(c.op("POST", f"/care-services-coupons/{cs[0]['id']}/void"), "void")
    r = c.op("POST", "/care-services-coupons/redeem", {"code": cs[1]["code"], "productSlug": "primary-family-plan",
                                                       "months": 6, "email": "+a@example.test",
                                                       "providerPrimaryExternalId": "=HYPERLINK(1)"})
    check("redeem with '+' e-mail and '=' external id -> 200", r.status_code == 200, r.text[:200])
    time.sleep(2.3)
    r = c.raw("GET", "/api/v1/care-services-coupons?product_slug=primary-family-plan", te)
    stt = {x["code"]: x["status"] for x in data(r) or []}
    check("after expiry: void stays void, redeemed stays redeemed, active reads expired",
          [stt.get(x["code"]) for x in cs] == ["void", "redeemed", "expired"], str([stt.get(x["code"]) for x in cs]))
    r = c.op("POST", "/care-services-coupons/redeem", {"code": cs[2]["code"], "productSlug": "primary-family-plan",
                                                       "months": 6, "email": "a@example.test",
                                                       "providerPrimaryExternalId": "x"})
    expect("redeem expired -> 409 invalid_request", r, 409, "invalid_request")
    expect("void expired -> 409", c.op("POST", f"/care-services-coupons/{cs[2]['id']}/void"), 409)
    expect("void unknown id -> 404", c.op("POST", f"/care-services-coupons/{uuid.uuid4()}/void"), 404, "not_found")
    r = c.op("POST", "/care-services-coupons/redeem", {"code": cs[2]["code"] + "A", "productSlug": "primary-family-plan",
                                                       "months": 6, "email": "a@example.test",
                                                       "providerPrimaryExternalId": "x"})
    expect("redeem 13-char code -> 400", r, 400, "invalid_request")
    r = c.raw("GET", "/api/v1/care-services-coupons?product_slug=primary-family-plan&format=csv", te)
    rows = list(csv.DictReader(io.StringIO(r.text)))
    red = next((x for x in rows if x["code"] == cs[1]["code"]), {})
    check("CSV: '+' e-mail and '=' external id and '@' notes prefixed with '",
          red.get("redeemed_email") == "'+a@example.test" and
          red.get("redeemed_provider_primary_external_id") == "'=HYPERLINK(1)" and red.get("notes") == "'@SUM(1)",
          str(red)[:300], "extensions §7")
    r = c.raw("GET", "/api/v1/care-services-coupons?product_slug=primary-family-plan&status=expired", te)
    check("status=expired filter includes the expired one only", [x["code"] for x in data(r) or []] == [cs[2]["code"]],
          r.text[:200])
    r = c.raw("GET", "/api/v1/care-services-coupons?product_slug=primary-family-plan&status=active", te)
    check("status=active excludes it", data(r) == [], r.text[:200])

    section("custom header names and values (rulings Webhooks; extensions §12)")
    p = "/api/v1/webhook-endpoints"
    r = c.raw("GET", p, tok["b"])
    beid = next((x["id"] for x in data(r) or []), None)
    for name in ("Content-Type", "content_length", "HOST", "Transfer_Encoding", "connection", "User-Agent",
                 "authorization", "X-Partner-Signature", "x_partner_x", "webhook-signature", "Webhook_Foo", "TE",
                 "trailer", "Upgrade", "Expect", "Content-Encoding", "Proxy-Authorization", "Cookie", "Forwarded",
                 "X-Forwarded-Host", "x_forwarded_proto", "X-Real-Ip", "Proxy-Connection", "Keep_Alive"):
        r = c.raw("PATCH", f"{p}/{beid}", tok["b"], json={"customHeader": {"name": name, "value": "v"}})
        expect(f"reserved custom header {name!r} -> 400", r, 400, "invalid_request")
    for val, what in (("a\tb", "tab"), ("a\x7fb", "DEL"), ("é", "non-ASCII")):
        r = c.raw("PATCH", f"{p}/{beid}", tok["b"], json={"customHeader": {"name": "X-Ok", "value": val}})
        expect(f"custom header value with {what} -> 400", r, 400, "invalid_request")
    r = c.raw("PATCH", f"{p}/{beid}", tok["b"], json={"customHeader": {"name": "X-Team", "value": "teamvalue-9876"}})
    check("the PATCH that sets it carries {name, value}", (data(r) or {}).get("customHeader") ==
          {"name": "X-Team", "value": "teamvalue-9876"}, r.text[:200])
    r = c.op("POST", f"/partners/{B}/webhook-endpoints", {"url": "https://hooks.example.invalid/op", "events": ["lead.created"],
                                                          "customHeader": {"name": "X-Op", "value": "opvalue-4321"}})
    check("operator POST that sets it carries the value", (data(r) or {}).get("customHeader") ==
          {"name": "X-Op", "value": "opvalue-4321"}, r.text[:200])
    r = c.raw("GET", p, tok["b"])
    check("partner listing masks both", "teamvalue-9876" not in r.text and "opvalue-4321" not in r.text and
          "…9876" in r.text and "…4321" in r.text, r.text[:300])
    st["secrets_extra"] = ["teamvalue-9876", "opvalue-4321"]

    section("raw HTTP edge requests (extensions §12: parser rejects carry the error body)")
    host, port = c.base.split("//")[1].split(":")

    def rawreq(b):
        sk = socket.create_connection((host, int(port)), timeout=8)
        sk.sendall(b)
        out = b""
        try:
            while True:
                ch = sk.recv(65536)
                if not ch:
                    break
                out += ch
                if b"\r\n\r\n" in out:
                    head, _, rest = out.partition(b"\r\n\r\n")
                    m = re.search(rb"content-length:\s*(\d+)", head, re.I)
                    if m and len(rest) >= int(m.group(1)):
                        break
        except socket.timeout:
            pass
        sk.close()
        try:
            stc = int(out.split(b" ", 2)[1])
        except Exception:
            stc = None
        try:
            code = json.loads(out.partition(b"\r\n\r\n")[2])["error"]["code"]
        except Exception:
            code = out.partition(b"\r\n\r\n")[2][:80]
        return stc, code
    for b, what in ((b"GARBAGE\r\n\r\n", "garbage request line"),
                    (b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", "header without colon"),
                    (b"POST /api/v1/sub-accounts HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                     "Content-Length with chunked"),
                    (b"GET /api/v1/leads HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", "bad Content-Length"),
                    (b"GET /api/v1/le\x01ads HTTP/1.1\r\nHost: x\r\n\r\n", "control char in path")):
        stc, code = rawreq(b)
        check(f"{what}: 4xx with error body invalid_request", stc is not None and 400 <= stc < 500 and
              code in ("invalid_request", "not_found"), f"{stc} {code}")


def check_metrics(c, st, url):
    section("metrics (extensions §5, §12)")
    try:
        t = requests.get(url, timeout=10).text
    except Exception as e:
        check("metrics reachable", False, str(e))
        return
    for name in ("http_requests_total", "http_request_duration_seconds", "webhook_attempts_total",
                 "webhook_attempt_duration_seconds", "webhook_deliveries_pending", "webhook_oldest_pending_age_seconds",
                 "db_pool_connections", "rate_limit_rejections_total", "rate_limiter_errors_total",
                 "partner_cross_reads_total", "http_rejected_requests_total"):
        check(f"metric {name} present", re.search(rf"^{name}(_bucket|_count|_sum)?[{{ ]", t, re.M) is not None, "")
    m = re.search(r"^partner_cross_reads_total(\{[^}]*\})? (\d+)", t, re.M)
    check("partner_cross_reads_total counted the cross reads (>= 4)", m and int(m.group(2)) >= 4, m.group(0) if m else "")
    check("http_requests_total labelled by route template, not raw ids",
          'route="/api/v1/leads/{id}"' in t or "/api/v1/leads/{" in t, "")
    for marker in ("zzqmark", "bbB", st["tok"]["a"][:20]):
        check(f"metrics do not carry {marker[:10]!r} (no query strings, ids, tokens)", marker not in t, "")


def check_order_of_checks(c, st):
    section("order of checks: auth before validation (rulings)")
    tok = st["tok"]
    expect("no token + invalid limit -> 401", c.raw("GET", "/api/v1/leads?limit=0"), 401, "missing_bearer")
    expect("bad token + invalid cursor -> 401", c.raw("GET", "/api/v1/leads?cursor=x", "garbage"), 401, "invalid_token")
    r = c.raw("POST", "/api/v1/sub-accounts", None, data="{bad", headers={"Content-Type": "application/json"})
    expect("no token + malformed JSON -> 401", r, 401, "missing_bearer")
    r = c.raw("POST", "/api/v1/sub-accounts", None, data=b"{" + b" " * (1024 * 1024 + 10) + b"}",
              headers={"Content-Type": "application/json"})
    check("no token + body over 1 MiB -> 401 (auth first) or 413", r.status_code in (401, 413), f"{r.status_code}")
    expect("inactive partner + malformed JSON -> 403", c.raw("POST", "/api/v1/sub-accounts", tok["c"], data="{bad",
                                                            headers={"Content-Type": "application/json"}), 403, "forbidden")
    expect("non-admin malformed partner_id with sub code -> 400",
           c.raw("GET", f"/api/v1/care-services-coupons?partner_id={A}.7", tok["a"]), 400, "invalid_request")
    expect("coupons format=csv&limit=0 -> 400", c.raw("GET", "/api/v1/care-services-coupons?format=csv&limit=0", tok["a"]),
           400, "invalid_request")
    expect("coupons offset= (empty) -> 400", c.raw("GET", "/api/v1/care-services-coupons?offset=", tok["a"]), 400,
           "invalid_request")


def check_exact(c, st):
    tok = st["tok"]
    section("exact values of links and catalog (operator-api Catalog; spec)")
    r = c.raw("GET", "/api/v1/dna-links", tok["a"])
    d = (data(r) or [{}])[0]
    check("DNA intakeUrl = {legacy_intake_url}/<intakePath>?partner_id=A",
          d.get("intakeUrl") == f"https://legacy-intake.example.com/dna/kit?partner_id={A}", d.get("intakeUrl"))
    check("DNA partnerId, prices, parentProduct, available", d.get("partnerId") == A and d.get("minimumPrice") == 99 and
          d.get("recommendedPrice") == 129 and d.get("maximumPrice") == 199 and d.get("parentProduct") == ["dna"] and
          d.get("available") is True, str(d)[:300])
    r = c.raw("GET", "/api/v1/medical-intake-links", tok["a"])
    m = {x["productName"]: x for x in data(r) or []}
    s_ = m.get("Sema", {})
    check("self-hosted url = {intake_url}/<selfHostedSlug>?partner_id=A",
          s_.get("url") == f"https://intake.example.com/sema?partner_id={A}", s_.get("url"))
    check("legacyUrl = {legacy_intake_url}/<legacyPath>?partner_id=A",
          s_.get("legacyUrl") == f"https://legacy-intake.example.com/legacy/sema?partner_id={A}", s_.get("legacyUrl"))
    check("link details/suggestedPrices/imageUrl as configured", s_.get("details") == "In stock" and
          s_.get("suggestedPrices") == "$199 - $549" and s_.get("imageUrl") == "https://img.example/x.png", str(s_)[:300])
    t = {x["key"]: x for x in s_.get("tiers", [])}
    check("tier values: label, min/max, commission", t.get("m3", {}).get("label") == "3 months" and
          t["m3"].get("minPrice") == 250 and t["m3"].get("maxPrice") == 900 and t["m3"].get("commission") == 90.25,
          str(t.get("m3")))
    r = c.raw("GET", "/api/v1/care-service-links?service=primary-care", tok["a"])
    x = (data(r) or [{}])[0]
    check("care url = {care_services_url}/<slug>?partner_id=A", x.get("url") == f"https://care.example.com/primary?partner_id={A}",
          x.get("url"))
    check("care redeemUrl = …/primary?partner_id=A&redeem=true (param order free)",
          x.get("redeemUrl", "").split("?")[0] == "https://care.example.com/primary" and
          sorted(qs(x.get("redeemUrl", ""))) == sorted([("partner_id", A), ("redeem", "true")]), x.get("redeemUrl"))
    tt = {y["key"]: y for y in x.get("tiers", [])}
    check("care tier values", tt.get("m12", {}).get("userPrice") == 120 and tt["m12"].get("commission") == 12 and
          tt["m12"].get("label") == "12 mo" and sorted(qs(tt["m12"]["url"])) == sorted([("partner_id", A), ("m", "12")]),
          str(tt.get("m12")))
    r = c.raw("GET", f"/api/all-products?partner_id={A}")
    cat = {y["name"]: y for y in r.json().get("products", [])}
    y = cat.get("Sema", {})
    check("catalog id = product id, image = imageUrl, imageSourceUrl, details",
          y.get("id") == M1 and y.get("image") == "https://img.example/x.png" and
          y.get("imageSourceUrl") == "https://img.example/src.png" and y.get("details") == "In stock", str(y)[:300])
    check("catalog intakeUrl == medical link url", y.get("intakeUrl") == s_.get("url"), f"{y.get('intakeUrl')} {s_.get('url')}")

    section("Authorization header forms (RFC 6750 / 7235; rulings Tokens)")
    a = tok["a"]
    for h, what in (("BEARER " + a, "upper-case scheme"), ("Bearer  " + a, "two spaces (RFC 6750 1*SP)")):
        r = c.raw("GET", "/api/v1/payouts", auth_header=h)
        check(f"{what}: 200 (RFC) or 401 with the error body", r.status_code in (200, 401), f"{r.status_code}")
        print(f"  INFO {what}: {r.status_code} {ecode(r)}")
    r = c.raw("GET", f"/api/v1/payouts?access_token={a}")
    expect("token in the query string is not a bearer -> 401 missing_bearer", r, 401, "missing_bearer")
    r = c.raw("GET", "/api/v1/payouts", headers={"Authorization": "Bearer " + a, "X-Api-Key": a})
    expect("plain bearer works with unrelated headers", r, 200)
    for path in ("/api/v1/leads/", "//api/v1/leads", "/api/v1//leads", "/API/V1/LEADS", "/api/v1/leads%2F"):
        r = c.raw("GET", path, tok["a"])
        check(f"{path!r}: 200 or 404 with the error body, no 5xx", r.status_code in (200, 404), f"{r.status_code}")
        print(f"  INFO {path!r}: {r.status_code}")
    r = c.raw("POST", "/api/v1/sub-accounts", tok["a"], data='{"subId":"90","nickname":"x"} xyz',
              headers={"Content-Type": "application/json"})
    expect("JSON with trailing garbage -> 400", r, 400, "invalid_request")
    r = c.raw("POST", "/api/v1/sub-accounts", tok["a"], data='{"subId":"90","subId":"91","nickname":"x"}',
              headers={"Content-Type": "application/json"})
    expect("JSON with a duplicate key -> 400", r, 400, "invalid_request")
    r = c.raw("POST", "/api/v1/sub-accounts", tok["a"], data='{"subId":"92","nickname":"x"}')
    check("JSON body without Content-Type: 201 or 4xx with error body", r.status_code in (201, 400, 415),
          f"{r.status_code} {r.text[:100]}")
    print(f"  INFO no Content-Type: {r.status_code} {ecode(r)}")


class Receiver:
    """An HTTPS receiver on 127.0.0.1:port that records every POST; `status` sets its answer."""

    def __init__(self, port, cert, key):
        import ssl
        import threading
        from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
        self.got, self.status, self.lock = [], {}, threading.Lock()
        self.delay, self.extra = {}, {}
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                code = outer.status.get(self.path, 200)
                if outer.delay.get(self.path):
                    time.sleep(outer.delay[self.path])
                with outer.lock:
                    outer.got.append({"t": time.time(), "path": self.path, "headers": dict(self.headers.items()),
                                      "raw": body, "status": code})
                self.send_response(code)
                if code in (301, 302, 307):
                    self.send_header("Location", "https://127.0.0.1/elsewhere")
                for k, v in outer.extra.get(self.path, {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        class Srv(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # the sender gave up (its timeout): nothing to report

        self.srv = Srv(("127.0.0.1", port), H)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.srv.socket = ctx.wrap_socket(self.srv.socket, server_side=True)
        self.srv.daemon_threads = True
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"https://127.0.0.1:{port}"

    def wait(self, pred, secs=10):
        t0 = time.time()
        while time.time() - t0 < secs:
            with self.lock:
                hits = [g for g in self.got if pred(g)]
            if hits:
                return hits
            time.sleep(0.05)
        return []


def hdr(g, name):
    for k, v in g["headers"].items():
        if k.lower() == name.lower():
            return v
    return None


def verify_sig(g, secrets_):
    import hashlib
    import hmac
    sig = hdr(g, "X-Partner-Signature") or ""
    parts = [p.split("=", 1) for p in sig.split(",") if "=" in p]
    ts = [v for k, v in parts if k == "t"]
    v1 = [v for k, v in parts if k == "v1"]
    if len(ts) != 1:
        return False, "no t", []
    signed = ts[0].encode() + b"." + g["raw"]
    ok = [any(hmac.compare_digest(hmac.new(sec.encode(), signed, hashlib.sha256).hexdigest(), v) for v in v1)
          for sec in secrets_]
    return all(ok), ts[0], v1


def verify_std(g, secret):
    import base64
    import hashlib
    import hmac
    wid, wts, wsig = hdr(g, "webhook-id"), hdr(g, "webhook-timestamp"), hdr(g, "webhook-signature")
    if not (wid and wts and wsig):
        return False, "missing"
    key = base64.b64decode(secret[len("whsec_"):])
    mac = base64.b64encode(hmac.new(key, f"{wid}.{wts}.".encode() + g["raw"], hashlib.sha256).digest()).decode()
    return f"v1,{mac}" in wsig.split(" "), wsig


def phase_webhooks(c, st):
    section("webhook deliveries (spec Events; rulings Webhooks; extensions §1-§3, §8.1, §9)")
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    certs = os.path.join(here, "..", "certs")
    rx = Receiver(int(os.environ.get("BB_RX_PORT", "18520")), os.path.join(certs, "leaf.pem"),
                  os.path.join(certs, "leaf.key"))
    W = "bbW" + uuid.uuid4().hex[:8]
    must(c.op("PUT", f"/partners/{W}", partner_body()), "partner W")
    u = must(c.op("POST", "/users", {"email": "w@example.test", "partnerId": W, "admin": False}), "user W")
    tw = must(c.op("POST", f"/users/{u['id']}/tokens", {}), "token W")["token"]
    p = "/api/v1/webhook-endpoints"
    r = c.raw("POST", p, tw, json={"url": rx.url + "/signed?x=1", "events": ["lead.created", "lead.enriched",
                                                                          "order.created", "payout.created"],
                                   "secret": True, "customHeader": {"name": "X-Team", "value": "team-secret-77"}})
    expect("endpoint on the receiver (private addresses allowed) -> 201", r, 201)
    ep = data(r) or {}
    secret = ep.get("secret", "")
    r = c.raw("POST", p, tw, json={"url": rx.url + "/plain", "events": ["lead.created"]})
    plain = data(r) or {}
    t_before = int(time.time())
    lead = must(c.op("POST", "/leads", {"partnerId": W, "firstName": "Hook", "lastName": "H", "email": "h@example.test",
                                        "emailConsent": True, "smsConsent": True, "origin": "managed-website",
                                        "location": "x"}), "lead W")
    hits = rx.wait(lambda g: g["path"].startswith("/signed") and b'"lead.created"' in g["raw"])
    check("lead.created delivered to the subscribed endpoint", bool(hits), str(len(rx.got)))
    if hits:
        g = hits[0]
        b = json.loads(g["raw"])
        check("Content-Type application/json", (hdr(g, "Content-Type") or "").startswith("application/json"),
              hdr(g, "Content-Type"))
        check("body {id, event, created_at, data:{lead}}", set(b) == {"id", "event", "created_at", "data"} and
              b["event"] == "lead.created" and set(b["data"]) == {"lead"} and b["data"]["lead"]["id"] == lead["id"],
              str(b)[:300])
        check("created_at RFC 3339 ms Z", TS_MS.match(b["created_at"] or ""), b["created_at"])
        check("lead payload carries isTest/testSource and equals the listing row",
              b["data"]["lead"].get("isTest") is False and "testSource" in b["data"]["lead"] and
              b["data"]["lead"] == data(c.raw("GET", f"/api/v1/leads/{lead['id']}", tw)), str(b["data"])[:300])
        check("X-Partner-Event = event name", hdr(g, "X-Partner-Event") == "lead.created", hdr(g, "X-Partner-Event"))
        check("X-Partner-Delivery is a UUID equal to body id", hdr(g, "X-Partner-Delivery") == b["id"] and
              re.fullmatch(r"[0-9a-f-]{36}", b["id"] or ""), f"{hdr(g, 'X-Partner-Delivery')} {b['id']}")
        ok, ts, v1 = verify_sig(g, [secret])
        check("X-Partner-Signature t=<unix>,v1=<hex HMAC-SHA256(secret, t.body)> verifies",
              ok and len(v1) == 1 and re.fullmatch(r"[0-9a-f]{64}", v1[0]), hdr(g, "X-Partner-Signature"))
        check("signature t is now (not older than 5 min)", ts.isdigit() and abs(int(ts) - time.time()) < 60, ts)
        ok, det = verify_std(g, secret)
        check("Standard Webhooks headers verify (webhook-id = delivery id, webhook-timestamp = t)",
              ok and hdr(g, "webhook-id") == b["id"] and hdr(g, "webhook-timestamp") == ts, str(det)[:200],
              "extensions §9")
        check("custom header sent on the delivery", hdr(g, "X-Team") == "team-secret-77", str(g["headers"])[:300])
        evid = hdr(g, "X-Partner-Event-Id")
        r = c.raw("GET", f"/api/v1/events/{evid}", tw)
        check("X-Partner-Event-Id names the feed's event, same event/created_at/data",
              r.status_code == 200 and data(r) and data(r)["event"] == "lead.created" and
              data(r)["data"] == b["data"], f"{evid} {r.text[:200]}", "extensions §8.1")
        d = wait_delivery(c, tw, b["id"], "delivered", secs=10)
        check("delivery log: delivered, attempts 1, lastStatusCode 200, deliveredAt", d.get("status") == "delivered" and
              d.get("attempts") == 1 and d.get("lastStatusCode") == 200 and TS_MS.match(d.get("deliveredAt") or ""),
              str(d)[:300])
    ph = rx.wait(lambda g: g["path"] == "/plain")
    if ph:
        check("no secret: no X-Partner-Signature, no webhook-signature", hdr(ph[0], "X-Partner-Signature") is None and
              hdr(ph[0], "webhook-signature") is None, str(ph[0]["headers"])[:300], "rulings Webhooks")
    # headless: nothing
    n0 = len(rx.got)
    hl = must(c.op("POST", "/leads", {"partnerId": W, "firstName": "Headless", "lastName": "H", "email": "x@example.test",
                                      "emailConsent": True, "smsConsent": True, "origin": "headless_intake",
                                      "location": "Weight Loss"}), "headless W")
    c.op("PATCH", f"/leads/{hl['id']}", {"phone": "+1 555 0000"})
    # enrichment of the real lead
    c.op("PATCH", f"/leads/{lead['id']}", {"phone": "+1 555 0101"})
    hits = rx.wait(lambda g: b'"lead.enriched"' in g["raw"])
    check("lead.enriched delivered with previousPhone/currentPhone", hits and
          json.loads(hits[0]["raw"])["data"]["currentPhone"] == "+1 555 0101" and
          json.loads(hits[0]["raw"])["data"]["previousPhone"] == "", str(hits[:1])[:300])
    time.sleep(0.5)
    check("headless_intake lead and its enrichment deliver nothing",
          not any(b"Headless" in g["raw"] for g in rx.got[n0:]), "")
    # order and payout
    c.op("POST", "/orders", {"orderId": f"ORD-{W}", "partnerId": W, "createdDate": iso(now()), "product": "P",
                             "amount": 10.5, "commission": 1, "status": "shipped", "isTest": False, "source": "shop",
                             "customerName": "Secret Name", "customerEmail": "secret@example.test"})
    hits = rx.wait(lambda g: b'"order.created"' in g["raw"])
    if hits:
        b = json.loads(hits[0]["raw"])
        check("order.created {source, order: Order} with exactly the spec's fields (no customer data)",
              set(b["data"]) == {"source", "order"} and b["data"]["source"] == "shop" and
              set(b["data"]["order"]) == set(ORDER_KEYS) and b"secret@example.test" not in hits[0]["raw"],
              str(b["data"])[:300])
    else:
        check("order.created delivered", False, "")
    c.op("POST", "/payouts", {"partnerId": W, "payoutDate": "2026-11-05", "payoutAmount": 7.25, "status": "paid",
                              "note": "private"})
    hits = rx.wait(lambda g: b'"payout.created"' in g["raw"])
    if hits:
        b = json.loads(hits[0]["raw"])
        check("payout.created {payout: Payout}, no note", set(b["data"]) == {"payout"} and
              set(b["data"]["payout"]) == set(PAYOUT_KEYS) and b"private" not in hits[0]["raw"], str(b["data"])[:300])
    else:
        check("payout.created delivered", False, "")
    # ping
    r = c.raw("POST", f"{p}/{ep.get('id')}/test", tw)
    pid_ = (data(r) or {}).get("id")
    hits = rx.wait(lambda g: hdr(g, "X-Partner-Delivery") == pid_)
    if hits:
        b = json.loads(hits[0]["raw"])
        check("ping body {id, event: ping, created_at, data:{endpointId}}, signed",
              b["event"] == "ping" and b["data"] == {"endpointId": ep.get("id")} and verify_sig(hits[0], [secret])[0],
              str(b)[:200], "extensions §1")
        # resend: same id and body bytes, fresh signature time
        time.sleep(1.1)
        r = c.raw("POST", f"/api/v1/webhook-deliveries/{pid_}/resend", tw)
        hits2 = rx.wait(lambda g: hdr(g, "X-Partner-Delivery") == pid_ and g is not hits[0] and g["t"] > hits[0]["t"])
        if hits2:
            check("resend: same id, same body bytes, fresh signature time, verifies",
                  hits2[0]["raw"] == hits[0]["raw"] and verify_sig(hits2[0], [secret])[0] and
                  verify_sig(hits2[0], [secret])[1] != verify_sig(hits[0], [secret])[1], "", "extensions §1")
        else:
            check("resend delivered again", False, r.text[:200])
    else:
        check("ping delivered", False, r.text[:200])
    # rotation with overlap: two v1, new first (Standard Webhooks too)
    r = c.raw("PATCH", f"{p}/{ep.get('id')}", tw, json={"secret": True})
    new = (data(r) or {}).get("secret", "")
    r = c.raw("POST", f"{p}/{ep.get('id')}/test", tw)
    pid2 = (data(r) or {}).get("id")
    hits = rx.wait(lambda g: hdr(g, "X-Partner-Delivery") == pid2)
    if hits:
        g = hits[0]
        ok_new, _, v1 = verify_sig(g, [new])
        ok_old, _, _ = verify_sig(g, [secret])
        check("during the overlap: t=…,v1=<new>,v1=<old>, both verify", ok_new and ok_old and len(v1) == 2,
              hdr(g, "X-Partner-Signature"), "extensions §3")
        import base64, hashlib, hmac as hm
        wsig = (hdr(g, "webhook-signature") or "").split(" ")
        okstd = verify_std(g, new)[0] and verify_std(g, secret)[0] and len(wsig) == 2
        first_new = False
        if wsig and new:
            key = base64.b64decode(new[6:])
            mac = base64.b64encode(hm.new(key, f"{hdr(g, 'webhook-id')}.{hdr(g, 'webhook-timestamp')}.".encode() +
                                          g["raw"], hashlib.sha256).digest()).decode()
            first_new = wsig[0] == f"v1,{mac}"
        check("webhook-signature: two values, the current secret's first", okstd and first_new, str(wsig)[:200],
              "extensions §9")
    else:
        check("ping after rotation delivered", False, r.text[:200])
    # failing receiver: retried, then failed; 410 disables
    rx.status["/fail"] = 500
    r = c.raw("POST", p, tw, json={"url": rx.url + "/fail", "events": ["payout.created"]})
    fid = (data(r) or {}).get("id")
    r = c.raw("POST", f"{p}/{fid}/test", tw)
    did = (data(r) or {}).get("id")
    d = wait_delivery(c, tw, did, "failed", secs=15)
    hits = [g for g in rx.got if hdr(g, "X-Partner-Delivery") == did]
    check("500s: 1 + 2 attempts (schedule 50ms,50ms), same delivery id, then failed 'status 500'",
          len(hits) == 3 and d.get("status") == "failed" and d.get("lastStatusCode") == 500 and
          "500" in (d.get("lastError") or ""), f"{len(hits)} {str(d)[:300]}")
    rx.status["/redir"] = 302
    r = c.raw("POST", p, tw, json={"url": rx.url + "/redir", "events": ["payout.created"]})
    rid = (data(r) or {}).get("id")
    r = c.raw("POST", f"{p}/{rid}/test", tw)
    d = wait_delivery(c, tw, (data(r) or {}).get("id"), "failed", secs=15)
    check("redirects are not followed: failed, lastError 'redirect'", d.get("status") == "failed" and
          not any(g["path"] == "/elsewhere" for g in rx.got) and "redirect" in (d.get("lastError") or ""), str(d)[:300])
    rx.status["/gone"] = 410
    r = c.raw("POST", p, tw, json={"url": rx.url + "/gone", "events": ["payout.created"]})
    gid = (data(r) or {}).get("id")
    c.raw("POST", f"{p}/{gid}/test", tw)
    ok = False
    for _ in range(40):
        e = next((x for x in data(c.raw("GET", p, tw)) or [] if x["id"] == gid), {})
        if e.get("status") == "disabled":
            ok = e.get("disabledReason") == "gone" and TS_MS.match(e.get("disabledAt") or "")
            break
        time.sleep(0.25)
    check("410 Gone disables the endpoint at once (reason gone)", ok, str(e)[:300], "extensions §2")
    # timeout, fairness, Retry-After, disabling with pending deliveries (rulings Webhooks; extensions §2)
    rx.delay["/slow"] = 3
    r = c.raw("POST", p, tw, json={"url": rx.url + "/slow", "events": ["payout.created"]})
    sid = (data(r) or {}).get("id")
    rx.status["/busy"] = 503
    rx.extra["/busy"] = {"Retry-After": "3"}
    r = c.raw("POST", p, tw, json={"url": rx.url + "/busy", "events": ["payout.created"]})
    bid = (data(r) or {}).get("id")
    r = c.raw("POST", p, tw, json={"url": rx.url + "/fast", "events": ["payout.created"]})
    t0 = time.time()
    c.op("POST", "/payouts", {"partnerId": W, "payoutDate": "2026-11-06", "payoutAmount": 1, "status": "paid"})
    hits = rx.wait(lambda g: g["path"] == "/fast", secs=10)
    check("a slow endpoint does not delay another endpoint's delivery (< 1.5 s)", hits and hits[0]["t"] - t0 < 1.5,
          f"{(hits[0]['t'] - t0) if hits else None}", "rulings Webhooks")
    busy = rx.wait(lambda g: g["path"] == "/busy", secs=5)
    time.sleep(2.0)
    n_busy_early = len([g for g in rx.got if g["path"] == "/busy"])
    busy2 = rx.wait(lambda g: g["path"] == "/busy" and busy and g["t"] > busy[0]["t"] + 0.5, secs=6)
    check("503 with Retry-After: 3 defers the next attempt to >= 3 s (schedule says 50 ms)",
          busy and n_busy_early == 1 and busy2 and busy2[0]["t"] - busy[0]["t"] >= 2.9,
          f"early={n_busy_early} gap={(busy2[0]['t'] - busy[0]['t']) if busy2 else None}", "extensions §2")
    slow = wait_delivery(c, tw, next((x["id"] for x in data(c.raw("GET", f"/api/v1/webhook-deliveries?endpointId={sid}", tw))
                                      or []), str(uuid.uuid4())), "failed", secs=15)
    check("attempt timeout (PARTNER_WEBHOOK_TIMEOUT=1s): failed, lastError timeout, lastStatusCode null",
          slow.get("status") == "failed" and "timeout" in (slow.get("lastError") or "") and
          slow.get("lastStatusCode") is None, str(slow)[:300])
    rx.extra["/busy"] = {"Retry-After": "60"}
    c.op("POST", "/payouts", {"partnerId": W, "payoutDate": "2026-11-07", "payoutAmount": 2, "status": "paid"})
    time.sleep(1.5)
    r = c.raw("GET", f"/api/v1/webhook-deliveries?endpointId={bid}&status=pending", tw)
    pend = [x["id"] for x in data(r) or []]
    c.raw("PATCH", f"{p}/{bid}", tw, json={"enabled": False})
    ds = [wait_delivery(c, tw, x, "failed", secs=5) for x in pend]
    check("disabling ends the pending deliveries failed with lastError 'endpoint disabled'",
          pend and all(d.get("status") == "failed" and d.get("lastError") == "endpoint disabled" for d in ds),
          f"{pend} {[str(d)[:120] for d in ds]}", "extensions §2")
    # recover is bounded to 1,000 per call (extensions §12)
    if os.environ.get("BB_RECOVER", "1") == "1":
        rx.status["/many"] = 500
        r = c.raw("POST", p, tw, json={"url": rx.url + "/many", "events": ["lead.created"]})
        mid = (data(r) or {}).get("id")
        t_start = now() - dt.timedelta(seconds=1)
        import concurrent.futures as cf

        def ing(i):
            return Client(c.base, c.internal).op("POST", "/leads", {
                "partnerId": W, "firstName": f"M{i}", "lastName": "x", "email": "m@example.test", "emailConsent": True,
                "smsConsent": True, "origin": "public-link", "location": "x"}).status_code
        with cf.ThreadPoolExecutor(8) as ex:
            codes = list(ex.map(ing, range(1003)))
        t0 = time.time()
        nfail = 0
        while time.time() - t0 < 90:
            r = c.op("GET", f"/partners/{W}/webhook-deliveries?endpointId={mid}&status=pending&limit=1")
            if r.status_code == 200 and not data(r):
                break
            time.sleep(1)
        rx.status["/many"] = 200
        r = c.raw("POST", f"{p}/{mid}/recover", tw, json={"since": iso(t_start)})
        d1 = data(r) or {}
        r = c.raw("POST", f"{p}/{mid}/recover", tw, json={"since": iso(t_start)})
        d2 = data(r) or {}
        check("recover of 1,003 failed deliveries: 1,000 then 3 (remaining 3, then 0)",
              codes.count(201) == 1003 and d1 == {"requeued": 1000, "remaining": 3} and d2 == {"requeued": 3, "remaining": 0},
              f"{codes.count(201)} {d1} {d2}", "extensions §12")
        hits = rx.wait(lambda g: False, secs=0)
        t0 = time.time()
        while time.time() - t0 < 60:
            r = c.op("GET", f"/partners/{W}/webhook-deliveries?endpointId={mid}&status=delivered&limit=500")
            if len(data(r) or []) >= 500:
                break
            time.sleep(1)
        check("the requeued deliveries are delivered", len(data(r) or []) >= 500, str(len(data(r) or [])))
    # delayed lead.created carries a phone supplied during the delay
    if os.environ.get("BB_SLOW", "1") == "1":
        r = c.raw("POST", p, tw, json={"url": rx.url + "/delayed", "events": ["lead.created"], "leadCreatedDelay": "1m"})
        dl = must(c.op("POST", "/leads", {"partnerId": W, "firstName": "Delayed", "lastName": "D",
                                          "email": "d@example.test", "emailConsent": True, "smsConsent": True,
                                          "origin": "public-link", "location": "x"}), "delayed lead")
        t0 = time.time()
        time.sleep(2)
        early = [g for g in rx.got if g["path"] == "/delayed"]
        c.op("PATCH", f"/leads/{dl['id']}", {"phone": "+1 555 0202"})
        hits = rx.wait(lambda g: g["path"] == "/delayed", secs=75)
        took = time.time() - t0
        check("lead.created delayed 1m: not before ~1 min, built when sent (phone supplied during the delay)",
              not early and hits and 55 <= took <= 75 and
              json.loads(hits[0]["raw"])["data"]["lead"]["phone"] == "+1 555 0202", f"{took:.1f}s {str(hits[:1])[:200]}",
              "spec Events 4; rulings Webhooks")
    st["secrets_extra"] = st.get("secrets_extra", []) + ["team-secret-77", secret, new]


def check_operator_shapes(c, st):
    section("operator answers' shapes (operator-api.md)")
    tok = st["tok"]
    r = c.op("GET", f"/partners/{A}")
    d = data(r) or {}
    ok, det = keys_exact(d, list(partner_body().keys()) + ["partnerId", "createdAt", "updatedAt"])
    check("Partner = the body plus partnerId, createdAt, updatedAt", ok, det)
    r = c.op("POST", "/users", {"email": "shape@example.test", "partnerId": A, "admin": False})
    u = data(r) or {}
    ok, det = keys_exact(u, ["id", "email", "partnerId", "admin", "createdAt"])
    check("user answer {id, email, partnerId, admin, createdAt}", r.status_code == 201 and ok, det)
    t = data(c.op("POST", f"/users/{u.get('id')}/tokens", {})) or {}
    c.raw("GET", "/api/v1/payouts", t.get("token"))
    r = c.op("GET", f"/users/{u.get('id')}/tokens")
    row = next((x for x in data(r) or [] if x["id"] == t.get("id")), {})
    check("lastUsedAt set once the token was used", TS_MS.match(row.get("lastUsedAt") or ""), str(row))
    r = c.op("DELETE", f"/tokens/{t.get('id')}")
    check("DELETE token -> 200 {data:{ok:true}}", r.status_code == 200 and r.json() == {"data": {"ok": True}}, r.text)
    r = c.op("GET", f"/users/{u.get('id')}/tokens")
    row = next((x for x in data(r) or [] if x["id"] == t.get("id")), {})
    check("revokedAt set after revocation", TS_MS.match(row.get("revokedAt") or ""), str(row))
    r = c.op("DELETE", f"/users/{u.get('id')}")
    check("DELETE user -> 200 {data:{ok:true}}", r.status_code == 200 and r.json() == {"data": {"ok": True}}, r.text)
    r = c.op("POST", "/analytics-events", {"runId": "run-shape", "partnerId": f"{A}.7", "event": "order_completed",
                                           "product": "Sema", "amount": 12.5, "occurredAt": "2026-11-21T10:00:00.123Z",
                                           "testSource": "simulation"})
    check("analytics event -> 202", r.status_code == 202, r.text[:200])
    r = c.raw("GET", "/api/v1/orders/TEST-SIM-run-shape", tok["a"])
    d = data(r) or {}
    check("simulated order: createdDate = occurredAt, subAccount from the code's sub-account, amount",
          d.get("createdDate") == "2026-11-21T10:00:00.123Z" and d.get("subAccount") == "Staff Seven" and
          d.get("amount") == 12.5 and d.get("commission") == 0, str(d))
    r = c.op("POST", "/analytics-events", {"runId": "run-view", "partnerId": A, "event": "page_view",
                                           "occurredAt": iso(now()), "testSource": "simulation"})
    check("non-order analytics event -> 202, no order", r.status_code == 202 and
          c.raw("GET", "/api/v1/orders/TEST-SIM-run-view", tok["a"]).status_code == 404, r.text[:200])
    r = c.op("POST", "/analytics-events", {"runId": "run-np", "partnerId": A, "event": "order_completed",
                                           "occurredAt": iso(now()), "testSource": "simulation"})
    expect("order_completed without product/amount -> 400", r, 400, "invalid_request")
    r = c.raw("POST", "/api/v1/webhook-endpoints", tok["a"], json={"url": "https://hooks.example.invalid/d",
                                                                   "events": ["lead.created"]})
    eid = (data(r) or {}).get("id")
    r = c.raw("DELETE", f"/api/v1/webhook-endpoints/{eid}", tok["a"])
    check("DELETE webhook endpoint -> 200 {data:{ok:true}}", r.status_code == 200 and r.json() == {"data": {"ok": True}},
          r.text)
    r = c.op("GET", f"/partners/{A}/webhook-deliveries?limit=5")
    d = data(r) or []
    if d:
        check("operator deliveries carry the listed fields", {"id", "endpointId", "event", "status", "attempts",
                                                              "nextAttemptAt", "lastStatusCode", "lastError",
                                                              "createdAt", "deliveredAt"} <= set(d[0]), str(sorted(d[0])))
    ca = st["coupons"]["A"]["coupons"]
    r = c.op("POST", f"/care-services-coupons/{ca[3]['id']}/void")
    check("void answers the coupon, status void", r.status_code == 200 and (data(r) or {}).get("status") == "void" and
          (data(r) or {}).get("code") == ca[3]["code"], r.text[:200])


def check_empty_and_unicode(c, st):
    section("empty partner; Unicode round trips (spec; rulings Wire conventions)")
    Z = "bbZ"
    must(c.op("PUT", f"/partners/{Z}", partner_body(dna=False, care=False)), "partner Z")
    u = must(c.op("POST", "/users", {"email": "z@example.test", "partnerId": Z, "admin": False}), "user Z")
    tz = must(c.op("POST", f"/users/{u['id']}/tokens", {}), "token Z")["token"]
    r = c.raw("GET", "/api/v1/leads", tz)
    check("leads of an empty partner: data [], nextCursor null, limit 50",
          r.status_code == 200 and r.json() == {"data": [], "page": {"nextCursor": None, "limit": 50}}, r.text[:200])
    for path in ("/api/v1/orders", "/api/v1/payouts", "/api/v1/sub-accounts", "/api/v1/webhook-endpoints"):
        r = c.raw("GET", path, tz)
        check(f"{path} of an empty partner: {{data: []}}", r.status_code == 200 and r.json() == {"data": []}, r.text[:200])
    r = c.raw("GET", "/api/v1/care-services-coupons", tz)
    check("coupons of an empty partner: total 0", r.status_code == 200 and
          r.json() == {"data": [], "total": 0, "limit": 100, "offset": 0}, r.text[:200])
    r = c.raw("GET", "/api/v1/care-services-coupons?format=csv", tz)
    check("CSV of an empty partner: the header row only, X-Total-Count 0", r.status_code == 200 and
          r.text.strip() == ",".join(f'"{x}"' for x in CSV_COLS) and r.headers.get("X-Total-Count") == "0", r.text[:300])
    r = c.raw("GET", "/api/v1/events", tz)
    check("events of an empty partner: [], a cursor", r.status_code == 200 and data(r) == [] and
          isinstance(r.json()["page"]["nextCursor"], str), r.text[:200])
    r = c.raw("GET", "/api/v1/webhook-deliveries", tz)
    check("deliveries of an empty partner: [], nextCursor null", r.status_code == 200 and data(r) == [] and
          r.json()["page"]["nextCursor"] is None, r.text[:200])
    r = c.raw("GET", "/api/v1/care-service-links", tz)
    check("care links without access: []", r.status_code == 200 and data(r) == [], r.text[:200])
    names = ("Zoë 👩‍⚕️", "שרה \"q\" \\ </script>")
    r = c.op("POST", "/leads", {"partnerId": Z, "firstName": names[0], "lastName": names[1],
                                "email": "zoë+tag@example.test", "emailConsent": True, "smsConsent": True,
                                "phone": "+1 (555) 010-0999", "origin": "managed-website", "location": "Zürich"})
    lid = (data(r) or {}).get("id")
    r = c.raw("GET", f"/api/v1/leads/{lid}", tz)
    d = data(r) or {}
    check("Unicode, quotes, backslash and markup round-trip exactly",
          (d.get("firstName"), d.get("lastName"), d.get("location"), d.get("phone")) ==
          (names[0], names[1], "Zürich", "+1 (555) 010-0999"), str(d)[:300])
    check("e-mail with + and non-ASCII kept as given", d.get("email") in ("zoë+tag@example.test",), d.get("email"))
    bo = c.op("POST", "/care-services-coupons/bulk-orders", {
        "partnerId": Z, "productSlug": "vet-care", "months": 12, "quantity": 1, "unitPriceCents": 1,
        "purchaserEmail": "b@example.test", "purchaserSource": "naïve \"shop\"", "notes": "línea 1; línea 2, \"x\""})
    check("bulk order with Unicode/comma/quote notes -> 201", bo.status_code == 201, bo.text[:200])
    r = c.op("POST", "/care-services-coupons/bulk-orders", {
        "partnerId": Z, "productSlug": "vet-care", "months": 12, "quantity": 1, "unitPriceCents": 1,
        "purchaserEmail": "b@example.test", "purchaserSource": "x", "notes": "two\nlines"})
    check("notes with a newline: 201 or 400 (decisions.md refuses control characters)", r.status_code in (201, 400),
          r.text[:200])
    print(f"  INFO notes with a newline: {r.status_code} {ecode(r)}")
    r = c.raw("GET", "/api/v1/care-services-coupons?format=csv", tz)
    rows = list(csv.DictReader(io.StringIO(r.content.decode("utf-8"))))
    check("CSV is UTF-8; newline, comma and quotes inside a value survive",
          rows and rows[0]["notes"] == "línea 1; línea 2, \"x\"" and rows[0]["purchaser_source"] == "naïve \"shop\"",
          str(rows[:1])[:300])


def phase_proxies(c, st):
    section("PARTNER_TRUSTED_PROXIES=127.0.0.1, PARTNER_PUBLIC_RATE=1 (extensions §12)")
    url = f"/api/weight-loss?partner_id={A}"

    def flood(xff):
        codes = []
        for _ in range(10):
            r = c.raw("GET", url, headers={"X-Forwarded-For": xff})
            codes.append(r.status_code)
            if r.status_code == 429:
                break
        return codes
    a = flood("198.51.100.1")
    check("client 198.51.100.1 (via the trusted proxy) reaches 429", a[-1] == 429, str(a))
    b = c.raw("GET", url, headers={"X-Forwarded-For": "198.51.100.2"})
    check("another client behind the proxy has its own budget", b.status_code == 200, f"{b.status_code}")
    # a 429 is answered after 1 s, so one unit came back meanwhile: two quick calls meet a 429
    x1 = c.raw("GET", url, headers={"X-Forwarded-For": "203.0.113.50, 198.51.100.1"})
    x2 = c.raw("GET", url, headers={"X-Forwarded-For": "203.0.113.51, 198.51.100.1"})
    check("the right-most hop is the client: a spoofed left part does not help",
          429 in (x1.status_code, x2.status_code), f"{x1.status_code} {x2.status_code}")
    y1 = c.raw("GET", url, headers={"X-Forwarded-For": "198.51.100.1, 127.0.0.1"})
    y2 = c.raw("GET", url, headers={"X-Forwarded-For": "198.51.100.1, 127.0.0.1"})
    check("trusted hops are skipped from the right", 429 in (y1.status_code, y2.status_code),
          f"{y1.status_code} {y2.status_code}")
    z = flood("198.51.100.3")
    check("a fresh client behind the proxy: first call 200", z[0] == 200, str(z))


def check_openapi(c, st):
    section("OpenAPI documents list every answer the service gave (extensions §6)")
    docs = {"/api": c.raw("GET", "/api/v1/openapi.json").json(), "/internal": c.op("GET", "/openapi.json").json()}
    ops = []
    for prefix, d in docs.items():
        for tmpl, item in d.get("paths", {}).items():
            rx_ = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(tmpl)) + "$"
            for m, op in item.items():
                if m.lower() in ("get", "post", "put", "patch", "delete", "options", "head"):
                    ops.append((m.upper(), tmpl, re.compile(rx_), set(op.get("responses", {}).keys())))
    missing, unmatched = {}, set()
    for method, path, status, ct in SEEN:
        if not (path.startswith("/api") or path.startswith("/internal") or path.startswith("/embed")
                or path.startswith("/portal")):
            continue
        cands = [o for o in ops if o[0] == method and o[2].match(path)]
        if not cands:
            if status not in (404, 405):
                unmatched.add((method, path[:60], status))
            continue
        # the most specific template: fewest parameters
        o = min(cands, key=lambda o: o[1].count("{"))
        if str(status) not in o[3] and "default" not in o[3] and f"{str(status)[0]}XX" not in o[3]:
            missing.setdefault((method, o[1]), set()).add(status)
    for (method, tmpl), sts in sorted(missing.items()):
        check(f"{method} {tmpl}: statuses {sorted(sts)} documented", False, "not in the operation's responses",
              "extensions §6")
    check("every answered operation's status is documented", not missing, f"{len(missing)} operations")
    check("every answered path is a documented operation (404/405 aside)", not unmatched, str(sorted(unmatched))[:400])


def phase_faults(c, st):
    section("database unreachable (extensions §11)")
    import os
    ctl = os.environ["BB_DBPROXY_CTL"]
    tok = st["tok"]
    expect("before: 200", c.raw("GET", "/api/v1/orders", tok["a"]), 200)
    open(ctl, "w").write("down")
    time.sleep(0.3)
    results = []
    for method, path, t in (("GET", "/api/v1/orders", tok["a"]), ("GET", "/api/v1/leads", tok["a"]),
                            ("GET", f"/api/weight-loss?partner_id={A}", None),
                            ("GET", f"/internal/v1/partners/{A}", c.internal),
                            ("POST", "/internal/v1/leads", c.internal)):
        t0 = time.time()
        r = c.raw(method, path, t, json={"partnerId": A, "firstName": "Down", "lastName": "D",
                                         "email": "d@example.test", "emailConsent": True, "smsConsent": True,
                                         "origin": "managed-website", "location": "x"} if method == "POST" else None)
        took = time.time() - t0
        results.append((path, r.status_code, ecode(r), r.headers.get("Retry-After"), round(took, 2)))
        check(f"{method} {path[:40]} while the database is down: 503 unavailable, Retry-After 1, within 1 s",
              r.status_code == 503 and ecode(r) == "unavailable" and r.headers.get("Retry-After") == "1" and took <= 1.2,
              f"{r.status_code} {ecode(r)} ra={r.headers.get('Retry-After')} {took:.2f}s")
    r = c.raw("GET", "/readyz")
    check("/readyz 503 while down", r.status_code == 503, f"{r.status_code}")
    expect("/healthz 200 while down", c.raw("GET", "/healthz"), 200)
    open(ctl, "w").write("up")
    t0 = time.time()
    back = None
    while time.time() - t0 < 5:
        r = c.raw("GET", "/api/v1/orders", tok["a"])
        if r.status_code == 200:
            back = time.time() - t0
            break
        time.sleep(0.05)
    check("recovers by itself within 1 s of the database coming back", back is not None and back <= 1.2,
          f"{back}")
    expect("/readyz 200 again", c.raw("GET", "/readyz"), 200)
    r = c.op("POST", "/leads", {"partnerId": A, "firstName": "Back", "lastName": "B", "email": "b@example.test",
                                "emailConsent": True, "smsConsent": True, "origin": "managed-website", "location": "x"})
    expect("writes work again", r, 201)


def phase_sigterm(c, st):
    section("SIGTERM (extensions §5, §11; README: PARTNER_SHUTDOWN_DRAIN=2s)")
    import os
    import signal
    pid = int(os.environ["BB_SERVER_PID"])
    expect("before: /readyz 200", c.raw("GET", "/readyz"), 200)
    os.kill(pid, signal.SIGTERM)
    time.sleep(0.2)
    r = c.raw("GET", "/readyz")
    check("/readyz 503 at once after SIGTERM", r.status_code == 503, f"{r.status_code}")
    r = c.raw("GET", "/api/v1/orders", st["tok"]["a"])
    check("the API still answers during the drain", r.status_code == 200, f"{r.status_code}")
    t0 = time.time()
    gone = False
    while time.time() - t0 < 20:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            gone = True
            break
        try:
            if open(f"/proc/{pid}/stat").read().split()[2] == "Z":
                gone = True
                break
        except OSError:
            gone = True
            break
        time.sleep(0.1)
    check("the process exits after the drain (within 20 s)", gone, f"{time.time() - t0:.1f}s")


def check_embed(c, st):
    section("embedded Care Services view (spec Embedded view; docs/embedding.md)")
    tok = st["tok"]
    r = c.raw("GET", "/api/v1/embed", tok["a"])
    d = data(r) or {}
    check("GET /api/v1/embed -> {url, origin}, url = {catalog_url}/embed/care-services?partner_id=A",
          r.status_code == 200 and d.get("url") == f"{c.base}/embed/care-services?partner_id={A}" and
          d.get("origin") == c.base, r.text[:200])
    check("/api/v1/embed carries the links group's rate-limit headers", "X-RateLimit-Limit" in r.headers)
    r = c.raw("GET", f"/embed/care-services?partner_id={A}")
    h = r.text
    check("200 text/html with the height message type", r.status_code == 200 and
          r.headers.get("Content-Type", "").startswith("text/html") and "partner-api-docs-height" in h,
          f"{r.status_code} {r.headers.get('Content-Type')}")
    check("lists the partner's services (Primary-Care, Urgent-Care, Mental-Health)",
          all(x in h for x in ("Primary-Care", "Urgent-Care", "Mental-Health")), "")
    check("links carry partner_id and no patient data", f"partner_id={A}" in h and "@example.test" not in h, "")
    c.op("PUT", "/care-services/feature-flags", {"mental-health": False})
    h2 = c.raw("GET", f"/embed/care-services?partner_id={A}").text
    c.op("PUT", "/care-services/feature-flags", {"mental-health": True})
    check("a category flag off hides that service", "Mental-Health" not in h2 and "Primary-Care" in h2, "")
    h3 = c.raw("GET", f"/embed/care-services?partner_id={A}&service=urgent-care").text
    check("service= filters", "Urgent-Care" in h3 and "Primary-Care" not in h3, "")
    h4 = c.raw("GET", f"/embed/care-services?partner_id={A}&sub=7&m=3").text
    check("sub=7 carried on the links", "sub=7" in h4, "")
    h5 = c.raw("GET", f"/embed/care-services?partner_id={A}&redeem=true").text
    check("redeem=true: the redemption screen's links carry redeem=true", "redeem=true" in h5, "")
    r = c.raw("GET", f"/embed/care-services?partner_id={B}")
    check("a partner without access: 200, no service listed", r.status_code == 200 and "Primary-Care" not in r.text,
          f"{r.status_code}")
    c.op("PUT", f"/partners/{C}", partner_body(active=False))
    for q, st_, what in (("", 400, "missing partner_id"), ("?partner_id=a%20b", 400, "malformed partner_id"),
                         ("?partner_id=nobody", 404, "unknown partner"), (f"?partner_id={C}", 404, "inactive partner")):
        r = c.raw("GET", f"/embed/care-services{q}")
        ok = r.status_code == st_
        try:
            ok = ok and r.json()["error"]["code"] in ("invalid_request", "not_found")
        except Exception:
            ok = False
        check(f"embed {what} -> {st_} with the error body", ok, f"{r.status_code} {r.text[:100]}", "rulings Wire conventions")
    for q in ("service=dentistry", "m=2", "sub=0", "sub=251", "sub=99", "redeem=yes", "lang=fr"):
        r = c.raw("GET", f"/embed/care-services?partner_id={A}&{q}")
        check(f"embed {q}: 200 (ignored) or 400 with the error body, never 5xx", r.status_code in (200, 400), f"{r.status_code}")
        print(f"  INFO embed {q}: {r.status_code}")


def check_logs(c, st, log, audit=True):
    section("server log (extensions §12: audit line, no secrets)")
    try:
        text = open(log).read()
    except Exception as e:
        check("server log readable", False, str(e))
        return
    lines = [json.loads(x) for x in text.splitlines() if x.startswith("{")]
    if audit:
        aud = [x for x in lines if x.get("target") == "audit"]
        hit = [x for x in aud if x.get("partnerId") == B and x.get("rows") == 2]
        check("admin cross read logs target audit with tokenId, userId, partnerId, path, rows",
              bool(hit) and all(k in hit[0] for k in ("tokenId", "userId", "partnerId", "path", "rows")) and
              hit[0].get("level") == "INFO", str(aud[:1])[:300])
        own = [x for x in aud if x.get("partnerId") == A and x.get("userId") == st["users"]["adm"]]
        check("admin read of its own partner (partner_id=own) is not audited", not own, str(own[:1])[:200])
        csvl = [x for x in aud if x.get("partnerId") == B and x.get("userId") == st["users"]["adm"] and x.get("rows") == 2]
        check("every cross read audited (JSON and CSV: 2 lines for B)", len(csvl) >= 2, str(len(csvl)))
        bdm = [x for x in aud if x.get("partnerId") == A and x.get("userId") == st["users"]["bdm"]]
        check("B's admin reading A: audited with A's partnerId", len(bdm) == 1, str(bdm)[:200])
    secrets = [st["tok"][k] for k in ("a", "b", "adm")] + ["supersecretvalue1234", "ann@example.test", "555 0100",
                                                           "cus@example.test", "Cus Tomer", "pat@example.test",
                                                           "bbapi-internal-token", "bbapi-pepper"]
    secrets += st.get("secrets_extra", []) + ["whsec_", "zzsecretq", "zzqmark", "NoConsent", "+1 555 0111",
                                              "555 0122", "i@example.test", "buyer@example.test"]
    found = [x for x in secrets if x in text]
    check("log holds no token, header value, e-mail, phone, name or setting secret", not found, str(found))


# ---------------------------------------------------------------- other phases

def phase_rate(c, st):
    section("rate limiting (PARTNER_RATE_LIMIT=4/60s; rulings Rate limits; extensions §12)")
    tok = st["tok"]
    rs = [c.raw("GET", "/api/v1/payouts", tok["a"]) for _ in range(4)]
    check("4 calls within budget -> 200", all(r.status_code == 200 for r in rs), str([r.status_code for r in rs]))
    check("X-RateLimit-Limit 4, Remaining 3..0", [r.headers.get("X-RateLimit-Remaining") for r in rs] == ["3", "2", "1", "0"]
          and rs[0].headers.get("X-RateLimit-Limit") == "4", str([r.headers.get("X-RateLimit-Remaining") for r in rs]))
    r = c.raw("GET", "/api/v1/payouts", tok["a"])
    expect("5th -> 429 rate_limited", r, 429, "rate_limited")
    ra = r.headers.get("Retry-After", "")
    check("429 carries Retry-After whole seconds and X-RateLimit-*", ra.isdigit() and int(ra) <= 60 and
          r.headers.get("X-RateLimit-Remaining") == "0" and "X-RateLimit-Reset" in r.headers, str(dict(r.headers)))
    reset = int(r.headers.get("X-RateLimit-Reset", "0"))
    check("Reset within the 60 s window and Retry-After ~ Reset - now", 0 <= reset - time.time() <= 61 and
          ra.isdigit() and abs(int(ra) - (reset - time.time())) <= 2, f"reset-now={reset - time.time():.1f} ra={ra}")
    expect("by-id in the same group is limited too", c.raw("GET", f"/api/v1/payouts/{uuid.uuid4()}", tok["a"]), 429,
           "rate_limited", "extensions §8.2")
    expect("other group (orders) unaffected", c.raw("GET", "/api/v1/orders", tok["a"]), 200)
    expect("other token same group unaffected", c.raw("GET", "/api/v1/payouts", tok["adm"]), 200)
    expect("over budget + invalid input -> 429 before 400",
           c.raw("GET", "/api/v1/payouts?x=1", tok["a"]), 429, "rate_limited")
    # leads: 400s cost a unit
    for _ in range(4):
        r = c.raw("GET", "/api/v1/leads?limit=0", tok["a"])
    check("400s count against the budget (4 x 400 then...)", r.status_code == 400 and
          r.headers.get("X-RateLimit-Remaining") == "0", f"{r.status_code} {r.headers.get('X-RateLimit-Remaining')}")
    expect("... a valid call is 429", c.raw("GET", "/api/v1/leads", tok["a"]), 429, "rate_limited")
    expect("over budget + invalid limit -> 429 (429 before 400)", c.raw("GET", "/api/v1/leads?limit=0", tok["a"]), 429,
           "rate_limited")
    for _ in range(4):
        c.raw("GET", "/api/v1/sub-accounts", tok["a"])
    r = c.raw("POST", "/api/v1/sub-accounts", tok["a"], data="{bad", headers={"Content-Type": "application/json"})
    expect("over budget + malformed JSON body -> 429 (429 before 400)", r, 429, "rate_limited")
    r = c.raw("POST", "/api/v1/sub-accounts", tok["a"], data='{"subId":"0"}', headers={"Content-Type": "application/json",
                                                                                      "Idempotency-Key": "a b"})
    check("over budget + malformed Idempotency-Key -> 429 or 400", r.status_code in (429, 400), f"{r.status_code}")
    print(f"  INFO over budget + malformed Idempotency-Key: {r.status_code} {ecode(r)}")
    # links group shared by dna/medical/care
    rs = [c.raw("GET", path, tok["adm"]) for path in ("/api/v1/dna-links", "/api/v1/medical-intake-links",
                                                      "/api/v1/care-service-links", "/api/v1/dna-links")]
    r = c.raw("GET", "/api/v1/care-service-links", tok["adm"])
    check("links group: dna+medical+care share one budget", [x.status_code for x in rs] == [200] * 4 and
          r.status_code == 429, str([x.status_code for x in rs] + [r.status_code]))
    # forbidden before 429: C is inactive (its token fails at 403 always)
    for _ in range(5):
        r = c.raw("GET", "/api/v1/leads", tok["c"])
    expect("inactive partner stays 403 (403 before 429)", r, 403, "forbidden")
    # 401 not limited
    rs = [c.raw("GET", "/api/v1/orders", auth_header="Bearer pk_live_" + "Z" * 43) for _ in range(6)]
    check("invalid tokens are 401, never 429", all(x.status_code == 401 for x in rs), str([x.status_code for x in rs]))
    # webhook-endpoints group includes events
    rs = [c.raw("GET", "/api/v1/events", tok["b"]) for _ in range(2)] + \
         [c.raw("GET", "/api/v1/webhook-endpoints", tok["b"]) for _ in range(2)]
    r = c.raw("GET", "/api/v1/webhook-deliveries", tok["b"])
    check("events + webhook-endpoints + deliveries share one group", [x.status_code for x in rs] == [200] * 4 and
          r.status_code == 429, str([x.status_code for x in rs] + [r.status_code]))
    import concurrent.futures as cf
    with cf.ThreadPoolExecutor(12) as ex:
        rs = list(ex.map(lambda _: Client(c.base).raw("GET", "/api/v1/orders", tok["bdm"]).status_code, range(12)))
    check("12 concurrent calls on a budget of 4: exactly 4 admitted", rs.count(200) == 4 and rs.count(429) == 8,
          str(sorted(rs)))
    # idempotent replay counts as one unit
    H = {"Idempotency-Key": "rate-k", "Content-Type": "application/json"}
    r1 = c.raw("POST", "/api/v1/sub-accounts", tok["adm"], data='{"subId":"150","nickname":"r"}', headers=H)
    r2 = c.raw("POST", "/api/v1/sub-accounts", tok["adm"], data='{"subId":"150","nickname":"r"}', headers=H)
    check("a replay costs one unit (Remaining 3 then 2)", r2.headers.get("Idempotent-Replayed") == "true" and
          (r1.headers.get("X-RateLimit-Remaining"), r2.headers.get("X-RateLimit-Remaining")) == ("3", "2"),
          f"{r1.status_code} {r2.status_code} {r1.headers.get('X-RateLimit-Remaining')} {r2.headers.get('X-RateLimit-Remaining')}")
    section("public surfaces limit (PARTNER_PUBLIC_RATE=1; extensions §12)")
    r429 = None
    codes = []
    for _ in range(20):
        r = c.raw("GET", f"/api/weight-loss?partner_id={A}")
        codes.append(r.status_code)
        if r.status_code == 429:
            r429 = r
            t429 = time.time()
            break
    check("catalog flood -> 429 within 20 calls", r429 is not None, str(codes))
    if r429 is not None:
        check("public 429: error body, Retry-After, catalog headers", ecode(r429) == "rate_limited" and
              r429.headers.get("Retry-After", "").isdigit() and
              r429.headers.get("Cdn-Cache-Control") == "no-store", f"{r429.text[:200]} {dict(r429.headers)}")
        # a 429 is answered after 1 s (README), so one unit has refilled by then: two more calls
        # with distinct spoofed X-Forwarded-For must meet at least one 429 if the header is ignored
        x1 = c.raw("GET", f"/api/weight-loss?partner_id={A}", headers={"X-Forwarded-For": "203.0.113.9"})
        x2 = c.raw("GET", f"/api/weight-loss?partner_id={A}", headers={"X-Forwarded-For": "203.0.113.10"})
        check("spoofed X-Forwarded-For from an untrusted peer gets no fresh budget",
              429 in (x1.status_code, x2.status_code), f"{x1.status_code} {x2.status_code}")
        e = c.raw("GET", "/embed/care-services?partner_id=" + A)
        g = c.raw("GET", f"/api/weight-loss?partner_id={A}")
        check("embedded view and catalog share one budget", 429 in (e.status_code, g.status_code),
              f"{e.status_code} {g.status_code}")
    expect("partner API unaffected by the public flood", c.raw("GET", "/api/v1/sub-accounts", tok["b"]), 200)


def phase_careoff(c, st):
    section("CARE_SERVICES_API_ENABLED=false (spec; rulings order of checks)")
    tok = st["tok"]
    for path in ("/api/v1/care-service-links", "/api/v1/care-services-coupons", "/api/v1/care-services-coupons?format=csv",
                 f"/api/v1/care-services-coupons/{st['coupons']['A']['coupons'][2]['code']}"):
        expect(f"{path[:45]} with token -> 404 not_found", c.raw("GET", path, tok["a"]), 404, "not_found")
        expect(f"{path[:45]} without token -> 404 (before auth)", c.raw("GET", path), 404, "not_found")
        expect(f"{path[:45]} bad token -> 404", c.raw("GET", path, "garbage"), 404, "not_found")
    expect("other endpoints still served", c.raw("GET", "/api/v1/dna-links", tok["a"]), 200)
    expect("GET /api/v1/embed -> 404 while Care Services are off", c.raw("GET", "/api/v1/embed", tok["a"]), 404,
           "not_found")
    expect("/embed/care-services -> 404 while Care Services are off",
           c.raw("GET", f"/embed/care-services?partner_id={A}"), 404, "not_found")


def phase_nopepper(c, st):
    section("no PARTNER_TOKEN_PEPPER (rulings Tokens)")
    tok = st["tok"]
    expect("valid-looking token -> 503 api_keys_unavailable", c.raw("GET", "/api/v1/leads", tok["a"]), 503,
           "api_keys_unavailable")
    expect("garbage bearer -> 503", c.raw("GET", "/api/v1/leads", "garbage"), 503, "api_keys_unavailable")
    expect("no bearer -> 401 missing_bearer", c.raw("GET", "/api/v1/leads"), 401, "missing_bearer")
    r = c.raw("GET", "/api/v1/leads", "garbage")
    try:
        ok = list(r.json()) == ["error"] and set(r.json()["error"]) == {"code", "message"}
    except Exception:
        ok = False
    check("503 carries the error body and no-store", ok and "no-store" in r.headers.get("Cache-Control", ""), r.text[:200])
    expect("public catalog still served", c.raw("GET", f"/api/weight-loss?partner_id={A}"), 200)


def phase_internalbind(c, st):
    section("PARTNER_INTERNAL_BIND (extensions §5)")
    port = int(c.base.rsplit(":", 1)[1])
    expect("operator API on PARTNER_BIND -> 404", c.raw("GET", f"/internal/v1/partners/{A}", c.internal), 404, "not_found")
    o = Client(f"http://127.0.0.1:{port + 5}", c.internal)
    r = o.op("GET", f"/partners/{A}")
    expect("operator API on PARTNER_INTERNAL_BIND -> 200", r, 200)
    expect("partner API still on PARTNER_BIND", c.raw("GET", "/api/v1/orders", st["tok"]["a"]), 200)
    r = o.raw("GET", "/api/v1/orders", st["tok"]["a"])
    check("partner API on the internal listener: 404 or served (unspecified)", r.status_code in (200, 404),
          f"{r.status_code}")


def phase_nointernal(c, st):
    section("no PARTNER_INTERNAL_TOKEN (operator-api)")
    for path in ("/internal/v1/partners/bbA", "/internal/v1/openapi.json", "/internal/v1/nope", "/internal"):
        r = c.raw("GET", path, "anything")
        expect(f"{path} -> 404 not_found", r, 404, "not_found")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--internal")
    ap.add_argument("--phase", default="main")
    ap.add_argument("--state", default="/tmp/bbapi_state.json")
    ap.add_argument("--pace", type=float, default=0.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--server-log", default="")
    ap.add_argument("--metrics", default="")
    a = ap.parse_args()
    PACE[0] = a.pace
    c = Client(a.base, a.internal)
    if a.phase == "main":
        st = seed(c)
        st["t0"] = time.time()
        json.dump(st, open(a.state, "w"))
        funcs = [check_auth, check_leads, check_orders, check_payouts, check_subaccounts, check_links, check_coupons,
                 check_catalog, check_operator, check_idempotency, check_webhook_endpoints, check_events,
                 check_ratelimit_headers, check_partner_variants, check_lead_enriched, check_more,
                 check_formats, check_edges, check_races,
                 check_order_of_checks, check_exact, check_operator_shapes,
                 check_empty_and_unicode, check_embed, check_errors]
        for f in funcs:
            if a.only and f.__name__ not in a.only.split(","):
                continue
            try:
                f(c, st)
            except Exception as e:  # a crash in one section must not hide the others
                import traceback
                traceback.print_exc()
                check(f"{f.__name__} ran to the end", False, repr(e))
        json.dump(st, open(a.state, "w"))
        full = not a.only or "check_coupons" in a.only.split(",")
        if a.server_log:
            time.sleep(0.5)
            check_logs(c, st, a.server_log, audit=full)
        if a.metrics and a.phase == "main" and full:
            check_metrics(c, st, a.metrics)
        if a.phase == "main":
            check_openapi(c, st)
    else:
        st = json.load(open(a.state))
        {"rate": phase_rate, "careoff": phase_careoff, "nopepper": phase_nopepper,
         "nointernal": phase_nointernal, "internalbind": phase_internalbind,
         "webhooks": phase_webhooks, "proxies": phase_proxies, "faults": phase_faults,
         "sigterm": phase_sigterm}[a.phase](c, st)
        if a.phase == "webhooks" and a.server_log:
            time.sleep(0.5)
            check_logs(c, st, a.server_log, audit=False)
    fails = [x for x in RESULTS if not x[2]]
    print(f"\n{a.phase}: {len(RESULTS)} checks, {len(fails)} failed")
    for s, n, _, d, ref in fails:
        print(f"FAIL [{s}] {n} :: {d[:300]} {('[' + ref + ']') if ref else ''}")
    sys.exit(min(len(fails), 100))


if __name__ == "__main__":
    main()
