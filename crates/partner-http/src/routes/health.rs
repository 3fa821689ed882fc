//! Liveness and readiness probes.

use actix_web::{HttpResponse, web};

use crate::AppState;

/// 200 while the process runs.
pub(super) async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({ "status": "ok" }))
}

/// 200 when the database answers, else 503; 503 from the moment the process begins to stop
/// (a load balancer then sends it nothing new while it drains).
pub(super) async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    if state.stopping.load(std::sync::atomic::Ordering::Relaxed) {
        metrics::gauge!(crate::READY_GAUGE).set(0.0);
        return HttpResponse::ServiceUnavailable().json(serde_json::json!({
            "error": { "code": "unavailable", "message": "the server is shutting down" }
        }));
    }
    let ping = state.readiness.ping().await;
    metrics::gauge!(crate::READY_GAUGE).set(if ping.is_ok() { 1.0 } else { 0.0 });
    match ping {
        Ok(()) => HttpResponse::Ok().json(serde_json::json!({ "status": "ready" })),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check failed");
            HttpResponse::ServiceUnavailable().json(serde_json::json!({
                "error": { "code": "unavailable", "message": "the database does not answer" }
            }))
        }
    }
}
