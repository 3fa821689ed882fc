//! `partner_prices` rows: a partner's prices for one product, one JSONB document each. They are
//! read as [`crate::models::catalog_products::Doc`] (the priced product's id and the document),
//! parsed as the catalog's documents are.
