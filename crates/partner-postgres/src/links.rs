//! What a partner's links are built from, read for a token: every statement is pipelined with
//! the token lookup on one connection (one round trip), and those reading the partner's rows take
//! the partner from the token in SQL ([`TokenPartner`]).

use std::collections::BTreeMap;

use diesel::prelude::*;
use diesel::sql_types::{Bytea, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures_util::future::{try_join4, try_join5};
use partner_domain::RepoError;
use partner_domain::account::{CareFlags, Partner};
use partner_domain::auth::{Sealed, TokenKey};
use partner_domain::links::{CareLinkInputs, DnaLinkInputs, MedicalLinkInputs};
use partner_domain::values::{CareService, SubId};
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::accounts::PartnerRow;
use crate::schema::{care_service_flags, partners, sub_accounts};
use crate::tokens::{self, TokenPartner};
use crate::{PgStore, corrupt, db};

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
            flags(&conn),
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
    mut conn: &AsyncPgConnection,
    tp: &TokenPartner,
    kind: &str,
) -> Result<BTreeMap<Uuid, T>, RepoError> {
    let (hash, now) = tp.binds();
    let rows: Vec<Doc> = crate::Prepared(
        diesel::sql_query(format!(
            "SELECT product_id AS id, doc::text AS doc FROM partner_prices \
             WHERE partner_id = {} AND kind = $3",
            TokenPartner::sql(1, 2)
        ))
        .bind::<Bytea, _>(hash)
        .bind::<Timestamptz, _>(now)
        .bind::<Text, _>(kind),
    )
    .load(&mut conn)
    .await
    .map_err(db)?;
    rows.iter().map(|d| Ok((d.id, parse(d)?))).collect()
}

/// Every product of one kind (global: no partner).
async fn docs<T: DeserializeOwned>(
    mut conn: &AsyncPgConnection,
    kind: &str,
) -> Result<Vec<T>, RepoError> {
    let rows: Vec<Doc> = crate::Prepared(
        diesel::sql_query("SELECT id, doc::text AS doc FROM catalog_products WHERE kind = $1")
            .bind::<Text, _>(kind),
    )
    .load(&mut conn)
    .await
    .map_err(db)?;
    rows.iter().map(parse).collect()
}

/// The five global Care Services switches (a missing row reads as enabled).
async fn flags(mut conn: &AsyncPgConnection) -> Result<CareFlags, RepoError> {
    let rows: Vec<(String, bool)> = care_service_flags::table
        .select((care_service_flags::service, care_service_flags::enabled))
        .load(&mut conn)
        .await
        .map_err(db)?;
    let mut flags = CareFlags::default();
    for (service, on) in rows {
        if let Some(s) = CareService::parse(&service) {
            flags.set(s, on);
        }
    }
    Ok(flags)
}
