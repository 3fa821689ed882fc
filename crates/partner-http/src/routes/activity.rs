//! Partner reads of activity: `GET /api/v1/leads`, `/orders`, `/payouts`.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use partner_domain::lead::{LeadQuery, LeadRow, ListLeadsError, Page, parse_limit};
use serde::Serialize;

use std::future::Future;

use partner_domain::RepoError;
use partner_domain::order::Chunk;

use super::{PageBody, PageInfo, Result};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::Query;
use crate::middleware::{Caller, one_trip};
use crate::ratelimit::Group;

/// `GET /api/v1/leads` in one database round trip: the token lookup is folded into the page's
/// statement ([`one_trip`] stands in for the partner guard and keeps its answers). A request
/// whose query is invalid looks the token up alone and answers 400 after authentication and the
/// rate limit, as behind the guard.
pub(super) async fn leads(req: HttpRequest) -> HttpResponse {
    let query = lead_query(&req);
    match query {
        Ok(query) => {
            let q = query.clone();
            one_trip(
                &req,
                Group::Leads,
                async move |st, token| Ok(st.leads.list_for_token(&token, &q).await?),
                move |st, me, leads| page_response(st.leads.finish(&me.partner_id, &query, leads)),
            )
            .await
        }
        Err(e) => {
            one_trip(
                &req,
                Group::Leads,
                async |st, token| st.auth.lookup(&token).await,
                move |_, _, ()| Err(e),
            )
            .await
        }
    }
}

/// Any other method on `/api/v1/leads`: the token lookup alone, then 405.
pub(super) async fn leads_other_method(req: HttpRequest) -> HttpResponse {
    one_trip(
        &req,
        Group::Leads,
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

fn page_response(page: std::result::Result<Page<LeadRow>, ListLeadsError>) -> Result {
    match page {
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
