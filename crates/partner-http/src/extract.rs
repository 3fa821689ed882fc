//! Request parsing into plain structs, with every failure mapped to the spec's 400/413 body.
//! Parsing happens inside handlers (after authentication and rate limiting), which keeps the
//! contract's order of checks.

use std::future::Future;
use std::pin::Pin;

use actix_web::web::Bytes;
use actix_web::{FromRequest, HttpRequest, dev::Payload};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Largest accepted request body.
pub const MAX_BODY: usize = 1 << 20;

/// A JSON request body. Over 1 MiB: 413; empty, malformed, wrong types or unknown fields: 400.
/// The `Content-Type` is not checked: a body is JSON by contract.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

/// Like [`JsonBody`], but an empty body means `T::default()`.
#[derive(Debug)]
pub struct OptionalJsonBody<T>(pub T);

fn read(
    req: &HttpRequest,
    payload: &mut Payload,
) -> impl Future<Output = Result<Bytes, ApiError>> + use<> {
    let fut = Bytes::from_request(req, payload);
    async move {
        fut.await.map_err(|e| {
            if e.as_response_error().status_code() == actix_web::http::StatusCode::PAYLOAD_TOO_LARGE
            {
                ApiError::too_large()
            } else {
                ApiError::invalid("the request body could not be read")
            }
        })
    }
}

fn parse<T: DeserializeOwned + utoipa::PartialSchema>(bytes: &[u8]) -> Result<T, ApiError> {
    // Every body of this API is an object; serde would otherwise accept a struct as an array.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::invalid("the request body must be a JSON object"));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        // serde stops at the first missing field; name them all, from the body's own schema
        // (the document's `required` list), so a caller fixes its body in one try.
        if e.to_string().starts_with("missing field")
            && let Some(missing) = missing_fields::<T>(bytes)
        {
            return ApiError::invalid(format!("invalid JSON body: missing fields {missing}"));
        }
        ApiError::invalid(format!("invalid JSON body: {}", clip(&e.to_string())))
    })
}

/// The required fields of `T`'s schema absent from the object `bytes`, as `` `a`, `b` ``; `None`
/// when none (or the schema lists none).
fn missing_fields<T: utoipa::PartialSchema>(bytes: &[u8]) -> Option<String> {
    let utoipa::openapi::RefOr::T(utoipa::openapi::schema::Schema::Object(schema)) = T::schema()
    else {
        return None;
    };
    let body: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(bytes).ok()?;
    let missing: Vec<String> = schema
        .required
        .iter()
        .filter(|k| !body.contains_key(k.as_str()))
        .map(|k| format!("`{k}`"))
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}

/// Keeps error messages short even when serde quotes a long input.
pub(crate) fn clip(s: &str) -> String {
    const MAX: usize = 200;
    if s.chars().count() <= MAX {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(MAX).collect::<String>())
    }
}

type BodyFuture<W> = Pin<Box<dyn Future<Output = Result<W, ApiError>>>>;

/// Reads and parses a body; `on_empty` decides what an empty (or all-whitespace) body means.
fn extract<T: DeserializeOwned + utoipa::PartialSchema + 'static, W: 'static>(
    req: &HttpRequest,
    payload: &mut Payload,
    on_empty: fn() -> Result<T, ApiError>,
    wrap: fn(T) -> W,
) -> BodyFuture<W> {
    let body = read(req, payload);
    Box::pin(async move {
        let bytes = body.await?;
        let value = if bytes.iter().all(u8::is_ascii_whitespace) {
            on_empty()?
        } else {
            parse(&bytes)?
        };
        Ok(wrap(value))
    })
}

impl<T: DeserializeOwned + utoipa::PartialSchema + 'static> FromRequest for JsonBody<T> {
    type Error = ApiError;
    type Future = BodyFuture<Self>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        extract(
            req,
            payload,
            || Err(ApiError::invalid("a JSON body is required")),
            JsonBody,
        )
    }
}

impl<T: DeserializeOwned + utoipa::PartialSchema + Default + 'static> FromRequest
    for OptionalJsonBody<T>
{
    type Error = ApiError;
    type Future = BodyFuture<Self>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        extract(req, payload, || Ok(T::default()), OptionalJsonBody)
    }
}

/// Parses a UUID path or body identifier, naming `field` in the error.
pub fn uuid(s: &str, field: &'static str) -> Result<uuid::Uuid, ApiError> {
    Ok(partner_domain::kernel::ids::parse_uuid(s, field)?)
}

/// Query parameters, in order. Where a name repeats, the first value wins; unknown names are
/// ignored.
#[derive(Debug)]
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn of(req: &HttpRequest) -> Result<Self, ApiError> {
        serde_urlencoded::from_str(req.query_string())
            .map(Self)
            .map_err(|_| ApiError::invalid("the query string is malformed"))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// For PATCH bodies: tells an absent field (`None`) from an explicit `null` (`Some(None)`).
pub fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    serde::Deserialize::deserialize(d).map(Some)
}

/// For an optional field that may be absent but not `null` (`#[serde(default, deserialize_with
/// = "not_null")]`): absent is `None`, a value is `Some`, and `null` is refused like any other
/// value of the wrong type (400), where plain `Option` would read it as absent.
pub fn not_null<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}
