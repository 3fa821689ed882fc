//! Wake-ups across instances: the announcer that sends `NOTIFY webhook_deliveries` after a
//! commit wrote deliveries, and the listener that wakes this process's worker on each
//! notification. Neither is a query (`SET`, `NOTIFY`, `LISTEN`), so they are raw statements.

use diesel_async::RunQueryDsl;

/// Keeps the announcer's notifications off the disk's critical path (see [`announce_deliveries`]).
const ANNOUNCER_SETUP_SQL: &str = "SET synchronous_commit = off";
/// Wakes the workers of every instance.
const NOTIFY_SQL: &str = "NOTIFY webhook_deliveries";
/// Subscribes the worker's connection to [`NOTIFY_SQL`].
const LISTEN_SQL: &str = "LISTEN webhook_deliveries";

/// Tells the workers of every instance (`NOTIFY webhook_deliveries`) that this store committed
/// deliveries. The notification goes out on a connection of its own, after the writing
/// transaction: a `NOTIFY` holds a database-wide lock until its transaction's commit is flushed,
/// which inside the writes would serialise every ingest commit (no group commit; 278 events/s
/// instead of thousands, measured). Coalesced to at most one every 10 ms, and not durable
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
                    loop {
                        if written.changed().await.is_err() {
                            return; // the store is gone
                        }
                        if let Err(e) = diesel::sql_query(NOTIFY_SQL).execute(&mut conn).await {
                            tracing::warn!(error = %e, "NOTIFY webhook_deliveries failed; reconnecting");
                            break;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot open the webhook announcer connection"),
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// Keeps a connection that `LISTEN`s for new deliveries and calls `wake` on each notification
/// (and once after every (re)connect, since notifications sent while disconnected are lost).
/// Runs until the process ends; a lost connection is re-established after a short pause.
pub async fn listen_for_deliveries(database_url: String, wake: impl Fn() + Send + Sync) {
    use diesel_async::AsyncConnection;
    use futures_util::StreamExt;
    loop {
        match <diesel_async::AsyncPgConnection as AsyncConnection>::establish(&database_url).await {
            Ok(mut conn) => {
                if let Err(e) = diesel::sql_query(LISTEN_SQL).execute(&mut conn).await {
                    tracing::warn!(error = %e, "LISTEN webhook_deliveries failed");
                } else {
                    wake();
                    let mut stream = std::pin::pin!(conn.notifications_stream());
                    while let Some(n) = stream.next().await {
                        if n.is_err() {
                            break;
                        }
                        wake();
                    }
                    tracing::warn!("the webhook notification connection closed; reconnecting");
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot open the webhook notification connection"),
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}
