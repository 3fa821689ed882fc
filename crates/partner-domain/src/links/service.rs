//! The link service: every link listing and the public catalog, built from the stored catalog.

use std::sync::Arc;

use crate::account::Partner;
use crate::account::auth::{Sealed, TokenKey};
use crate::catalog::ports::CatalogRepo;
use crate::catalog::{CareProduct, Category, DnaProduct, MedicalProduct};
use crate::kernel::error::RepoError;
use crate::kernel::values::{PartnerId, SubId};
use crate::links::attribution::Attribution;
use crate::links::ports::{LinkPartners, LinkRepo};
use crate::links::{
    CareEmbed, CareLinkInputs, CareQuery, CareServiceLink, CatalogProduct, DnaLinkInputs,
    DnaProductLink, LinkBases, LinkSettings, MedicalLinkInputs, PartnerProductLink, care_link,
    catalog_product, dna_link, embed_lang, embed_langs, medical_link,
};

/// Errors of the partner link listings.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The `sub` names none of the partner's sub-accounts (400).
    #[error("sub must name an existing sub-account (1-250) of this account")]
    UnknownSub,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// The partner read for an authenticated token: it must be there, and be the authenticated one
/// (the statements took it from the token; this keeps a faulty adapter honest).
fn read_for(partner: &PartnerId, read: Option<Partner>) -> Result<Partner, RepoError> {
    match read {
        Some(p) if p.partner_id() == partner => Ok(p),
        Some(_) => Err(RepoError::new(
            "links read for a token held another partner",
        )),
        None => Err(RepoError::new("authenticated partner vanished")),
    }
}

/// Errors of the public catalog.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// No active partner has that `partner_id` (404).
    #[error("no active partner has that partner_id")]
    UnknownPartner,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Builds every link listing and the public catalog from the stored catalog.
#[derive(Debug, Clone)]
pub struct LinkService {
    reads: Arc<dyn LinkRepo>,
    catalog: Arc<dyn CatalogRepo>,
    partners: Arc<dyn LinkPartners>,
    bases: LinkBases,
}

impl LinkService {
    /// The service over the link reads, the catalog, the partners as the public surfaces read
    /// them (a partner, the Care Services switches) and the configured bases.
    pub fn new(
        reads: Arc<dyn LinkRepo>,
        catalog: Arc<dyn CatalogRepo>,
        partners: Arc<dyn LinkPartners>,
        bases: LinkBases,
    ) -> Self {
        Self {
            reads,
            catalog,
            partners,
            bases,
        }
    }

    /// What the partner's DNA links are built from (the partner, its DNA prices, every DNA
    /// product), for the partner of the token of `key`, read with the token's record in one
    /// round trip and sealed until authentication passes; then [`Self::dna_links_from`] builds
    /// the links. Callers MUST first refuse a principal without
    /// [`crate::account::auth::Principal::may_use_dna_links`] (403 [`crate::links::DNA_DISABLED`]); the HTTP layer does,
    /// before the rate limit, where the contract orders account-state checks.
    pub async fn dna_links_for_token(
        &self,
        key: TokenKey,
    ) -> Result<Sealed<DnaLinkInputs>, RepoError> {
        self.reads.dna_links_for_token(key).await
    }

    /// The DNA links of `partner` (the authenticated one) from what was read for its token.
    pub fn dna_links_from(
        &self,
        partner: &PartnerId,
        inputs: DnaLinkInputs,
    ) -> Result<Vec<DnaProductLink>, LinkError> {
        let DnaLinkInputs {
            partner: p,
            prices,
            mut products,
        } = inputs;
        let p = LinkSettings::from(&read_for(partner, p)?);
        DnaProduct::sort(&mut products);
        Ok(products
            .iter()
            .filter_map(|d| dna_link(&self.bases, &p, d, prices.get(&d.id()).copied()))
            .collect())
    }

    /// What the links of every active medical product are built from (with `sub`'s check), for
    /// the partner of the token of `key`, read with the token's record in one round trip and
    /// sealed until authentication passes; then [`Self::medical_links_from`] builds the links.
    pub async fn medical_links_for_token(
        &self,
        key: TokenKey,
        sub: Option<SubId>,
    ) -> Result<Sealed<MedicalLinkInputs>, RepoError> {
        self.reads.medical_links_for_token(key, sub).await
    }

    /// The links of every active medical product of `partner` (the authenticated one) from what
    /// was read for its
    /// token: 400 for a `sub` that names none of its sub-accounts.
    pub fn medical_links_from(
        &self,
        partner: &PartnerId,
        inputs: MedicalLinkInputs,
        sub: Option<SubId>,
        lang: Option<&str>,
    ) -> Result<Vec<PartnerProductLink>, LinkError> {
        let MedicalLinkInputs {
            sub_exists,
            partner: p,
            prices,
            mut products,
        } = inputs;
        if !sub_exists {
            return Err(LinkError::UnknownSub);
        }
        let p = LinkSettings::from(&read_for(partner, p)?);
        MedicalProduct::sort(&mut products);
        Ok(products
            .iter()
            .filter(|m| m.active())
            .map(|m| medical_link(&self.bases, &p, m, prices.get(&m.id()), sub, lang))
            .collect())
    }

    /// What the links of the Care Services products the partner can access are built from (with
    /// `q.sub`'s check), for the partner of the token of
    /// `key`, read with the token's record in one round trip and sealed until authentication
    /// passes; then [`Self::care_links_from`] builds the links.
    pub async fn care_links_for_token(
        &self,
        key: TokenKey,
        sub: Option<SubId>,
    ) -> Result<Sealed<CareLinkInputs>, RepoError> {
        self.reads.care_links_for_token(key, sub).await
    }

    /// The Care Services links `partner` (the authenticated one) can access, from what was read
    /// for its
    /// token: 400 for a `sub` that names none of its sub-accounts.
    pub fn care_links_from(
        &self,
        partner: &PartnerId,
        inputs: CareLinkInputs,
        q: &CareQuery,
    ) -> Result<Vec<CareServiceLink>, LinkError> {
        let CareLinkInputs {
            sub_exists,
            partner: p,
            flags,
            mut products,
        } = inputs;
        if !sub_exists {
            return Err(LinkError::UnknownSub);
        }
        let p = LinkSettings::from(&read_for(partner, p)?);
        CareProduct::sort(&mut products);
        Ok(products
            .iter()
            .filter(|c| q.service.is_none_or(|s| s == c.service()))
            .filter_map(|c| care_link(&self.bases, &p, &flags, c, q))
            .collect())
    }

    /// The Care Services links `p` can access now, filtered by `q.service` (and `q.duration`).
    async fn accessible_care_links(
        &self,
        p: &LinkSettings,
        q: &CareQuery,
    ) -> Result<Vec<CareServiceLink>, RepoError> {
        let flags = self.partners.care_flags().await?;
        let mut products = self.catalog.care_products().await?;
        CareProduct::sort(&mut products);
        Ok(products
            .iter()
            .filter(|c| q.service.is_none_or(|s| s == c.service()))
            .filter_map(|c| care_link(&self.bases, p, &flags, c, q))
            .collect())
    }

    /// The partner when it exists and is active (the public surfaces serve no one else).
    async fn active_partner(&self, id: &PartnerId) -> Result<Partner, CatalogError> {
        match self.partners.partner(id).await? {
            Some(p) if p.settings().active() => Ok(p),
            _ => Err(CatalogError::UnknownPartner),
        }
    }

    /// The embedded Care Services view's links: public (no token), for an active partner, with
    /// the same access rule and link builder as the partners' Care Services links. `sub` is a
    /// tracking parameter of a shared URL here, so only its shape was checked.
    pub async fn care_embed(
        &self,
        partner_id: &PartnerId,
        q: &CareQuery,
    ) -> Result<CareEmbed, CatalogError> {
        let p = self.active_partner(partner_id).await?;
        let settings = LinkSettings::from(&p);
        let links = self.accessible_care_links(&settings, q).await?;
        Ok(CareEmbed {
            partner_name: p.settings().name().to_owned(),
            lang: embed_lang(q.lang.as_deref(), &settings),
            langs: embed_langs(&settings),
            links,
        })
    }

    /// The public catalog of one category (or all) for an active partner. A sub-account code as
    /// `partner_id` is carried into every `intakeUrl`.
    pub async fn catalog(
        &self,
        attribution: &Attribution,
        category: Option<Category>,
    ) -> Result<Vec<CatalogProduct>, CatalogError> {
        let partner_id = &attribution.partner_id;
        let p = LinkSettings::from(&self.active_partner(partner_id).await?);
        let prices = self.catalog.medical_prices(partner_id).await?;
        let mut products = self.catalog.medical_products().await?;
        MedicalProduct::sort(&mut products);
        Ok(products
            .iter()
            .filter(|m| m.active() && category.is_none_or(|c| m.categories().contains(&c)))
            .map(|m| catalog_product(&self.bases, &p, m, prices.get(&m.id()), attribution.sub_id))
            .collect())
    }
}
