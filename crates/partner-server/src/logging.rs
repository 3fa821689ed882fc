//! The process's log: one layer writing text or JSON lines to standard output, behind two
//! filters that must both let an event through:
//!
//! - `RUST_LOG` (an `EnvFilter`), what the operator asked for;
//! - [`caps`], which no `RUST_LOG` can lift: the crates below print, at `debug` and `trace`,
//!   statement parameters (`tokio_postgres`: webhook secrets, custom header values, e-mails and
//!   phones), URLs and headers (HTTP clients and servers), or Redis commands. They log at most
//!   `info`, even under `RUST_LOG=trace` or `RUST_LOG=tokio_postgres=trace`.
//!
//! actix-http's `ERROR` line per unparsable request is dropped ([`QuietStreamErrors`]). Our own
//! crates log no secret, token, header value or personal data at any level.

use tracing::{Event, Level, Metadata};
use tracing_subscriber::filter::{FilterExt, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// Crates capped at `info` whatever `RUST_LOG` says (a target matches its crate and modules).
pub const CAPPED_TARGETS: [&str; 24] = [
    // PostgreSQL: `executing statement … with parameters: […]`.
    "tokio_postgres",
    "postgres_protocol",
    "postgres_types",
    "diesel",
    "diesel_async",
    "diesel_migrations",
    "deadpool",
    "deadpool_postgres",
    // Redis: commands and keys.
    "redis",
    // HTTP clients (webhook deliveries): URLs, which may carry a credential in the query.
    "reqwest",
    "hyper",
    "hyper_util",
    "h2",
    "want",
    "rustls",
    "tokio_rustls",
    // HTTP server: request heads.
    "actix_http",
    "actix_server",
    "actix_web",
    "actix_router",
    "tracing_actix_web",
    "httparse",
    "mio",
    "url",
];

/// The level [`CAPPED_TARGETS`] log at most.
pub const CAP: LevelFilter = LevelFilter::INFO;

/// The filter no `RUST_LOG` lifts: [`CAPPED_TARGETS`] at [`CAP`], everything else open (the
/// `RUST_LOG` filter decides for it).
pub fn caps() -> Targets {
    Targets::new()
        .with_default(LevelFilter::TRACE)
        .with_targets(CAPPED_TARGETS.iter().map(|t| (*t, CAP)))
}

/// Drops actix-http's `ERROR` line for a connection whose request it could not parse (or that
/// broke off): anyone can send those, and the guard of `crate::edge` refuses, counts and logs at
/// `debug` nearly all of them before actix sees them. The few left (heads `httparse` accepts but
/// actix refuses) are counted here, as `malformed`.
#[derive(Debug, Clone, Copy)]
pub struct QuietStreamErrors;

const DISPATCHER: &str = "actix_http::h1::dispatcher";

impl<S> Filter<S> for QuietStreamErrors {
    fn enabled(&self, _: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        let meta = event.metadata();
        if meta.target() != DISPATCHER || *meta.level() != Level::ERROR {
            return true;
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        let Some(cause) = message.0.strip_prefix("stream error: ") else {
            return true;
        };
        if cause.starts_with("request parse error") {
            metrics::counter!(crate::edge::REJECTED, "reason" => crate::edge::Rejection::Malformed.reason())
                .increment(1);
        }
        false
    }
}

/// The `message` field of an event.
struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

/// Parses `RUST_LOG`-style directives, with the `audit` target always at `info`: an admin's
/// cross-partner read is recorded whatever level the operator chose (extensions §12), so
/// `RUST_LOG=warn` cannot silence it.
pub fn env_filter(directives: &str) -> Result<EnvFilter, String> {
    let audit = "audit=info"
        .parse()
        .map_err(|e| format!("the audit directive: {e}"))?;
    EnvFilter::try_new(directives)
        .map(|f| f.add_directive(audit))
        .map_err(|e| format!("RUST_LOG: not a valid log filter ({e})"))
}

/// Installs the process's subscriber: `directives` (from `RUST_LOG`) and [`caps`], written as
/// one JSON object a line when `json`, else as text.
pub fn init(directives: &str, json: bool) -> Result<(), String> {
    let filter = QuietStreamErrors.and(env_filter(directives)?).and(caps());
    let fmt = tracing_subscriber::fmt::layer();
    let layer: Box<dyn Layer<Registry> + Send + Sync> = if json {
        fmt.json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .boxed()
    } else {
        fmt.boxed()
    };
    tracing_subscriber::registry()
        .with(layer.with_filter(filter))
        .try_init()
        .map_err(|e| format!("log setup: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    #[test]
    fn the_audit_target_logs_at_info_whatever_the_level() {
        use tracing_subscriber::layer::SubscriberExt as _;
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        struct Count(std::sync::Arc<std::sync::atomic::AtomicUsize>);
        impl<S: tracing::Subscriber> Layer<S> for Count {
            fn on_event(&self, _: &Event<'_>, _: Context<'_, S>) {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let filter = env_filter("warn").expect("filter");
        let subscriber =
            tracing_subscriber::registry().with(Count(seen.clone()).with_filter(filter));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "audit", "a cross read");
            tracing::info!(target: "partner_http", "not at warn");
        });
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn the_caps_stop_debug_and_trace_of_the_named_crates_only() {
        let caps = caps();
        for target in [
            "tokio_postgres::query",
            "reqwest::connect",
            "actix_http::h1",
            "redis",
        ] {
            assert!(!caps.would_enable(target, &Level::DEBUG), "{target}");
            assert!(!caps.would_enable(target, &Level::TRACE), "{target}");
            assert!(caps.would_enable(target, &Level::INFO), "{target}");
        }
        assert!(caps.would_enable("partner_postgres", &Level::TRACE));
        assert!(caps.would_enable("partner_http::middleware", &Level::TRACE));
    }
}
