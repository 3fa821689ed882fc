DROP INDEX coupons_page_idx;
CREATE INDEX coupons_partner_idx ON coupons (partner_id, created_at DESC, code);
DROP TRIGGER coupon_blocks_insert ON coupons;
DROP TRIGGER coupon_blocks_delete ON coupons;
DROP TRIGGER coupon_blocks_update ON coupons;
DROP TRIGGER coupon_blocks_truncate ON coupons;
DROP FUNCTION coupon_blocks_inserted(), coupon_blocks_deleted(), coupon_blocks_moved(),
    coupon_blocks_truncated(), coupon_blocks_shift(text, timestamptz, bigint);
DROP TABLE coupon_blocks;
