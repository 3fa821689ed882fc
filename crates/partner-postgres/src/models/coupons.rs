//! `coupons` rows.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Int2, Nullable, Text, Timestamptz};
use partner_domain::RepoError;
use partner_domain::coupon::{
    Coupon, CouponCode, CouponParts, ProductSlug, Redemption, StoredStatus,
};
use partner_domain::kernel::ids::{BulkOrderId, CouponId};
use partner_domain::kernel::values::PartnerId;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::corrupt;
use crate::models::leads::sub_id;
use crate::schema::coupons;

/// A coupon as lookups, listings and the transitions' `RETURNING` read it.
#[derive(Queryable, QueryableByName, Selectable)]
#[diesel(table_name = coupons, check_for_backend(diesel::pg::Pg))]
pub(crate) struct Row {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    code: String,
    #[diesel(sql_type = Text)]
    partner_id: String,
    #[diesel(sql_type = Nullable<Int2>)]
    sub_id: Option<i16>,
    #[diesel(sql_type = Text)]
    product_slug: String,
    #[diesel(sql_type = Int2)]
    months: i16,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    expires_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    redeemed_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<Text>)]
    redeemed_email: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    redeemed_provider_primary_external_id: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    bulk_order_id: Uuid,
    #[diesel(sql_type = Text)]
    purchaser_email: String,
    #[diesel(sql_type = Text)]
    purchaser_source: String,
    #[diesel(sql_type = BigInt)]
    unit_price_cents: i64,
    #[diesel(sql_type = Nullable<Text>)]
    notes: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    created_at: OffsetDateTime,
}

impl Row {
    pub(crate) fn into_domain(self) -> Result<Coupon, RepoError> {
        Coupon::new(CouponParts {
            id: CouponId::from_uuid(self.id),
            code: CouponCode::normalize(&self.code).ok_or_else(|| corrupt("coupon code"))?,
            partner_id: PartnerId::parse(&self.partner_id).map_err(|_| corrupt("partner id"))?,
            sub_id: sub_id(self.sub_id)?,
            product_slug: ProductSlug::parse(&self.product_slug)
                .ok_or_else(|| corrupt("product slug"))?,
            months: u8::try_from(self.months).map_err(|_| corrupt("months"))?,
            status: StoredStatus::parse(&self.status).ok_or_else(|| corrupt("coupon status"))?,
            expires_at: self.expires_at,
            redemption: match self.redeemed_at {
                Some(at) => Some(Redemption {
                    at,
                    email: self.redeemed_email.unwrap_or_default(),
                    provider_primary_external_id: self
                        .redeemed_provider_primary_external_id
                        .unwrap_or_default(),
                }),
                None => None,
            },
            bulk_order_id: BulkOrderId::from_uuid(self.bulk_order_id),
            purchaser_email: self.purchaser_email,
            purchaser_source: self.purchaser_source,
            unit_price_cents: self.unit_price_cents,
            notes: self.notes,
            created_at: self.created_at,
        })
        .map_err(|_| corrupt("coupon"))
    }
}
