//! Orders (stored, provider-test, simulated), the commission summary, and payouts.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_error, body};

fn order(id: &str, partner: &str, extra: Value) -> Value {
    let mut b = json!({
        "orderId": id,
        "partnerId": partner,
        "createdDate": "2026-11-20T10:00:00.000Z",
        "product": "Semaglutide 1 month",
        "amount": 299.0,
        "commission": 45.5,
        "status": "shipped",
        "isTest": false,
        "source": "pharmacy",
        "customerName": "Ann Lee",
        "customerEmail": "ann@example.com"
    });
    if let (Some(b), Some(e)) = (b.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    b
}

async fn post_order(app: &TestApp, b: &Value) -> reqwest::Response {
    app.internal(Method::POST, "/orders")
        .json(b)
        .send()
        .await
        .expect("send")
}

fn sim_event(run: &str, partner: &str, occurred: &str) -> Value {
    json!({ "runId": run, "partnerId": partner, "event": "order_completed", "product": "Tirzepatide",
            "amount": 399.99, "occurredAt": occurred, "testSource": "simulation" })
}

async fn post_event(app: &TestApp, b: &Value) -> reqwest::Response {
    app.internal(Method::POST, "/analytics-events")
        .json(b)
        .send()
        .await
        .expect("send")
}

#[tokio::test]
async fn order_ingest_is_idempotent_and_conflicts_on_a_different_body() {
    let app = TestApp::spawn().await;
    app.seed("acme", false).await;
    let b = order("ORD-1", "acme", json!({}));
    let res = post_order(&app, &b).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let created = body(res).await["data"].clone();
    assert_eq!(created["orderId"], "ORD-1");
    assert_eq!(created["amount"], json!(299));
    assert_eq!(created["commission"], json!(45.5));
    assert_eq!(created["partnerId"], "acme", "admin shape");
    let res = post_order(&app, &b).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(body(res).await["data"], created);
    let res = post_order(&app, &order("ORD-1", "acme", json!({ "amount": 300 }))).await;
    assert_error(res, 409, "invalid_request").await;
    for (what, bad) in [
        ("reserved prefix", order("TEST-SIM-1", "acme", json!({}))),
        (
            "three decimals",
            order("O2", "acme", json!({ "amount": 1.005 })),
        ),
        ("negative", order("O2", "acme", json!({ "commission": -1 }))),
        (
            "amount as text",
            order("O2", "acme", json!({ "amount": "10" })),
        ),
        (
            "bad date",
            order("O2", "acme", json!({ "createdDate": "yesterday" })),
        ),
        ("missing status", {
            let mut o = order("O2", "acme", json!({}));
            o.as_object_mut().map(|m| m.remove("status"));
            o
        }),
        (
            "bad customer email",
            order("O2", "acme", json!({ "customerEmail": "x" })),
        ),
    ] {
        let res = post_order(&app, &bad).await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{what}");
    }
    assert_error(
        post_order(&app, &order("O3", "ghost", json!({}))).await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn partners_see_real_test_and_simulated_orders_newest_first() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let res = app
        .api(Method::POST, "/api/v1/sub-accounts", &s.token)
        .json(&json!({ "subId": "7", "nickname": "Front desk" }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    post_order(
        &app,
        &order(
            "REAL-1",
            "acme.7",
            json!({ "createdDate": "2026-11-20T10:00:00.000Z" }),
        ),
    )
    .await;
    post_order(
        &app,
        &order(
            "PTEST-1",
            "acme",
            json!({ "isTest": true, "createdDate": "2026-11-20T11:00:00.000Z" }),
        ),
    )
    .await;
    let res = post_event(
        &app,
        &sim_event("run-9", "acme.7", "2026-11-20T12:00:00.000Z"),
    )
    .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    // A second order_completed of the same run changes nothing.
    assert_eq!(
        post_event(
            &app,
            &sim_event("run-9", "acme", "2026-11-21T12:00:00.000Z")
        )
        .await
        .status(),
        StatusCode::ACCEPTED
    );
    // Other analytics events make no orders.
    let mut view = sim_event("run-9", "acme", "2026-11-20T11:30:00.000Z");
    view["event"] = json!("page_view");
    assert_eq!(post_event(&app, &view).await.status(), StatusCode::ACCEPTED);

    let orders = app.get_ok("/api/v1/orders", &s.token).await["data"].clone();
    let ids: Vec<&str> = orders
        .as_array()
        .expect("rows")
        .iter()
        .map(|o| o["orderId"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["TEST-SIM-run-9", "PTEST-1", "REAL-1"]);
    let sim = &orders[0];
    assert_eq!(
        sim,
        &json!({ "orderId": "TEST-SIM-run-9", "createdDate": "2026-11-20T12:00:00.000Z", "subAccount": "Front desk",
                 "product": "Tirzepatide", "amount": 399.99, "commission": 0, "status": "Simulated", "isTest": true })
    );
    assert_eq!(orders[1]["isTest"], true);
    assert_eq!(orders[2]["subAccount"], "Front desk");
    assert_eq!(orders[1]["subAccount"], "");
    // Non-admin tokens get exactly the spec's fields.
    for o in orders.as_array().expect("rows") {
        let mut keys: Vec<&String> = o.as_object().expect("obj").keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "amount",
                "commission",
                "createdDate",
                "isTest",
                "orderId",
                "product",
                "status",
                "subAccount"
            ]
        );
    }
    // The nickname is read at read time.
    let subs = app.get_ok("/api/v1/sub-accounts", &s.token).await;
    let id = subs["data"][0]["id"].clone();
    app.api(Method::DELETE, "/api/v1/sub-accounts", &s.token)
        .json(&json!({ "recordId": id }))
        .send()
        .await
        .expect("send");
    let orders = app.get_ok("/api/v1/orders", &s.token).await["data"].clone();
    assert_eq!(orders[2]["subAccount"], "");
}

#[tokio::test]
async fn admin_tokens_also_see_partner_and_customer_fields() {
    let app = TestApp::spawn().await;
    let admin = app.seed("acme", true).await;
    post_order(
        &app,
        &order("REAL-1", "acme", json!({ "customerEmail": null })),
    )
    .await;
    post_event(&app, &sim_event("r1", "acme", "2026-11-19T12:00:00.000Z")).await;
    let orders = app.get_ok("/api/v1/orders", &admin.token).await["data"].clone();
    assert_eq!(orders[0]["partnerId"], "acme");
    assert_eq!(orders[0]["customerName"], "Ann Lee");
    assert!(orders[0].get("customerEmail").is_some_and(Value::is_null));
    assert_eq!(orders[1]["orderId"], "TEST-SIM-r1");
    assert!(orders[1].get("customerName").is_some_and(Value::is_null));
}

#[tokio::test]
async fn commission_summary_excludes_test_and_simulated_orders() {
    let app = TestApp::spawn().await;
    app.seed("acme", false).await;
    app.seed("beta", false).await;
    post_order(
        &app,
        &order(
            "R1",
            "acme",
            json!({ "commission": 10.25, "createdDate": "2026-11-01T00:00:00.000Z" }),
        ),
    )
    .await;
    post_order(
        &app,
        &order(
            "R2",
            "acme.3",
            json!({ "commission": 20, "createdDate": "2026-11-30T23:59:59.999Z" }),
        ),
    )
    .await;
    post_order(
        &app,
        &order(
            "R-OUT",
            "acme",
            json!({ "commission": 99, "createdDate": "2026-12-01T00:00:00.000Z" }),
        ),
    )
    .await;
    post_order(
        &app,
        &order(
            "T1",
            "acme",
            json!({ "commission": 500, "isTest": true, "createdDate": "2026-11-10T00:00:00.000Z" }),
        ),
    )
    .await;
    post_order(
        &app,
        &order(
            "B1",
            "beta",
            json!({ "commission": 1000, "createdDate": "2026-11-10T00:00:00.000Z" }),
        ),
    )
    .await;
    post_event(&app, &sim_event("s1", "acme", "2026-11-15T00:00:00.000Z")).await;
    post_event(&app, &sim_event("s2", "acme", "2026-10-15T00:00:00.000Z")).await;
    let res = app
        .internal(
            Method::GET,
            "/partners/acme/commission-summary?from=2026-11-01&to=2026-11-30",
        )
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        body(res).await["data"],
        json!({ "orderCount": 2, "commissionTotal": 30.25, "excludedTestOrders": 2 })
    );
    let res = app
        .internal(
            Method::GET,
            "/partners/acme/commission-summary?from=2026-12-01&to=2026-12-01",
        )
        .send()
        .await
        .expect("send");
    assert_eq!(
        body(res).await["data"],
        json!({ "orderCount": 1, "commissionTotal": 99, "excludedTestOrders": 0 })
    );
    for q in [
        "",
        "?from=2026-11-01",
        "?from=2026-11-30&to=2026-11-01",
        "?from=11/01/2026&to=2026-11-30",
    ] {
        let res = app
            .internal(
                Method::GET,
                &format!("/partners/acme/commission-summary{q}"),
            )
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    let res = app
        .internal(
            Method::GET,
            "/partners/ghost/commission-summary?from=2026-11-01&to=2026-11-30",
        )
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
}

#[tokio::test]
async fn analytics_event_validation() {
    let app = TestApp::spawn().await;
    app.seed("acme", false).await;
    for (what, extra) in [
        ("bad run id", json!({ "runId": "a b" })),
        ("missing product", json!({ "product": null })),
        ("missing amount", json!({ "amount": null })),
        ("bad source", json!({ "testSource": "real" })),
        ("bad time", json!({ "occurredAt": "now" })),
        ("unknown field", json!({ "x": 1 })),
    ] {
        let mut b = sim_event("r", "acme", "2026-11-20T12:00:00.000Z");
        for (k, v) in extra.as_object().expect("obj") {
            b[k] = v.clone();
        }
        let res = post_event(&app, &b).await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{what}");
    }
    assert_error(
        post_event(&app, &sim_event("r", "ghost", "2026-11-20T12:00:00.000Z")).await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn payouts_are_recorded_and_listed_per_partner() {
    let app = TestApp::spawn().await;
    let a = app.seed("acme", false).await;
    let b = app.seed("beta", false).await;
    let res = app
        .internal(Method::POST, "/payouts")
        .json(&json!({ "partnerId": "acme", "payoutDate": "2026-11-15", "payoutAmount": 1234.5, "status": "paid",
                        "receiptUrl": "https://receipts.example/1", "note": "internal only" }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    let p = body(res).await["data"].clone();
    let mut keys: Vec<&String> = p.as_object().expect("obj").keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "createdAt",
            "email",
            "payoutAmount",
            "payoutDate",
            "recordId",
            "status"
        ]
    );
    assert_eq!(
        (p["email"].clone(), p["payoutAmount"].clone()),
        (json!("ops@acme.test"), json!(1234.5))
    );
    assert_eq!(p["createdAt"].as_str().map(str::len), Some(10));
    app.internal(Method::POST, "/payouts")
        .json(&json!({ "partnerId": "acme", "payoutDate": "2026-11-30", "payoutAmount": 40, "status": "paid" }))
        .send()
        .await
        .expect("send");
    let list = app.get_ok("/api/v1/payouts", &a.token).await["data"].clone();
    let dates: Vec<&str> = list
        .as_array()
        .expect("rows")
        .iter()
        .map(|p| p["payoutDate"].as_str().expect("date"))
        .collect();
    assert_eq!(dates, ["2026-11-30", "2026-11-15"]);
    assert_eq!(list[0]["payoutAmount"], json!(40));
    assert_eq!(
        app.get_ok("/api/v1/payouts", &b.token).await["data"],
        json!([])
    );
    for bad in [
        json!({ "partnerId": "acme", "payoutDate": "2026-13-01", "payoutAmount": 1, "status": "paid" }),
        json!({ "partnerId": "acme", "payoutDate": "2026-11-01", "payoutAmount": 1.234, "status": "paid" }),
        json!({ "partnerId": "acme.7", "payoutDate": "2026-11-01", "payoutAmount": 1, "status": "paid" }),
        json!({ "partnerId": "acme", "payoutDate": "2026-11-01", "payoutAmount": 1 }),
    ] {
        let res = app
            .internal(Method::POST, "/payouts")
            .json(&bad)
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    let res = app
        .internal(Method::POST, "/payouts")
        .json(&json!({ "partnerId": "ghost", "payoutDate": "2026-11-01", "payoutAmount": 1, "status": "paid" }))
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
}

#[tokio::test]
async fn orders_and_payouts_are_isolated_and_authenticated() {
    let app = TestApp::spawn().await;
    let a = app.seed("acme", false).await;
    let b = app.seed("beta", true).await;
    post_order(&app, &order("A1", "acme", json!({}))).await;
    post_event(&app, &sim_event("ra", "acme", "2026-11-20T12:00:00.000Z")).await;
    assert_eq!(
        app.get_ok("/api/v1/orders", &a.token).await["data"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    // Even an admin token of another partner sees only its own orders here.
    assert_eq!(
        app.get_ok("/api/v1/orders", &b.token).await["data"],
        json!([])
    );
    for p in ["/api/v1/orders", "/api/v1/payouts"] {
        assert_error(
            app.request(Method::GET, p).send().await.expect("send"),
            401,
            "missing_bearer",
        )
        .await;
    }
}

#[tokio::test]
async fn long_histories_are_listed_whole_in_order_across_chunks() {
    use futures_util::StreamExt;
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    // 1,103 stored orders (more than two 500-row chunks), three to an instant so that ties are
    // broken by order id across chunk boundaries, and simulated orders sharing those instants.
    let at = |i: usize| {
        format!(
            "2026-11-{:02}T{:02}:{:02}:00.000Z",
            1 + i / 1440 % 28,
            i / 60 % 24,
            i % 60
        )
    };
    let bodies: Vec<Value> = (0..1103)
        .map(|i| {
            order(
                &format!("ORD-{i:05}"),
                "acme",
                json!({ "createdDate": at(i / 3) }),
            )
        })
        .collect();
    futures_util::stream::iter(bodies.iter().map(|b| post_order(&app, b)))
        .buffer_unordered(16)
        .for_each(|res| async move { assert_eq!(res.status(), StatusCode::CREATED) })
        .await;
    for (run, i) in [("r1", 0), ("r2", 166), ("r3", 167), ("r4", 333)] {
        let res = post_event(&app, &sim_event(run, "acme", &at(i))).await;
        assert_eq!(res.status(), StatusCode::ACCEPTED);
    }
    let all = app.get_ok("/api/v1/orders", &s.token).await["data"]
        .as_array()
        .expect("data")
        .clone();
    assert_eq!(all.len(), 1107);
    let keys: Vec<(String, String)> = all
        .iter()
        .map(|o| {
            (
                o["createdDate"].as_str().expect("date").to_owned(),
                o["orderId"].as_str().expect("id").to_owned(),
            )
        })
        .collect();
    assert!(
        keys.windows(2).all(|w| w[0] > w[1]),
        "newest first, then order id descending, no repeats"
    );
    assert_eq!(all.iter().filter(|o| o["status"] == "Simulated").count(), 4);

    // Payouts, likewise past a chunk.
    let payouts: Vec<Value> = (0..503)
        .map(|i| json!({ "partnerId": "acme", "payoutDate": format!("2026-{:02}-{:02}", 1 + i % 12, 1 + i % 28), "payoutAmount": i, "status": "paid" }))
        .collect();
    futures_util::stream::iter(
        payouts
            .iter()
            .map(|b| app.internal(Method::POST, "/payouts").json(b).send()),
    )
    .buffer_unordered(16)
    .for_each(|res| async move { assert_eq!(res.expect("send").status(), StatusCode::CREATED) })
    .await;
    let listed = app.get_ok("/api/v1/payouts", &s.token).await["data"]
        .as_array()
        .expect("data")
        .clone();
    assert_eq!(listed.len(), 503);
    let dates: Vec<&str> = listed
        .iter()
        .map(|p| p["payoutDate"].as_str().expect("date"))
        .collect();
    assert!(
        dates.windows(2).all(|w| w[0] >= w[1]),
        "newest payout date first"
    );
}
