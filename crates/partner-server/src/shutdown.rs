//! The stop of the HTTP listeners on SIGTERM or SIGINT (extensions §5 and §11: "requests in
//! flight are answered, not cut"), such that every connection the process accepted gets an answer
//! (docs/decisions.md, 2026-11-26, "SIGTERM: every accepted connection is answered"):
//!
//! 1. at the signal, `/readyz` answers 503 and every answer carries `Connection: close`
//!    ([`close_when_stopping`]); the delivery worker stops claiming;
//! 2. for `PARTNER_SHUTDOWN_DRAIN` the listeners accept and serve as usual, so that a load
//!    balancer that watches `/readyz` moves away before anything is refused;
//! 3. the kernel drops new connection attempts on the listening sockets ([`refuse_new`]: a socket
//!    filter that drops SYN segments, Linux): a client's `connect` then waits and is refused once
//!    the process has closed the socket, with nothing sent. Handshakes already under way complete
//!    and are accepted and served for [`SETTLE`];
//! 4. the servers stop accepting, and a connection still in the kernel's listen queue is accepted
//!    here and answered 503 `unavailable` with `Retry-After: 1` and `Connection: close`
//!    ([`answer_unavailable`]): closing the socket with it queued would reset it unanswered;
//! 5. the servers stop gracefully: every request they accepted is answered (at most
//!    [`HTTP_DRAIN_SECS`]).
//!
//! Without the socket filter (another OS, or the filter refused) a connection whose handshake the
//! kernel completes between the last look at the queue and the close is still reset.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix_server::ServerHandle;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// The longest the servers wait, once they stop accepting, for the requests they accepted.
pub const HTTP_DRAIN_SECS: u64 = 10;
/// How long handshakes under way when new connections are refused get to complete (and be
/// served) before the servers stop accepting: a loopback or LAN round trip is well within it.
pub const SETTLE: Duration = Duration::from_millis(200);
/// The listen queue is left when no connection came out of it for this long.
const QUIET: Duration = Duration::from_millis(100);
/// The longest the listen queue is emptied (without the filter, new connections may keep coming).
const QUEUE_AT_MOST: Duration = Duration::from_secs(1);
/// How long a queued connection gets to send its request and take the 503.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);
/// The most read of a queued request's head, and of its body.
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: u64 = 1 << 20;

/// A running HTTP server and a second handle on its listening socket (the server holds the
/// first): the socket outlives the server's stop of accepting, so nothing queued is reset.
#[derive(Debug)]
pub struct Listening {
    pub handle: ServerHandle,
    pub socket: TcpListener,
}

/// Resolves at SIGINT (Ctrl-C); never when that signal cannot be listened for.
async fn interrupt() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Resolves at SIGTERM or SIGINT with the signal's name.
#[cfg(unix)]
pub async fn signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal as unix_signal};
    match unix_signal(SignalKind::terminate()) {
        Ok(mut term) => tokio::select! {
            _ = term.recv() => "SIGTERM",
            () = interrupt() => "SIGINT",
        },
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; stopping on SIGINT only");
            interrupt().await;
            "SIGINT"
        }
    }
}

/// Resolves at Ctrl-C.
#[cfg(not(unix))]
pub async fn signal() -> &'static str {
    interrupt().await;
    "SIGINT"
}

/// The answer of [`close_when_stopping`]'s middleware.
type Answer<B> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<ServiceResponse<B>, actix_web::Error>>>,
>;

/// A middleware of the whole app: once `stopping` is set, every answer closes its connection
/// (clients of a stopping process open their next connection elsewhere).
pub fn close_when_stopping<S, B>(
    stopping: Arc<AtomicBool>,
) -> impl Fn(ServiceRequest, &S) -> Answer<B> + Clone
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error>,
    S::Future: 'static,
    B: 'static,
{
    move |req, srv| {
        let answer = srv.call(req);
        let stopping = stopping.clone();
        Box::pin(async move {
            let mut res = answer.await?;
            if stopping.load(Ordering::Relaxed) {
                res.response_mut()
                    .head_mut()
                    .set_connection_type(actix_http::ConnectionType::Close);
            }
            Ok(res)
        })
    }
}

/// Steps 3 to 5 of the module's sequence for `servers`.
pub async fn stop(servers: Vec<Listening>) {
    for s in &servers {
        refuse_new(&s.socket);
    }
    tokio::time::sleep(SETTLE).await;
    for s in &servers {
        s.handle.pause().await;
    }
    let mut answers = JoinSet::new();
    let mut queued = 0usize;
    for s in &servers {
        queued = queued.saturating_add(answer_queued(&s.socket, &mut answers).await);
    }
    if queued > 0 {
        tracing::info!(
            connections = queued,
            "connections still queued when the listeners stopped accepting were answered 503"
        );
    }
    let mut stops = JoinSet::new();
    for s in &servers {
        let handle = s.handle.clone();
        stops.spawn(async move { handle.stop(true).await });
    }
    while stops.join_next().await.is_some() {}
    while answers.join_next().await.is_some() {}
    drop(servers);
}

/// Makes the kernel drop connection attempts (SYN segments) on `socket` from now on: classic BPF
/// over the TCP header, whose 14th byte holds the flags. Segments of handshakes under way and of
/// accepted connections pass.
#[cfg(target_os = "linux")]
fn refuse_new(socket: &TcpListener) {
    use socket2::{SockFilter, SockRef};
    const LOAD_BYTE_ABS: u16 = 0x30; // BPF_LD | BPF_B | BPF_ABS
    const JUMP_IF_SET: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
    const RETURN: u16 = 0x06; // BPF_RET | BPF_K
    const SYN: u32 = 0x02;
    let program = [
        SockFilter::new(LOAD_BYTE_ABS, 0, 0, 13),
        // SYN set: on to the next (drop); else skip it (keep).
        SockFilter::new(JUMP_IF_SET, 0, 1, SYN),
        SockFilter::new(RETURN, 0, 0, 0),
        SockFilter::new(RETURN, 0, 0, u32::MAX),
    ];
    if let Err(e) = SockRef::from(socket).attach_filter(&program) {
        tracing::warn!(error = %e, "cannot refuse new connections before the stop; one that arrives as the listener closes may be reset");
    }
}

#[cfg(not(target_os = "linux"))]
fn refuse_new(_: &TcpListener) {}

/// Accepts what is left in `socket`'s listen queue and answers each with a 503 (a task in
/// `answers`), until the queue stays empty for [`QUIET`]; how many there were.
async fn answer_queued(socket: &TcpListener, answers: &mut JoinSet<()>) -> usize {
    let listener = match socket.try_clone().and_then(|s| {
        s.set_nonblocking(true)?;
        tokio::net::TcpListener::from_std(s)
    }) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "cannot look at the listen queue before the stop");
            return 0;
        }
    };
    let until = tokio::time::Instant::now() + QUEUE_AT_MOST;
    let mut n = 0usize;
    while tokio::time::Instant::now() < until {
        match tokio::time::timeout(QUIET, listener.accept()).await {
            Ok(Ok((stream, _))) => {
                n = n.saturating_add(1);
                answers.spawn(answer_unavailable(stream));
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "accepting a queued connection failed");
                break;
            }
            Err(_) => break,
        }
    }
    n
}

/// The whole answer to a request that arrived as the process stopped.
fn unavailable_response() -> Vec<u8> {
    let body = serde_json::json!({
        "error": {
            "code": "unavailable",
            "message": "the server is shutting down; retry in a second"
        }
    })
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         retry-after: 1\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads a queued connection's request (its head, and a body of at most [`MAX_BODY`] bytes),
/// answers 503 `unavailable` with `Retry-After: 1`, and closes after the client (what it still
/// sends is read and dropped, so that the close sends no reset over the answer). A connection
/// that closes without a request gets none; all within [`ANSWER_WITHIN`].
async fn answer_unavailable(mut stream: TcpStream) {
    let answered = tokio::time::timeout(ANSWER_WITHIN, async {
        let mut head = Vec::new();
        let mut chunk = [0u8; 8192];
        let mut body_left = 0u64;
        loop {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok::<(), std::io::Error>(());
            }
            head.extend_from_slice(chunk.get(..n).unwrap_or_default());
            let mut headers = [httparse::EMPTY_HEADER; 100];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&head) {
                Ok(httparse::Status::Complete(end)) => {
                    let length = req
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                        .and_then(|h| std::str::from_utf8(h.value).ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .unwrap_or(0);
                    let read = u64::try_from(head.len().saturating_sub(end)).unwrap_or(u64::MAX);
                    body_left = length.min(MAX_BODY).saturating_sub(read);
                    break;
                }
                Ok(httparse::Status::Partial) if head.len() < MAX_HEAD => {}
                _ => break,
            }
        }
        while body_left > 0 {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            body_left = body_left.saturating_sub(u64::try_from(n).unwrap_or(u64::MAX));
        }
        stream.write_all(&unavailable_response()).await?;
        stream.shutdown().await?;
        while stream.read(&mut chunk).await? > 0 {}
        Ok(())
    })
    .await;
    if let Ok(Err(e)) = answered {
        tracing::debug!(error = %e, "a queued connection ended before its 503 was read");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_the_error_body_with_retry_after() {
        let answer = String::from_utf8(unavailable_response()).unwrap_or_default();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
        assert!(head.contains("\r\nretry-after: 1\r\n"), "{head}");
        assert!(head.contains("\r\nconnection: close"), "{head}");
        assert!(head.contains(&format!("content-length: {}\r\n", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        assert_eq!(v["error"]["code"], "unavailable");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_queued_connection_is_answered_503_and_a_new_one_is_not_taken() {
        let socket = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = socket.local_addr().expect("address");
        // Completed by the kernel, never accepted by a server: in the listen queue.
        let mut queued = TcpStream::connect(address).await.expect("connect");
        queued
            .write_all(
                b"POST /internal/v1/leads HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
            )
            .await
            .expect("request");
        refuse_new(&socket);
        let late =
            tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(address)).await;
        assert!(late.is_err(), "a new connection completed: {late:?}");
        let mut answers = JoinSet::new();
        assert_eq!(answer_queued(&socket, &mut answers).await, 1);
        let mut answer = String::new();
        queued.read_to_string(&mut answer).await.expect("answer");
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
        assert!(answer.contains("\r\nretry-after: 1\r\n"), "{answer}");
        drop(queued);
        while answers.join_next().await.is_some() {}
    }
}
