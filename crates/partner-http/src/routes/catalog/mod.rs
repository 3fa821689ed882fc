//! The product catalog: the public listing under `{catalog_url}/api/<category>` (no token,
//! attribution by `partner_id`) and the operator's writes of products and partners' prices.

use std::collections::BTreeMap;

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{Error, HttpRequest, HttpResponse, web};
use partner_domain::catalog::{
    CareProductInput, CareTier, Category, DnaProductInput, MedicalProductInput, MedicalTier, Stored,
};
use partner_domain::kernel::ids::{ImageFileId, ProductId, parse_uuid};
use partner_domain::kernel::values::{CareService, Lang, Money, PartnerId, ValueError};
use partner_domain::links::attribution::Attribution;
use serde::{Deserialize, Serialize};

use super::{Result, data, ok};
use crate::AppState;
use crate::extract::{JsonBody, Query};

mod out;

pub(crate) use out::{
    CareProductOut, CatalogBody, CatalogProductOut, DnaPriceOut, DnaProductOut, MedicalPricesOut,
    MedicalProductOut,
};

/// Public: no token. `all-products` lists every category.
#[utoipa::path(
    get, path = "/api/{category}", tag = "catalog", security(()),
    params(
        ("category" = String, Path, description = "`weight-loss`, `mens-health`, `womens-health`, `hair-loss`, `wellness` or `all-products`",
            pattern = "^(weight-loss|mens-health|womens-health|hair-loss|wellness|all-products)$"),
        ("partner_id" = String, Query, description = "The partner the links are attributed to, or a sub-account attribution code `<partnerId>.<subId>` (`acme.7`) as its links carry"),
    ),
    responses(
        (status = 200, description = "The partner's products", body = CatalogBody),
        (status = 400, description = "`partner_id` is missing or malformed", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No active partner has that `partner_id`", body = crate::routes::schemas::ErrorBody),
        (status = 429, description = "Over the public budget of this client address (`PARTNER_PUBLIC_RATE` a second, bursts up to twice that, shared by the catalog and the embedded view); `Retry-After` says when to retry", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn list(
    state: web::Data<AppState>,
    req: HttpRequest,
    category: Option<Category>,
) -> Result {
    let q = Query::of(&req)?;
    let raw = q
        .get("partner_id")
        .filter(|p| !p.is_empty())
        .ok_or(ValueError::Missing("partner_id"))?;
    let attribution = Attribution::parse(raw).map_err(|e| e.named("partner_id"))?;
    let products = state.links.catalog(&attribution, category).await?;
    Ok(HttpResponse::Ok().json(CatalogBody {
        count: products.len(),
        products: products.iter().map(CatalogProductOut::from).collect(),
    }))
}

/// The catalog's CORS preflight, documented (extensions §6: every answer is in the document).
/// [`headers`] answers every `OPTIONS` itself, before the public budget is charged, so this
/// route only gives the documented operation a mounted home; it answers the same.
#[utoipa::path(
    options, path = "/api/{category}", tag = "catalog", security(()),
    params(
        ("category" = String, Path, description = "`weight-loss`, `mens-health`, `womens-health`, `hair-loss`, `wellness` or `all-products`",
            pattern = "^(weight-loss|mens-health|womens-health|hair-loss|wellness|all-products)$"),
    ),
    responses(
        (status = 204, description = "CORS preflight (`rulings.md`): no body; the caching and CORS headers of every catalog answer, whatever `partner_id` says"),
        (status = 404, description = "No such category", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn preflight() -> HttpResponse {
    HttpResponse::NoContent().finish()
}

/// `OPTIONS` answers 204; every answer gets the caching and CORS headers.
pub(super) async fn headers(
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> std::result::Result<ServiceResponse<BoxBody>, Error> {
    let mut res = if req.method() == Method::OPTIONS {
        req.into_response(HttpResponse::build(StatusCode::NO_CONTENT).finish())
    } else {
        next.call(req).await?
    };
    let h = res.headers_mut();
    for (name, value) in [
        (
            "cache-control",
            "no-store, no-cache, must-revalidate, proxy-revalidate",
        ),
        ("cdn-cache-control", "no-store"),
        ("access-control-allow-origin", "*"),
        ("access-control-allow-methods", "GET, OPTIONS"),
        ("access-control-allow-headers", "Content-Type"),
    ] {
        h.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    if !h.contains_key(header::CONTENT_TYPE) && res.status() != StatusCode::NO_CONTENT {
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    Ok(res)
}

/// `{ data }` of a stored product: 201 when the put created it, else 200.
fn stored<'a, T: 'a, O: Serialize + From<&'a Stored<T>>>(
    (record, created): &'a (Stored<T>, bool),
) -> actix_web::HttpResponse {
    data(
        if *created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        O::from(record),
    )
}

fn money(v: f64, field: &'static str) -> std::result::Result<Money, ValueError> {
    Money::parse(v, field)
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = MedicalTierInput)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct MedicalTierBody {
    key: String,
    label: String,
    months: u8,
    min_price: f64,
    max_price: f64,
    recommended_price: f64,
    commission: f64,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = MedicalProductInput)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct MedicalBody {
    name: String,
    categories: Vec<String>,
    details: String,
    image_url: String,
    image_file_id: String,
    image_source_url: String,
    active: bool,
    legacy_path: String,
    self_hosted_slug: Option<String>,
    self_hosted_langs: Vec<String>,
    suggested_prices: String,
    tiers: Vec<MedicalTierBody>,
}

#[utoipa::path(
    put, path = "/internal/v1/medical-products/{id}", tag = "catalog", request_body = MedicalBody,
    params(
        ("id" = String, Path, description = "The product's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "Updated", body = crate::routes::schemas::MedicalProductData),
        (status = 201, description = "Created", body = crate::routes::schemas::MedicalProductData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn put_medical(
    state: web::Data<AppState>,
    path: web::Path<String>,
    JsonBody(b): JsonBody<MedicalBody>,
) -> Result {
    let product = b.parse(product_id(&path)?)?;
    Ok(stored::<_, MedicalProductOut>(
        &state.catalog.put_medical(product).await?,
    ))
}

/// The product id of a path.
fn product_id(s: &str) -> std::result::Result<ProductId, ValueError> {
    Ok(ProductId::from_uuid(parse_uuid(s, "product id")?))
}

impl TryFrom<MedicalTierBody> for MedicalTier {
    type Error = ValueError;

    fn try_from(t: MedicalTierBody) -> std::result::Result<Self, ValueError> {
        Ok(Self {
            key: t.key,
            label: t.label,
            months: t.months,
            min_price: money(t.min_price, "tiers.minPrice")?,
            max_price: money(t.max_price, "tiers.maxPrice")?,
            recommended_price: money(t.recommended_price, "tiers.recommendedPrice")?,
            commission: money(t.commission, "tiers.commission")?,
        })
    }
}

impl MedicalBody {
    /// The product `id` as submitted; every refusal is the domain's.
    fn parse(self, id: ProductId) -> std::result::Result<MedicalProductInput, ValueError> {
        Ok(MedicalProductInput {
            id,
            name: self.name,
            categories: self
                .categories
                .iter()
                .map(|c| Category::parse_field(c, "categories entries"))
                .collect::<std::result::Result<_, _>>()?,
            details: self.details,
            image_url: self.image_url,
            image_file_id: ImageFileId::from_uuid(parse_uuid(&self.image_file_id, "imageFileId")?),
            image_source_url: self.image_source_url,
            active: self.active,
            legacy_path: self.legacy_path,
            self_hosted_slug: self.self_hosted_slug,
            self_hosted_langs: self
                .self_hosted_langs
                .iter()
                .map(|l| Lang::parse_field(l, "selfHostedLangs entries"))
                .collect::<std::result::Result<_, _>>()?,
            suggested_prices: self.suggested_prices,
            tiers: self
                .tiers
                .into_iter()
                .map(MedicalTier::try_from)
                .collect::<std::result::Result<_, _>>()?,
        })
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = DnaProductInput)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct DnaBody {
    product_name: String,
    description: String,
    intake_path: String,
    product_image_url: String,
    minimum_price: f64,
    recommended_price: f64,
    maximum_price: f64,
    parent_product: Vec<String>,
    available: bool,
}

#[utoipa::path(
    put, path = "/internal/v1/dna-products/{id}", tag = "catalog", request_body = DnaBody,
    params(
        ("id" = String, Path, description = "The product's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "Updated", body = crate::routes::schemas::DnaProductData),
        (status = 201, description = "Created", body = crate::routes::schemas::DnaProductData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn put_dna(
    state: web::Data<AppState>,
    path: web::Path<String>,
    JsonBody(b): JsonBody<DnaBody>,
) -> Result {
    let product = b.parse(product_id(&path)?)?;
    Ok(stored::<_, DnaProductOut>(
        &state.catalog.put_dna(product).await?,
    ))
}

impl DnaBody {
    /// The product `id` as submitted; every refusal is the domain's.
    fn parse(self, id: ProductId) -> std::result::Result<DnaProductInput, ValueError> {
        Ok(DnaProductInput {
            id,
            product_name: self.product_name,
            description: self.description,
            intake_path: self.intake_path,
            product_image_url: self.product_image_url,
            minimum_price: money(self.minimum_price, "minimumPrice")?,
            recommended_price: money(self.recommended_price, "recommendedPrice")?,
            maximum_price: money(self.maximum_price, "maximumPrice")?,
            parent_product: self.parent_product,
            available: self.available,
        })
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = CareTierInput)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct CareTierBody {
    key: String,
    label: String,
    months: u8,
    user_price: f64,
    commission: f64,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = CareProductInput)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct CareBody {
    service: String,
    slug: String,
    product_name: String,
    description: String,
    image_url: String,
    tiers: Vec<CareTierBody>,
}

#[utoipa::path(
    put, path = "/internal/v1/care-service-products/{id}", tag = "catalog", request_body = CareBody,
    params(
        ("id" = String, Path, description = "The product's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "Updated", body = crate::routes::schemas::CareProductData),
        (status = 201, description = "Created", body = crate::routes::schemas::CareProductData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn put_care(
    state: web::Data<AppState>,
    path: web::Path<String>,
    JsonBody(b): JsonBody<CareBody>,
) -> Result {
    let product = b.parse(product_id(&path)?)?;
    Ok(stored::<_, CareProductOut>(
        &state.catalog.put_care(product).await?,
    ))
}

impl TryFrom<CareTierBody> for CareTier {
    type Error = ValueError;

    fn try_from(t: CareTierBody) -> std::result::Result<Self, ValueError> {
        Ok(Self {
            key: t.key,
            label: t.label,
            months: t.months,
            user_price: money(t.user_price, "tiers.userPrice")?,
            commission: money(t.commission, "tiers.commission")?,
        })
    }
}

impl CareBody {
    /// The product `id` as submitted; every refusal is the domain's.
    fn parse(self, id: ProductId) -> std::result::Result<CareProductInput, ValueError> {
        Ok(CareProductInput {
            id,
            service: CareService::parse_field(&self.service, "service")?,
            slug: self.slug,
            product_name: self.product_name,
            description: self.description,
            image_url: self.image_url,
            tiers: self
                .tiers
                .into_iter()
                .map(CareTier::try_from)
                .collect::<std::result::Result<_, _>>()?,
        })
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = MedicalPricesInput)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct MedicalPricesBody {
    tier_prices: BTreeMap<String, f64>,
}

impl TryFrom<MedicalPricesBody> for BTreeMap<String, Money> {
    type Error = ValueError;

    fn try_from(b: MedicalPricesBody) -> std::result::Result<Self, ValueError> {
        b.tier_prices
            .into_iter()
            .map(|(k, v)| Ok((k, money(v, "tierPrices")?)))
            .collect()
    }
}

#[utoipa::path(
    put, path = "/internal/v1/partners/{partner_id}/medical-prices/{product_id}", tag = "catalog", request_body = MedicalPricesBody,
    params(
        ("partner_id" = String, Path, description = "The partner's id"),
        ("product_id" = String, Path, description = "The product's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "The partner's tier prices", body = crate::routes::schemas::MedicalPricesData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`, or no product with that id", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn put_medical_prices(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    JsonBody(b): JsonBody<MedicalPricesBody>,
) -> Result {
    let partner = PartnerId::parse(&path.0)?;
    let product = product_id(&path.1)?;
    let prices = BTreeMap::try_from(b)?;
    state
        .catalog
        .put_medical_prices(&partner, product, prices.clone())
        .await?;
    Ok(ok(MedicalPricesOut {
        partner_id: &partner,
        product_id: product,
        tier_prices: &prices,
    }))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = DnaPriceInput)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct DnaPriceBody {
    user_set_price: f64,
}

#[utoipa::path(
    put, path = "/internal/v1/partners/{partner_id}/dna-prices/{product_id}", tag = "catalog", request_body = DnaPriceBody,
    params(
        ("partner_id" = String, Path, description = "The partner's id"),
        ("product_id" = String, Path, description = "The product's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "The partner's price", body = crate::routes::schemas::DnaPriceData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`, or no product with that id", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn put_dna_price(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    JsonBody(b): JsonBody<DnaPriceBody>,
) -> Result {
    let partner = PartnerId::parse(&path.0)?;
    let product = product_id(&path.1)?;
    let price = money(b.user_set_price, "userSetPrice")?;
    state
        .catalog
        .put_dna_price(&partner, product, price)
        .await?;
    Ok(ok(DnaPriceOut {
        partner_id: &partner,
        product_id: product,
        user_set_price: price,
    }))
}
