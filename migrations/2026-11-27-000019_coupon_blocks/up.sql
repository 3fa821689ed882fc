-- Coupon listings at scale (issue 22): `GET /api/v1/care-services-coupons` keeps the contract's
-- exact `total` and `offset` paging without counting or skipping a big partner's coupons on
-- every page (docs/decisions.md, "Coupon listings at scale").
--
-- A *block* is a partner's coupons of one `created_at` (a bulk order's codes share it). Per
-- block: `n`, its coupons, and `older`, the partner's coupons in older blocks. The listing's
-- order is `created_at DESC, code`, so the coupon at offset N of a partner with T coupons is in
-- the block with the largest `older <= T - 1 - N`, at `older + n - T + N` rows into it: one
-- probe of `coupon_blocks_older_idx`, then a skip within one bulk order (at most 10,000
-- codes). T is the newest block's `older + n`. Status changes (redeem, void) move nothing:
-- the blocks count every status; the filtered listings count with the covering index below.
CREATE TABLE coupon_blocks (
    partner_id  text NOT NULL,
    created_at  timestamptz NOT NULL,
    n           bigint NOT NULL CHECK (n >= 0),
    older       bigint NOT NULL CHECK (older >= 0),
    PRIMARY KEY (partner_id, created_at)
);
CREATE INDEX coupon_blocks_older_idx ON coupon_blocks (partner_id, older);

-- Adds k (negative: removes) coupons to partner p's block at t, shifting the newer blocks, under
-- a per-partner transaction lock so that two writers of one partner's coupons cannot both read
-- `older` before the other's block exists (each statement below sees what committed before it).
CREATE FUNCTION coupon_blocks_shift(p text, t timestamptz, k bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('coupon_blocks'), hashtext(p));
    UPDATE coupon_blocks SET older = older + k WHERE partner_id = p AND created_at > t;
    UPDATE coupon_blocks SET n = n + k WHERE partner_id = p AND created_at = t;
    IF NOT FOUND THEN
        INSERT INTO coupon_blocks (partner_id, created_at, n, older)
        SELECT p, t, k, coalesce((SELECT b.older + b.n FROM coupon_blocks b
            WHERE b.partner_id = p AND b.created_at < t ORDER BY b.created_at DESC LIMIT 1), 0);
    END IF;
    DELETE FROM coupon_blocks WHERE partner_id = p AND created_at = t AND n = 0;
END $$;

-- Once per statement (a bulk order is one INSERT of up to 10,000 rows): one call per block.
CREATE FUNCTION coupon_blocks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM coupon_blocks_shift(partner_id, created_at, count(*))
    FROM (SELECT partner_id, created_at FROM added) a
    GROUP BY partner_id, created_at ORDER BY partner_id, created_at;
    RETURN NULL;
END $$;
CREATE FUNCTION coupon_blocks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM coupon_blocks_shift(partner_id, created_at, -count(*))
    FROM (SELECT partner_id, created_at FROM removed) r
    GROUP BY partner_id, created_at ORDER BY partner_id, created_at;
    RETURN NULL;
END $$;
-- No statement of the service changes a coupon's partner or time; should one, its row moves.
CREATE FUNCTION coupon_blocks_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM coupon_blocks_shift(OLD.partner_id, OLD.created_at, -1);
    PERFORM coupon_blocks_shift(NEW.partner_id, NEW.created_at, 1);
    RETURN NULL;
END $$;
CREATE FUNCTION coupon_blocks_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE coupon_blocks;
    RETURN NULL;
END $$;
CREATE TRIGGER coupon_blocks_insert AFTER INSERT ON coupons
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION coupon_blocks_inserted();
CREATE TRIGGER coupon_blocks_delete AFTER DELETE ON coupons
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION coupon_blocks_deleted();
CREATE TRIGGER coupon_blocks_update AFTER UPDATE OF partner_id, created_at ON coupons
    FOR EACH ROW WHEN (OLD.partner_id IS DISTINCT FROM NEW.partner_id OR OLD.created_at IS DISTINCT FROM NEW.created_at)
    EXECUTE FUNCTION coupon_blocks_moved();
CREATE TRIGGER coupon_blocks_truncate AFTER TRUNCATE ON coupons
    FOR EACH STATEMENT EXECUTE FUNCTION coupon_blocks_truncated();

-- The blocks of the coupons issued so far (bench/dataset.sh runs the same after its load,
-- which fires no trigger).
INSERT INTO coupon_blocks (partner_id, created_at, n, older)
SELECT partner_id, created_at, n,
    coalesce(sum(n) OVER (PARTITION BY partner_id ORDER BY created_at
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
FROM (SELECT partner_id, created_at, count(*) AS n FROM coupons GROUP BY partner_id, created_at) g;

-- The filtered listings (`status`, `product_slug`): the listing's order with the filtered
-- columns carried, so their count and the rows an offset skips are read from the index alone
-- (an index-only scan, where the visibility map allows), and only the page's rows from the heap.
DROP INDEX coupons_partner_idx;
CREATE INDEX coupons_page_idx ON coupons (partner_id, created_at DESC, code)
    INCLUDE (status, product_slug, expires_at);
