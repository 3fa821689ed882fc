//! Integration tests: the real server on port 0 against a fresh database of the real
//! PostgreSQL, driven over HTTP. One binary, one module per area.

#![allow(clippy::expect_used, clippy::indexing_slicing)]

mod database;
mod helpers;

mod auth;
mod bad_receivers;
mod browser;
mod by_id;
mod contract;
mod coupon_pages;
mod coupons;
mod delivery_engine;
mod drills;
mod embed_url;
mod errors;
mod events_feed;
mod frozen_db;
mod hostile;
mod idempotency;
mod leads;
mod links;
mod one_trip;
mod openapi;
mod operate;
mod operator;
mod orders;
mod own_cluster;
mod portal;
mod portal_browser;
mod process;
mod receiver;
mod s01_over_budget;
mod sec_edge;
mod sec_public;
mod sec_webhooks;
mod standard_webhooks;
mod startup;
mod sub_accounts;
mod webhook_control;
mod webhook_schemas;
mod webhooks;

/// Every `.rs` file beside this one is declared above: a test file without its `mod` line would
/// silently not be built, and its tests never run.
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/api");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("main.rs");
    let declared: Vec<&str> = main
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/api") {
        let path = entry.expect("entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs")
            && stem != "main"
            && !declared.contains(&stem)
        {
            missing.push(stem.to_owned());
        }
    }
    assert!(
        missing.is_empty(),
        "tests/api files without a `mod` line in main.rs: {missing:?}"
    );
}
