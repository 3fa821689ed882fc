//! `Idempotency-Key` on every `POST` and `PATCH` of the partner and operator APIs (extensions
//! §8.3), run by their guards after authentication (and, on the partner API, the rate limit) and
//! before the handler parses anything.
//!
//! An answer that carries a secret shown once (the handler marks it [`shown_once`]) is kept
//! sealed under a key derived from the caller's bearer token (issue 23, N10;
//! [`partner_domain::idempotency::AnswerKey`]): only a request presenting that token has it
//! replayed; another token of the same partner, with the same key and request, gets 422
//! `idempotency_key_reused`, and the stored row holds no secret in clear.

use actix_web::ResponseError;
use actix_web::body::BoxBody;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::web::Bytes;
use actix_web::{Error, HttpResponse, web};
use partner_domain::idempotency::{
    AnswerKey, CLAIM_LEASE, Caller, Claim, Fingerprint, IdempotencyKey, IdempotencyService,
    KeptAnswer, Ticket,
};
use partner_domain::kernel::ambient::Ambient;

use crate::AppState;
use crate::error::ApiError;

const KEY: HeaderName = HeaderName::from_static("idempotency-key");
const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Between two tries of [`release_later`].
const RELEASE_AGAIN_AFTER: std::time::Duration = std::time::Duration::from_millis(500);
/// How many releases [`release_later`] writes: one is not enough when the claim's own statement
/// is still on its way (a frozen database runs it when it wakes, and a release on a fresh
/// connection can come first); the next ones follow 1 s and 1.5 s later.
const RELEASES_WRITTEN: u32 = 3;

/// Releases the claim of a request whose claim or end could not be written because the database
/// did not answer (`error`, the try already made): tried again in the background until it is
/// written ([`RELEASES_WRITTEN`] times) or the claim's lease has run out, so a client following
/// `Retry-After: 1` is not answered 409 `idempotency_key_in_use` for the rest of the lease after
/// a database outage of a second (attack9: 3.5 and 47 s after a freeze). Safe however late: the
/// release removes only this claim's row while it holds no answer, so a write that did commit
/// (its answer with it) stays kept, and a later claim of the key is not touched.
fn release_later(service: &IdempotencyService, ticket: &Ticket, error: &partner_domain::RepoError) {
    if !error.is_unavailable() {
        return;
    }
    let (service, ticket) = (service.clone(), ticket.clone());
    actix_web::rt::spawn(async move {
        let until = std::time::Instant::now()
            + std::time::Duration::try_from(CLAIM_LEASE).unwrap_or_default();
        let mut written = 0;
        while std::time::Instant::now() < until && written < RELEASES_WRITTEN {
            actix_web::rt::time::sleep(RELEASE_AGAIN_AFTER * (1 + written)).await;
            match service.finish(&ticket, None).await {
                Ok(()) => written += 1,
                Err(e) if e.is_unavailable() => {}
                Err(e) => {
                    tracing::warn!(error = %e, "could not release an idempotency key");
                    return;
                }
            }
        }
    });
}

/// Releases the claim of a request whose answer is not kept (the key may run again), now or,
/// when the database does not answer, later ([`release_later`]).
async fn release_claim(service: &IdempotencyService, ticket: &Ticket) {
    if let Err(e) = service.finish(ticket, None).await {
        tracing::warn!(error = %e, "could not release an idempotency key");
        release_later(service, ticket, &e);
    }
}

/// The mark of an answer carrying a secret shown once ([`shown_once`]).
#[derive(Debug, Clone, Copy)]
struct ShownOnce;

/// Marks `res` as carrying a secret shown once (a signing secret, a custom header's value, a
/// token's text, a portal link): kept for a replay only sealed for the token that asked.
pub(crate) fn shown_once(mut res: HttpResponse) -> HttpResponse {
    res.extensions_mut().insert(ShownOnce);
    res
}

/// The key sealing a kept answer of this request: from its bearer token.
fn answer_key(req: &ServiceRequest) -> Option<AnswerKey> {
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    partner_domain::account::auth::bearer(header).and_then(AnswerKey::of_bearer)
}

/// Runs `req` through `next`, or answers it from its key: without an `Idempotency-Key` (or on
/// a method other than `POST`/`PATCH`) it simply runs; with one, 400 for a malformed key, the
/// kept answer (`Idempotent-Replayed: true`) for the same request, 409 while the first runs,
/// 422 for another request under the same key; else it runs, and its answer is kept.
pub(crate) async fn run(
    st: &web::Data<AppState>,
    caller: Caller,
    mut req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    if !matches!(*req.method(), Method::POST | Method::PATCH) {
        return next.call(req).await;
    }
    let mut values = req.headers().get_all(KEY);
    let Some(first) = values.next() else {
        return next.call(req).await;
    };
    if values.next().is_some() {
        let e = ApiError::invalid("Idempotency-Key must be given once");
        return Ok(req.error_response(e));
    }
    let key = match IdempotencyKey::parse(first.as_bytes()) {
        Ok(k) => k,
        Err(e) => return Ok(req.error_response(ApiError::from(e))),
    };
    let body = match req.extract::<Bytes>().await {
        Ok(b) => b,
        Err(e) => {
            let e = if e.as_response_error().status_code() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::too_large()
            } else {
                ApiError::invalid("the request body could not be read")
            };
            return Ok(req.error_response(e));
        }
    };
    let target = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.path().to_owned(), |p| p.as_str().to_owned());
    let fingerprint = Fingerprint::of(req.method().as_str(), &target, &body);
    let claim = st.idempotency.ticket(&caller, &key, &fingerprint);
    let ticket = match st.idempotency.claim(claim.clone()).await {
        Err(e) => {
            // The claim's statement may still commit: a database frozen mid-request runs what
            // it had read once it wakes, after this connection was given up (attack10).
            release_later(&st.idempotency, &claim, &e);
            return Ok(req.error_response(ApiError::from(e)));
        }
        Ok(Claim::InUse) => return Ok(req.error_response(ApiError::idempotency_key_in_use())),
        Ok(Claim::Reused) => return Ok(req.error_response(ApiError::idempotency_key_reused())),
        Ok(Claim::Replay(answer)) if answer.is_sealed() => {
            let opened = answer_key(&req).and_then(|k| answer.open(&k, &fingerprint));
            let res = match opened {
                Some(answer) => replay(&answer),
                None => {
                    return Ok(req.error_response(ApiError::idempotency_answer_sealed()));
                }
            };
            return Ok(req.into_response(res));
        }
        Ok(Claim::Replay(answer)) => {
            let res = replay(&answer);
            return Ok(req.into_response(res));
        }
        Ok(Claim::Run(ticket)) => ticket,
    };
    let sealing = answer_key(&req);
    req.set_payload(payload(body));
    // The request runs to its end, and its answer is kept, even if the client goes away
    // meanwhile: the answer must describe the write it made. It runs in an ambient where the
    // store holds its writes' transaction open, so the answer is kept in that transaction and
    // commits with the writes (docs/decisions.md, "Idempotency keys: the answer commits with
    // the write"); dropped without that commit, the writes roll back.
    let service = st.idempotency.clone();
    let release = (service.clone(), ticket.clone());
    let task = actix_web::rt::spawn(async move {
        let ambient = Ambient::new();
        let res = match ambient.scope(next.call(req)).await {
            Ok(res) => res,
            Err(e) => {
                // An `Err` is rendered by actix later; it is not a kept answer, and the writes
                // held for it roll back.
                drop(ambient);
                release_claim(&service, &ticket).await;
                return Err(e);
            }
        };
        let (req, res) = res.into_parts();
        let (res, body) = res.into_parts();
        let bytes = match actix_web::body::to_bytes(body).await {
            Ok(b) => b,
            Err(_) => {
                drop(ambient);
                release_claim(&service, &ticket).await;
                return Err(ApiError::generic_internal().into());
            }
        };
        let answer = KeptAnswer {
            status: res.status().as_u16(),
            content_type: res
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body: bytes.to_vec(),
        };
        // A secret shown once is kept sealed for the token that asked, or not kept at all.
        let answer = if res.extensions().contains::<ShownOnce>() {
            sealing.as_ref().and_then(|k| answer.seal(k, &fingerprint))
        } else {
            Some(answer)
        };
        if let Err(e) = service
            .finish_within(&ambient, &ticket, answer.as_ref())
            .await
        {
            // The writes the answer describes did not commit: it must not be sent.
            tracing::warn!(error = %e, "could not commit an idempotent request");
            release_later(&service, &ticket, &e);
            return Ok(ServiceResponse::new(
                req,
                ApiError::from(e).error_response(),
            ));
        }
        Ok(ServiceResponse::new(req, res.set_body(BoxBody::new(bytes))))
    });
    match task.await {
        Ok(res) => res,
        Err(_) => {
            // The handler panicked: nothing to keep (its held writes rolled back), the key may
            // run again.
            let (service, ticket) = release;
            actix_web::rt::spawn(async move {
                release_claim(&service, &ticket).await;
            });
            tracing::error!("handler panicked");
            Err(ApiError::generic_internal().into())
        }
    }
}

/// The kept answer, byte for byte, marked as a replay.
fn replay(answer: &KeptAnswer) -> HttpResponse {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let mut res = HttpResponse::build(status);
    res.insert_header((REPLAYED, HeaderValue::from_static("true")));
    if let Some(ct) = answer
        .content_type
        .as_deref()
        .and_then(|c| HeaderValue::from_str(c).ok())
    {
        res.insert_header((header::CONTENT_TYPE, ct));
    }
    res.body(answer.body.clone())
}

/// `bytes` as a request payload again, for the handler to read.
fn payload(bytes: Bytes) -> Payload {
    Payload::from(bytes)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use partner_domain::RepoError;
    use partner_domain::idempotency::MockIdempotencyStore;
    use partner_domain::kernel::clock::SystemClock;

    use super::*;

    /// attack9: a keyed request cut by a database outage after its claim committed left the key
    /// claimed for the rest of the lease (409 to retries for up to a minute). Its release, failed
    /// with the database, is tried again until it is written (three times, spaced: attack10's
    /// claim statement that a frozen database ran when it woke, after the first release), and
    /// then no more.
    #[actix_web::test]
    async fn a_release_that_found_the_database_down_is_tried_again_until_written() {
        let tries = Arc::new(AtomicUsize::new(0));
        let counted = tries.clone();
        let mut store = MockIdempotencyStore::new();
        store.expect_release().returning(move |_| {
            if counted.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(RepoError::unavailable("the database does not answer"))
            } else {
                Ok(())
            }
        });
        let service = IdempotencyService::new(Arc::new(store), Arc::new(SystemClock));
        let ticket = Ticket {
            caller: "operator".into(),
            key: "k-1".into(),
            fingerprint: Fingerprint::of("POST", "/internal/v1/leads", b"{}"),
            claimed_at: time::OffsetDateTime::now_utc(),
        };
        release_later(
            &service,
            &ticket,
            &RepoError::unavailable("the database does not answer"),
        );
        let asked = std::time::Instant::now();
        while tries.load(Ordering::SeqCst) < 3 {
            assert!(
                asked.elapsed() < Duration::from_secs(10),
                "tried {} times",
                tries.load(Ordering::SeqCst)
            );
            actix_web::rt::time::sleep(Duration::from_millis(50)).await;
        }
        while tries.load(Ordering::SeqCst) < 2 + RELEASES_WRITTEN as usize {
            assert!(asked.elapsed() < Duration::from_secs(20), "written again");
            actix_web::rt::time::sleep(Duration::from_millis(50)).await;
        }
        actix_web::rt::time::sleep(RELEASE_AGAIN_AFTER * 5).await;
        assert_eq!(
            tries.load(Ordering::SeqCst),
            2 + RELEASES_WRITTEN as usize,
            "no try after it was written {RELEASES_WRITTEN} times"
        );

        // Any other failure is not the database's absence: not tried again.
        let tries = Arc::new(AtomicUsize::new(0));
        let mut store = MockIdempotencyStore::new();
        let counted = tries.clone();
        store.expect_release().returning(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        let service = IdempotencyService::new(Arc::new(store), Arc::new(SystemClock));
        release_later(&service, &ticket, &RepoError::new("a bad row"));
        actix_web::rt::time::sleep(RELEASE_AGAIN_AFTER * 2).await;
        assert_eq!(tries.load(Ordering::SeqCst), 0);
    }
}
