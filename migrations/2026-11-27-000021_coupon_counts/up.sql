-- Filtered coupon listings at scale (issue 22): `GET /api/v1/care-services-coupons` with `status`
-- or `product_slug` keeps the contract's exact `total` and `offset` paging without counting or
-- skipping the partner's matching coupons on every page (docs/decisions.md, "Coupon listings at
-- scale"; the unfiltered listing keeps `coupon_blocks`, migration 000019).
--
-- A coupon's listed status depends on its stored status and, for a stored `active` one, on
-- whether its `expires_at` has passed (`active` while it is null or later than now, `expired`
-- after). So coupons are counted by what does not move with the clock: stored status, product,
-- and, for the active ones, the exact expiry instant (a bulk order's codes share it; `infinity`
-- for none, and for every redeemed or void coupon, whose expiry no longer matters). A count at
-- any instant is then a sum over those keys, split at `expires_at > now`.
--
-- `coupon_counts` adds the listing group (`created_at`, shared by a bulk order's codes): a
-- filtered page walks the partner's groups newest first, summing their matching counts, to the
-- group where its offset lands, skips within that group only, and reads only groups that hold
-- matching coupons. `coupon_totals` is the same without the group, for `total`: a redeemed or
-- void filter reads a row per product, an active or expired one a row per expiry instant.
CREATE TABLE coupon_counts (
    partner_id    text NOT NULL,
    created_at    timestamptz NOT NULL,
    product_slug  text NOT NULL,
    status        text NOT NULL,
    expires_at    timestamptz NOT NULL,
    n             bigint NOT NULL,
    PRIMARY KEY (partner_id, created_at, product_slug, status, expires_at)
);
CREATE TABLE coupon_totals (
    partner_id    text NOT NULL,
    status        text NOT NULL,
    product_slug  text NOT NULL,
    expires_at    timestamptz NOT NULL,
    n             bigint NOT NULL,
    PRIMARY KEY (partner_id, status, product_slug, expires_at)
);

-- The expiry a coupon is counted under.
CREATE FUNCTION coupon_count_expiry(status text, expires_at timestamptz) RETURNS timestamptz
IMMUTABLE LANGUAGE sql AS $$
    SELECT CASE WHEN status = 'active' THEN coalesce(expires_at, 'infinity') ELSE 'infinity' END
$$;

-- Adds d[i] to the count of key i (keys may repeat; negative: removes), in key order, so two
-- writers lock the rows of both tables in one order and cannot deadlock (no CHECK (n >= 0): an
-- INSERT … ON CONFLICT checks the row it proposes, the negative delta, before the conflict). Counts are additions
-- under each row's lock, so concurrent writers need no other lock. A count that reaches 0 is
-- deleted; a writer waiting on that row then inserts it afresh (ON CONFLICT retries).
CREATE FUNCTION coupon_counts_add(p text[], t timestamptz[], s text[], st text[], e timestamptz[],
    d bigint[]) RETURNS void VOLATILE LANGUAGE sql AS $$
    INSERT INTO coupon_counts AS c (partner_id, created_at, product_slug, status, expires_at, n)
    SELECT x.p, x.t, x.s, x.st, x.e, sum(x.d)::bigint
    FROM unnest(p, t, s, st, e, d) AS x (p, t, s, st, e, d)
    GROUP BY 1, 2, 3, 4, 5 HAVING sum(x.d) <> 0 ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (partner_id, created_at, product_slug, status, expires_at)
    DO UPDATE SET n = c.n + EXCLUDED.n;
    DELETE FROM coupon_counts c USING unnest(p, t, s, st, e) AS x (p, t, s, st, e)
    WHERE c.n = 0 AND c.partner_id = x.p AND c.created_at = x.t AND c.product_slug = x.s
      AND c.status = x.st AND c.expires_at = x.e;
    INSERT INTO coupon_totals AS c (partner_id, status, product_slug, expires_at, n)
    SELECT x.p, x.st, x.s, x.e, sum(x.d)::bigint
    FROM unnest(p, s, st, e, d) AS x (p, s, st, e, d)
    GROUP BY 1, 2, 3, 4 HAVING sum(x.d) <> 0 ORDER BY 1, 2, 3, 4
    ON CONFLICT (partner_id, status, product_slug, expires_at)
    DO UPDATE SET n = c.n + EXCLUDED.n;
    DELETE FROM coupon_totals c USING unnest(p, s, st, e) AS x (p, s, st, e)
    WHERE c.n = 0 AND c.partner_id = x.p AND c.status = x.st AND c.product_slug = x.s
      AND c.expires_at = x.e;
$$;

-- Once per statement (a bulk order is one INSERT of up to 10,000 rows; a redemption or a void one
-- UPDATE of one row): the rows added count +1, the rows removed -1, under their keys.
CREATE FUNCTION coupon_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM coupon_counts_add(array_agg(partner_id), array_agg(created_at), array_agg(product_slug),
        array_agg(status), array_agg(e), array_agg(d))
    FROM (SELECT partner_id, created_at, product_slug, status,
            coupon_count_expiry(status, expires_at) AS e, count(*) AS d
          FROM added GROUP BY 1, 2, 3, 4, 5) g;
    RETURN NULL;
END $$;
CREATE FUNCTION coupon_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM coupon_counts_add(array_agg(partner_id), array_agg(created_at), array_agg(product_slug),
        array_agg(status), array_agg(e), array_agg(d))
    FROM (SELECT partner_id, created_at, product_slug, status,
            coupon_count_expiry(status, expires_at) AS e, -count(*) AS d
          FROM removed GROUP BY 1, 2, 3, 4, 5) g;
    RETURN NULL;
END $$;
CREATE FUNCTION coupon_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM coupon_counts_add(array_agg(partner_id), array_agg(created_at), array_agg(product_slug),
        array_agg(status), array_agg(e), array_agg(d))
    FROM (SELECT partner_id, created_at, product_slug, status, e, sum(d)::bigint AS d
          FROM (SELECT partner_id, created_at, product_slug, status,
                  coupon_count_expiry(status, expires_at) AS e, 1 AS d FROM added
                UNION ALL
                SELECT partner_id, created_at, product_slug, status,
                  coupon_count_expiry(status, expires_at), -1 FROM removed) u
          GROUP BY 1, 2, 3, 4, 5 HAVING sum(d) <> 0) g;
    RETURN NULL;
END $$;
CREATE FUNCTION coupon_counts_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE coupon_counts, coupon_totals;
    RETURN NULL;
END $$;
CREATE TRIGGER coupon_counts_insert AFTER INSERT ON coupons
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION coupon_counts_inserted();
CREATE TRIGGER coupon_counts_delete AFTER DELETE ON coupons
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION coupon_counts_deleted();
-- Every UPDATE (a trigger with transition tables cannot name columns); one that changes no
-- counted column nets to nothing and writes nothing.
CREATE TRIGGER coupon_counts_update AFTER UPDATE ON coupons
    REFERENCING OLD TABLE AS removed NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION coupon_counts_updated();
CREATE TRIGGER coupon_counts_truncate AFTER TRUNCATE ON coupons
    FOR EACH STATEMENT EXECUTE FUNCTION coupon_counts_truncated();

-- The counts of the coupons issued so far (bench/dataset.sh and bench/coupons-dataset.sh run the
-- same after their loads, which fire no trigger).
INSERT INTO coupon_counts (partner_id, created_at, product_slug, status, expires_at, n)
SELECT partner_id, created_at, product_slug, status, coupon_count_expiry(status, expires_at), count(*)
FROM coupons GROUP BY 1, 2, 3, 4, 5;
INSERT INTO coupon_totals (partner_id, status, product_slug, expires_at, n)
SELECT partner_id, status, product_slug, expires_at, sum(n)::bigint
FROM coupon_counts GROUP BY 1, 2, 3, 4;
