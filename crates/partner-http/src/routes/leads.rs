//! Leads: the partner's listing (`GET /api/v1/leads`) and the operator's ingest and
//! enrichment (`POST /internal/v1/leads`, `PATCH /internal/v1/leads/{id}`).

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use partner_domain::kernel::values::{Email, ValueError, text};
use partner_domain::lead::{LeadId, LeadPatch, NewLead, Origin, Phone, TestFlag};
use serde::Deserialize;

use super::fields::{attribution, optional_text};
use super::{Result, data, ok};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonBody, Query, nullable, uuid};

use partner_domain::kernel::page::{Page, parse_limit};
use partner_domain::kernel::values::{PartnerId, SubId};
use partner_domain::kernel::wire::{self, timestamp_bytes};
use partner_domain::lead::{Lead, LeadQuery, ListLeadsError, TestSource};
use serde::{Serialize, Serializer};
use time::OffsetDateTime;

use crate::middleware::one_trip;
use crate::ratelimit::Group;

/// `LeadRow` of the spec. `email` and `phone` are masked without the lead's consent.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Lead, example = json!({
    "id": "0b5c7a4e-1f0e-4c43-9a39-3f1f4b8e2a10", "partnerId": "demo-clinic", "subId": "1",
    "firstName": "Ana", "lastName": "Lopez", "email": "ana@example.com", "phone": "+15551234567",
    "origin": "quiz", "location": "Austin, TX", "questionId": null,
    "createdAt": "2026-11-21T10:00:00.000Z", "updatedAt": "2026-11-21T10:00:00.000Z",
    "isTest": false, "testSource": null
}))]
pub(crate) struct LeadOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    id: LeadId,
    #[schema(value_type = String)]
    partner_id: &'a PartnerId,
    /// The sub-account number; empty when the lead is not attributed to one.
    #[serde(serialize_with = "sub_id_or_empty")]
    #[schema(value_type = String)]
    sub_id: Option<SubId>,
    first_name: &'a str,
    last_name: &'a str,
    email: &'a str,
    phone: &'a str,
    origin: &'a str,
    location: &'a str,
    #[schema(required = true)]
    question_id: Option<&'a str>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_at: OffsetDateTime,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    updated_at: OffsetDateTime,
    is_test: bool,
    #[schema(value_type = Option<crate::routes::schemas::TestSource>, required = true)]
    test_source: Option<TestSource>,
}

impl<'a> From<&'a Lead> for LeadOut<'a> {
    fn from(l: &'a Lead) -> Self {
        Self {
            id: l.id(),
            partner_id: l.partner_id(),
            sub_id: l.sub_id(),
            first_name: l.first_name(),
            last_name: l.last_name(),
            email: l.visible_email(),
            phone: l.visible_phone(),
            origin: l.origin().as_str(),
            location: l.location(),
            question_id: l.question_id(),
            created_at: l.created_at(),
            updated_at: l.updated_at(),
            is_test: l.test().is_test(),
            test_source: l.test().source(),
        }
    }
}

fn sub_id_or_empty<S: Serializer>(
    sub: &Option<SubId>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match sub {
        Some(sub) => s.collect_str(sub),
        None => s.serialize_str(""),
    }
}

/// The partner's leads, newest first, in keyset pages.
#[utoipa::path(
    get, path = "/api/v1/leads", tag = "activity",
    params(
        ("limit" = Option<u16>, Query, description = "Page size, 1-200 (default 50)", minimum = 1, maximum = 200),
        ("cursor" = Option<String>, Query, description = "The `nextCursor` of the previous page, unchanged"),
        ("includeTest" = Option<bool>, Query, description = "`true` includes test leads"),
    ),
    responses(
        (status = 200, description = "A page of leads", body = crate::routes::schemas::LeadPage),
        (status = 400, description = "`limit` or `cursor` is invalid", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn list(req: HttpRequest) -> HttpResponse {
    // One database round trip: the token lookup is folded into the page's statement
    // ([`one_trip`] stands in for the partner guard and keeps its answers). A request whose
    // query is invalid looks the token up alone and answers 400 after authentication and the
    // rate limit, as behind the guard.
    match lead_query(&req) {
        Ok(query) => {
            let q = query.clone();
            one_trip(
                &req,
                Group::Leads,
                None,
                async move |st, token| Ok(st.leads.list_for_token(&token, &q).await?),
                move |st, me, leads| page_response(st.leads.finish(me.partner_id(), &query, leads)),
            )
            .await
        }
        Err(e) => {
            one_trip(
                &req,
                Group::Leads,
                None,
                async |st, token| st.auth.lookup(&token).await,
                move |_, _, ()| Err(e),
            )
            .await
        }
    }
}

/// One lead by id, a test lead too (extensions §8.2).
#[utoipa::path(
    get, path = "/api/v1/leads/{id}", tag = "activity",
    params(("id" = String, Path, description = "The lead's `id` (a UUID)", format = Uuid)),
    responses(
        (status = 200, description = "The lead, as the listing (`includeTest=true`) shows it", body = crate::routes::schemas::LeadData),
        (status = 400, description = "`id` is not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "The partner has no lead with that id", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn one(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    // One round trip, as the listing; a malformed id answers 400 after authentication.
    let id = match uuid(&path, "id") {
        Ok(id) => LeadId::from_uuid(id),
        Err(e) => return super::refused_after_admission(&req, Group::Leads, e).await,
    };
    one_trip(
        &req,
        Group::Leads,
        None,
        async move |st, token| Ok(st.leads.find_for_token(st.auth.key(&token), id).await?),
        |_, _, lead| match lead {
            Some(l) => Ok(ok(LeadOut::from(&l))),
            None => Err(ApiError::not_found("no such lead")),
        },
    )
    .await
}

/// Any other method on `/api/v1/leads`: the token lookup alone, then 405.
pub(super) async fn list_other_method(req: HttpRequest) -> HttpResponse {
    one_trip(
        &req,
        Group::Leads,
        None,
        async |st, token| st.auth.lookup(&token).await,
        |_, _, ()| Err(ApiError::for_status(StatusCode::METHOD_NOT_ALLOWED)),
    )
    .await
}

fn lead_query(req: &HttpRequest) -> Result<LeadQuery> {
    let q = Query::of(req)?;
    Ok(LeadQuery {
        limit: parse_limit(q.get("limit"), 50, 200)?,
        // An empty cursor is the first page, as if absent.
        cursor: q.get("cursor").filter(|c| !c.is_empty()).map(str::to_owned),
        include_test: q.get("includeTest") == Some("true"),
    })
}

fn page_response(page: std::result::Result<Page<Lead>, ListLeadsError>) -> Result {
    let page = page?;
    Ok(HttpResponse::Ok()
        .content_type(actix_web::http::header::ContentType::json())
        .body(render_page(&page)))
}

/// The page's JSON, byte for byte what serde renders for `PageBody<LeadOut>` (a test holds it
/// to that), written by hand because this is the busiest answer of the API: serde escapes every
/// key of every row through the generic string path (14 keys × 50 rows), about a third of the
/// rendering's cost in a profile of the leads benchmark. Values still go through serde_json's
/// escaping.
fn render_page(page: &Page<Lead>) -> Vec<u8> {
    // ~400 bytes a row in practice; one allocation for a default page.
    let mut out = Vec::with_capacity(64 + page.items.len() * 448);
    out.extend_from_slice(b"{\"data\":[");
    for (i, row) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        render_lead(&mut out, row);
    }
    out.extend_from_slice(b"],\"page\":{\"nextCursor\":");
    optional_string(&mut out, page.next_cursor.as_deref());
    out.extend_from_slice(b",\"limit\":");
    out.extend_from_slice(page.limit.to_string().as_bytes());
    out.extend_from_slice(b"}}");
    out
}

fn render_lead(out: &mut Vec<u8>, lead: &Lead) {
    let row = LeadOut::from(lead);
    let mut id = [0u8; uuid::fmt::Hyphenated::LENGTH];
    out.extend_from_slice(b"{\"id\":\"");
    out.extend_from_slice(
        row.id
            .as_uuid()
            .hyphenated()
            .encode_lower(&mut id)
            .as_bytes(),
    );
    out.extend_from_slice(b"\",\"partnerId\":");
    string(out, row.partner_id.as_str());
    out.extend_from_slice(b",\"subId\":");
    match row.sub_id {
        Some(sub) => {
            out.push(b'"');
            out.extend_from_slice(sub.to_string().as_bytes());
            out.push(b'"');
        }
        None => out.extend_from_slice(b"\"\""),
    }
    out.extend_from_slice(b",\"firstName\":");
    string(out, row.first_name);
    out.extend_from_slice(b",\"lastName\":");
    string(out, row.last_name);
    out.extend_from_slice(b",\"email\":");
    string(out, row.email);
    out.extend_from_slice(b",\"phone\":");
    string(out, row.phone);
    out.extend_from_slice(b",\"origin\":");
    string(out, row.origin);
    out.extend_from_slice(b",\"location\":");
    string(out, row.location);
    out.extend_from_slice(b",\"questionId\":");
    optional_string(out, row.question_id);
    out.extend_from_slice(b",\"createdAt\":\"");
    out.extend_from_slice(&timestamp_bytes(row.created_at));
    out.extend_from_slice(b"\",\"updatedAt\":\"");
    out.extend_from_slice(&timestamp_bytes(row.updated_at));
    out.extend_from_slice(if row.is_test {
        b"\",\"isTest\":true,\"testSource\":"
    } else {
        b"\",\"isTest\":false,\"testSource\":"
    });
    optional_string(out, row.test_source.map(TestSource::as_str));
    out.push(b'}');
}

/// A JSON string, escaped as serde_json escapes it.
fn string(out: &mut Vec<u8>, s: &str) {
    // Writing a `str` into a `Vec` cannot fail: serde_json fails only on I/O and on
    // non-string map keys.
    let _ = serde_json::to_writer(&mut *out, s);
}

fn optional_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => string(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = LeadIngest)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct LeadBody {
    partner_id: String,
    sub_id: Option<String>,
    first_name: String,
    last_name: String,
    email: String,
    email_consent: bool,
    phone: Option<String>,
    sms_consent: bool,
    origin: String,
    location: String,
    question_id: Option<String>,
    is_test: Option<bool>,
    test_source: Option<String>,
}

fn phone(v: Option<&str>) -> std::result::Result<Option<Phone>, ValueError> {
    v.filter(|p| !p.trim().is_empty())
        .map(Phone::parse)
        .transpose()
}

#[utoipa::path(
    post, path = "/internal/v1/leads", tag = "activity", request_body = LeadBody,
    responses(
        (status = 201, description = "The stored lead", body = crate::routes::schemas::LeadData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn create_lead(
    state: web::Data<AppState>,
    JsonBody(b): JsonBody<LeadBody>,
) -> Result {
    let new = NewLead::try_from(b)?;
    let lead = state.leads.ingest(new).await?;
    Ok(data(StatusCode::CREATED, LeadOut::from(&lead)))
}

impl TryFrom<LeadBody> for NewLead {
    type Error = ValueError;

    fn try_from(b: LeadBody) -> std::result::Result<Self, ValueError> {
        let at = attribution(&b.partner_id, b.sub_id.as_deref())?;
        let origin = Origin::parse(&b.origin)?;
        Ok(NewLead {
            partner_id: at.partner_id,
            sub_id: at.sub_id,
            first_name: text("firstName", &b.first_name, 1, 100)?,
            last_name: text("lastName", &b.last_name, 0, 100)?,
            email: Email::parse(&b.email)?,
            email_consent: b.email_consent,
            phone: phone(b.phone.as_deref())?,
            sms_consent: b.sms_consent,
            test: TestFlag::parse(b.is_test, b.test_source.as_deref(), &origin)?,
            origin,
            location: text("location", &b.location, 0, 200)?,
            question_id: optional_text(b.question_id.as_deref(), "questionId", 100)?,
        })
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = LeadPatch)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct LeadPatchBody {
    #[serde(default, deserialize_with = "nullable")]
    phone: Option<Option<String>>,
    sms_consent: Option<bool>,
    email: Option<String>,
    email_consent: Option<bool>,
    first_name: Option<String>,
    last_name: Option<String>,
}

#[utoipa::path(
    patch, path = "/internal/v1/leads/{id}", tag = "activity", request_body = LeadPatchBody,
    params(
        ("id" = String, Path, description = "The lead's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "The updated lead", body = crate::routes::schemas::LeadData),
        (status = 400, description = "A field is invalid, or none is named", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such lead", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn patch_lead(
    state: web::Data<AppState>,
    path: web::Path<String>,
    JsonBody(b): JsonBody<LeadPatchBody>,
) -> Result {
    let id = LeadId::from_uuid(uuid(&path, "lead id")?);
    let patch = LeadPatch::try_from(b)?;
    let lead = state.leads.patch(id, &patch).await?;
    Ok(ok(LeadOut::from(&lead)))
}

impl TryFrom<LeadPatchBody> for LeadPatch {
    type Error = ValueError;

    /// Each field as the lead's parsers take it; a patch naming no field is refused.
    fn try_from(b: LeadPatchBody) -> std::result::Result<Self, ValueError> {
        LeadPatch {
            phone: b.phone.map(|p| phone(p.as_deref())).transpose()?,
            sms_consent: b.sms_consent,
            email: b.email.as_deref().map(Email::parse).transpose()?,
            email_consent: b.email_consent,
            first_name: b
                .first_name
                .as_deref()
                .map(|n| text("firstName", n, 1, 100))
                .transpose()?,
            last_name: b
                .last_name
                .as_deref()
                .map(|n| text("lastName", n, 0, 100))
                .transpose()?,
        }
        .non_empty()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use partner_domain::kernel::page::Page;
    use partner_domain::kernel::values::PartnerId;
    use partner_domain::kernel::values::SubId;
    use partner_domain::lead::{Lead, LeadId, LeadParts, Origin, TestFlag, TestSource};
    use proptest::prelude::*;
    use time::OffsetDateTime;

    use super::{LeadOut, render_page};
    use crate::routes::{PageBody, PageInfo};

    /// Any text, with the characters JSON must escape over-represented.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "\\PC{0,12}",
            "[\"\\\\/\u{0}-\u{1f}\u{7f}<>&'a é€😀\u{2028}]{0,12}",
        ]
    }

    fn lead() -> impl Strategy<Value = Lead> {
        (
            (
                any::<u128>(),
                "[A-Za-z0-9_-]{1,64}",
                0u16..=250,
                text(),
                text(),
            ),
            (
                text(),
                proptest::option::of(text()),
                "[a-z0-9_-]{1,64}",
                text(),
            ),
            (proptest::option::of(text()), any::<bool>(), any::<bool>()),
            (
                -377_705_116_800i64..253_402_300_799,
                0u32..1_000_000_000,
                0i64..1_000_000,
            ),
            proptest::option::of(any::<bool>()),
        )
            .prop_map(
                |(
                    (id, partner, sub, first, last),
                    (email, phone, origin, location),
                    (question, email_consent, sms_consent),
                    (secs, nanos, later),
                    source,
                )| {
                    let created = OffsetDateTime::from_unix_timestamp(secs).expect("in range")
                        + time::Duration::nanoseconds(i64::from(nanos));
                    // Only headless intakes carry test rows.
                    let origin = Origin::parse(if source.is_some() {
                        "headless_intake"
                    } else {
                        origin.as_str()
                    })
                    .expect("valid");
                    let test = TestFlag::from_stored(
                        source.map(|s| {
                            if s {
                                TestSource::Simulation
                            } else {
                                TestSource::ProviderTestMode
                            }
                        }),
                        &origin,
                    )
                    .expect("a headless origin");
                    Lead::new(LeadParts {
                        id: LeadId::from_uuid(uuid::Uuid::from_u128(id)),
                        partner_id: PartnerId::parse(&partner).expect("valid"),
                        sub_id: SubId::new(sub),
                        first_name: first,
                        last_name: last,
                        email,
                        email_consent,
                        phone,
                        sms_consent,
                        origin,
                        location,
                        question_id: question,
                        test,
                        created_at: created,
                        updated_at: created + time::Duration::seconds(later),
                    })
                    .expect("a valid lead")
                },
            )
    }

    proptest! {
        #[test]
        fn the_hand_written_page_is_what_serde_renders(
            items in proptest::collection::vec(lead(), 0..4),
            next_cursor in proptest::option::of(text()),
            limit in any::<u16>(),
        ) {
            let page = Page { items, next_cursor, limit };
            let serde = serde_json::to_vec(&PageBody {
                data: page.items.iter().map(LeadOut::from).collect(),
                page: PageInfo { next_cursor: page.next_cursor.clone(), limit: page.limit },
            })
            .expect("serializes");
            prop_assert_eq!(
                String::from_utf8(render_page(&page)).expect("utf-8"),
                String::from_utf8(serde).expect("utf-8")
            );
        }
    }
}
