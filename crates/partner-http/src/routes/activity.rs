//! Partner reads of activity: `GET /api/v1/leads`, `/orders`, `/payouts`.

use actix_web::{HttpRequest, HttpResponse, web};
use partner_domain::lead::{LeadQuery, ListLeadsError, parse_limit};
use serde::Serialize;

use std::future::Future;

use partner_domain::RepoError;
use partner_domain::order::Chunk;

use super::{PageBody, PageInfo, Result};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::Query;
use crate::middleware::Caller;

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
pub(super) async fn leads(
    state: web::Data<AppState>,
    Caller(me): Caller,
    req: HttpRequest,
) -> Result {
    let q = Query::of(&req)?;
    let query = LeadQuery {
        limit: parse_limit(q.get("limit"), 50, 200)?,
        // An empty cursor is the first page, as if absent.
        cursor: q.get("cursor").filter(|c| !c.is_empty()).map(str::to_owned),
        include_test: q.get("includeTest") == Some("true"),
    };
    match state.leads.list(&me.partner_id, &query).await {
        Ok(page) => Ok(HttpResponse::Ok().json(PageBody {
            data: page.items,
            page: PageInfo {
                next_cursor: page.next_cursor,
                limit: page.limit,
            },
        })),
        Err(ListLeadsError::BadCursor) => Err(ApiError::invalid(
            "cursor is invalid: pass the nextCursor of a previous page unchanged",
        )),
        Err(ListLeadsError::Repo(e)) => Err(e.into()),
    }
}

/// Rows read from the database per chunk of a streamed listing.
const CHUNK: u16 = 1000;

/// `{ data: Order[] }`, the whole history, streamed chunk by chunk.
#[utoipa::path(
    get, path = "/api/v1/orders", tag = "activity",
    responses((status = 200, description = "Every order of the partner (streamed)", body = crate::routes::schemas::OrderList))
)]
pub(super) async fn orders(state: web::Data<AppState>, Caller(me): Caller) -> Result {
    let first = state
        .orders
        .chunk(&me.partner_id, me.admin, None, CHUNK)
        .await?;
    let (partner, admin) = (me.partner_id, me.admin);
    Ok(stream_data(first, move |after| {
        let (state, partner) = (state.clone(), partner.clone());
        async move {
            state
                .orders
                .chunk(&partner, admin, Some(after), CHUNK)
                .await
        }
    }))
}

/// `{ data: Payout[] }`, streamed chunk by chunk.
#[utoipa::path(
    get, path = "/api/v1/payouts", tag = "activity",
    responses((status = 200, description = "Every payout of the partner (streamed)", body = crate::routes::schemas::PayoutList))
)]
pub(super) async fn payouts(state: web::Data<AppState>, Caller(me): Caller) -> Result {
    let first = state.payouts.chunk(&me.partner_id, None, CHUNK).await?;
    let partner = me.partner_id;
    Ok(stream_data(first, move |after| {
        let (state, partner) = (state.clone(), partner.clone());
        async move { state.payouts.chunk(&partner, Some(after), CHUNK).await }
    }))
}

/// Where a streamed listing stands.
enum Step<T, K> {
    /// Render this chunk; `written` tells whether an element was written before it.
    Render(Chunk<T, K>, bool, bool),
    Fetch(K, bool),
    Done,
}

/// A 200 `{ "data": [ … ] }` whose array is written chunk by chunk as `next` reads them, so the
/// memory of a request stays flat however long the listing. The bytes are exactly those of
/// serializing the whole array at once. The first chunk is read before answering, so a failing
/// database is still a clean 500; a failure after that cuts the body short (logged), which a
/// client sees as a broken response and retries.
fn stream_data<T, K, F, Fut>(first: Chunk<T, K>, next: F) -> HttpResponse
where
    T: Serialize + 'static,
    K: 'static,
    F: Fn(K) -> Fut + Clone + 'static,
    Fut: Future<Output = std::result::Result<Chunk<T, K>, RepoError>> + 'static,
{
    let body = futures_util::stream::unfold(Step::Render(first, false, true), move |step| {
        let next = next.clone();
        async move {
            let (chunk, written, opening) = match step {
                Step::Done => return None,
                Step::Render(c, w, o) => (c, w, o),
                Step::Fetch(after, w) => match next(after).await {
                    Ok(c) => (c, w, false),
                    Err(e) => {
                        tracing::error!(error = %e, "a streamed listing failed midway");
                        let e = std::io::Error::other("the listing could not be read");
                        return Some((Err(e), Step::Done));
                    }
                },
            };
            let mut buf = Vec::with_capacity(256 * chunk.rows.len() + 16);
            if opening {
                buf.extend_from_slice(br#"{"data":["#);
            }
            let mut written = written;
            for row in &chunk.rows {
                if written {
                    buf.push(b',');
                }
                if let Err(e) = serde_json::to_writer(&mut buf, row) {
                    tracing::error!(error = %e, "rendering a streamed listing failed");
                    return Some((Err(std::io::Error::other(e)), Step::Done));
                }
                written = true;
            }
            let step = match chunk.next {
                Some(after) => Step::Fetch(after, written),
                None => {
                    buf.extend_from_slice(b"]}");
                    Step::Done
                }
            };
            Some((Ok::<_, std::io::Error>(web::Bytes::from(buf)), step))
        }
    });
    HttpResponse::Ok()
        .content_type(actix_web::http::header::ContentType::json())
        .streaming(body)
}
