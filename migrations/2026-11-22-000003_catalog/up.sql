-- The product catalog and partners' prices. Products are few and always read whole, so each is
-- one JSONB document (numbers in jsonb are exact numeric, so money never becomes a float).

CREATE TABLE catalog_products (
    kind        text NOT NULL CHECK (kind IN ('medical', 'dna', 'care')),
    id          uuid NOT NULL,
    doc         jsonb NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (kind, id)
);

CREATE TABLE partner_prices (
    partner_id  text NOT NULL REFERENCES partners (partner_id),
    kind        text NOT NULL CHECK (kind IN ('medical', 'dna')),
    product_id  uuid NOT NULL,
    doc         jsonb NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (partner_id, kind, product_id),
    FOREIGN KEY (kind, product_id) REFERENCES catalog_products (kind, id)
);
