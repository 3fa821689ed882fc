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
