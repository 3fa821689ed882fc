//! The migration path at start, which the other tests skip (their databases are copies of a
//! template migrated once: see `database.rs`).

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{TestApp, lead_body};

#[tokio::test]
async fn a_server_on_a_new_database_creates_it_and_applies_every_migration() {
    let app = TestApp::spawn_migrating(|_| {}).await;
    let s = app.seed("acme", false).await;
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let res = app
        .api(Method::GET, "/api/v1/leads", &s.token)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    let pending = partner_postgres::migrate(&app.config.database_url)
        .await
        .expect("migrate");
    assert_eq!(pending, Vec::<String>::new(), "nothing was left to apply");
}

#[tokio::test]
async fn a_test_database_is_a_copy_with_every_migration_applied() {
    let app = TestApp::spawn().await;
    let applied = partner_postgres::migrate(&app.config.database_url)
        .await
        .expect("migrate");
    assert_eq!(
        applied,
        Vec::<String>::new(),
        "the template is current with migrations/"
    );
}

/// A listen address another process holds stops the start with a message naming the variable.
#[tokio::test]
async fn a_busy_bind_address_names_partner_bind() {
    let app = TestApp::spawn().await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let mut config = app.config.clone();
    config.bind = taken.local_addr().expect("addr").to_string();
    let err = partner_server::startup::Application::build(
        &config,
        partner_server::startup::Migrations::Skip,
    )
    .await
    .expect_err("the address is taken");
    let message = format!("{err:#}");
    assert!(message.contains("PARTNER_BIND"), "{message}");
}
