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
    AnswerKey, Caller, Claim, End, Fingerprint, IdempotencyKey, KeptAnswer,
};
use partner_domain::kernel::ambient::Ambient;

use crate::AppState;
use crate::error::ApiError;

const KEY: HeaderName = HeaderName::from_static("idempotency-key");
const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

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
    let ticket = st.idempotency.ticket(&caller, &key, &fingerprint);
    let sealing = answer_key(&req);
    req.set_payload(payload(body));
    // The request runs to its end, and its answer is kept, even if the client goes away
    // meanwhile: the answer must describe the write it made. It runs in an ambient armed with
    // its key: its first unit of work claims the key in its own transaction, which the store
    // holds open, so the answer is kept in that transaction and commits with the writes
    // (docs/decisions.md, "Idempotency keys: claimed and kept inside the write's
    // transaction"); dropped without that commit, the writes roll back and the key is free.
    let service = st.idempotency.clone();
    let task = actix_web::rt::spawn(async move {
        let ambient = Ambient::new();
        service.arm(&ambient, &ticket);
        let res = match ambient.scope(next.call(req)).await {
            Ok(res) => res,
            Err(e) => {
                // An `Err` is rendered by actix later; it is not a kept answer, and the writes
                // held for it roll back.
                return match service.finish(&ambient, &ticket, End::Abandon).await {
                    Ok(Some(claim)) => Err(refused_error(&claim).into()),
                    Ok(None) | Err(_) => Err(e),
                };
            }
        };
        let (req, res) = res.into_parts();
        let (res, body) = res.into_parts();
        let bytes = match actix_web::body::to_bytes(body).await {
            Ok(b) => b,
            Err(_) => {
                let _rolled_back = service.finish(&ambient, &ticket, End::Abandon).await;
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
        let kept = if res.extensions().contains::<ShownOnce>() {
            sealing.as_ref().and_then(|k| answer.seal(k, &fingerprint))
        } else {
            Some(answer)
        };
        // Not kept (it could not be sealed): the writes commit alone.
        let end = kept.as_ref().map_or(End::Commit, End::answered);
        let outcome = service.finish(&ambient, &ticket, end).await;
        match outcome {
            Ok(None) => Ok(ServiceResponse::new(req, res.set_body(BoxBody::new(bytes)))),
            // Another request holds or answered the key: this one wrote nothing.
            Ok(Some(claim)) => {
                let res = answer_claim(&claim, sealing.as_ref(), &fingerprint);
                Ok(ServiceResponse::new(req, res))
            }
            Err(e) => {
                // The writes the answer describes did not commit: it must not be sent.
                tracing::warn!(error = %e, "could not commit an idempotent request");
                Ok(ServiceResponse::new(
                    req,
                    ApiError::from(e).error_response(),
                ))
            }
        }
    });
    match task.await {
        Ok(res) => res,
        Err(_) => {
            // The handler panicked: nothing to keep (its held writes rolled back with its
            // ambient, and the key with them).
            tracing::error!("handler panicked");
            Err(ApiError::generic_internal().into())
        }
    }
}

/// The error answering a request whose key another request holds or answered differently.
fn refused_error(claim: &Claim) -> ApiError {
    match claim {
        Claim::Reused => ApiError::idempotency_key_reused(),
        Claim::InUse | Claim::Replay(_) => ApiError::idempotency_key_in_use(),
    }
}

/// The answer to a request whose key another request holds or answered: 409 while it runs, the
/// kept answer to the same request (a sealed one only for the token that asked), else 422.
fn answer_claim(
    claim: &Claim,
    sealing: Option<&AnswerKey>,
    fingerprint: &Fingerprint,
) -> HttpResponse {
    match claim {
        Claim::Replay(answer) if answer.is_sealed() => {
            match sealing.and_then(|k| answer.open(k, fingerprint)) {
                Some(answer) => replay(&answer),
                None => ApiError::idempotency_answer_sealed().error_response(),
            }
        }
        Claim::Replay(answer) => replay(answer),
        Claim::InUse | Claim::Reused => refused_error(claim).error_response(),
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
