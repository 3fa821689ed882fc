//! Row structs, one file per table of `schema.rs` and `schema_extra.rs`: what diesel reads from
//! and writes to that table (`Queryable`/`Selectable`, `Insertable`, `AsChangeset`, and the
//! `QueryableByName` rows of the raw statements that read it), and their translation to and from
//! the domain's types. The statements themselves live in the repository modules beside
//! `models/`.

pub(crate) mod analytics_events;
pub(crate) mod api_tokens;
pub(crate) mod care_service_flags;
pub(crate) mod catalog_products;
pub(crate) mod coupons;
pub(crate) mod domain_events;
pub(crate) mod leads;
pub(crate) mod orders;
pub(crate) mod partner_prices;
pub(crate) mod partners;
pub(crate) mod payouts;
pub(crate) mod portal_users;
pub(crate) mod sub_accounts;
pub(crate) mod webhook_attempts;
pub(crate) mod webhook_deliveries;
pub(crate) mod webhook_endpoints;
