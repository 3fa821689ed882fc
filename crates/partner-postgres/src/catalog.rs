//! The catalog as JSONB documents, and partners' prices.

use std::collections::BTreeMap;

use diesel::prelude::*;
use diesel::sql_types::{Bool, Text, Timestamptz};
use diesel_async::RunQueryDsl;
use partner_domain::RepoError;
use partner_domain::auth::{Sealed, TokenKey};
use partner_domain::catalog::{CareProduct, DnaProduct, MedicalProduct, Stored};
use partner_domain::links::{CareLinkInputs, DnaLinkInputs, MedicalLinkInputs};
use partner_domain::ports::CatalogRepo;
use partner_domain::values::{Money, PartnerId, SubId};
use serde::Serialize;
use serde::de::DeserializeOwned;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{PgStore, corrupt, db};

#[derive(QueryableByName)]
struct Put {
    #[diesel(sql_type = Timestamptz)]
    created_at: OffsetDateTime,
    #[diesel(sql_type = Timestamptz)]
    updated_at: OffsetDateTime,
    #[diesel(sql_type = Bool)]
    inserted: bool,
}

#[derive(QueryableByName)]
struct Doc {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    doc: String,
}

fn parse<T: DeserializeOwned>(d: &Doc) -> Result<T, RepoError> {
    serde_json::from_str(&d.doc).map_err(|_| corrupt("catalog document"))
}

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
        let put: Put = diesel::sql_query(
            "INSERT INTO catalog_products (kind, id, doc, created_at, updated_at) VALUES ($1, $2, $3::jsonb, $4, $4) \
             ON CONFLICT (kind, id) DO UPDATE SET doc = EXCLUDED.doc, updated_at = EXCLUDED.updated_at \
             RETURNING created_at, updated_at, (xmax = 0) AS inserted",
        )
        .bind::<Text, _>(kind)
        .bind::<diesel::sql_types::Uuid, _>(id)
        .bind::<Text, _>(doc)
        .bind::<Timestamptz, _>(now)
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
        let rows: Vec<Doc> =
            diesel::sql_query("SELECT id, doc::text AS doc FROM catalog_products WHERE kind = $1")
                .bind::<Text, _>(kind)
                .load(&mut conn)
                .await
                .map_err(db)?;
        rows.iter().map(parse).collect()
    }

    async fn doc<T: DeserializeOwned>(&self, kind: &str, id: Uuid) -> Result<Option<T>, RepoError> {
        let mut conn = self.conn().await?;
        let row: Option<Doc> = diesel::sql_query(
            "SELECT id, doc::text AS doc FROM catalog_products WHERE kind = $1 AND id = $2",
        )
        .bind::<Text, _>(kind)
        .bind::<diesel::sql_types::Uuid, _>(id)
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
        diesel::sql_query(
            "INSERT INTO partner_prices (partner_id, kind, product_id, doc, updated_at) VALUES ($1, $2, $3, $4::jsonb, $5) \
             ON CONFLICT (partner_id, kind, product_id) DO UPDATE SET doc = EXCLUDED.doc, updated_at = EXCLUDED.updated_at",
        )
        .bind::<Text, _>(partner.as_str())
        .bind::<Text, _>(kind)
        .bind::<diesel::sql_types::Uuid, _>(product)
        .bind::<Text, _>(doc)
        .bind::<Timestamptz, _>(now)
        .execute(&mut conn)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn price_docs<T: DeserializeOwned>(
        &self,
        partner: &PartnerId,
        kind: &str,
    ) -> Result<BTreeMap<Uuid, T>, RepoError> {
        let mut conn = self.conn().await?;
        let rows: Vec<Doc> = diesel::sql_query(
            "SELECT product_id AS id, doc::text AS doc FROM partner_prices WHERE partner_id = $1 AND kind = $2",
        )
        .bind::<Text, _>(partner.as_str())
        .bind::<Text, _>(kind)
        .load(&mut conn)
        .await
        .map_err(db)?;
        rows.iter().map(|d| Ok((d.id, parse(d)?))).collect()
    }
}

#[async_trait::async_trait]
impl CatalogRepo for PgStore {
    async fn put_medical(
        &self,
        p: &MedicalProduct,
        now: OffsetDateTime,
    ) -> Result<(Stored<MedicalProduct>, bool), RepoError> {
        self.put_doc("medical", p.id, p, now).await
    }

    async fn medical_products(&self) -> Result<Vec<MedicalProduct>, RepoError> {
        self.docs("medical").await
    }

    async fn medical_product(&self, id: Uuid) -> Result<Option<MedicalProduct>, RepoError> {
        self.doc("medical", id).await
    }

    async fn put_medical_prices(
        &self,
        partner: &PartnerId,
        product: Uuid,
        prices: &BTreeMap<String, Money>,
        now: OffsetDateTime,
    ) -> Result<(), RepoError> {
        let doc = serde_json::to_string(prices).map_err(RepoError::new)?;
        self.put_price_doc(partner, "medical", product, doc, now)
            .await
    }

    async fn medical_prices(
        &self,
        partner: &PartnerId,
    ) -> Result<BTreeMap<Uuid, BTreeMap<String, Money>>, RepoError> {
        self.price_docs(partner, "medical").await
    }

    async fn put_dna(
        &self,
        p: &DnaProduct,
        now: OffsetDateTime,
    ) -> Result<(Stored<DnaProduct>, bool), RepoError> {
        self.put_doc("dna", p.id, p, now).await
    }

    async fn dna_products(&self) -> Result<Vec<DnaProduct>, RepoError> {
        self.docs("dna").await
    }

    async fn dna_product(&self, id: Uuid) -> Result<Option<DnaProduct>, RepoError> {
        self.doc("dna", id).await
    }

    async fn put_dna_price(
        &self,
        partner: &PartnerId,
        product: Uuid,
        price: Money,
        now: OffsetDateTime,
    ) -> Result<(), RepoError> {
        let doc = serde_json::to_string(&price).map_err(RepoError::new)?;
        self.put_price_doc(partner, "dna", product, doc, now).await
    }

    async fn dna_prices(&self, partner: &PartnerId) -> Result<BTreeMap<Uuid, Money>, RepoError> {
        self.price_docs(partner, "dna").await
    }

    async fn put_care(
        &self,
        p: &CareProduct,
        now: OffsetDateTime,
    ) -> Result<(Stored<CareProduct>, bool), RepoError> {
        self.put_doc("care", p.id, p, now).await
    }

    async fn care_products(&self) -> Result<Vec<CareProduct>, RepoError> {
        self.docs("care").await
    }

    async fn dna_links_for_token(&self, key: TokenKey) -> Result<Sealed<DnaLinkInputs>, RepoError> {
        self.dna_link_inputs(key).await
    }

    async fn medical_links_for_token(
        &self,
        key: TokenKey,
        sub: Option<SubId>,
    ) -> Result<Sealed<MedicalLinkInputs>, RepoError> {
        self.medical_link_inputs(key, sub).await
    }

    async fn care_links_for_token(
        &self,
        key: TokenKey,
        sub: Option<SubId>,
    ) -> Result<Sealed<CareLinkInputs>, RepoError> {
        self.care_link_inputs(key, sub).await
    }
}
