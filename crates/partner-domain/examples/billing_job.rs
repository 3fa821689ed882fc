//! A billing job as another internal service would write it, with this crate's public API only
//! (`cargo run -p partner-domain --example billing_job`).
//!
//! It reads an export of orders (here inline; a real job reads its own source), keeps the rows
//! whose values parse, and decides each partner's commission with the contract's rule: test and
//! simulated (`TEST-SIM-`) orders never count. It then checks a coupon redemption its checkout
//! asks about, and verifies the signature of an `order.created` webhook delivery it received
//! before trusting it. Nothing here touches a database: the rules are pure functions.

use std::collections::BTreeMap;
use std::error::Error;

use partner_domain::coupon::{
    Coupon, CouponCode, CouponParts, ProductSlug, RedeemRefusal, StoredStatus,
};
use partner_domain::kernel::ids::{BulkOrderId, CouponId};
use partner_domain::kernel::values::{Money, PartnerId, SubId};
use partner_domain::kernel::wire::{format_timestamp, parse_timestamp_field};
use partner_domain::order::{CommissionSummary, Order, OrderParts, parse_order_id};
use partner_domain::time::{Duration, OffsetDateTime};
use partner_domain::uuid::Uuid;
use partner_domain::webhook::{VerifyError, WebhookSecret, WebhookVerifier};

/// One row of the export: orderId, partnerId, subId, amount, commission, isTest, createdDate.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    f64,
    f64,
    bool,
    &'static str,
);

const EXPORT: [Row; 5] = [
    (
        "A-1001",
        "acme",
        "7",
        199.0,
        20.0,
        false,
        "2026-11-02T09:30:00.000Z",
    ),
    (
        "A-1002",
        "acme",
        "",
        49.5,
        5.0,
        false,
        "2026-11-03T10:00:00.000Z",
    ),
    (
        "A-1003",
        "acme",
        "",
        49.5,
        5.0,
        true,
        "2026-11-03T11:00:00.000Z",
    ),
    (
        "TEST-SIM-run42",
        "acme",
        "",
        0.0,
        0.0,
        false,
        "2026-11-04T08:00:00.000Z",
    ),
    (
        "B-9",
        "Bad Partner!",
        "",
        10.0,
        1.0,
        false,
        "2026-11-05T08:00:00.000Z",
    ),
];

/// An order of the export, or why the row is skipped.
fn order(row: &Row) -> Result<Order, Box<dyn Error>> {
    let (order_id, partner, sub, amount, commission, is_test, created) = *row;
    Ok(Order::new(OrderParts {
        // A stored order's id: `TEST-SIM-` ids are simulated orders, never stored or billed.
        order_id: parse_order_id(order_id)?,
        partner_id: PartnerId::parse(partner)?,
        sub_id: if sub.is_empty() {
            None
        } else {
            Some(SubId::parse(sub)?)
        },
        created_date: parse_timestamp_field(created, "createdDate")?,
        product: "semaglutide-3m".into(),
        amount: Money::parse(amount, "amount")?,
        commission: Money::parse(commission, "commission")?,
        status: "Completed".into(),
        is_test,
        source: "checkout".into(),
        customer_name: None,
        customer_email: None,
    })?)
}

fn main() -> Result<(), Box<dyn Error>> {
    // 1. Commission per partner.
    let mut by_partner: BTreeMap<String, Vec<Order>> = BTreeMap::new();
    for row in &EXPORT {
        match order(row) {
            Ok(o) => by_partner
                .entry(o.partner_id().to_string())
                .or_default()
                .push(o),
            Err(e) => println!("skipped {}: {e}", row.0),
        }
    }
    for (partner, orders) in &by_partner {
        let s = CommissionSummary::of(orders);
        println!(
            "{partner}: {} orders, commission {}, {} test orders excluded",
            s.order_count, s.commission_total, s.excluded_test_orders
        );
        assert_eq!((s.order_count, s.excluded_test_orders), (2, 1));
    }

    // 2. May this coupon be redeemed for this product and duration now?
    let now = OffsetDateTime::from_unix_timestamp(1_795_000_000)?;
    let coupon = Coupon::new(CouponParts {
        id: CouponId::from_uuid(Uuid::from_u128(1)),
        code: CouponCode::normalize("abcd-efgh-2345").ok_or("not a coupon code")?,
        partner_id: PartnerId::parse("acme")?,
        sub_id: None,
        product_slug: ProductSlug::PrimaryPlus,
        months: 6,
        status: StoredStatus::Active,
        expires_at: Some(now + Duration::days(90)),
        redemption: None,
        bulk_order_id: BulkOrderId::from_uuid(Uuid::from_u128(2)),
        purchaser_email: "hr@acme.test".into(),
        purchaser_source: "billing-job".into(),
        unit_price_cents: 12_900,
        notes: None,
        created_at: now,
    })?;
    let asked = ProductSlug::parse("primary-plus").ok_or("unknown product")?;
    match coupon.can_redeem(asked, 6, now) {
        Ok(()) => println!("coupon {} may be redeemed", coupon.code().as_str()),
        Err(RedeemRefusal::Mismatch) => println!("coupon is for another product or duration"),
        Err(RedeemRefusal::NotActive(status)) => println!("coupon is {}", status.as_str()),
    }

    // 3. Verify a webhook delivery before acting on it. The secret is the endpoint's (shown once
    // when generated); during a rotation, pass the new and the old one.
    let secret = WebhookSecret::from_stored("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into());
    let verifier = WebhookVerifier::new([secret.clone()])?;
    let body = format!(
        r#"{{"id":"6c1f0a4e-2f1b-4f1a-9d6e-3b1c2d4e5f60","event":"order.created","created_at":"{}","data":{{"orderId":"A-1001"}}}}"#,
        format_timestamp(now)
    );
    // What the sender put in the header (a real job reads it from the request).
    let signature =
        partner_domain::webhook::signature_header(&secret, now.unix_timestamp(), body.as_bytes());
    let headers = [
        ("Content-Type", "application/json"),
        ("X-Partner-Signature", signature.as_str()),
    ];
    verifier.verify(headers, body.as_bytes(), now)?;
    println!("delivery verified");
    let tampered = body.replace("A-1001", "A-9999");
    assert_eq!(
        verifier.verify(headers, tampered.as_bytes(), now),
        Err(VerifyError::Mismatch)
    );
    println!("tampered delivery refused");
    Ok(())
}
