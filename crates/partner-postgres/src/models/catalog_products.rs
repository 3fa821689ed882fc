//! `catalog_products` rows: one JSONB document per product, read as text and parsed by serde.

use diesel::prelude::*;
use partner_domain::RepoError;
use serde::de::DeserializeOwned;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::corrupt;

/// What an upsert returns: the row's timestamps, and whether it was inserted.
#[derive(Queryable)]
pub(crate) struct Put {
    pub(crate) created_at: OffsetDateTime,
    pub(crate) updated_at: OffsetDateTime,
    pub(crate) inserted: bool,
}

/// A document and the id it is stored under (a product's, or for `partner_prices` the priced
/// product's).
#[derive(Queryable)]
pub(crate) struct Doc {
    pub(crate) id: Uuid,
    doc: String,
}

pub(crate) fn parse<T: DeserializeOwned>(d: &Doc) -> Result<T, RepoError> {
    serde_json::from_str(&d.doc).map_err(|_| corrupt("catalog document"))
}

/// A JSON document's text, bound as `jsonb` (whose binary form is a version byte, 1, then the
/// text), so the server parses it as a `$n::jsonb` cast would. Diesel's own `jsonb` binding
/// needs `serde_json::Value`, which would parse and re-serialise every document.
#[derive(Debug, diesel::expression::AsExpression)]
#[diesel(sql_type = diesel::sql_types::Jsonb)]
pub(crate) struct JsonText(pub(crate) String);

impl diesel::serialize::ToSql<diesel::sql_types::Jsonb, diesel::pg::Pg> for JsonText {
    fn to_sql<'b>(
        &'b self,
        out: &mut diesel::serialize::Output<'b, '_, diesel::pg::Pg>,
    ) -> diesel::serialize::Result {
        use std::io::Write;
        out.write_all(&[1])?;
        out.write_all(self.0.as_bytes())?;
        Ok(diesel::serialize::IsNull::No)
    }
}
