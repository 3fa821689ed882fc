//! Coupon listings at scale (issue 22): the unfiltered listing's `total` and pages come from
//! `coupon_blocks` (migration 000019), the filtered ones from the covering index. Whatever the
//! writes (bulk orders at once, rows older than the newest, deletes, moved rows), every page at
//! every offset is the page `ORDER BY created_at DESC, code OFFSET … LIMIT …` reads.

use diesel::sql_types::{BigInt, Text, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, body};

const LIST: &str = "/api/v1/care-services-coupons";

async fn issue(app: &TestApp, partner: &str, quantity: u32, slug: &str) {
    let res = app
        .internal(Method::POST, "/care-services-coupons/bulk-orders")
        .json(&json!({ "partnerId": partner, "productSlug": slug, "months": 12, "quantity": quantity,
            "unitPriceCents": 9900, "purchaserEmail": "buyer@acme.test", "purchaserSource": "portal" }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), 201);
}

async fn sql(conn: &mut AsyncPgConnection, statement: &str) {
    diesel::sql_query(statement)
        .execute(conn)
        .await
        .expect(statement);
}

#[derive(diesel::QueryableByName)]
struct Code {
    #[diesel(sql_type = Text)]
    code: String,
}

/// The partner's codes in the listing's order, `extra` narrowing them, read the plain way.
async fn expected(conn: &mut AsyncPgConnection, partner: &str, extra: &str) -> Vec<String> {
    diesel::sql_query(format!(
        "SELECT code FROM coupons WHERE partner_id = $1 {extra} ORDER BY created_at DESC, code"
    ))
    .bind::<Text, _>(partner)
    .load::<Code>(conn)
    .await
    .expect("codes")
    .into_iter()
    .map(|c| c.code)
    .collect()
}

#[derive(diesel::QueryableByName, Debug, PartialEq)]
struct Block {
    #[diesel(sql_type = Text)]
    partner_id: String,
    #[diesel(sql_type = Timestamptz)]
    created_at: time::OffsetDateTime,
    #[diesel(sql_type = BigInt)]
    n: i64,
    #[diesel(sql_type = BigInt)]
    older: i64,
}

/// `coupon_blocks` as stored, and as recomputed from `coupons`.
async fn blocks(conn: &mut AsyncPgConnection) -> (Vec<Block>, Vec<Block>) {
    let stored = diesel::sql_query(
        "SELECT partner_id, created_at, n, older FROM coupon_blocks ORDER BY partner_id, created_at",
    )
    .load::<Block>(conn)
    .await
    .expect("stored");
    let computed = diesel::sql_query(
        "SELECT partner_id, created_at, n, (coalesce(sum(n) OVER (PARTITION BY partner_id \
           ORDER BY created_at ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))::bigint AS older \
         FROM (SELECT partner_id, created_at, count(*) AS n FROM coupons GROUP BY 1, 2) g \
         ORDER BY partner_id, created_at",
    )
    .load::<Block>(conn)
    .await
    .expect("computed");
    (stored, computed)
}

/// Every page of `query` (limit 3, offsets 0 to past the end) as JSON, and in pages of 4 as
/// CSV, against `want`.
async fn pages_match(app: &TestApp, token: &str, query: &str, want: &[String]) {
    let total = want.len();
    for offset in 0..=total + 1 {
        let page = app
            .get_ok(&format!("{LIST}?{query}&limit=3&offset={offset}"), token)
            .await;
        assert_eq!(page["total"], json!(total), "{query} offset {offset}");
        let got: Vec<&str> = page["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(|c| c["code"].as_str().expect("code"))
            .collect();
        let end = (offset + 3).min(total);
        let want_page: Vec<&str> = want
            .get(offset.min(total)..end)
            .unwrap_or_default()
            .iter()
            .map(String::as_str)
            .collect();
        assert_eq!(got, want_page, "{query} offset {offset}");
    }
    let mut from_csv = Vec::new();
    for offset in (0..total + 4).step_by(4) {
        let res = app
            .api(
                Method::GET,
                &format!("{LIST}?{query}&format=csv&limit=4&offset={offset}"),
                token,
            )
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), 200, "{query} CSV offset {offset}");
        assert_eq!(res.headers()["x-total-count"], total.to_string().as_str());
        let text = res.text().await.expect("text");
        for rec in csv::Reader::from_reader(text.as_bytes()).records() {
            from_csv.push(rec.expect("record")[0].to_owned());
        }
    }
    assert_eq!(from_csv, want, "{query}: the CSV pages join to the listing");
}

#[tokio::test]
async fn coupon_blocks_stay_equal_to_the_coupons_they_count() {
    let app = TestApp::spawn().await;
    app.seed("acme", false).await;
    app.seed("beta", false).await;
    let mut conn = AsyncPgConnection::establish(&app.config.database_url)
        .await
        .expect("connect");
    // Bulk orders of two partners at once: each insert shifts the blocks under its partner's lock.
    let orders: Vec<_> = (0..6)
        .map(|i| {
            issue(
                &app,
                if i % 2 == 0 { "acme" } else { "beta" },
                5 + i,
                "primary",
            )
        })
        .collect();
    futures_util::future::join_all(orders).await;
    // Older than every block, between blocks, into an existing block, two blocks in one
    // statement; then deletes (a whole block, part of one), a moved row, and a redemption.
    sql(&mut conn, "INSERT INTO coupons (id, code, partner_id, product_slug, months, status, bulk_order_id, \
        purchaser_email, purchaser_source, unit_price_cents, created_at) \
        SELECT gen_random_uuid(), 'OLD' || lpad(g::text, 9, '0'), 'acme', 'primary', 12, 'active', gen_random_uuid(), \
          'b@acme.test', 'sql', 1, timestamptz '2020-01-01' + (g % 2) * interval '1 day' FROM generate_series(1, 7) g").await;
    sql(&mut conn, "INSERT INTO coupons (id, code, partner_id, product_slug, months, status, bulk_order_id, \
        purchaser_email, purchaser_source, unit_price_cents, created_at) \
        SELECT gen_random_uuid(), 'MID' || lpad(g::text, 9, '0'), 'acme', 'primary', 12, 'active', gen_random_uuid(), \
          'b@acme.test', 'sql', 1, (SELECT min(created_at) + interval '1 microsecond' FROM coupons WHERE partner_id = 'acme' AND code NOT LIKE 'OLD%') \
        FROM generate_series(1, 3) g").await;
    sql(&mut conn, "INSERT INTO coupons (id, code, partner_id, product_slug, months, status, bulk_order_id, \
        purchaser_email, purchaser_source, unit_price_cents, created_at) \
        SELECT gen_random_uuid(), 'SAME' || lpad(g::text, 8, '0'), 'acme', 'primary', 12, 'active', gen_random_uuid(), \
          'b@acme.test', 'sql', 1, (SELECT max(created_at) FROM coupons WHERE partner_id = 'acme') FROM generate_series(1, 2) g").await;
    let (stored, computed) = blocks(&mut conn).await;
    assert_eq!(stored, computed, "after inserts");
    sql(&mut conn, "DELETE FROM coupons WHERE code LIKE 'MID%'").await;
    sql(
        &mut conn,
        "DELETE FROM coupons WHERE code IN ('OLD000000001', 'SAME00000001')",
    )
    .await;
    sql(
        &mut conn,
        "UPDATE coupons SET created_at = timestamptz '2021-06-01' WHERE code = 'OLD000000002'",
    )
    .await;
    sql(
        &mut conn,
        "UPDATE coupons SET partner_id = 'beta' WHERE code = 'OLD000000004'",
    )
    .await;
    sql(
        &mut conn,
        "UPDATE coupons SET status = 'redeemed', redeemed_at = now() WHERE code = 'OLD000000006'",
    )
    .await;
    let (stored, computed) = blocks(&mut conn).await;
    assert_eq!(stored, computed, "after deletes and moves");
    assert!(stored.iter().all(|b| b.n > 0), "no empty block is kept");
    sql(&mut conn, "TRUNCATE coupons").await;
    let (stored, _) = blocks(&mut conn).await;
    assert_eq!(stored, Vec::new(), "truncated with the coupons");
}

#[tokio::test]
async fn offset_pages_of_the_coupon_listing_match_offset_paging_at_every_offset() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let admin = app.seed("hq", true).await;
    app.seed("beta", false).await;
    let mut conn = AsyncPgConnection::establish(&app.config.database_url)
        .await
        .expect("connect");
    for (quantity, slug) in [
        (4, "primary"),
        (5, "urgent-care"),
        (1, "primary"),
        (6, "primary"),
    ] {
        issue(&app, "acme", quantity, slug).await;
    }
    issue(&app, "beta", 3, "primary").await;
    // A block older than the others, and a redeemed, a void and an expired coupon.
    sql(&mut conn, "INSERT INTO coupons (id, code, partner_id, product_slug, months, status, bulk_order_id, \
        purchaser_email, purchaser_source, unit_price_cents, created_at) \
        SELECT gen_random_uuid(), 'OLD' || lpad(g::text, 9, '0'), 'acme', 'primary', 12, 'active', gen_random_uuid(), \
          'b@acme.test', 'sql', 1, timestamptz '2020-01-01' FROM generate_series(1, 4) g").await;
    sql(
        &mut conn,
        "UPDATE coupons SET status = 'redeemed', redeemed_at = now() WHERE code = 'OLD000000001'",
    )
    .await;
    sql(
        &mut conn,
        "UPDATE coupons SET status = 'void', voided_at = now() WHERE code = 'OLD000000002'",
    )
    .await;
    sql(
        &mut conn,
        "UPDATE coupons SET expires_at = timestamptz '2021-01-01' WHERE code = 'OLD000000003'",
    )
    .await;

    let all = expected(&mut conn, "acme", "").await;
    assert_eq!(all.len(), 20);
    pages_match(&app, &acme.token, "status=", &all).await;
    pages_match(
        &app,
        &acme.token,
        "status=active,redeemed,void,expired",
        &all,
    )
    .await;
    pages_match(&app, &admin.token, "partner_id=acme", &all).await;
    let beta = expected(&mut conn, "beta", "").await;
    pages_match(&app, &admin.token, "partner_id=beta", &beta).await;
    let urgent = expected(&mut conn, "acme", "AND product_slug = 'urgent-care'").await;
    pages_match(&app, &acme.token, "product_slug=urgent-care", &urgent).await;
    let expired = expected(
        &mut conn,
        "acme",
        "AND status = 'active' AND expires_at <= now()",
    )
    .await;
    assert_eq!(expired.len(), 1);
    pages_match(&app, &acme.token, "status=expired", &expired).await;
    let gone = expected(&mut conn, "acme", "AND status IN ('redeemed', 'void')").await;
    pages_match(&app, &acme.token, "status=redeemed,void", &gone).await;
    // A partner with no coupon: total 0, an empty page.
    let empty = app.seed("empty", false).await;
    pages_match(&app, &empty.token, "status=", &[]).await;
    let res = app
        .api(
            Method::GET,
            &format!("{LIST}?offset=999999999"),
            &acme.token,
        )
        .send()
        .await
        .expect("send");
    let page: Value = body(res).await;
    assert_eq!(
        (page["total"].clone(), page["data"].clone()),
        (json!(20), json!([]))
    );
}

/// The listing's four statuses and their condition on `coupons` at `$2` (the server's clock).
const STATUSES: [(&str, &str); 4] = [
    (
        "active",
        "(status = 'active' AND (expires_at IS NULL OR expires_at > $2))",
    ),
    ("expired", "(status = 'active' AND expires_at <= $2)"),
    ("redeemed", "status = 'redeemed'"),
    ("void", "status = 'void'"),
];

/// Every filter a listing can be asked for: each non-empty set of statuses (the four included),
/// with no product and with each of `slugs`; as the query string and the SQL condition.
fn filters(slugs: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for set in 1..16_usize {
        let chosen: Vec<_> = STATUSES
            .iter()
            .enumerate()
            .filter(|(i, _)| set & (1 << i) != 0)
            .map(|(_, s)| *s)
            .collect();
        let names: Vec<&str> = chosen.iter().map(|s| s.0).collect();
        let conds: Vec<&str> = chosen.iter().map(|s| s.1).collect();
        let status = format!("status={}", names.join(","));
        let cond = format!("AND ({})", conds.join(" OR "));
        out.push((status.clone(), cond.clone()));
        for slug in slugs {
            out.push((
                format!("{status}&product_slug={slug}"),
                format!("{cond} AND product_slug = '{slug}'"),
            ));
        }
    }
    for slug in slugs {
        out.push((
            format!("product_slug={slug}"),
            format!("AND product_slug = '{slug}'"),
        ));
    }
    out
}

/// The partner's codes in the listing's order, `extra` narrowing them at `now` (`$2`).
async fn expected_at(
    conn: &mut AsyncPgConnection,
    partner: &str,
    extra: &str,
    now: time::OffsetDateTime,
) -> Vec<String> {
    diesel::sql_query(format!(
        "SELECT code FROM coupons WHERE partner_id = $1 {extra} ORDER BY created_at DESC, code"
    ))
    .bind::<Text, _>(partner)
    .bind::<Timestamptz, _>(now)
    .load::<Code>(conn)
    .await
    .expect("codes")
    .into_iter()
    .map(|c| c.code)
    .collect()
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// The rows of `coupon_counts` and `coupon_totals` (migration 000021) that differ from the
/// counts recomputed from `coupons` (none when they are kept right).
async fn counts_differing(conn: &mut AsyncPgConnection) -> i64 {
    const KEY: &str = "CASE WHEN status = 'active' THEN coalesce(expires_at, 'infinity') \
                       ELSE 'infinity' END";
    let counts = format!(
        "SELECT partner_id, created_at, product_slug, status, {KEY} AS e, count(*) AS n \
         FROM coupons GROUP BY 1, 2, 3, 4, 5"
    );
    let totals = format!(
        "SELECT partner_id, status, product_slug, {KEY} AS e, count(*) AS n \
         FROM coupons GROUP BY 1, 2, 3, 4"
    );
    diesel::sql_query(format!(
        "SELECT count(*) AS n FROM ( \
           (SELECT partner_id, created_at, product_slug, status, expires_at, n FROM coupon_counts \
            EXCEPT ALL {counts}) UNION ALL ({counts} EXCEPT ALL \
            SELECT partner_id, created_at, product_slug, status, expires_at, n FROM coupon_counts) \
           UNION ALL (SELECT partner_id, NULL::timestamptz, product_slug, status, expires_at, n FROM coupon_totals \
            EXCEPT ALL SELECT partner_id, NULL::timestamptz, product_slug, status, e, n FROM ({totals}) t) \
           UNION ALL (SELECT partner_id, NULL::timestamptz, product_slug, status, e, n FROM ({totals}) t \
            EXCEPT ALL SELECT partner_id, NULL::timestamptz, product_slug, status, expires_at, n FROM coupon_totals)) d"
    ))
    .get_result::<Count>(conn)
    .await
    .expect("differing counts")
    .n
}

/// Each filter's `total` and first page against the plain count and page at `now`.
async fn totals_match(
    app: &TestApp,
    conn: &mut AsyncPgConnection,
    token: &str,
    partner: &str,
    slugs: &[&str],
    now: time::OffsetDateTime,
) {
    for (query, cond) in filters(slugs) {
        let want = expected_at(conn, partner, &cond, now).await;
        let page = app.get_ok(&format!("{LIST}?{query}&limit=5"), token).await;
        assert_eq!(page["total"], json!(want.len()), "{query}");
        let got: Vec<&str> = page["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(|c| c["code"].as_str().expect("code"))
            .collect();
        let first: Vec<&str> = want.iter().take(5).map(String::as_str).collect();
        assert_eq!(got, first, "{query}");
    }
}

async fn order(app: &TestApp, partner: &str, quantity: u32, slug: &str, extra: Value) -> Value {
    let mut b = json!({ "partnerId": partner, "productSlug": slug, "months": 12, "quantity": quantity,
        "unitPriceCents": 9900, "purchaserEmail": "buyer@acme.test", "purchaserSource": "portal" });
    if let (Some(b), Some(e)) = (b.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    loop {
        let res = app
            .internal(Method::POST, "/care-services-coupons/bulk-orders")
            .json(&b)
            .send()
            .await
            .expect("send");
        if res.status() == 503 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        }
        assert_eq!(res.status(), 201);
        let created: Value = body(res).await;
        return created["data"]["coupons"].clone();
    }
}

/// The status of `req`, sent again while it is 503 (the pool's wait, on a loaded machine: the
/// request did nothing).
async fn sent(req: impl Fn() -> reqwest::RequestBuilder) -> u16 {
    loop {
        let status = req().send().await.expect("send").status().as_u16();
        if status != 503 {
            return status;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn redeem(app: &TestApp, code: &str, slug: &str) -> u16 {
    sent(|| {
        app.internal(Method::POST, "/care-services-coupons/redeem")
            .json(&json!({ "code": code, "productSlug": slug, "months": 12, "email": "pat@example.com",
                            "providerPrimaryExternalId": "ext-42" }))
    })
    .await
}

async fn void(app: &TestApp, id: &str) -> u16 {
    sent(|| app.internal(Method::POST, &format!("/care-services-coupons/{id}/void"))).await
}

fn field(coupons: &Value, i: usize, name: &str) -> String {
    coupons[i][name].as_str().expect(name).to_owned()
}

#[tokio::test]
async fn filtered_counts_stay_equal_to_a_plain_count_under_concurrent_orders_redemptions_and_voids()
{
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    app.seed("beta", false).await;
    let mut conn = AsyncPgConnection::establish(&app.config.database_url)
        .await
        .expect("connect");
    let in_a_day = partner_domain::kernel::wire::format_timestamp(
        time::OffsetDateTime::now_utc() + time::Duration::days(1),
    );
    let first = order(
        &app,
        "acme",
        12,
        "primary",
        json!({ "expiresAt": in_a_day }),
    )
    .await;
    let second = order(&app, "acme", 10, "urgent-care", json!({})).await;
    // At once: more bulk orders of both partners, every redemption of the first order's codes
    // twice (one of each pair wins), and voids of the second's, some of them twice.
    let won = std::cell::Cell::new(0);
    let won = &won;
    let mut writes: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>> = Vec::new();
    for i in 0..6_u32 {
        let app = &app;
        writes.push(Box::pin(async move {
            let partner = if i % 3 == 2 { "beta" } else { "acme" };
            let slug = if i % 2 == 0 { "primary" } else { "urgent-care" };
            order(app, partner, 3 + i, slug, json!({})).await;
        }));
    }
    for i in 0..8 {
        for _ in 0..2 {
            let (app, code) = (&app, field(&first, i, "code"));
            writes.push(Box::pin(async move {
                match redeem(app, &code, "primary").await {
                    200 => won.set(won.get() + 1),
                    409 => {}
                    other => panic!("redeem: {other}"),
                }
            }));
        }
    }
    for i in 0..6 {
        for _ in 0..(1 + i % 2) {
            let (app, id) = (&app, field(&second, i, "id"));
            writes.push(Box::pin(async move {
                let status = void(app, &id).await;
                assert!(matches!(status, 200 | 409), "void: {status}");
            }));
        }
    }
    futures_util::future::join_all(writes).await;
    assert_eq!(won.get(), 8, "one redemption of each code");
    assert_eq!(counts_differing(&mut conn).await, 0, "after the writes");
    // Expired by a write rather than by the clock: an expiry moved into the past, and one off.
    sql(
        &mut conn,
        &format!(
            "UPDATE coupons SET expires_at = now() - interval '1 day' WHERE code IN ('{}', '{}')",
            field(&first, 9, "code"),
            field(&second, 9, "code")
        ),
    )
    .await;
    sql(
        &mut conn,
        &format!(
            "UPDATE coupons SET expires_at = NULL WHERE code = '{}'",
            field(&first, 10, "code")
        ),
    )
    .await;
    assert_eq!(counts_differing(&mut conn).await, 0, "after expiries");
    let now = time::OffsetDateTime::now_utc();
    totals_match(
        &app,
        &mut conn,
        &acme.token,
        "acme",
        &["primary", "urgent-care", "vet-care"],
        now,
    )
    .await;
    for query in [
        "status=redeemed",
        "status=active",
        "status=expired,void&product_slug=urgent-care",
    ] {
        let cond = filters(&["urgent-care"])
            .into_iter()
            .find(|(q, _)| q == query)
            .expect("a filter")
            .1;
        let want = expected_at(&mut conn, "acme", &cond, now).await;
        pages_match(&app, &acme.token, query, &want).await;
    }
    sql(&mut conn, "DELETE FROM coupons WHERE status = 'void'").await;
    assert_eq!(counts_differing(&mut conn).await, 0, "after deletes");
    sql(&mut conn, "TRUNCATE coupons").await;
    assert_eq!(counts_differing(&mut conn).await, 0, "after a truncate");
}

#[tokio::test]
async fn filtered_totals_and_pages_follow_the_injected_clock_past_each_expiry() {
    // At a whole millisecond, as the API writes `expiresAt`, so the clock meets it exactly.
    let clock = std::sync::Arc::new(partner_domain::kernel::clock::FixedClock::new(
        partner_domain::kernel::clock::truncate_to_millis(time::OffsetDateTime::now_utc()),
    ));
    let app = TestApp::spawn_full(|_| {}, clock.clone()).await;
    let acme = app.seed("acme", false).await;
    let mut conn = AsyncPgConnection::establish(&app.config.database_url)
        .await
        .expect("connect");
    use partner_domain::kernel::clock::Clock;
    let t0 = clock.now();
    let at = |h: i64| partner_domain::kernel::wire::format_timestamp(t0 + time::Duration::hours(h));
    // Two orders at the same instant (one listing group of two products and two expiries),
    // then orders a millisecond apart: expiring in 1 h, in 2 h, never.
    let a = order(&app, "acme", 5, "primary", json!({ "expiresAt": at(1) })).await;
    let b = order(
        &app,
        "acme",
        3,
        "urgent-care",
        json!({ "expiresAt": at(2) }),
    )
    .await;
    clock.advance(time::Duration::milliseconds(1));
    order(&app, "acme", 4, "primary", json!({})).await;
    clock.advance(time::Duration::milliseconds(1));
    let c = order(
        &app,
        "acme",
        6,
        "urgent-care",
        json!({ "expiresAt": at(1) }),
    )
    .await;
    clock.advance(time::Duration::milliseconds(1));
    order(&app, "acme", 2, "primary", json!({ "expiresAt": at(2) })).await;
    assert_eq!(redeem(&app, &field(&a, 0, "code"), "primary").await, 200);
    assert_eq!(void(&app, &field(&b, 1, "id")).await, 200);
    assert_eq!(void(&app, &field(&c, 2, "id")).await, 200);
    assert_eq!(counts_differing(&mut conn).await, 0);
    // Before any expiry, exactly at the first (expired: `expiresAt` has passed when it is now),
    // between, at the second, and after both; redeemed and void coupons never expire.
    for (step, by) in [
        (0, 0),
        (1, 3_600_000 - 3),
        (2, 1),
        (3, 1_800_000),
        (4, 1_799_999),
        (5, 3_600_000),
    ] {
        clock.advance(time::Duration::milliseconds(by));
        let now = clock.now();
        totals_match(
            &app,
            &mut conn,
            &acme.token,
            "acme",
            &["primary", "urgent-care"],
            now,
        )
        .await;
        for query in ["status=expired", "status=active&product_slug=urgent-care"] {
            let cond = filters(&["urgent-care"])
                .into_iter()
                .find(|(q, _)| q == query)
                .expect("a filter")
                .1;
            let want = expected_at(&mut conn, "acme", &cond, now).await;
            pages_match(&app, &acme.token, query, &want).await;
        }
        let expired = expected_at(
            &mut conn,
            "acme",
            "AND status = 'active' AND expires_at <= $2",
            now,
        )
        .await;
        let want = [0, 9, 9, 9, 13, 13][step];
        assert_eq!(
            expired.len(),
            want,
            "step {step}: the clock moved the expiries"
        );
    }
    assert_eq!(
        counts_differing(&mut conn).await,
        0,
        "the clock writes nothing"
    );
}
