//! The catalog as JSONB documents, and partners' prices.

use std::collections::BTreeMap;

use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::sql_types::{Bool, Text};
use diesel::upsert::excluded;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::catalog::ports::CatalogRepo;
use partner_domain::catalog::{CareProduct, DnaProduct, MedicalProduct, Stored};
use partner_domain::kernel::ids::ProductId;
use partner_domain::kernel::values::{Money, PartnerId};
use serde::Serialize;
use serde::de::DeserializeOwned;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::dsl::fixed;
use crate::models::catalog_products::{Doc, JsonText, Put, parse};
use crate::schema::{catalog_products, partner_prices};
use crate::{PgStore, db};

impl PgStore {
    async fn put_doc<T: Serialize + Clone>(
        &self,
        kind: &str,
        id: Uuid,
        record: &T,
        now: OffsetDateTime,
    ) -> Result<(Stored<T>, bool), RepoError> {
        let mut conn = self.conn().await?;
        let doc = serde_json::to_string(record).map_err(RepoError::new)?;
        // `xmax = 0` only on a row this statement inserted (an updated row carries the
        // updating transaction's id).
        let put: Put = diesel::insert_into(catalog_products::table)
            .values((
                catalog_products::kind.eq(kind),
                catalog_products::id.eq(id),
                catalog_products::doc.eq(JsonText(doc)),
                catalog_products::created_at.eq(now),
                catalog_products::updated_at.eq(now),
            ))
            .on_conflict((catalog_products::kind, catalog_products::id))
            .do_update()
            .set((
                catalog_products::doc.eq(excluded(catalog_products::doc)),
                catalog_products::updated_at.eq(excluded(catalog_products::updated_at)),
            ))
            .returning((
                catalog_products::created_at,
                catalog_products::updated_at,
                fixed::<Bool>("xmax = 0"),
            ))
            .get_result(&mut conn)
            .await
            .map_err(db)?;
        Ok((
            Stored {
                record: record.clone(),
                created_at: put.created_at,
                updated_at: put.updated_at,
            },
            put.inserted,
        ))
    }

    async fn docs<T: DeserializeOwned>(&self, kind: &str) -> Result<Vec<T>, RepoError> {
        let mut conn = self.conn().await?;
        let rows: Vec<Doc> = catalog_products::table
            .filter(catalog_products::kind.eq(kind))
            .select((catalog_products::id, catalog_products::doc.cast::<Text>()))
            .load(&mut conn)
            .await
            .map_err(db)?;
        rows.iter().map(parse).collect()
    }

    async fn doc<T: DeserializeOwned>(&self, kind: &str, id: Uuid) -> Result<Option<T>, RepoError> {
        let mut conn = self.conn().await?;
        let row: Option<Doc> = catalog_products::table
            .find((kind, id))
            .select((catalog_products::id, catalog_products::doc.cast::<Text>()))
            .get_result(&mut conn)
            .await
            .optional()
            .map_err(db)?;
        row.as_ref().map(parse).transpose()
    }

    async fn put_price_doc(
        &self,
        partner: &PartnerId,
        kind: &str,
        product: Uuid,
        doc: String,
        now: OffsetDateTime,
    ) -> Result<(), RepoError> {
        let mut conn = self.conn().await?;
        diesel::insert_into(partner_prices::table)
            .values((
                partner_prices::partner_id.eq(partner.as_str()),
                partner_prices::kind.eq(kind),
                partner_prices::product_id.eq(product),
                partner_prices::doc.eq(JsonText(doc)),
                partner_prices::updated_at.eq(now),
            ))
            .on_conflict((
                partner_prices::partner_id,
                partner_prices::kind,
                partner_prices::product_id,
            ))
            .do_update()
            .set((
                partner_prices::doc.eq(excluded(partner_prices::doc)),
                partner_prices::updated_at.eq(excluded(partner_prices::updated_at)),
            ))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn price_docs<T: DeserializeOwned>(
        &self,
        partner: &PartnerId,
        kind: &str,
    ) -> Result<BTreeMap<ProductId, T>, RepoError> {
        let conn = self.conn().await?;
        price_docs(
            &conn,
            partner_prices::table
                .filter(partner_prices::partner_id.eq(partner.as_str()))
                .into_boxed(),
            kind,
        )
        .await
    }
}

/// The prices of one kind of product among `found` (one partner's rows), by product. The
/// partner-keyed read and the token-keyed one (`links.rs`) differ only in how `found` names the
/// partner.
pub(crate) async fn price_docs<T: DeserializeOwned>(
    mut conn: &AsyncPgConnection,
    found: partner_prices::BoxedQuery<'_, Pg>,
    kind: &str,
) -> Result<BTreeMap<ProductId, T>, RepoError> {
    let rows: Vec<Doc> = found
        .filter(partner_prices::kind.eq(kind))
        .select((
            partner_prices::product_id,
            partner_prices::doc.cast::<Text>(),
        ))
        .load(&mut conn)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|d| Ok((ProductId::from_uuid(d.id), parse(d)?)))
        .collect()
}

#[async_trait::async_trait]
impl CatalogRepo for PgStore {
    async fn put_medical(
        &self,
        p: &MedicalProduct,
        now: OffsetDateTime,
    ) -> Result<(Stored<MedicalProduct>, bool), RepoError> {
        self.put_doc("medical", p.id().as_uuid(), p, now).await
    }

    async fn medical_products(&self) -> Result<Vec<MedicalProduct>, RepoError> {
        self.docs("medical").await
    }

    async fn medical_product(&self, id: ProductId) -> Result<Option<MedicalProduct>, RepoError> {
        self.doc("medical", id.as_uuid()).await
    }

    async fn put_medical_prices(
        &self,
        partner: &PartnerId,
        product: ProductId,
        prices: &BTreeMap<String, Money>,
        now: OffsetDateTime,
    ) -> Result<(), RepoError> {
        let doc = serde_json::to_string(prices).map_err(RepoError::new)?;
        self.put_price_doc(partner, "medical", product.as_uuid(), doc, now)
            .await
    }

    async fn medical_prices(
        &self,
        partner: &PartnerId,
    ) -> Result<BTreeMap<ProductId, BTreeMap<String, Money>>, RepoError> {
        self.price_docs(partner, "medical").await
    }

    async fn put_dna(
        &self,
        p: &DnaProduct,
        now: OffsetDateTime,
    ) -> Result<(Stored<DnaProduct>, bool), RepoError> {
        self.put_doc("dna", p.id().as_uuid(), p, now).await
    }

    async fn dna_products(&self) -> Result<Vec<DnaProduct>, RepoError> {
        self.docs("dna").await
    }

    async fn dna_product(&self, id: ProductId) -> Result<Option<DnaProduct>, RepoError> {
        self.doc("dna", id.as_uuid()).await
    }

    async fn put_dna_price(
        &self,
        partner: &PartnerId,
        product: ProductId,
        price: Money,
        now: OffsetDateTime,
    ) -> Result<(), RepoError> {
        let doc = serde_json::to_string(&price).map_err(RepoError::new)?;
        self.put_price_doc(partner, "dna", product.as_uuid(), doc, now)
            .await
    }

    async fn dna_prices(
        &self,
        partner: &PartnerId,
    ) -> Result<BTreeMap<ProductId, Money>, RepoError> {
        self.price_docs(partner, "dna").await
    }

    async fn put_care(
        &self,
        p: &CareProduct,
        now: OffsetDateTime,
    ) -> Result<(Stored<CareProduct>, bool), RepoError> {
        self.put_doc("care", p.id().as_uuid(), p, now).await
    }

    async fn care_products(&self) -> Result<Vec<CareProduct>, RepoError> {
        self.docs("care").await
    }
}
