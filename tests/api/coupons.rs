//! Care Services bulk coupon codes.

use std::collections::HashSet;
use std::sync::Arc;

use partner_domain::kernel::clock::{Clock, FixedClock};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::helpers::{TestApp, assert_error, body};

const LIST: &str = "/api/v1/care-services-coupons";

fn bulk(partner: &str, quantity: u32, extra: Value) -> Value {
    let mut b = json!({ "partnerId": partner, "productSlug": "primary", "months": 12, "quantity": quantity,
        "unitPriceCents": 9900, "purchaserEmail": "buyer@acme.test", "purchaserSource": "portal" });
    if let (Some(b), Some(e)) = (b.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    b
}

async fn issue(app: &TestApp, b: &Value) -> reqwest::Response {
    app.internal(Method::POST, "/care-services-coupons/bulk-orders")
        .json(b)
        .send()
        .await
        .expect("send")
}

async fn issue_ok(app: &TestApp, b: &Value) -> Value {
    let res = issue(app, b).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    body(res).await["data"].clone()
}

async fn redeem(app: &TestApp, code: &str, slug: &str, months: u8) -> reqwest::Response {
    app.internal(Method::POST, "/care-services-coupons/redeem")
        .json(&json!({ "code": code, "productSlug": slug, "months": months, "email": "pat@example.com",
                        "providerPrimaryExternalId": "ext-42" }))
        .send()
        .await
        .expect("send")
}

fn codes(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|c| c["code"].as_str().expect("code").to_owned())
        .collect()
}

#[tokio::test]
async fn a_bulk_order_issues_unique_active_codes() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    app.api(Method::POST, "/api/v1/sub-accounts", &s.token)
        .json(&json!({ "subId": "7", "nickname": "Desk" }))
        .send()
        .await
        .expect("send");
    let order = issue_ok(
        &app,
        &bulk(
            "acme",
            25,
            json!({ "subAccountId": "7", "notes": "Gift for \"VIP\" clients" }),
        ),
    )
    .await;
    let coupons = order["coupons"].as_array().expect("coupons");
    assert_eq!(coupons.len(), 25);
    let set: HashSet<String> = codes(&order["coupons"]).into_iter().collect();
    assert_eq!(set.len(), 25);
    let c = &coupons[0];
    assert!(
        c["code"]
            .as_str()
            .expect("code")
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
    );
    assert_eq!(c["code"].as_str().map(str::len), Some(12));
    assert_eq!(
        (
            c["status"].clone(),
            c["months"].clone(),
            c["productSlug"].clone()
        ),
        (json!("active"), json!(12), json!("primary"))
    );
    assert_eq!(c["bulkOrderId"], order["bulkOrderId"]);
    assert_eq!(c["subAccountId"], "7");
    assert_eq!(c["unitPriceCents"], 9900);
    for k in [
        "expiresAt",
        "redeemedAt",
        "redeemedEmail",
        "redeemedProviderPrimaryExternalId",
    ] {
        assert!(c.get(k).is_some_and(Value::is_null), "{k}");
    }
    let listed = app.get_ok(LIST, &s.token).await;
    assert_eq!(listed["total"], 25);
    assert_eq!(
        (listed["limit"].clone(), listed["offset"].clone()),
        (json!(100), json!(0))
    );
}

#[tokio::test]
async fn bulk_order_validation() {
    let app = TestApp::spawn().await;
    app.seed("acme", false).await;
    for (what, b) in [
        ("quantity 0", bulk("acme", 0, json!({}))),
        ("quantity 10001", bulk("acme", 10_001, json!({}))),
        (
            "bad slug",
            bulk("acme", 1, json!({ "productSlug": "primary-care" })),
        ),
        ("months 2", bulk("acme", 1, json!({ "months": 2 }))),
        (
            "negative price",
            bulk("acme", 1, json!({ "unitPriceCents": -1 })),
        ),
        (
            "fractional price",
            bulk("acme", 1, json!({ "unitPriceCents": 1.5 })),
        ),
        (
            "past expiry",
            bulk(
                "acme",
                1,
                json!({ "expiresAt": "2020-01-01T00:00:00.000Z" }),
            ),
        ),
        (
            "unknown sub-account",
            bulk("acme", 1, json!({ "subAccountId": "9" })),
        ),
        (
            "bad email",
            bulk("acme", 1, json!({ "purchaserEmail": "x" })),
        ),
        ("unknown field", bulk("acme", 1, json!({ "colour": "red" }))),
    ] {
        let res = issue(&app, &b).await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{what}");
    }
    assert_error(
        issue(&app, &bulk("ghost", 1, json!({}))).await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn redemption_rules() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let order = issue_ok(&app, &bulk("acme", 2, json!({}))).await;
    let code = order["coupons"][0]["code"]
        .as_str()
        .expect("code")
        .to_owned();
    // Mismatched product or duration: 400, and the code stays active.
    assert_error(
        redeem(&app, &code, "primary-plus", 12).await,
        400,
        "invalid_request",
    )
    .await;
    assert_error(
        redeem(&app, &code, "primary", 6).await,
        400,
        "invalid_request",
    )
    .await;
    // Input is normalized: lower case, spaces and hyphens.
    let typed = format!(
        " {}-{} {} ",
        &code[..4].to_lowercase(),
        &code[4..8],
        &code[8..]
    );
    let res = redeem(&app, &typed, "primary", 12).await;
    assert_eq!(res.status(), StatusCode::OK);
    let c = body(res).await["data"].clone();
    assert_eq!(
        (
            c["status"].clone(),
            c["redeemedEmail"].clone(),
            c["redeemedProviderPrimaryExternalId"].clone()
        ),
        (json!("redeemed"), json!("pat@example.com"), json!("ext-42"))
    );
    assert!(c["redeemedAt"].is_string());
    assert_error(
        redeem(&app, &code, "primary", 12).await,
        409,
        "invalid_request",
    )
    .await;
    assert_error(
        redeem(&app, "ZZZZZZZZZZZZ", "primary", 12).await,
        404,
        "not_found",
    )
    .await;
    assert_error(
        redeem(&app, "SHORT", "primary", 12).await,
        400,
        "invalid_request",
    )
    .await;
    let listed = app
        .get_ok(&format!("{LIST}?status=redeemed"), &s.token)
        .await;
    assert_eq!(codes(&listed["data"]), vec![code]);
}

#[tokio::test]
async fn of_thirty_concurrent_redemptions_exactly_one_wins() {
    let app = TestApp::spawn_with(|c| c.db_pool_size = 16).await;
    app.seed("acme", false).await;
    let order = issue_ok(&app, &bulk("acme", 1, json!({}))).await;
    let code = order["coupons"][0]["code"]
        .as_str()
        .expect("code")
        .to_owned();
    let attempts = (0..30).map(|_| redeem(&app, &code, "primary", 12));
    let statuses: Vec<u16> = futures_util::future::join_all(attempts)
        .await
        .iter()
        .map(|r| r.status().as_u16())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        29,
        "{statuses:?}"
    );
}

#[tokio::test]
async fn void_from_active_only() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let order = issue_ok(&app, &bulk("acme", 2, json!({}))).await;
    let (a, b) = (order["coupons"][0].clone(), order["coupons"][1].clone());
    let void = |id: Value| {
        let app = &app;
        async move {
            app.internal(
                Method::POST,
                &format!("/care-services-coupons/{}/void", id.as_str().expect("id")),
            )
            .send()
            .await
            .expect("send")
        }
    };
    let res = void(a["id"].clone()).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(body(res).await["data"]["status"], "void");
    assert_error(void(a["id"].clone()).await, 409, "invalid_request").await;
    assert_error(
        redeem(&app, a["code"].as_str().expect("code"), "primary", 12).await,
        409,
        "invalid_request",
    )
    .await;
    assert_eq!(
        redeem(&app, b["code"].as_str().expect("code"), "primary", 12)
            .await
            .status(),
        StatusCode::OK
    );
    assert_error(void(b["id"].clone()).await, 409, "invalid_request").await;
    assert_error(
        void(json!(uuid::Uuid::new_v4().to_string())).await,
        404,
        "not_found",
    )
    .await;
    let res = app
        .internal(Method::POST, "/care-services-coupons/nope/void")
        .send()
        .await
        .expect("send");
    assert_error(res, 400, "invalid_request").await;
    assert_eq!(
        app.get_ok(&format!("{LIST}?status=void"), &s.token).await["total"],
        1
    );
}

#[tokio::test]
async fn an_active_coupon_past_its_expiry_reads_expired_everywhere() {
    let clock = Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let app = TestApp::spawn_full(|_| {}, clock.clone()).await;
    let s = app.seed("acme", false).await;
    let expires =
        partner_domain::kernel::wire::format_timestamp(clock.now() + time::Duration::hours(1));
    let order = issue_ok(&app, &bulk("acme", 2, json!({ "expiresAt": expires }))).await;
    issue_ok(&app, &bulk("acme", 1, json!({}))).await;
    let code = order["coupons"][0]["code"]
        .as_str()
        .expect("code")
        .to_owned();
    assert_eq!(
        app.get_ok(&format!("{LIST}?status=active"), &s.token).await["total"],
        3
    );
    clock.advance(time::Duration::hours(1));
    let expired = app
        .get_ok(&format!("{LIST}?status=expired"), &s.token)
        .await;
    assert_eq!(expired["total"], 2);
    assert!(
        expired["data"]
            .as_array()
            .expect("data")
            .iter()
            .all(|c| c["status"] == "expired")
    );
    assert_eq!(
        app.get_ok(&format!("{LIST}?status=active"), &s.token).await["total"],
        1
    );
    assert_error(
        redeem(&app, &code, "primary", 12).await,
        409,
        "invalid_request",
    )
    .await;
    let id = order["coupons"][0]["id"].as_str().expect("id");
    let res = app
        .internal(Method::POST, &format!("/care-services-coupons/{id}/void"))
        .send()
        .await
        .expect("send");
    assert_error(res, 409, "invalid_request").await;
    let csv = app
        .api(
            Method::GET,
            &format!("{LIST}?format=csv&status=expired"),
            &s.token,
        )
        .send()
        .await
        .expect("send");
    let text = csv.text().await.expect("text");
    assert_eq!(text.matches("\"expired\"").count(), 2);
}

#[tokio::test]
async fn filters_and_validation() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    issue_ok(&app, &bulk("acme", 3, json!({}))).await;
    issue_ok(
        &app,
        &bulk("acme", 2, json!({ "productSlug": "vet-care", "months": 1 })),
    )
    .await;
    let vet = app
        .get_ok(&format!("{LIST}?product_slug=vet-care"), &s.token)
        .await;
    assert_eq!(vet["total"], 2);
    assert!(
        vet["data"]
            .as_array()
            .expect("data")
            .iter()
            .all(|c| c["productSlug"] == "vet-care")
    );
    let one = app
        .get_ok(&format!("{LIST}?product_slug=primary"), &s.token)
        .await;
    let code = one["data"][0]["code"].as_str().expect("code").to_owned();
    redeem(&app, &code, "primary", 12).await;
    assert_eq!(
        app.get_ok(&format!("{LIST}?status=active,redeemed"), &s.token)
            .await["total"],
        5
    );
    assert_eq!(
        app.get_ok(&format!("{LIST}?status=redeemed,void,expired"), &s.token)
            .await["total"],
        1
    );
    assert_eq!(
        app.get_ok(
            &format!("{LIST}?status=active&product_slug=primary"),
            &s.token
        )
        .await["total"],
        2
    );
    for bad in [
        "status=used",
        "status=active,",
        "product_slug=primary-care",
        "format=xml",
        "limit=0",
        "limit=501",
        "limit=abc",
        "offset=-1",
        "offset=1.5",
        "offset=x",
        "partner_id=a%20b",
        "partner_id=",
    ] {
        let res = app
            .api(Method::GET, &format!("{LIST}?{bad}"), &s.token)
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    let page = app
        .get_ok(&format!("{LIST}?limit=500&offset=4"), &s.token)
        .await;
    assert_eq!(
        (
            page["limit"].clone(),
            page["offset"].clone(),
            page["total"].clone()
        ),
        (json!(500), json!(4), json!(5))
    );
    assert_eq!(page["data"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn offset_pages_join_to_the_full_set_in_json_and_csv() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let order = issue_ok(&app, &bulk("acme", 23, json!({}))).await;
    let all: HashSet<String> = codes(&order["coupons"]).into_iter().collect();
    let mut seen = Vec::new();
    for offset in (0..30).step_by(7) {
        let page = app
            .get_ok(&format!("{LIST}?limit=7&offset={offset}"), &s.token)
            .await;
        assert_eq!(page["total"], 23);
        seen.extend(codes(&page["data"]));
    }
    assert_eq!(seen.len(), 23);
    assert_eq!(seen.iter().cloned().collect::<HashSet<_>>(), all);
    let mut from_csv = Vec::new();
    for offset in (0..23).step_by(10) {
        let res = app
            .api(
                Method::GET,
                &format!("{LIST}?format=csv&limit=10&offset={offset}"),
                &s.token,
            )
            .send()
            .await
            .expect("send");
        assert_eq!(res.headers()["x-total-count"], "23");
        let text = res.text().await.expect("text");
        let mut r = csv::Reader::from_reader(text.as_bytes());
        for rec in r.records() {
            from_csv.push(rec.expect("record")[0].to_owned());
        }
    }
    assert_eq!(from_csv, seen, "CSV pages follow the same order");
}

#[tokio::test]
async fn csv_export_format() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let order = issue_ok(
        &app,
        &bulk(
            "acme",
            2,
            json!({ "notes": "Gift for \"VIP\" clients, 2026" }),
        ),
    )
    .await;
    let code = order["coupons"][0]["code"]
        .as_str()
        .expect("code")
        .to_owned();
    redeem(&app, &code, "primary", 12).await;
    let res = app
        .api(Method::GET, &format!("{LIST}?format=csv"), &s.token)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["content-type"], "text/csv");
    let today = partner_domain::payout::format_date(OffsetDateTime::now_utc().date());
    assert_eq!(
        res.headers()["content-disposition"],
        format!("attachment; filename=\"care-services-coupons-{today}.csv\"")
    );
    assert_eq!(res.headers()["x-total-count"], "2");
    let text = res.text().await.expect("text");
    assert!(!text.starts_with('\u{feff}'), "no byte-order mark");
    let header = "\"code\",\"product_slug\",\"months\",\"status\",\"partner_id\",\"sub_account_id\",\"unit_price_cents\",\
                  \"bulk_order_id\",\"purchaser_email\",\"purchaser_source\",\"created_at\",\"expires_at\",\"redeemed_at\",\
                  \"redeemed_email\",\"redeemed_provider_primary_external_id\",\"notes\"";
    assert_eq!(text.lines().next(), Some(header));
    assert!(
        text.contains("\"Gift for \"\"VIP\"\" clients, 2026\""),
        "embedded quotes doubled: {text}"
    );
    let active_line = text
        .lines()
        .find(|l| !l.contains(&code) && !l.starts_with("\"code\""))
        .expect("active row");
    assert!(
        active_line.contains(",\"\",\"9900\","),
        "null sub_account_id is \"\": {active_line}"
    );
    assert!(active_line.contains("\"active\""));
    // Every value quoted.
    for line in text.lines() {
        assert_eq!(line.matches("\",\"").count(), 15, "{line}");
        assert!(line.starts_with('"') && line.ends_with('"'));
    }
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.expect("record")).collect();
    assert_eq!(rows.len(), 2);
    let redeemed = rows.iter().find(|r| r[0] == code).expect("redeemed row");
    assert_eq!(
        (&redeemed[1], &redeemed[2], &redeemed[3], &redeemed[4]),
        ("primary", "12", "redeemed", "acme")
    );
    assert_eq!(&redeemed[13], "pat@example.com");
    assert_eq!(&redeemed[14], "ext-42");
    assert_eq!(&redeemed[15], "Gift for \"VIP\" clients, 2026");
    assert_eq!(&redeemed[11], "", "no expiry");
    assert_eq!(redeemed[10].len(), 24, "timestamp with milliseconds");
    // CSV pages default to 500 rows.
    assert!(text.lines().count() <= 501);
}

/// extensions.md §7: a CSV cell that a spreadsheet would evaluate is written with a leading `'`,
/// whoever supplied it (the patient's email at redemption, the operator's fields); JSON is
/// unchanged.
#[tokio::test]
async fn csv_cells_that_look_like_formulas_are_neutralised_json_is_not() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let order = issue_ok(
        &app,
        &bulk(
            "acme",
            1,
            json!({ "purchaserSource": "+1 call me", "notes": "@SUM(A1:A9)",
                    "purchaserEmail": "-2+3@buyer.test" }),
        ),
    )
    .await;
    let code = order["coupons"][0]["code"]
        .as_str()
        .expect("code")
        .to_owned();
    let email = "=HYPERLINK(\"http://evil.test\")@x.co";
    let res = app
        .internal(Method::POST, "/care-services-coupons/redeem")
        .json(
            &json!({ "code": code, "productSlug": "primary", "months": 12, "email": email,
                        "providerPrimaryExternalId": "-1+1" }),
        )
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);

    let json = app.get_ok(LIST, &s.token).await;
    let row = &json["data"][0];
    assert_eq!(row["redeemedEmail"], email, "JSON unchanged");
    assert_eq!(row["redeemedProviderPrimaryExternalId"], "-1+1");
    assert_eq!(row["purchaserSource"], "+1 call me");
    assert_eq!(row["purchaserEmail"], "-2+3@buyer.test");
    assert_eq!(row["notes"], "@SUM(A1:A9)");

    let res = app
        .api(Method::GET, &format!("{LIST}?format=csv"), &s.token)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    let text = res.text().await.expect("text");
    assert!(
        text.contains("\"'=HYPERLINK(\"\"http://evil.test\"\")@x.co\""),
        "prefixed and still quoted: {text}"
    );
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.expect("record")).collect();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(&row[0], code, "safe cells untouched");
    assert_eq!(&row[8], "'-2+3@buyer.test");
    assert_eq!(&row[9], "'+1 call me");
    assert_eq!(&row[13], &format!("'{email}"));
    assert_eq!(&row[14], "'-1+1");
    assert_eq!(&row[15], "'@SUM(A1:A9)");
    for cell in row {
        assert!(
            !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
            "{cell:?}"
        );
    }
}

#[tokio::test]
async fn listing_scope_admin_and_non_admin() {
    let app = TestApp::spawn().await;
    let me = app.seed("acme", false).await;
    let admin = app.seed("hq", true).await;
    app.seed("beta", false).await;
    issue_ok(&app, &bulk("acme", 2, json!({}))).await;
    issue_ok(&app, &bulk("beta", 3, json!({}))).await;
    assert_eq!(app.get_ok(LIST, &me.token).await["total"], 2);
    assert_eq!(
        app.get_ok(&format!("{LIST}?partner_id=acme"), &me.token)
            .await["total"],
        2
    );
    assert_error(
        app.api(Method::GET, &format!("{LIST}?partner_id=beta"), &me.token)
            .send()
            .await
            .expect("send"),
        403,
        "forbidden",
    )
    .await;
    assert_error(
        app.api(Method::GET, &format!("{LIST}?partner_id=ghost"), &me.token)
            .send()
            .await
            .expect("send"),
        403,
        "forbidden",
    )
    .await;
    assert_eq!(
        app.get_ok(LIST, &admin.token).await["total"],
        0,
        "an admin sees its own partner by default"
    );
    let beta = app
        .get_ok(&format!("{LIST}?partner_id=beta"), &admin.token)
        .await;
    assert_eq!(beta["total"], 3);
    assert!(
        beta["data"]
            .as_array()
            .expect("data")
            .iter()
            .all(|c| c["partnerId"] == "beta")
    );
    assert_eq!(
        app.get_ok(&format!("{LIST}?partner_id=ghost"), &admin.token)
            .await["total"],
        0
    );
    let res = app
        .api(
            Method::GET,
            &format!("{LIST}?partner_id=bad%20id"),
            &admin.token,
        )
        .send()
        .await
        .expect("send");
    assert_error(res, 400, "invalid_request").await;
}

#[tokio::test]
async fn coupons_are_404_when_care_services_are_disabled() {
    let app = TestApp::spawn_with(|c| c.care_services_enabled = false).await;
    let s = app.seed("acme", false).await;
    assert_error(
        app.api(Method::GET, LIST, &s.token)
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;
    assert_error(
        app.request(Method::GET, LIST).send().await.expect("send"),
        404,
        "not_found",
    )
    .await;
}
