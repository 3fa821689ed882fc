//! What a partner's links are built from, read for a token: every statement is pipelined with
//! the token lookup on one connection (one round trip), and those reading the partner's rows take
//! the partner from the token in SQL ([`TokenPartner`]).

use std::collections::BTreeMap;

use diesel::prelude::*;
use diesel::sql_types::Text;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures_util::future::{try_join4, try_join5};
use partner_domain::RepoError;
use partner_domain::account::auth::{Sealed, TokenKey};
use partner_domain::account::{CareFlags, Partner};
use partner_domain::kernel::ids::ProductId;
use partner_domain::kernel::values::SubId;
use partner_domain::links::ports::LinkRepo;
use partner_domain::links::{CareLinkInputs, DnaLinkInputs, MedicalLinkInputs};
use serde::de::DeserializeOwned;

use crate::models::care_service_flags::{FlagRow, flags};
use crate::models::catalog_products::{Doc, parse};
use crate::models::partners::PartnerRow;
use crate::schema::{care_service_flags, catalog_products, partner_prices, partners, sub_accounts};
use crate::tokens::{self, TokenPartner};
use crate::{PgStore, db};

impl PgStore {
    pub(crate) async fn dna_link_inputs(
        &self,
        key: TokenKey,
    ) -> Result<Sealed<DnaLinkInputs>, RepoError> {
        let conn = self.conn().await?;
        let tp = TokenPartner::of(key);
        let (token, partner, prices, products) = try_join4(
            tokens::lookup(&conn, &key.hash),
            partner(&conn, &tp),
            prices(&conn, &tp, "dna"),
            docs(&conn, "dna"),
        )
        .await?;
        Ok(Sealed::new(
            token,
            DnaLinkInputs {
                partner,
                prices,
                products,
            },
        ))
    }

    pub(crate) async fn medical_link_inputs(
        &self,
        key: TokenKey,
        sub: Option<SubId>,
    ) -> Result<Sealed<MedicalLinkInputs>, RepoError> {
        let conn = self.conn().await?;
        let tp = TokenPartner::of(key);
        let (token, sub_exists, partner, prices, products) = try_join5(
            tokens::lookup(&conn, &key.hash),
            sub_exists(&conn, &tp, sub),
            partner(&conn, &tp),
            prices(&conn, &tp, "medical"),
            docs(&conn, "medical"),
        )
        .await?;
        Ok(Sealed::new(
            token,
            MedicalLinkInputs {
                sub_exists,
                partner,
                prices,
                products,
            },
        ))
    }

    pub(crate) async fn care_link_inputs(
        &self,
        key: TokenKey,
        sub: Option<SubId>,
    ) -> Result<Sealed<CareLinkInputs>, RepoError> {
        let conn = self.conn().await?;
        let tp = TokenPartner::of(key);
        let (token, sub_exists, partner, flags, products) = try_join5(
            tokens::lookup(&conn, &key.hash),
            sub_exists(&conn, &tp, sub),
            partner(&conn, &tp),
            care_flags(&conn),
            docs(&conn, "care"),
        )
        .await?;
        Ok(Sealed::new(
            token,
            CareLinkInputs {
                sub_exists,
                partner,
                flags,
                products,
            },
        ))
    }
}

/// The token's partner (`None` when the token is not live).
async fn partner(
    mut conn: &AsyncPgConnection,
    tp: &TokenPartner,
) -> Result<Option<Partner>, RepoError> {
    let row: Option<PartnerRow> = partners::table
        .filter(partners::partner_id.eq(tp.clone()))
        .select(PartnerRow::as_select())
        .first(&mut conn)
        .await
        .optional()
        .map_err(db)?;
    row.map(PartnerRow::into_domain).transpose()
}

/// Whether `sub` names one of the token's partner's sub-accounts; no statement without a `sub`.
async fn sub_exists(
    mut conn: &AsyncPgConnection,
    tp: &TokenPartner,
    sub: Option<SubId>,
) -> Result<bool, RepoError> {
    let Some(sub) = sub else {
        return Ok(true);
    };
    diesel::select(diesel::dsl::exists(
        sub_accounts::table
            .filter(sub_accounts::partner_id.eq(tp.clone()))
            .filter(sub_accounts::sub_id.eq(i16::from(sub.get()))),
    ))
    .get_result(&mut conn)
    .await
    .map_err(db)
}

/// The token's partner's prices of one kind of product, by product.
async fn prices<T: DeserializeOwned>(
    conn: &AsyncPgConnection,
    tp: &TokenPartner,
    kind: &str,
) -> Result<BTreeMap<ProductId, T>, RepoError> {
    crate::catalog::price_docs(
        conn,
        partner_prices::table
            .filter(partner_prices::partner_id.eq(tp.clone()))
            .into_boxed(),
        kind,
    )
    .await
}

/// Every product of one kind (global: no partner).
async fn docs<T: DeserializeOwned>(
    mut conn: &AsyncPgConnection,
    kind: &str,
) -> Result<Vec<T>, RepoError> {
    let rows: Vec<Doc> = catalog_products::table
        .filter(catalog_products::kind.eq(kind))
        .select((catalog_products::id, catalog_products::doc.cast::<Text>()))
        .load(&mut conn)
        .await
        .map_err(db)?;
    rows.iter().map(parse).collect()
}

/// The five global Care Services switches (a missing row reads as enabled).
async fn care_flags(mut conn: &AsyncPgConnection) -> Result<CareFlags, RepoError> {
    let rows: Vec<FlagRow> = care_service_flags::table
        .select((care_service_flags::service, care_service_flags::enabled))
        .load(&mut conn)
        .await
        .map_err(db)?;
    Ok(flags(rows))
}

#[async_trait::async_trait]
impl LinkRepo for PgStore {
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
