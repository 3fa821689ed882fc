//! The lease rules against the real Redis at 127.0.0.1:6379 (as the api tests; CI starts it),
//! each test on keys of its own. Two limiters on one Redis are two server instances.

use std::sync::Arc;
use std::time::Duration;

use partner_domain::uuid::Uuid;

use super::*;

const URL: &str = "redis://127.0.0.1:6379";
/// The middle of an hour: one window of 3,600 s holds every charge of a test.
const NOW: i64 = 1_795_001_800 + 1_400;

fn instance(prefix: &str, limit: u32) -> Arc<RedisRateLimiter> {
    Arc::new(
        RedisRateLimiter::new(
            URL,
            prefix,
            Quota {
                limit,
                window_secs: 3600,
            },
            Duration::from_secs(2),
        )
        .expect("url"),
    )
}

/// Two instances on keys of this test only.
fn two(limit: u32) -> (Arc<RedisRateLimiter>, Arc<RedisRateLimiter>) {
    let prefix = format!("test:{}:", uuid::Uuid::new_v4().simple());
    (instance(&prefix, limit), instance(&prefix, limit))
}

fn token() -> TokenId {
    TokenId::from_uuid(Uuid::from_u128(23))
}

async fn charge(l: &RedisRateLimiter) -> Decision {
    l.charge(token(), Group::Leads, NOW).await
}

/// `n` charges in flight together on `l`; how many were admitted.
async fn flood(l: &Arc<RedisRateLimiter>, n: usize) -> usize {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let l = l.clone();
        set.spawn(async move { charge(&l).await.allowed });
    }
    set.join_all().await.into_iter().filter(|a| *a).count()
}

/// Charges one at a time until one is refused: how many were admitted.
async fn until_refused(l: &RedisRateLimiter) -> usize {
    let mut admitted = 0;
    while charge(l).await.allowed {
        admitted += 1;
        assert!(admitted <= 100_000, "never refused");
    }
    admitted
}

#[tokio::test]
async fn one_request_at_a_time_leases_one_unit_that_every_instance_sees() {
    let (a, b) = two(5);
    for (i, l) in [&a, &b, &a, &b, &b].into_iter().enumerate() {
        let d = charge(l).await;
        assert!(d.allowed, "call {}", i + 1);
        assert_eq!(
            d.remaining,
            4 - u32::try_from(i).expect("small"),
            "call {}",
            i + 1
        );
        assert_eq!(d.reset, NOW - NOW.rem_euclid(3600) + 3600);
    }
    for l in [&a, &b] {
        let d = charge(l).await;
        assert_eq!((d.allowed, d.remaining), (false, 0));
    }
    assert_eq!(a.leases() + b.leases(), 7, "one round trip per request");
    // Spent is final for the window: refusals cost Redis nothing.
    for l in [&a, &b] {
        for _ in 0..5 {
            assert!(!charge(l).await.allowed);
        }
    }
    assert_eq!(a.leases() + b.leases(), 7, "no round trip once refused");
    assert_eq!(a.errors() + b.errors(), 0);
}

/// The bound of docs/decisions.md: two instances flooded together never admit more than the
/// budget, and at most one lease less; one Redis round trip serves many requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_flooded_instances_admit_the_budget_at_most_and_at_most_one_lease_less() {
    for _ in 0..3 {
        let (a, b) = two(1_000);
        let (on_a, on_b) = tokio::join!(flood(&a, 800), flood(&b, 800));
        let admitted = on_a + on_b;
        assert!(
            admitted <= 1_000 && admitted >= 1_000 - LEASE_MAX as usize,
            "admitted {on_a} + {on_b}"
        );
        let trips = a.leases() + b.leases();
        eprintln!("admitted {on_a} + {on_b} of 1,600 in {trips} round trips");
        assert!(trips <= 1_600 / 8, "{trips} round trips for 1,600 requests");
        assert_eq!(a.errors() + b.errors(), 0);
    }
}

/// The server's pattern: 64 connections, each sending its next request once the last is
/// answered. Leases grow to the most while requests queue for them: one round trip serves many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_flow_of_64_connections_leases_many_units_a_round_trip() {
    let (a, _) = two(1_000_000_000);
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let a = a.clone();
        set.spawn(async move {
            for _ in 0..50 {
                assert!(charge(&a).await.allowed);
                // The read the request makes once admitted.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
    }
    set.join_all().await;
    let trips = a.leases();
    eprintln!("3,200 requests in {trips} round trips");
    assert!(
        trips <= 3_200 / 16,
        "{trips} round trips for 3,200 requests"
    );
}

/// Units an idle instance holds are refused to the other, at most one lease of them, and are
/// not lost: the instance that holds them spends them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_instance_holds_at_most_one_lease_and_spends_it_later() {
    let (a, b) = two(200);
    let first = flood(&a, 100).await;
    assert_eq!(first, 100);
    let then = until_refused(&b).await;
    assert!(
        first + then >= 200 - LEASE_MAX as usize && first + then <= 200,
        "{first} on a, then {then} on b"
    );
    let last = until_refused(&a).await;
    assert_eq!(
        first + then + last,
        200,
        "every unit of the budget is spent once"
    );
    assert!(!charge(&b).await.allowed);
}

#[tokio::test]
async fn a_refund_gives_the_unit_back_to_the_lease() {
    let (a, b) = two(2);
    assert_eq!(charge(&a).await.remaining, 1);
    assert_eq!(charge(&a).await.remaining, 0);
    a.refund(token(), Group::Leads, NOW).await;
    let again = charge(&a).await;
    assert_eq!((again.allowed, again.remaining), (true, 0));
    assert!(!charge(&a).await.allowed);
    assert!(!charge(&b).await.allowed);
    // A window with nothing leased: the refund goes to the in-process budgets, and is nothing.
    b.refund(token(), Group::Leads, NOW + 3600).await;
    assert_eq!(a.leases(), 3);
}

/// A Redis that accepts connections and never answers: the requests that waited behind the
/// first one's lease are decided in-process together when it times out, not one timeout each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_behind_a_silent_redis_are_decided_in_process_together() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = silent.local_addr().expect("addr").port();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            open.push(s);
        }
    });
    let l = Arc::new(
        RedisRateLimiter::new(
            &format!("redis://127.0.0.1:{port}"),
            "test:",
            Quota {
                limit: 1_000,
                window_secs: 3600,
            },
            Duration::from_millis(100),
        )
        .expect("url"),
    );
    let started = Instant::now();
    assert_eq!(flood(&l, 64).await, 64, "fail open");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "64 requests took {took:?}");
    assert_eq!(l.errors(), 64);
    held.abort();
}
