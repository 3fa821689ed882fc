//! Partner reads of activity: `GET /api/v1/leads`, `/orders`, `/payouts`.

use actix_web::{HttpRequest, HttpResponse, web};
use partner_domain::lead::{LeadQuery, ListLeadsError, parse_limit};
use serde::Serialize;

use super::{Result, ok};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::Query;
use crate::middleware::Caller;

/// `{ data, page: { nextCursor, limit } }`.
#[derive(Serialize)]
struct PageBody<T> {
    data: Vec<T>,
    page: PageInfo,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PageInfo {
    next_cursor: Option<String>,
    limit: u16,
}

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

pub(super) async fn orders(state: web::Data<AppState>, Caller(me): Caller) -> Result {
    Ok(ok(state.orders.list(&me.partner_id, me.admin).await?))
}

pub(super) async fn payouts(state: web::Data<AppState>, Caller(me): Caller) -> Result {
    Ok(ok(state.payouts.list(&me.partner_id).await?))
}
