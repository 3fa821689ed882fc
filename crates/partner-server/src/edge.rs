//! The edge of the HTTP listeners: every connection's bytes pass a guard before actix-http's
//! parser sees them (extensions §12, "Logs hold no secret at any level").
//!
//! actix-http answers the requests it cannot parse with an empty body and logs one `ERROR` line
//! for each, and its limits are fixed in its code (96 header fields, a 128 KiB head, no bound of
//! its own on the request line). The guard reads each request head as it streams by and, before
//! actix sees a byte of an offending head, answers it itself with the error body, code
//! `invalid_request`, and closes the connection:
//!
//! | status | when |
//! |---|---|
//! | 414 | the request line is over [`MAX_REQUEST_LINE`] bytes |
//! | 431 | the header section is over [`MAX_HEADER_BYTES`] bytes, or has more than [`MAX_HEADER_FIELDS`] fields |
//! | 408 | the head is not complete [`HEAD_TIMEOUT`] after its first byte |
//! | 400 | the head is not HTTP/1.x (`httparse` refuses it), or its body framing is invalid (see [`framing`]) |
//!
//! A body that stalls for [`BODY_IDLE_TIMEOUT`] closes the connection (actix owns the request by
//! then, so the guard cannot answer it).
//! Each is counted in `http_rejected_requests_total{reason}` and logged at `debug`. Bodies are
//! skipped by their framing (`Content-Length` or chunked), so every request of a keep-alive
//! connection is guarded. A connection that sends no byte within [`FIRST_BYTE_TIMEOUT`] is
//! closed without an answer (no request began).

use std::io;
use std::net::TcpListener;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use actix_http::body::MessageBody;
use actix_http::header::{HeaderMap, HeaderValue};
use actix_http::{HttpService, KeepAlive, Request, Response};
use actix_service::{
    IntoServiceFactory, Service, ServiceFactory, ServiceFactoryExt, apply_fn_factory, fn_service,
    map_config,
};
use actix_web::dev::AppConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// The longest request line (method, target, version; without the line end).
pub const MAX_REQUEST_LINE: usize = 16 * 1024;
/// The largest header section (every header line with its line end, after the request line).
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// The most header fields. The ruling says 100; actix-http's parser holds at most 96 (a constant
/// of its code), so the guard refuses from the 97th on, with the error body, rather than let
/// actix answer 97-100 with an empty 431.
pub const MAX_HEADER_FIELDS: usize = 96;
/// How long a request head may take from its first byte.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a new connection may stay silent before it is closed.
pub const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request body may stall (no byte while the server waits for one) before the
/// connection is closed: a body that never completes holds no connection for ever.
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// After a refusal, how long and how much of what the client still sends is read and dropped.
const DRAIN_FOR: Duration = Duration::from_secs(1);
const DRAIN_BYTES: usize = 1 << 20;

/// The counter of guarded rejections.
pub const REJECTED: &str = "http_rejected_requests_total";

/// Why the guard refused a request: the `reason` label of [`REJECTED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    RequestLineTooLong,
    HeadersTooLarge,
    TooManyHeaders,
    HeadTimeout,
    Malformed,
    /// The body stalled for [`BODY_IDLE_TIMEOUT`]: the connection is closed (actix owns the
    /// request by then, so no answer of the guard's can be written).
    BodyTimeout,
}

impl Rejection {
    /// Every reason, exported at 0 from the start.
    pub const ALL: [Rejection; 6] = [
        Rejection::RequestLineTooLong,
        Rejection::HeadersTooLarge,
        Rejection::TooManyHeaders,
        Rejection::HeadTimeout,
        Rejection::Malformed,
        Rejection::BodyTimeout,
    ];

    pub fn reason(self) -> &'static str {
        match self {
            Rejection::RequestLineTooLong => "request_line_too_long",
            Rejection::HeadersTooLarge => "headers_too_large",
            Rejection::TooManyHeaders => "too_many_headers",
            Rejection::HeadTimeout => "header_timeout",
            Rejection::Malformed => "malformed",
            Rejection::BodyTimeout => "body_timeout",
        }
    }

    fn status_line(self) -> &'static str {
        match self {
            Rejection::RequestLineTooLong => "414 URI Too Long",
            Rejection::HeadersTooLarge | Rejection::TooManyHeaders => {
                "431 Request Header Fields Too Large"
            }
            Rejection::HeadTimeout | Rejection::BodyTimeout => "408 Request Timeout",
            Rejection::Malformed => "400 Bad Request",
        }
    }

    fn message(self) -> String {
        match self {
            Rejection::RequestLineTooLong => {
                format!("the request line is longer than {MAX_REQUEST_LINE} bytes")
            }
            Rejection::HeadersTooLarge => {
                format!("the request headers are larger than {MAX_HEADER_BYTES} bytes")
            }
            Rejection::TooManyHeaders => {
                format!("the request has more than {MAX_HEADER_FIELDS} header fields")
            }
            Rejection::HeadTimeout => format!(
                "the request headers were not complete {} seconds after their first byte",
                HEAD_TIMEOUT.as_secs()
            ),
            Rejection::Malformed => "the request is not a valid HTTP/1.1 request".to_owned(),
            Rejection::BodyTimeout => format!(
                "the request body stalled for {} seconds",
                BODY_IDLE_TIMEOUT.as_secs()
            ),
        }
    }

    /// The whole answer: the spec's error body, closing the connection.
    fn response(self) -> Vec<u8> {
        let body = serde_json::json!({
            "error": { "code": "invalid_request", "message": self.message() }
        })
        .to_string();
        format!(
            "HTTP/1.1 {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             cache-control: no-store\r\nconnection: close\r\n\r\n{body}",
            self.status_line(),
            body.len()
        )
        .into_bytes()
    }

    /// Counts and logs (at `debug`, never higher: anyone can send these) one rejection.
    fn record(self) {
        metrics::counter!(REJECTED, "reason" => self.reason()).increment(1);
        tracing::debug!(reason = self.reason(), "request refused before parsing");
    }
}

/// Registers [`REJECTED`] at 0 for every reason.
pub fn export_rejections() {
    for r in Rejection::ALL {
        metrics::counter!(REJECTED, "reason" => r.reason()).increment(0);
    }
}

/// Where the guard is in the connection's byte stream.
#[derive(Debug)]
enum Phase {
    /// Before a request (line ends between requests are skipped).
    Idle,
    /// In the request line, `len` bytes so far.
    Line { len: usize },
    /// In the header section, which starts at `start` in the head buffer.
    Headers {
        start: usize,
        fields: usize,
        line: usize,
    },
    /// In a body of known length: bytes left.
    Length(u64),
    /// In a chunked body.
    Chunked(Chunk),
    /// Answering a refused request: the answer and how much of it is written.
    Refusing { answer: Vec<u8>, written: usize },
    /// Answered: what the client still sends is read and dropped for a moment, so closing the
    /// socket with unread bytes (a reset) does not destroy the answer before it is read.
    Draining {
        until: Pin<Box<Sleep>>,
        budget: usize,
    },
    /// Done: reads see the end of the stream, writes are dropped.
    Closed,
}

#[derive(Debug)]
enum Chunk {
    Size { size: u64, ext: bool },
    Data(u64),
    DataEnd,
    Trailer { len: usize },
}

/// A connection whose request heads are checked before the HTTP parser reads them.
#[derive(Debug)]
pub struct Guarded<T> {
    io: T,
    phase: Phase,
    /// The head read so far (cleared at its end).
    head: Vec<u8>,
    /// The deadline of the current head, or of the first byte of the connection.
    timer: Option<Pin<Box<Sleep>>>,
    /// Whether `timer` is the first-byte one (its expiry closes silently).
    waiting_first_byte: bool,
}

impl<T> Guarded<T> {
    pub fn new(io: T) -> Self {
        Self {
            io,
            phase: Phase::Idle,
            head: Vec::new(),
            timer: Some(Box::pin(tokio::time::sleep(FIRST_BYTE_TIMEOUT))),
            waiting_first_byte: true,
        }
    }

    /// Follows `bytes` through the request stream; the first refusal met, if any.
    fn scan(&mut self, bytes: &[u8]) -> Option<Rejection> {
        let mut i = 0;
        while i < bytes.len() {
            let Some(&b) = bytes.get(i) else { break };
            match &mut self.phase {
                Phase::Idle => {
                    if b != b'\r' && b != b'\n' {
                        self.waiting_first_byte = false;
                        self.timer = Some(Box::pin(tokio::time::sleep(HEAD_TIMEOUT)));
                        self.head.clear();
                        self.head.push(b);
                        self.phase = Phase::Line { len: 1 };
                    }
                    i += 1;
                }
                Phase::Line { len } => {
                    self.head.push(b);
                    i += 1;
                    if b == b'\n' {
                        let start = self.head.len();
                        self.phase = Phase::Headers {
                            start,
                            fields: 0,
                            line: 0,
                        };
                    } else if b != b'\r' {
                        *len += 1;
                        if *len > MAX_REQUEST_LINE {
                            return Some(Rejection::RequestLineTooLong);
                        }
                    }
                }
                Phase::Headers {
                    start,
                    fields,
                    line,
                } => {
                    self.head.push(b);
                    i += 1;
                    if self.head.len() - *start > MAX_HEADER_BYTES {
                        return Some(Rejection::HeadersTooLarge);
                    }
                    match b {
                        b'\n' if *line == 0 => {
                            if let Some(r) = self.head_complete() {
                                return Some(r);
                            }
                        }
                        b'\n' => {
                            *line = 0;
                            *fields += 1;
                            if *fields > MAX_HEADER_FIELDS {
                                return Some(Rejection::TooManyHeaders);
                            }
                        }
                        b'\r' => {}
                        _ => *line += 1,
                    }
                }
                Phase::Length(left) => {
                    let take = (bytes.len() - i).min(usize::try_from(*left).unwrap_or(usize::MAX));
                    i += take;
                    *left -= take as u64;
                    if *left == 0 {
                        self.phase = Phase::Idle;
                    }
                }
                Phase::Chunked(chunk) => {
                    match chunk {
                        Chunk::Size { size, ext } => match b {
                            b'\n' if *size == 0 => *chunk = Chunk::Trailer { len: 0 },
                            b'\n' => *chunk = Chunk::Data(*size),
                            b'\r' => {}
                            _ if !*ext && b.is_ascii_hexdigit() => {
                                let d = u64::from(char::from(b).to_digit(16).unwrap_or(0));
                                *size = size.saturating_mul(16).saturating_add(d);
                            }
                            _ => *ext = true,
                        },
                        Chunk::Data(left) => {
                            let take =
                                (bytes.len() - i).min(usize::try_from(*left).unwrap_or(usize::MAX));
                            *left -= take as u64;
                            if *left == 0 {
                                *chunk = Chunk::DataEnd;
                            }
                            i += take;
                            continue;
                        }
                        Chunk::DataEnd => {
                            if b == b'\n' {
                                *chunk = Chunk::Size {
                                    size: 0,
                                    ext: false,
                                };
                            }
                        }
                        Chunk::Trailer { len } => match b {
                            b'\n' if *len == 0 => self.phase = Phase::Idle,
                            b'\n' => *len = 0,
                            b'\r' => {}
                            _ => *len += 1,
                        },
                    }
                    i += 1;
                }
                Phase::Refusing { .. } | Phase::Draining { .. } | Phase::Closed => break,
            }
        }
        None
    }

    /// The head is complete: it must parse; its framing says where the next request starts.
    fn head_complete(&mut self) -> Option<Rejection> {
        self.timer = None;
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADER_FIELDS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&self.head) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) | Err(_) => return Some(Rejection::Malformed),
        }
        let (chunked, length) = match framing(req.headers) {
            Ok(f) => f,
            Err(r) => return Some(r),
        };
        self.head.clear();
        self.phase = match (chunked, length) {
            (true, _) => Phase::Chunked(Chunk::Size {
                size: 0,
                ext: false,
            }),
            (false, Some(n)) if n > 0 => Phase::Length(n),
            _ => Phase::Idle,
        };
        None
    }

    fn refuse(&mut self, r: Rejection) {
        r.record();
        self.timer = None;
        self.head = Vec::new();
        self.phase = Phase::Refusing {
            answer: r.response(),
            written: 0,
        };
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> Guarded<T> {
    /// Writes the refusal and closes the writing half, then drains what the client still
    /// sends; then the stream ends for the reader (and actix closes the connection).
    fn poll_refusal(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match &mut self.phase {
                Phase::Refusing { answer, written } => {
                    let rest = answer.get(*written..).unwrap_or_default();
                    if rest.is_empty() {
                        ready!(Pin::new(&mut self.io).poll_shutdown(cx))?;
                        self.phase = Phase::Draining {
                            until: Box::pin(tokio::time::sleep(DRAIN_FOR)),
                            budget: DRAIN_BYTES,
                        };
                        continue;
                    }
                    match ready!(Pin::new(&mut self.io).poll_write(cx, rest)) {
                        Ok(0) | Err(_) => self.phase = Phase::Closed,
                        Ok(n) => *written += n,
                    }
                }
                Phase::Draining { until, budget } => {
                    if until.as_mut().poll(cx).is_ready() || *budget == 0 {
                        self.phase = Phase::Closed;
                        continue;
                    }
                    let mut scratch = [0u8; 4096];
                    let mut sink = ReadBuf::new(&mut scratch);
                    match ready!(Pin::new(&mut self.io).poll_read(cx, &mut sink)) {
                        Ok(()) if !sink.filled().is_empty() => {
                            *budget = budget.saturating_sub(sink.filled().len());
                        }
                        _ => self.phase = Phase::Closed,
                    }
                }
                _ => return Poll::Ready(Ok(())),
            }
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.phase {
            Phase::Refusing { .. } | Phase::Draining { .. } => return this.poll_refusal(cx),
            Phase::Closed => return Poll::Ready(Ok(())),
            _ => {}
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let fresh = buf.filled().get(before..).unwrap_or_default();
                if let Some(r) = this.scan(fresh) {
                    // Not a byte of the refused head reaches the parser.
                    buf.set_filled(before);
                    this.refuse(r);
                    return this.poll_refusal(cx);
                }
                match this.phase {
                    // The body moved: its stall timer starts again.
                    Phase::Length(_) | Phase::Chunked(_) if !fresh.is_empty() => {
                        this.timer = Some(Box::pin(tokio::time::sleep(BODY_IDLE_TIMEOUT)));
                    }
                    // Between requests actix's keep-alive decides; no timer of the guard's.
                    Phase::Idle if !this.waiting_first_byte => this.timer = None,
                    _ => {}
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                if let Some(timer) = &mut this.timer
                    && timer.as_mut().poll(cx).is_ready()
                {
                    this.timer = None;
                    if this.waiting_first_byte {
                        this.phase = Phase::Closed;
                        return Poll::Ready(Ok(()));
                    }
                    if matches!(this.phase, Phase::Length(_) | Phase::Chunked(_)) {
                        Rejection::BodyTimeout.record();
                        this.phase = Phase::Closed;
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "request body stalled",
                        )));
                    }
                    this.refuse(Rejection::HeadTimeout);
                    return this.poll_refusal(cx);
                }
                Poll::Pending
            }
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match this.phase {
            // The connection is being refused: nothing of actix's may interleave with the answer.
            Phase::Refusing { .. } | Phase::Draining { .. } | Phase::Closed => {
                Poll::Ready(Ok(buf.len()))
            }
            _ => Pin::new(&mut this.io).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.phase {
            Phase::Refusing { .. } | Phase::Draining { .. } => this.poll_refusal(cx),
            // The refusal shut the writing half already.
            Phase::Closed => Poll::Ready(Ok(())),
            _ => Pin::new(&mut this.io).poll_shutdown(cx),
        }
    }
}

/// The body framing of a parsed head (RFC 9112 §6): `(chunked, Content-Length)`, or the refusal
/// of a framing actix-http would answer with an empty 400: a `Content-Length` that is not
/// digits only (`abc`, `-1`, `+2`) or too large, two different lengths, a `Transfer-Encoding`
/// other than exactly `chunked` (`chunkedx`, `gzip, chunked`; actix decodes no other coding), or
/// both headers at once (a request-smuggling shape).
fn framing(headers: &[httparse::Header<'_>]) -> Result<(bool, Option<u64>), Rejection> {
    let mut length: Option<u64> = None;
    let mut chunked = false;
    for h in headers {
        let value = std::str::from_utf8(h.value).map_err(|_| Rejection::Malformed)?;
        let value = value.trim_matches([' ', '\t']);
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if chunked || !value.eq_ignore_ascii_case("chunked") {
                return Err(Rejection::Malformed);
            }
            chunked = true;
        } else if h.name.eq_ignore_ascii_case("content-length") {
            if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(Rejection::Malformed);
            }
            let n = value.parse::<u64>().map_err(|_| Rejection::Malformed)?;
            if length.is_some_and(|l| l != n) {
                return Err(Rejection::Malformed);
            }
            length = Some(n);
        }
    }
    if chunked && length.is_some() {
        return Err(Rejection::Malformed);
    }
    Ok((chunked, length))
}

/// An HTTP/1 server on `listener` whose connections pass the guard, serving the app `factory`
/// makes on each of `workers` threads (as `actix_web::HttpServer` would), draining at most
/// `drain_secs` when stopped; `signals`: whether SIGINT/SIGTERM stop it.
pub fn serve<F, I, S, B>(
    listener: TcpListener,
    workers: usize,
    drain_secs: u64,
    signals: bool,
    factory: F,
) -> io::Result<actix_server::Server>
where
    F: Fn() -> I + Send + Clone + 'static,
    I: IntoServiceFactory<S, Request>,
    S: ServiceFactory<Request, Config = AppConfig> + 'static,
    S::Error: Into<actix_web::Error> + 'static,
    S::InitError: std::fmt::Debug,
    S::Response: Into<Response<B>> + 'static,
    <S::Service as actix_service::Service<Request>>::Future: 'static,
    S::Service: 'static,
    B: MessageBody + 'static,
{
    let local = listener.local_addr()?;
    let mut builder = actix_server::Server::build()
        .workers(workers)
        .shutdown_timeout(drain_secs);
    if !signals {
        builder = builder.disable_signals();
    }
    builder = builder.listen("partner-http", listener, move || {
        let app = factory()
            .into_factory()
            .map_err(|e| e.into().error_response());
        let app = apply_fn_factory(app, |mut req: Request, app: &_| {
            own_headers(req.head_mut().headers_mut());
            app.call(req)
        });
        let http = HttpService::build()
            .keep_alive(KeepAlive::Timeout(Duration::from_secs(5)))
            // The guard times heads from their first byte; actix's timer would run from the
            // connection's start and answer with an empty body.
            .client_request_timeout(Duration::ZERO)
            .client_disconnect_timeout(Duration::from_secs(1))
            .local_addr(local)
            .h1(map_config(app, move |_| AppConfig::default()));
        fn_service(|io: TcpStream| {
            let peer = io.peer_addr().ok();
            std::future::ready(Ok((Guarded::new(io), peer)))
        })
        .and_then(http)
    })?;
    Ok(builder.run())
}

/// Moves the request's headers into a map of their own size, each value a copy of its bytes.
/// actix-http parses a head into values that are slices of the connection's read buffer, into a
/// map made for 16 names (~6.7 KB), and keeps up to 128 request heads per worker thread in each
/// of two pools (actix-http's `MessagePool`, actix-web's `HttpRequestPool`) without clearing
/// their headers until reuse: each pooled head kept its map and its connection's whole 8 KiB
/// read buffer alive, so a burst of a few hundred connections left ~6 MB held for good, and the
/// allocator pages around it (docs/performance-history.md, "What a burst of connections
/// leaves"). The copies are a few bytes a value and one small map a request.
pub(crate) fn own_headers(headers: &mut HeaderMap) {
    let mut owned = HeaderMap::with_capacity(headers.len());
    let mut name = None;
    for (first, value) in headers.drain() {
        // A name comes with the first value of each name only.
        if first.is_some() {
            name = first;
        }
        let Some(name) = &name else { continue };
        let mut copy = HeaderValue::from_bytes(value.as_bytes()).unwrap_or_else(|_| value.clone());
        copy.set_sensitive(value.is_sensitive());
        owned.append(name.clone(), copy);
    }
    *headers = owned;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Guarded<()> {
        Guarded {
            io: (),
            phase: Phase::Idle,
            head: Vec::new(),
            timer: None,
            waiting_first_byte: false,
        }
    }

    #[test]
    fn headers_no_longer_hold_the_read_buffer_or_a_large_map() {
        use actix_http::header::{AUTHORIZATION, HeaderName, USER_AGENT};
        use actix_web::web::Bytes;
        // As actix-http's parser makes them: values sliced out of the connection's buffer.
        let buffer = Bytes::from(b"Bearer pk_live_abc curl/8.5 one two".repeat(200));
        let slice = |from: usize, to: usize| {
            HeaderValue::from_maybe_shared(buffer.slice(from..to)).expect("a valid value")
        };
        // As actix-http's pooled heads have it: a map made for 16 names.
        let mut headers = HeaderMap::with_capacity(16);
        let mut token = slice(0, 18);
        token.set_sensitive(true);
        headers.insert(AUTHORIZATION, token);
        headers.insert(USER_AGENT, slice(19, 27));
        let x = HeaderName::from_static("x-many");
        headers.append(x.clone(), slice(28, 31));
        headers.append(x.clone(), slice(32, 35));
        assert!(!buffer.is_unique(), "the values share the buffer");

        own_headers(&mut headers);
        assert!(buffer.is_unique(), "no value holds the buffer any more");
        let auth = headers.get(AUTHORIZATION).expect("kept");
        assert_eq!(auth.as_bytes(), b"Bearer pk_live_abc");
        assert!(auth.is_sensitive(), "sensitivity kept");
        assert_eq!(headers.get(USER_AGENT).expect("kept"), "curl/8.5");
        let many: Vec<_> = headers.get_all(&x).map(|v| v.as_bytes()).collect();
        assert_eq!(many, [b"one", b"two"], "every value, in order");
        assert_eq!(headers.len(), 4);
        assert!(headers.capacity() < 16, "{}", headers.capacity());
    }

    #[tokio::test]
    async fn keep_alive_requests_with_bodies_pass_and_each_head_is_checked() {
        let mut g = guard();
        let two = b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(g.scan(two), None);
        assert!(matches!(g.phase, Phase::Idle), "{:?}", g.phase);
        let chunked = b"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nX-T: 1\r\n\r\n";
        for b in chunked.iter() {
            assert_eq!(g.scan(std::slice::from_ref(b)), None);
        }
        assert!(matches!(g.phase, Phase::Idle), "{:?}", g.phase);
        let long = format!("GET /{} HTTP/1.1\r\n", "a".repeat(MAX_REQUEST_LINE));
        assert_eq!(g.scan(long.as_bytes()), Some(Rejection::RequestLineTooLong));
    }

    #[tokio::test]
    async fn limits_of_the_header_section() {
        let mut many = String::from("GET / HTTP/1.1\r\n");
        for i in 0..MAX_HEADER_FIELDS {
            many.push_str(&format!("X-{i}: v\r\n"));
        }
        let mut g = guard();
        assert_eq!(g.scan(format!("{many}\r\n").as_bytes()), None);
        let mut g = guard();
        assert_eq!(
            g.scan(format!("{many}X-Last: v\r\n\r\n").as_bytes()),
            Some(Rejection::TooManyHeaders)
        );
        let big = format!(
            "GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n",
            "b".repeat(MAX_HEADER_BYTES)
        );
        assert_eq!(
            guard().scan(big.as_bytes()),
            Some(Rejection::HeadersTooLarge)
        );
        assert_eq!(
            guard().scan(b"GET / HTTP/1.1\r\nBad Header\r\n\r\n"),
            Some(Rejection::Malformed)
        );
    }

    #[tokio::test]
    async fn invalid_body_framing_is_refused_with_the_error_body() {
        for framing in [
            "Content-Length: abc",
            "Content-Length: -1",
            "Content-Length: +2",
            "Content-Length: 99999999999999999999999",
            "Content-Length: 1\r\nContent-Length: 2",
            "Content-Length: 2\r\nTransfer-Encoding: chunked",
            "Transfer-Encoding: chunkedx",
            "Transfer-Encoding: gzip, chunked",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
        ] {
            let head = format!("POST /api/v1/leads HTTP/1.1\r\nHost: x\r\n{framing}\r\n\r\n");
            assert_eq!(
                guard().scan(head.as_bytes()),
                Some(Rejection::Malformed),
                "{framing}"
            );
        }
        // Repeated equal lengths and a plain length pass (RFC 9112 §6.3).
        for framing in [
            "Content-Length: 2\r\nContent-Length: 2",
            "Content-Length: 0",
            "Transfer-Encoding: Chunked",
        ] {
            let head = format!("POST /a HTTP/1.1\r\nHost: x\r\n{framing}\r\n\r\n");
            assert_eq!(guard().scan(head.as_bytes()), None, "{framing}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_closes_the_connection_and_an_idle_one_stays() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut client, server) = tokio::io::duplex(4096);
        let mut g = Guarded::new(server);
        let mut buf = vec![0u8; 1024];
        client
            .write_all(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nok")
            .await
            .expect("write");
        assert!(g.read(&mut buf).await.expect("head") > 0);
        client.write_all(b"ok").await.expect("write");
        assert_eq!(g.read(&mut buf).await.expect("rest of the body"), 2);
        // Complete: an idle keep-alive connection is left to actix.
        let idle = tokio::time::timeout(BODY_IDLE_TIMEOUT * 6, g.read(&mut buf)).await;
        assert!(
            idle.is_err(),
            "the guard closed an idle connection: {idle:?}"
        );

        client
            .write_all(b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
            .await
            .expect("write");
        assert!(g.read(&mut buf).await.expect("head") > 0);
        let stalled = g
            .read(&mut buf)
            .await
            .expect_err("the stalled body times out");
        assert_eq!(stalled.kind(), std::io::ErrorKind::TimedOut);
    }
}
