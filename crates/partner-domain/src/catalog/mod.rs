//! The product catalog: medical (elective-medication) products with price tiers, DNA testing
//! products, Care Services products, and partners' own prices. A product is built only by its
//! `parse`, when the operator stores it and again when its stored document is read back; links
//! and the public catalog are built from them in [`crate::links`].
//!
//! ```
//! use partner_domain::catalog::Category;
//!
//! assert_eq!(Category::parse("weight-loss"), Some(Category::WeightLoss));
//! assert_eq!(Category::parse("Weight Loss"), None);
//! assert!(Category::ALL.iter().all(|c| Category::parse(c.as_str()) == Some(*c)));
//! ```

pub mod ports;

mod service;

pub use service::{CatalogService, PutPriceError};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::kernel::ids::{ImageFileId, ProductId};
use crate::kernel::values::{CareService, Lang, Money, ValueError, text};

/// A medication catalog category (a public catalog path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    /// `weight-loss`.
    WeightLoss,
    /// `mens-health`.
    MensHealth,
    /// `womens-health`.
    WomensHealth,
    /// `hair-loss`.
    HairLoss,
    /// `wellness`.
    Wellness,
}

impl Category {
    /// Every category, in the order listings use.
    pub const ALL: [Category; 5] = [
        Self::WeightLoss,
        Self::MensHealth,
        Self::WomensHealth,
        Self::HairLoss,
        Self::Wellness,
    ];

    /// The category of its path text (`weight-loss`, …), if any.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// [`Category::parse`] of a request field: `{field} must be weight-loss, …` otherwise.
    pub fn parse_field(s: &str, field: &'static str) -> Result<Self, ValueError> {
        Self::parse(s).ok_or(ValueError::Expected {
            field,
            expected: "weight-loss, mens-health, womens-health, hair-loss or wellness",
        })
    }

    /// The category's path text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WeightLoss => "weight-loss",
            Self::MensHealth => "mens-health",
            Self::WomensHealth => "womens-health",
            Self::HairLoss => "hair-loss",
            Self::Wellness => "wellness",
        }
    }
}

/// A price tier of a medical product.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MedicalTier {
    /// The tier's key (1-32 of `a-z 0-9 _ -`), unique within the product.
    pub key: String,
    /// What the tier is called on a link.
    pub label: String,
    /// The tier's duration in months: 1, 3 or 6, one tier per duration.
    pub months: u8,
    /// The lowest price a partner may set.
    pub min_price: Money,
    /// The highest price a partner may set.
    pub max_price: Money,
    /// The price when the partner sets none.
    pub recommended_price: Money,
    /// The partner's commission on an order of this tier.
    pub commission: Money,
}

/// A medical (elective-medication) product, built only by [`MedicalProduct::parse`] (also when
/// read back from its stored document).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "MedicalProductInput")]
pub struct MedicalProduct {
    id: ProductId,
    name: String,
    categories: Vec<Category>,
    details: String,
    image_url: String,
    image_file_id: ImageFileId,
    image_source_url: String,
    active: bool,
    legacy_path: String,
    /// Set when the product is configured for self-hosted intake.
    self_hosted_slug: Option<String>,
    self_hosted_langs: Vec<Lang>,
    suggested_prices: String,
    tiers: Vec<MedicalTier>,
}

/// A medical product as the operator submits it, for [`MedicalProduct::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MedicalProductInput {
    /// The product's id.
    pub id: ProductId,
    /// Its name (1-200 characters).
    pub name: String,
    /// The catalog categories it is listed in (no duplicates).
    pub categories: Vec<Category>,
    /// A description (at most 500 characters).
    pub details: String,
    /// Its image, an absolute http(s) URL.
    pub image_url: String,
    /// The id of its image file.
    pub image_file_id: ImageFileId,
    /// Where the image came from, an absolute http(s) URL.
    pub image_source_url: String,
    /// Whether the product is offered.
    pub active: bool,
    /// The provider-hosted intake path (`{legacy_intake_url}/<legacyPath>`).
    pub legacy_path: String,
    /// Set when the product is configured for self-hosted intake.
    pub self_hosted_slug: Option<String>,
    /// The languages of the self-hosted intake.
    pub self_hosted_langs: Vec<Lang>,
    /// Free text on suggested prices (at most 200 characters).
    pub suggested_prices: String,
    /// The price tiers, at least one.
    pub tiers: Vec<MedicalTier>,
}

impl TryFrom<MedicalProductInput> for MedicalProduct {
    type Error = ValueError;

    /// Stored documents are read back through the same checks ([`MedicalProduct::parse`]).
    fn try_from(input: MedicalProductInput) -> Result<Self, ValueError> {
        Self::parse(input)
    }
}

/// A DNA testing product, built only by [`DnaProduct::parse`] (also when read back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "DnaProductInput")]
pub struct DnaProduct {
    id: ProductId,
    product_name: String,
    description: String,
    intake_path: String,
    product_image_url: String,
    minimum_price: Money,
    recommended_price: Money,
    maximum_price: Money,
    parent_product: Vec<String>,
    available: bool,
}

/// A DNA testing product as the operator submits it, for [`DnaProduct::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnaProductInput {
    /// The product's id.
    pub id: ProductId,
    /// Its name (1-200 characters).
    pub product_name: String,
    /// A description (at most 2,000 characters).
    pub description: String,
    /// The intake path of its links (`{legacy_intake_url}/<intakePath>`).
    pub intake_path: String,
    /// Its image, an absolute http(s) URL.
    pub product_image_url: String,
    /// The lowest price a partner may set.
    pub minimum_price: Money,
    /// The price when the partner sets none.
    pub recommended_price: Money,
    /// The highest price a partner may set.
    pub maximum_price: Money,
    /// The names of the products it belongs to.
    pub parent_product: Vec<String>,
    /// Whether the product is offered.
    pub available: bool,
}

impl TryFrom<DnaProductInput> for DnaProduct {
    type Error = ValueError;

    /// Stored documents are read back through the same checks ([`DnaProduct::parse`]).
    fn try_from(input: DnaProductInput) -> Result<Self, ValueError> {
        Self::parse(input)
    }
}

/// A price tier (a membership duration) of a Care Services product.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CareTier {
    /// The tier's key (1-32 of `a-z 0-9 _ -`), unique within the product.
    pub key: String,
    /// What the tier is called on a link.
    pub label: String,
    /// The membership's duration in months: 1, 3, 6 or 12, one tier per duration.
    pub months: u8,
    /// What the member pays.
    pub user_price: Money,
    /// The partner's commission on a membership of this tier.
    pub commission: Money,
}

/// A Care Services product, built only by [`CareProduct::parse`] (also when read back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "CareProductInput")]
pub struct CareProduct {
    id: ProductId,
    service: CareService,
    slug: String,
    product_name: String,
    description: String,
    image_url: String,
    tiers: Vec<CareTier>,
}

/// A Care Services product as the operator submits it, for [`CareProduct::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CareProductInput {
    /// The product's id.
    pub id: ProductId,
    /// The Care Service it belongs to.
    pub service: CareService,
    /// The path of its links (`{care_services_url}/<slug>`).
    pub slug: String,
    /// Its name (1-200 characters).
    pub product_name: String,
    /// A description (at most 2,000 characters).
    pub description: String,
    /// Its image, an absolute http(s) URL.
    pub image_url: String,
    /// The price tiers, at least one.
    pub tiers: Vec<CareTier>,
}

impl TryFrom<CareProductInput> for CareProduct {
    type Error = ValueError;

    /// Stored documents are read back through the same checks ([`CareProduct::parse`]).
    fn try_from(input: CareProductInput) -> Result<Self, ValueError> {
        Self::parse(input)
    }
}

/// A stored catalog record with its timestamps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored<T> {
    /// The record.
    pub record: T,
    /// When it was first stored.
    pub created_at: OffsetDateTime,
    /// When it was last changed.
    pub updated_at: OffsetDateTime,
}

/// An absolute http(s) URL of at most 2,048 characters, without spaces or control characters
/// (the URL parser would quietly percent-encode them). Stored in its normalized form.
pub(crate) fn parse_http_url(s: &str, field: &'static str) -> Result<String, ValueError> {
    let bad = ValueError::invalid(field, "must be an absolute http(s) URL");
    if s.len() > 2048 || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(bad);
    }
    match url::Url::parse(s) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(u.into()),
        _ => Err(bad),
    }
}

/// A relative path of 1-8 segments of `A-Z a-z 0-9 _ - .` (no `.` or `..` segments).
pub(crate) fn parse_path(s: &str, field: &'static str) -> Result<String, ValueError> {
    let s = s.trim_matches('/');
    let ok = !s.is_empty()
        && s.len() <= 200
        && s.split('/').count() <= 8
        && s.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        });
    if ok {
        Ok(s.to_owned())
    } else {
        Err(ValueError::invalid(
            field,
            "a path of A-Z a-z 0-9 _ - . segments",
        ))
    }
}

/// A tier key: 1-32 of `a-z 0-9 _ -`.
pub(crate) fn parse_key(s: &str) -> Result<String, ValueError> {
    let ok = !s.is_empty()
        && s.len() <= 32
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-".contains(&b));
    if ok {
        Ok(s.to_owned())
    } else {
        Err(ValueError::invalid(
            "tiers.key",
            "1-32 of a-z, 0-9, _ and -",
        ))
    }
}

fn unique<T: PartialEq>(
    items: impl Iterator<Item = T>,
    field: &'static str,
) -> Result<(), ValueError> {
    let mut seen = Vec::new();
    for i in items {
        if seen.contains(&i) {
            return Err(ValueError::invalid(field, "must be unique"));
        }
        seen.push(i);
    }
    Ok(())
}

impl MedicalProduct {
    /// The product's id.
    #[must_use]
    pub fn id(&self) -> ProductId {
        self.id
    }

    /// Its name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The catalog categories it is listed in.
    #[must_use]
    pub fn categories(&self) -> &[Category] {
        &self.categories
    }

    /// Its description.
    #[must_use]
    pub fn details(&self) -> &str {
        &self.details
    }

    /// Its image URL.
    #[must_use]
    pub fn image_url(&self) -> &str {
        &self.image_url
    }

    /// The id of its image file.
    #[must_use]
    pub fn image_file_id(&self) -> ImageFileId {
        self.image_file_id
    }

    /// Where its image came from.
    #[must_use]
    pub fn image_source_url(&self) -> &str {
        &self.image_source_url
    }

    /// Whether it is offered.
    #[must_use]
    pub fn active(&self) -> bool {
        self.active
    }

    /// Its provider-hosted intake path.
    #[must_use]
    pub fn legacy_path(&self) -> &str {
        &self.legacy_path
    }

    /// Its self-hosted intake slug, when configured for it.
    #[must_use]
    pub fn self_hosted_slug(&self) -> Option<&str> {
        self.self_hosted_slug.as_deref()
    }

    /// The languages of its self-hosted intake.
    #[must_use]
    pub fn self_hosted_langs(&self) -> &[Lang] {
        &self.self_hosted_langs
    }

    /// Free text on suggested prices.
    #[must_use]
    pub fn suggested_prices(&self) -> &str {
        &self.suggested_prices
    }

    /// Its price tiers.
    #[must_use]
    pub fn tiers(&self) -> &[MedicalTier] {
        &self.tiers
    }

    /// The order every listing of medical products uses: by name, then id.
    pub fn sort(products: &mut [Self]) {
        products.sort_by(|a, b| (&a.name, a.id).cmp(&(&b.name, b.id)));
    }

    /// Checks every field and the rules across them: tier months 1, 3 or 6, one tier per
    /// duration, unique keys, `minPrice <= recommendedPrice <= maxPrice`.
    pub fn parse(input: MedicalProductInput) -> Result<Self, ValueError> {
        let MedicalProductInput {
            id,
            name,
            categories,
            details,
            image_url,
            image_file_id,
            image_source_url,
            active,
            legacy_path,
            self_hosted_slug,
            self_hosted_langs,
            suggested_prices,
            tiers,
        } = input;
        let mut p = Self {
            id,
            name,
            categories,
            details,
            image_url,
            image_file_id,
            image_source_url,
            active,
            legacy_path,
            self_hosted_slug,
            self_hosted_langs,
            suggested_prices,
            tiers,
        };
        p.name = text("name", &p.name, 1, 200)?;
        p.details = text("details", &p.details, 0, 500)?;
        p.suggested_prices = text("suggestedPrices", &p.suggested_prices, 0, 200)?;
        p.image_url = parse_http_url(&p.image_url, "imageUrl")?;
        p.image_source_url = parse_http_url(&p.image_source_url, "imageSourceUrl")?;
        p.legacy_path = parse_path(&p.legacy_path, "legacyPath")?;
        p.self_hosted_slug = p
            .self_hosted_slug
            .as_deref()
            .map(|s| parse_path(s, "selfHostedSlug"))
            .transpose()?;
        unique(p.categories.iter(), "categories")?;
        unique(p.self_hosted_langs.iter(), "selfHostedLangs")?;
        if p.tiers.is_empty() {
            return Err(ValueError::Missing("tiers"));
        }
        for t in &mut p.tiers {
            t.key = parse_key(&t.key)?;
            t.label = text("tiers.label", &t.label, 1, 100)?;
            if ![1, 3, 6].contains(&t.months) {
                return Err(ValueError::invalid("tiers.months", "must be 1, 3 or 6"));
            }
            if !(t.min_price <= t.recommended_price && t.recommended_price <= t.max_price) {
                return Err(ValueError::invalid(
                    "tiers",
                    "minPrice <= recommendedPrice <= maxPrice",
                ));
            }
        }
        unique(p.tiers.iter().map(|t| &t.key), "tiers.key")?;
        unique(p.tiers.iter().map(|t| t.months), "tiers.months")?;
        Ok(p)
    }

    /// The partner's price for `tier`: its own, else the recommended one.
    pub fn price(
        &self,
        tier: &MedicalTier,
        partner_prices: Option<&BTreeMap<String, Money>>,
    ) -> Money {
        partner_prices
            .and_then(|p| p.get(&tier.key))
            .copied()
            .unwrap_or(tier.recommended_price)
    }

    /// Checks a partner's tier prices: known keys, each within its tier's min and max.
    pub(crate) fn check_prices(&self, prices: &BTreeMap<String, Money>) -> Result<(), ValueError> {
        for (key, price) in prices {
            let tier = self
                .tiers
                .iter()
                .find(|t| &t.key == key)
                .ok_or(ValueError::invalid(
                    "tierPrices",
                    "names a tier the product does not have",
                ))?;
            if *price < tier.min_price || *price > tier.max_price {
                return Err(ValueError::invalid(
                    "tierPrices",
                    "each price must be within its tier's minPrice and maxPrice",
                ));
            }
        }
        Ok(())
    }
}

impl DnaProduct {
    /// The product's id.
    #[must_use]
    pub fn id(&self) -> ProductId {
        self.id
    }

    /// Its name.
    #[must_use]
    pub fn product_name(&self) -> &str {
        &self.product_name
    }

    /// Its description.
    #[must_use]
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The intake path of its links.
    #[must_use]
    pub fn intake_path(&self) -> &str {
        &self.intake_path
    }

    /// Its image URL.
    #[must_use]
    pub fn product_image_url(&self) -> &str {
        &self.product_image_url
    }

    /// The lowest price a partner may set.
    #[must_use]
    pub fn minimum_price(&self) -> Money {
        self.minimum_price
    }

    /// The price when the partner sets none.
    #[must_use]
    pub fn recommended_price(&self) -> Money {
        self.recommended_price
    }

    /// The highest price a partner may set.
    #[must_use]
    pub fn maximum_price(&self) -> Money {
        self.maximum_price
    }

    /// The names of the products it belongs to.
    #[must_use]
    pub fn parent_product(&self) -> &[String] {
        &self.parent_product
    }

    /// Whether it is offered.
    #[must_use]
    pub fn available(&self) -> bool {
        self.available
    }

    /// The order every listing of DNA products uses: by product name, then id.
    pub fn sort(products: &mut [Self]) {
        products.sort_by(|a, b| (&a.product_name, a.id).cmp(&(&b.product_name, b.id)));
    }

    /// Checks every field and `minimumPrice <= recommendedPrice <= maximumPrice`.
    pub fn parse(input: DnaProductInput) -> Result<Self, ValueError> {
        let DnaProductInput {
            id,
            product_name,
            description,
            intake_path,
            product_image_url,
            minimum_price,
            recommended_price,
            maximum_price,
            parent_product,
            available,
        } = input;
        let mut p = Self {
            id,
            product_name,
            description,
            intake_path,
            product_image_url,
            minimum_price,
            recommended_price,
            maximum_price,
            parent_product,
            available,
        };
        p.product_name = text("productName", &p.product_name, 1, 200)?;
        p.description = text("description", &p.description, 0, 2000)?;
        p.intake_path = parse_path(&p.intake_path, "intakePath")?;
        p.product_image_url = parse_http_url(&p.product_image_url, "productImageUrl")?;
        if !(p.minimum_price <= p.recommended_price && p.recommended_price <= p.maximum_price) {
            return Err(ValueError::invalid(
                "recommendedPrice",
                "minimumPrice <= recommendedPrice <= maximumPrice",
            ));
        }
        p.parent_product = p
            .parent_product
            .iter()
            .map(|p| text("parentProduct", p, 1, 200))
            .collect::<Result<_, _>>()?;
        Ok(p)
    }

    /// Checks a partner's price: within the product's minimum and maximum.
    pub(crate) fn check_price(&self, price: Money) -> Result<(), ValueError> {
        if price < self.minimum_price || price > self.maximum_price {
            return Err(ValueError::invalid(
                "userSetPrice",
                "must be within minimumPrice and maximumPrice",
            ));
        }
        Ok(())
    }
}

impl CareProduct {
    /// The product's id.
    #[must_use]
    pub fn id(&self) -> ProductId {
        self.id
    }

    /// The Care Service it belongs to.
    #[must_use]
    pub fn service(&self) -> CareService {
        self.service
    }

    /// The path of its links.
    #[must_use]
    pub fn slug(&self) -> &str {
        &self.slug
    }

    /// Its name.
    #[must_use]
    pub fn product_name(&self) -> &str {
        &self.product_name
    }

    /// Its description.
    #[must_use]
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Its image URL.
    #[must_use]
    pub fn image_url(&self) -> &str {
        &self.image_url
    }

    /// Its price tiers.
    #[must_use]
    pub fn tiers(&self) -> &[CareTier] {
        &self.tiers
    }

    /// The order every listing of Care Services products uses: by service, product name, id.
    pub fn sort(products: &mut [Self]) {
        products.sort_by(|a, b| {
            (a.service, &a.product_name, a.id).cmp(&(b.service, &b.product_name, b.id))
        });
    }

    /// Checks every field and the tiers: months 1, 3, 6 or 12, one tier per duration, unique
    /// keys.
    pub fn parse(input: CareProductInput) -> Result<Self, ValueError> {
        let CareProductInput {
            id,
            service,
            slug,
            product_name,
            description,
            image_url,
            tiers,
        } = input;
        let mut p = Self {
            id,
            service,
            slug,
            product_name,
            description,
            image_url,
            tiers,
        };
        p.product_name = text("productName", &p.product_name, 1, 200)?;
        p.description = text("description", &p.description, 0, 2000)?;
        p.image_url = parse_http_url(&p.image_url, "imageUrl")?;
        p.slug = parse_path(&p.slug, "slug")?;
        if p.tiers.is_empty() {
            return Err(ValueError::Missing("tiers"));
        }
        for t in &mut p.tiers {
            t.key = parse_key(&t.key)?;
            t.label = text("tiers.label", &t.label, 1, 100)?;
            if ![1, 3, 6, 12].contains(&t.months) {
                return Err(ValueError::invalid("tiers.months", "must be 1, 3, 6 or 12"));
            }
        }
        unique(p.tiers.iter().map(|t| &t.key), "tiers.key")?;
        unique(p.tiers.iter().map(|t| t.months), "tiers.months")?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths() {
        assert_eq!(
            parse_http_url("https://img.test/a.png", "f"),
            Ok("https://img.test/a.png".into())
        );
        assert_eq!(
            parse_http_url("HTTPS://IMG.test", "f"),
            Ok("https://img.test/".into())
        );
        for bad in [
            "https://img.test/\u{0}",
            "https://img.test/a b",
            "javascript:alert(1)",
            "ftp://x.test",
            "/relative",
            "https://",
        ] {
            assert!(parse_http_url(bad, "f").is_err(), "{bad:?}");
        }
        assert_eq!(parse_path("/a/b.c/", "f"), Ok("a/b.c".into()));
        for bad in ["", "../x", "a/./b", "a//b", "a b", "a\u{0}", "%2e%2e"] {
            assert!(parse_path(bad, "f").is_err(), "{bad:?}");
        }
    }
}
