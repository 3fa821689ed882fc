//! Wake-ups across instances: the announcer that sends `NOTIFY webhook_deliveries` after a
//! commit wrote deliveries, the `webhook_endpoints` notification a change of an endpoint sends
//! with its commit, and the listener that tells this process's worker of both. None is a query
//! (`SET`, `NOTIFY`, `LISTEN`), so they are raw statements.

use diesel_async::RunQueryDsl;

/// Keeps the announcer's notifications off the disk's critical path (see [`announce_deliveries`]).
const ANNOUNCER_SETUP_SQL: &str = "SET synchronous_commit = off";
/// Wakes the workers of every instance.
const NOTIFY_SQL: &str = "NOTIFY webhook_deliveries";
/// Subscribes the worker's connection to [`NOTIFY_SQL`] and [`ENDPOINT_CHANGED_SQL`].
const LISTEN_SQL: &str = "LISTEN webhook_deliveries; LISTEN webhook_endpoints";
/// The channel of [`ENDPOINT_CHANGED_SQL`].
const ENDPOINTS_CHANNEL: &str = "webhook_endpoints";
/// Tells every worker that endpoint `$1` changed (sent when the writing transaction commits).
const ENDPOINT_CHANGED_SQL: &str = "SELECT pg_notify('webhook_endpoints', $1)";
/// The shortest time between two of the announcer's notifications. A commit that comes within it
/// waits for its end: 2 ms keeps a paced ingest (200 leads/s, one every 5 ms) from ever waiting,
/// where 10 ms made every other lead wait ~5 ms (issue 22), and still folds the commits of a
/// busy ingest into one wake-up of every worker per 2 ms (the worker claims in batches anyway).
const ANNOUNCE_GAP: std::time::Duration = std::time::Duration::from_millis(2);
/// The pause before the announcer's or the listener's connection is opened again. Short, so the
/// wake-ups are back well within a second of the database's return (extensions §11): with 1 s,
/// the events of the first second after a restart waited for it (p50 about 200 ms, measured by
/// `bench/drills/pg-restart.sh`). An attempt on a database that is down is refused at once.
const RECONNECT_AFTER: std::time::Duration = std::time::Duration::from_millis(250);

/// Announces, with the caller's transaction, that endpoint `id` changed or went: workers then give
/// back the deliveries of it they claimed before, instead of sending them with what the claim read
/// (the old URL, secret or custom header; issue 23, N1). Endpoint writes are rare, so the
/// commit-time lock a `NOTIFY` takes costs nothing that matters here.
pub(crate) async fn announce_endpoint_changed(
    conn: &mut diesel_async::AsyncPgConnection,
    id: uuid::Uuid,
) -> diesel::QueryResult<()> {
    diesel::sql_query(ENDPOINT_CHANGED_SQL)
        .bind::<diesel::sql_types::Text, _>(id.to_string())
        .execute(conn)
        .await
        .map(|_| ())
}

/// Tells the workers of every instance (`NOTIFY webhook_deliveries`) that this store committed
/// deliveries. The notification goes out on a connection of its own, after the writing
/// transaction: a `NOTIFY` holds a database-wide lock until its transaction's commit is flushed,
/// which inside the writes would serialise every ingest commit (no group commit; 278 events/s
/// instead of thousands, measured). The first commit after a quiet spell is announced at once;
/// those that follow within [`ANNOUNCE_GAP`] share the next notification. Not durable
/// (`synchronous_commit = off`): a lost wake-up costs one poll interval, nothing more.
pub async fn announce_deliveries(
    database_url: String,
    mut written: tokio::sync::watch::Receiver<u64>,
) {
    use diesel_async::AsyncConnection;
    loop {
        match <diesel_async::AsyncPgConnection as AsyncConnection>::establish(&database_url).await {
            Ok(mut conn) => {
                if let Err(e) = diesel::sql_query(ANNOUNCER_SETUP_SQL)
                    .execute(&mut conn)
                    .await
                {
                    tracing::warn!(error = %e, "preparing the webhook announcer failed");
                } else {
                    // A NOTIFY that failed (the reason for a reconnect) consumed its change: send
                    // one at once, so the writes it announced do not wait for the fallback poll.
                    written.mark_changed();
                    loop {
                        if written.changed().await.is_err() {
                            return; // the store is gone
                        }
                        if let Err(e) = diesel::sql_query(NOTIFY_SQL).execute(&mut conn).await {
                            tracing::warn!(error = %e, "NOTIFY webhook_deliveries failed; reconnecting");
                            break;
                        }
                        tokio::time::sleep(ANNOUNCE_GAP).await;
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot open the webhook announcer connection"),
        }
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}

/// Keeps a connection that `LISTEN`s for new deliveries and changed endpoints: calls `wake` on
/// each new-deliveries notification and `changed(Some(id))` on each changed endpoint
/// (`changed(None)` for a payload that names none). `listening(true)` once it listens (after
/// every (re)connect, with `wake()`: notifications sent while disconnected are lost), and
/// `listening(false)` as soon as the connection is found lost, before reconnecting: from then on
/// until the next `listening(true)` a change may commit unannounced, so the worker checks what it
/// claimed before sending it (issue 23, N9). Runs until the process ends; a lost connection is
/// re-established after a short pause.
pub async fn listen_for_deliveries(
    database_url: String,
    wake: impl Fn() + Send + Sync,
    changed: impl Fn(Option<partner_domain::kernel::ids::EndpointId>) + Send + Sync,
    listening: impl Fn(bool) + Send + Sync,
) {
    use diesel_async::{AsyncConnection, SimpleAsyncConnection};
    use futures_util::StreamExt;
    loop {
        match <diesel_async::AsyncPgConnection as AsyncConnection>::establish(&database_url).await {
            Ok(mut conn) => {
                // Two statements: the simple protocol (`batch_execute`), not a prepared one.
                if let Err(e) = conn.batch_execute(LISTEN_SQL).await {
                    tracing::warn!(error = %e, "LISTEN webhook_deliveries failed");
                } else {
                    listening(true);
                    wake();
                    let mut stream = std::pin::pin!(conn.notifications_stream());
                    while let Some(n) = stream.next().await {
                        let Ok(n) = n else { break };
                        if n.channel == ENDPOINTS_CHANNEL {
                            match n.payload.parse::<uuid::Uuid>() {
                                Ok(id) => changed(Some(
                                    partner_domain::kernel::ids::EndpointId::from_uuid(id),
                                )),
                                Err(_) => changed(None),
                            }
                        } else {
                            wake();
                        }
                    }
                    listening(false);
                    tracing::warn!("the webhook notification connection closed; reconnecting");
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot open the webhook notification connection"),
        }
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}
