//! Listings without paging in the contract (orders, payouts), written to the response chunk by
//! chunk as they are read, so a request's memory stays flat however long the history.

use actix_web::{HttpResponse, web};

use std::future::Future;

use partner_domain::RepoError;
use partner_domain::kernel::page::Chunk;

/// Rows read from the database per chunk of a streamed listing.
pub(super) const CHUNK: u16 = 1000;

/// Where a streamed listing stands.
enum Step<T, K> {
    /// Render this chunk; `written` tells whether an element was written before it.
    Render(Chunk<T, K>, bool, bool),
    Fetch(K, bool),
    Done,
}

/// A 200 `{ "data": [ … ] }` whose array is written chunk by chunk as `next` reads them, each
/// row as `wire` writes it (its answer type, serialized), so the memory of a request stays flat however long the listing.
/// The bytes are exactly those of serializing the whole array at once. The first chunk is read before answering, so a failing
/// database is still a clean 500; a failure after that cuts the body short (logged), which a
/// client sees as a broken response and retries.
pub(super) fn stream_data<T, K, W, F, Fut>(first: Chunk<T, K>, wire: W, next: F) -> HttpResponse
where
    T: 'static,
    K: 'static,
    W: Fn(&mut Vec<u8>, &T) -> serde_json::Result<()> + Clone + 'static,
    F: Fn(K) -> Fut + Clone + 'static,
    Fut: Future<Output = std::result::Result<Chunk<T, K>, RepoError>> + 'static,
{
    let body = futures_util::stream::unfold(Step::Render(first, false, true), move |step| {
        let next = next.clone();
        let wire = wire.clone();
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
                if let Err(e) = wire(&mut buf, row) {
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
