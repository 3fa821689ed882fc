DROP TRIGGER coupon_counts_insert ON coupons;
DROP TRIGGER coupon_counts_delete ON coupons;
DROP TRIGGER coupon_counts_update ON coupons;
DROP TRIGGER coupon_counts_truncate ON coupons;
DROP FUNCTION coupon_counts_inserted(), coupon_counts_deleted(), coupon_counts_updated(),
    coupon_counts_truncated(),
    coupon_counts_add(text[], timestamptz[], text[], text[], timestamptz[], bigint[]),
    coupon_count_expiry(text, timestamptz);
DROP TABLE coupon_counts, coupon_totals;
