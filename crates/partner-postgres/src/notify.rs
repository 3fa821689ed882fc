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
/// A listener's probe: `$2` on its own channel `$1` ([`listen_for_deliveries`]).
const PROBE_SQL: &str = "SELECT pg_notify($1, $2)";
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
/// How long the announcer's `NOTIFY` may take before its connection is taken for dead and
/// replaced (issue 23, N12: a connection frozen without FIN or RST otherwise hangs it, and every
/// later announcement, for good). A live one answers within milliseconds.
const ANNOUNCE_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

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
    loop {
        match crate::connect::open(&database_url).await {
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
                        match tokio::time::timeout(
                            ANNOUNCE_WITHIN,
                            diesel::sql_query(NOTIFY_SQL).execute(&mut conn),
                        )
                        .await
                        {
                            Ok(Ok(_)) => {}
                            Ok(Err(e)) => {
                                tracing::warn!(error = %e, "NOTIFY webhook_deliveries failed; reconnecting");
                                break;
                            }
                            Err(_) => {
                                tracing::warn!("NOTIFY webhook_deliveries hung; reconnecting");
                                break;
                            }
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

/// How often the listener proves that it still hears (issue 23, N9b): a connection that dies
/// silently (a NAT or firewall dropping the flow, a partition, a paused VM or pooler: no FIN, no
/// RST) ends no stream, and TCP notices it only after minutes (or hours, with the system's
/// keepalive defaults), while its announcements are lost.
const PROBE_EVERY: std::time::Duration = std::time::Duration::from_millis(500);
/// How long the echo of a probe may take before the listener counts itself deaf. A live
/// connection echoes within milliseconds; a false alarm costs a reconnect, nothing more.
const PROBE_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);
/// How long a probe's echo proves that the listener heard every change (issue 23, N9b'): from
/// the probe's asking, one [`PROBE_EVERY`] until the next probe is asked, and 250 ms for its echo
/// to come back. The worker no longer sends on this proof (it checks every attempt's endpoint
/// row, issue 23, N9b''); it only tells whether a change the row shows and no announcement did
/// was to be expected (past the proof) or is worth a log line (within it).
const PROVEN_FOR: std::time::Duration = std::time::Duration::from_millis(750);

/// Keeps a connection that `LISTEN`s for new deliveries and changed endpoints: calls `wake` on
/// each new-deliveries notification and `changed(Some(id))` on each changed endpoint
/// (`changed(None)` for a payload that names none). `listening(true)` once it listens (after
/// every (re)connect, with `wake()`: notifications sent while disconnected are lost), and
/// `listening(false)` as soon as the connection is found lost, before reconnecting: from then on
/// until the next `listening(true)` a change may commit unannounced, so the worker checks what it
/// claimed before sending it (issue 23, N9). Runs until the process ends; a lost connection is
/// re-established after a short pause.
///
/// A connection can also die without ending its stream (no FIN, no RST). So every
/// [`PROBE_EVERY`] a probe is `NOTIFY`d, through a connection of its own, on a channel only this
/// listener listens on; a notification is delivered after every one committed before it, so its
/// echo proves that every change committed before the probe was heard: `heard_until(t)` on each
/// echo (and on each `listening(true)`), `t` being [`PROVEN_FOR`] after the probe was asked; past
/// `t` the announcements are not trusted, as while not listening (issue 23, N9b'; the worker
/// checks every attempt's endpoint row whatever they say, N9b''). An echo missing
/// after [`PROBE_WITHIN`] (or a probe that could not be sent) makes the listener deaf:
/// `listening(false)` and a new connection (issue 23, N9b). The overdue echo is noticed on the
/// next [`PROBE_EVERY`] tick, so a silently dead connection is found within 2 s
/// (`2 × PROBE_EVERY + PROBE_WITHIN`; measured 1.03-2.03 s).
pub async fn listen_for_deliveries(
    database_url: String,
    wake: impl Fn() + Send + Sync,
    changed: impl Fn(Option<partner_domain::kernel::ids::EndpointId>) + Send + Sync,
    listening: impl Fn(bool) + Send + Sync,
    heard_until: impl Fn(std::time::Instant) + Send + Sync,
) {
    let probes = probe_channel();
    let (probe, sent) = tokio::sync::watch::channel(0_u64);
    futures_util::future::join(
        send_probes(database_url.clone(), probes.clone(), sent),
        listen(
            database_url,
            &probes,
            &probe,
            wake,
            changed,
            listening,
            heard_until,
        ),
    )
    .await;
}

/// A channel name no other listener uses (on this host or another): the process id, the
/// instant, a counter of this process.
fn probe_channel() -> String {
    static LISTENERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = LISTENERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("webhook_probe_{}_{nanos}_{n}", std::process::id())
}

async fn listen(
    database_url: String,
    probes: &str,
    probe: &tokio::sync::watch::Sender<u64>,
    wake: impl Fn() + Send + Sync,
    changed: impl Fn(Option<partner_domain::kernel::ids::EndpointId>) + Send + Sync,
    listening: impl Fn(bool) + Send + Sync,
    heard_until: impl Fn(std::time::Instant) + Send + Sync,
) {
    use diesel_async::SimpleAsyncConnection;
    use futures_util::StreamExt;
    let mut sequence = 0_u64;
    loop {
        match crate::connect::open(&database_url).await {
            Ok(mut conn) => {
                // Three statements: the simple protocol (`batch_execute`), not a prepared one.
                // Bounded: a connection frozen as it is opened would hang here for good.
                let statements = format!("{LISTEN_SQL}; LISTEN {probes}");
                let listen = conn.batch_execute(&statements);
                if let Err(e) = tokio::time::timeout(PROBE_WITHIN, listen)
                    .await
                    .unwrap_or_else(|_| {
                        Err(diesel::result::Error::DatabaseError(
                            diesel::result::DatabaseErrorKind::UnableToSendCommand,
                            Box::new("no answer within 1 s".to_owned()),
                        ))
                    })
                {
                    tracing::warn!(error = %e, "LISTEN webhook_deliveries failed");
                } else {
                    listening(true);
                    heard_until(std::time::Instant::now() + PROVEN_FOR);
                    wake();
                    let mut stream = std::pin::pin!(conn.notifications_stream());
                    let mut ticks = tokio::time::interval(PROBE_EVERY);
                    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    // The probe awaiting its echo, when it was asked, and when it is overdue.
                    let mut awaited: Option<(u64, std::time::Instant, tokio::time::Instant)> = None;
                    loop {
                        tokio::select! {
                            n = stream.next() => {
                                let Some(Ok(n)) = n else {
                                    tracing::warn!("the webhook notification connection closed; reconnecting");
                                    break;
                                };
                                if n.channel == probes {
                                    if let Some((s, asked, _)) = awaited
                                        && n.payload == s.to_string()
                                    {
                                        awaited = None;
                                        heard_until(asked + PROVEN_FOR);
                                    }
                                } else if n.channel == ENDPOINTS_CHANNEL {
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
                            _ = ticks.tick() => {
                                match awaited {
                                    Some((_, _, overdue)) if tokio::time::Instant::now() >= overdue => {
                                        tracing::warn!("the webhook notification connection echoes no probe; reconnecting");
                                        break;
                                    }
                                    Some(_) => {}
                                    None => {
                                        sequence += 1;
                                        let asked = tokio::time::Instant::now();
                                        awaited = Some((sequence, asked.into_std(), asked + PROBE_WITHIN));
                                        probe.send_replace(sequence);
                                    }
                                }
                            }
                        }
                    }
                    listening(false);
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot open the webhook notification connection"),
        }
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}

/// Sends each probe the listener asks for (`NOTIFY <probes>, '<sequence>'`) on a connection of
/// its own, reconnecting when a probe fails or hangs (the listener then counts itself deaf, its
/// echo missing). Returns when the listener is gone.
async fn send_probes(
    database_url: String,
    probes: String,
    mut asked: tokio::sync::watch::Receiver<u64>,
) {
    let mut conn: Option<diesel_async::AsyncPgConnection> = None;
    while asked.changed().await.is_ok() {
        let sequence = *asked.borrow_and_update();
        let sent = tokio::time::timeout(PROBE_WITHIN, async {
            if conn.is_none() {
                conn = Some(crate::connect::open(&database_url).await?);
            }
            let Some(c) = conn.as_mut() else {
                return Ok(());
            };
            diesel::sql_query(PROBE_SQL)
                .bind::<diesel::sql_types::Text, _>(&probes)
                .bind::<diesel::sql_types::Text, _>(sequence.to_string())
                .execute(c)
                .await
                .map(|_| ())
                .map_err(diesel::ConnectionError::CouldntSetupConfiguration)
        })
        .await;
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the webhook listener's probe failed");
                conn = None;
            }
            Err(_) => {
                tracing::warn!("the webhook listener's probe hung");
                conn = None;
            }
        }
    }
}
