//! Standard Webhooks signatures (extensions §9), checked with the official libraries: every
//! delivery captured here is handed to `tests/verify/signatures.py`, which verifies it with
//! `standardwebhooks` 1.1.0 and Stripe's Python SDK, as partners do, and to the `tested:`
//! snippets of `docs/webhooks.md` (Python: `tests/verify/snippets.py`; Node.js with `stripe` and
//! `standardwebhooks` from npm: `tests/verify/snippets.js`).

use std::process::Stdio;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::io::Write as _;

use crate::helpers::TestApp;
use crate::receiver::{Received, Receiver};
use crate::webhook_control::{call, ping};

const ENDPOINTS: &str = "/api/v1/webhook-endpoints";

/// One delivery to verify: its body and headers, one secret, whether `webhook-*` are expected.
fn case(r: &Received, secret: &str, standard: bool) -> Value {
    // Our own receiver entry point accepts it too, from the headers as they came.
    let verifier = partner_domain::webhook::WebhookVerifier::new([
        partner_domain::webhook::WebhookSecret::from_stored(secret.to_owned()),
    ])
    .expect("verifier");
    let pairs: Vec<(&str, &str)> = r
        .headers
        .iter()
        .filter(|(k, _)| standard || !k.starts_with("webhook-"))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        verifier.verify(
            pairs.iter().copied(),
            &r.body,
            time::OffsetDateTime::now_utc()
        ),
        Ok(())
    );
    if standard {
        let only_standard = pairs
            .iter()
            .copied()
            .filter(|(k, _)| k.starts_with("webhook-"));
        assert_eq!(
            verifier.verify(only_standard, &r.body, time::OffsetDateTime::now_utc()),
            Ok(()),
            "the Standard Webhooks headers alone"
        );
    }
    let headers: serde_json::Map<String, Value> = r
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    json!({ "body": BASE64.encode(&r.body), "headers": headers, "secret": secret, "standard": standard })
}

/// The Python of `.ci/venv` (made by `.ci/python-venv`), or `PARTNER_VERIFY_PYTHON`. Missing:
/// the test fails under `CI=true` and skips the library check otherwise.
fn python() -> Option<std::path::PathBuf> {
    if let Ok(p) = std::env::var("PARTNER_VERIFY_PYTHON") {
        return Some(p.into());
    }
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/venv/bin/python");
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI needs .ci/venv (run .ci/python-venv) to verify signatures with the official libraries"
    );
    eprintln!("skipping the library check: no .ci/venv (run .ci/python-venv)");
    None
}

/// Runs `tests/verify/<script>` with `.ci/venv`'s Python (see [`python`]), `input` as JSON on
/// its stdin, and asserts it exits 0 (`what` names the check in the failure).
pub async fn run_python(script: &str, input: &Value, what: &str) {
    let Some(python) = python() else { return };
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/verify")
        .join(script);
    run_checked(
        python.into_os_string(),
        vec![script.into_os_string()],
        input,
        what,
    )
    .await;
}

/// Runs `program args`, `input` as JSON on its stdin, and asserts it exits 0.
pub async fn run_checked(
    program: std::ffi::OsString,
    args: Vec<std::ffi::OsString>,
    input: &Value,
    what: &str,
) {
    let input = serde_json::to_vec(input).expect("json");
    // Blocking I/O on a thread of its own: the run is short and the server keeps serving.
    let out = tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(&input)
            .expect("write");
        child.wait_with_output().expect("output")
    })
    .await
    .expect("join");
    assert!(
        out.status.success(),
        "{what}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The directory whose `node_modules` holds `stripe` and `standardwebhooks` (`.ci/run` installs
/// them into `target/node-verify`), or `PARTNER_NODE_VERIFY`. Missing: the test fails under
/// `CI=true` and skips the Node.js snippets otherwise.
fn node_packages() -> Option<std::path::PathBuf> {
    let dir = std::env::var("PARTNER_NODE_VERIFY").map_or_else(
        |_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/node-verify"),
        Into::into,
    );
    let ready = ["stripe", "standardwebhooks"].iter().all(|p| {
        dir.join("node_modules")
            .join(p)
            .join("package.json")
            .exists()
    });
    if ready {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI needs stripe and standardwebhooks in {} (.ci/run installs them) to run the Node.js \
         snippets of docs/webhooks.md",
        dir.display()
    );
    eprintln!(
        "skipping the Node.js snippets of docs/webhooks.md: no stripe and standardwebhooks in {} \
         (npm install --prefix target/node-verify stripe@23.1.0 standardwebhooks@1.1.1)",
        dir.display()
    );
    None
}

/// The `tested:` snippets of `docs/webhooks.md`, by language.
const PYTHON_SNIPPETS: [&str; 2] = ["stripe-python", "standardwebhooks-python"];
const NODE_SNIPPETS: [&str; 2] = ["stripe-node", "standardwebhooks-node"];

/// Verifies `cases` with the official libraries, then with the snippets of `docs/webhooks.md`
/// as they are written there (Python and Node.js).
async fn verify_with_libraries(cases: Vec<Value>) {
    run_python(
        "signatures.py",
        &Value::Array(cases.clone()),
        "the official libraries refused a delivery",
    )
    .await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let document = root.join("docs/webhooks.md");
    run_python(
        "snippets.py",
        &json!({ "document": document, "expect": PYTHON_SNIPPETS, "cases": cases }),
        "a Python snippet of docs/webhooks.md failed",
    )
    .await;
    if let Some(packages) = node_packages() {
        run_checked(
            "node".into(),
            vec![
                root.join("tests/verify/snippets.js").into_os_string(),
                packages.into_os_string(),
            ],
            &json!({ "document": document, "expect": NODE_SNIPPETS, "cases": cases }),
            "a Node.js snippet of docs/webhooks.md failed",
        )
        .await;
    }
}

/// `t` of `X-Partner-Signature`.
fn stripe_t(r: &Received) -> String {
    let sig = r.header("x-partner-signature").expect("signature");
    sig.split(',')
        .find_map(|p| p.strip_prefix("t="))
        .expect("t")
        .to_owned()
}

async fn rotate(app: &TestApp, token: &str, id: &str) -> String {
    let (st, b) = call(
        app,
        Method::PATCH,
        &format!("{ENDPOINTS}/{id}"),
        token,
        Some(json!({ "secret": true })),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    b["data"]["secret"].as_str().expect("new secret").to_owned()
}

#[tokio::test]
async fn standard_webhooks_libraries_verify_deliveries_with_the_new_secret_and_during_a_rotation() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"], "secret": true }),
        )
        .await;
    let id = ep["id"].as_str().expect("id").to_owned();
    let first = ep["secret"].as_str().expect("secret").to_owned();
    let key = first.strip_prefix("whsec_").expect("whsec_ prefix");
    assert_eq!(key.len(), 32, "whsec_ and the base64 of 24 bytes");
    assert_eq!(BASE64.decode(key).expect("standard base64").len(), 24);

    let r = ping(&app, &s.token, &rx, &id).await;
    assert_eq!(r.header("webhook-id"), r.header("x-partner-delivery"));
    assert_eq!(r.header("webhook-timestamp"), Some(stripe_t(&r).as_str()));
    let sig = r.header("webhook-signature").expect("webhook-signature");
    assert!(sig.starts_with("v1,") && !sig.contains(' '), "{sig}");
    let mut cases = vec![case(&r, &first, true)];

    // During the overlap: two values, the current secret's first; each secret verifies.
    let second = rotate(&app, &s.token, &id).await;
    let r = ping(&app, &s.token, &rx, &id).await;
    let sig = r.header("webhook-signature").expect("webhook-signature");
    assert_eq!(sig.split(' ').count(), 2, "{sig}");
    cases.push(case(&r, &second, true));
    cases.push(case(&r, &first, true));
    verify_with_libraries(cases).await;
}

#[tokio::test]
async fn an_older_secret_signs_only_the_stripe_way_until_it_is_rotated() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"], "secret": true }),
        )
        .await;
    let id = ep["id"].as_str().expect("id").to_owned();
    // A secret of the form generated before §9: `whsec_` and 43 base62 characters.
    let old = format!("whsec_{}", "Ab3".repeat(14) + "Z");
    set_secret(&app, &id, &old).await;

    let r = ping(&app, &s.token, &rx, &id).await;
    for h in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        assert_eq!(r.header(h), None, "{h} with an older secret");
    }
    let mut cases = vec![case(&r, &old, false)];

    // Rotated: the new secret signs both ways; the older previous one adds no second value.
    let new = rotate(&app, &s.token, &id).await;
    let r = ping(&app, &s.token, &rx, &id).await;
    let sig = r.header("webhook-signature").expect("webhook-signature");
    assert_eq!(sig.split(' ').count(), 1, "{sig}");
    cases.push(case(&r, &new, true));
    // Stripe's shape still carries both during the overlap.
    let mut old_case = case(&r, &old, false);
    if let Some(h) = old_case["headers"].as_object_mut() {
        h.retain(|k, _| !k.starts_with("webhook-"));
    }
    cases.push(old_case);
    verify_with_libraries(cases).await;
}

async fn set_secret(app: &TestApp, endpoint: &str, secret: &str) {
    use diesel::sql_types::Text;
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    let mut conn = AsyncPgConnection::establish(&app.config.database_url)
        .await
        .expect("connect");
    let n = diesel::sql_query("UPDATE webhook_endpoints SET secret = $1 WHERE id::text = $2")
        .bind::<Text, _>(secret)
        .bind::<Text, _>(endpoint)
        .execute(&mut conn)
        .await
        .expect("update");
    assert_eq!(n, 1);
}
