-- Care Services bulk coupon codes. `expired` is never stored: it is derived from `expires_at`.

CREATE TABLE coupons (
    id                                     uuid PRIMARY KEY,
    code                                   text NOT NULL CHECK (code ~ '^[A-Z0-9]{12}$'),
    partner_id                             text NOT NULL REFERENCES partners (partner_id),
    sub_id                                 smallint CHECK (sub_id BETWEEN 1 AND 250),
    product_slug                           text NOT NULL,
    months                                 smallint NOT NULL CHECK (months IN (1, 3, 6, 12)),
    status                                 text NOT NULL CHECK (status IN ('active', 'redeemed', 'void')),
    expires_at                             timestamptz,
    redeemed_at                            timestamptz,
    redeemed_email                         text,
    redeemed_provider_primary_external_id  text,
    voided_at                              timestamptz,
    bulk_order_id                          uuid NOT NULL,
    purchaser_email                        text NOT NULL,
    purchaser_source                       text NOT NULL,
    unit_price_cents                       bigint NOT NULL CHECK (unit_price_cents >= 0),
    notes                                  text,
    created_at                             timestamptz NOT NULL,
    CONSTRAINT coupons_code_key UNIQUE (code),
    CONSTRAINT coupons_redeemed_fields CHECK ((status = 'redeemed') = (redeemed_at IS NOT NULL))
);
-- GET /api/v1/care-services-coupons: a partner's coupons, newest first.
CREATE INDEX coupons_partner_idx ON coupons (partner_id, created_at DESC, code);
CREATE INDEX coupons_bulk_order_idx ON coupons (bulk_order_id);
