//! The webhook portal (extensions §10) in a real browser: headless Chromium over WebDriver, with
//! the helpers of `browser.rs` (skipped, saying so, where Chromium is not installed, except in
//! CI). Screenshots land in `target/screenshots/`.

use std::panic::AssertUnwindSafe;

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use fantoccini::{Client, Locator};
use futures_util::FutureExt as _;
use reqwest::Method;
use serde_json::json;

use crate::browser::{browser, console_problems, driver, js, screenshot, tab, until, viewport};
use crate::helpers::{TestApp, body};
use crate::portal::mint;

/// Where `.ci/run` installs axe-core (npm), unless `AXE_CORE_JS` names the file.
const AXE_DEFAULT: &str = "target/axe/node_modules/axe-core/axe.min.js";

/// axe-core's source, or `None` (after saying so) where it is not installed; under `CI=true` its
/// absence is a failure, as the browser's is.
fn axe_source() -> Option<String> {
    let path = std::env::var("AXE_CORE_JS")
        .unwrap_or_else(|_| format!("{}/../../{AXE_DEFAULT}", env!("CARGO_MANIFEST_DIR")));
    match std::fs::read_to_string(&path) {
        Ok(s) => Some(s),
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "axe-core is missing at {path} ({e}): npm install --prefix target/axe axe-core"
            );
            eprintln!("SKIP the accessibility checks: no axe-core at {path} ({e})");
            None
        }
    }
}

/// axe-core's WCAG 2.0-2.2 A and AA rules on the page as it is now: the violations, named with
/// the elements they concern (none expected).
async fn axe(c: &Client, source: Option<&str>, state: &str) {
    let Some(source) = source else { return };
    js(c, &format!("{source}\nreturn true;")).await;
    let violations = c
        .execute_async(
            "const done = arguments[arguments.length - 1]; \
             axe.run(document, { runOnly: { type: 'tag', values: \
               ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'] } }) \
             .then(r => done(r.violations.map(v => v.id + ': ' + \
               v.nodes.map(n => n.target.join(' ')).join(', '))), \
               e => done(['axe failed: ' + e]));",
            vec![],
        )
        .await
        .expect("axe runs");
    assert_eq!(violations, json!([]), "axe-core violations ({state})");
}

/// What the browser sent: each request's method, path with query, and `Referer`.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, String, Option<String>)>>>;

/// A recording proxy in front of `app` (another port, same host): the browser talks to it, so
/// the test sees every URL and `Referer` that reaches the server.
async fn proxy(app: &TestApp) -> (String, Seen) {
    use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
    let seen: Seen = Seen::default();
    let target = app.address.clone();
    let client = reqwest::Client::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    let port = listener.local_addr().expect("addr").port();
    let (s2, t2) = (seen.clone(), target.clone());
    let server = HttpServer::new(move || {
        let (seen, target, client) = (s2.clone(), t2.clone(), client.clone());
        App::new().default_service(web::to(move |req: HttpRequest, body: web::Bytes| {
            let (seen, target, client) = (seen.clone(), target.clone(), client.clone());
            async move {
                let uri = req.uri().to_string();
                let referer = req
                    .headers()
                    .get("referer")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                seen.lock()
                    .expect("seen")
                    .push((req.method().to_string(), uri.clone(), referer));
                let method =
                    reqwest::Method::from_bytes(req.method().as_str().as_bytes()).expect("method");
                let mut out = client.request(method, format!("{target}{uri}"));
                for (name, value) in req.headers() {
                    if name.as_str() != "host" {
                        out = out.header(name.as_str(), value.as_bytes());
                    }
                }
                let res = out.body(body.to_vec()).send().await.expect("forward");
                let mut answer = HttpResponse::build(
                    actix_web::http::StatusCode::from_u16(res.status().as_u16()).expect("status"),
                );
                for (name, value) in res.headers() {
                    if !matches!(
                        name.as_str(),
                        "transfer-encoding" | "connection" | "content-length"
                    ) {
                        answer.insert_header((name.as_str(), value.as_bytes()));
                    }
                }
                answer.body(res.bytes().await.expect("body").to_vec())
            }
        }))
    })
    .workers(1)
    .listen(listener)
    .expect("listen")
    .run();
    tokio::spawn(server);
    (format!("http://127.0.0.1:{port}"), seen)
}

#[tokio::test]
async fn the_portal_in_a_real_browser() {
    let Some(driver) = driver() else { return };
    let app = TestApp::spawn().await;
    let c = browser(&driver).await;
    let result = AssertUnwindSafe(run(&app, &c)).catch_unwind().await;
    let _ = c.close().await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// Clicks the element `css` finds. The portal redraws its lists (an answer, a poll): an element
/// found just before a redraw is stale by the click, which then did not happen, so it is found
/// again (a full run under load failed on that: "stale element reference").
async fn click(c: &Client, css: &str) {
    for _ in 0..5 {
        let clicked = c
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
            .click()
            .await;
        match clicked {
            Ok(()) => return,
            Err(e) if e.is_stale_element_reference() => {}
            Err(e) => panic!("click {css}: {e}"),
        }
    }
    panic!("click {css}: the element went stale 5 times in a row");
}

async fn run(app: &TestApp, c: &Client) {
    let acme = app.seed("acme", false).await;
    let endpoint = app
        .create_webhook_endpoint(
            &acme.token,
            &json!({ "url": "https://hooks.acme.invalid/portal", "events": ["lead.created"], "secret": true }),
        )
        .await;
    let id = endpoint["id"].as_str().expect("id").to_owned();
    let axe_js = axe_source();
    let axe_js = axe_js.as_deref();
    let (code, _) = mint(app, &acme.token).await;
    let (front, seen) = proxy(app).await;
    let link = format!("{front}/portal#code={code}");

    viewport(c, 1200, 900).await;
    c.goto(&link).await.expect("portal");
    // The page exchanged the code, dropped it from the address bar and lists the endpoint.
    until(
        c,
        "the endpoint's card",
        &format!("document.querySelector('[data-endpoint=\"{id}\"] h3')"),
    )
    .await;
    let text = js(c, "return document.getElementById('endpoints').innerText;").await;
    assert!(
        text.as_str()
            .expect("text")
            .contains("hooks.acme.invalid/portal"),
        "{text}"
    );
    assert_eq!(js(c, "return location.hash;").await, json!(""));
    assert_eq!(
        js(c, "return document.documentElement.lang;").await,
        json!("en")
    );
    assert!(
        until(
            c,
            "the chart",
            "document.querySelector('.chart svg[role=img]')"
        )
        .await
        .is_object()
    );

    until(
        c,
        "the delivery log",
        "!document.getElementById('log-section').hidden",
    )
    .await;
    axe(c, axe_js, "loaded").await;

    // Keyboard: the first Tab reaches the skip link, which is visible when focused.
    js(c, "document.activeElement.blur(); window.scrollTo(0, 0);").await;
    tab(c).await;
    assert_eq!(
        js(c, "return document.activeElement.className;").await,
        json!("skip")
    );

    // Keyboard only: Tab reaches "Send test event", with a visible focus ring, and Enter
    // sends it; the status line announces it. The test event appears in the log.
    let mut reached = false;
    for _ in 0..20 {
        tab(c).await;
        if js(
            c,
            "return document.activeElement.getAttribute('data-action');",
        )
        .await
            == json!("test")
        {
            reached = true;
            break;
        }
    }
    assert!(reached, "Tab reaches the test button");
    assert_ne!(
        js(
            c,
            "return getComputedStyle(document.activeElement).outlineStyle;"
        )
        .await,
        json!("none"),
        "focus is visible"
    );
    let enter: char = Key::Enter.into();
    c.perform_actions(
        KeyActions::new("keyboard".into())
            .then(KeyAction::Down { value: enter })
            .then(KeyAction::Up { value: enter }),
    )
    .await
    .expect("enter");
    until(
        c,
        "the announcement",
        "document.getElementById('status').innerText.includes('Test event queued')",
    )
    .await;
    until(
        c,
        "the test event in the log",
        "Array.from(document.querySelectorAll('#log-body tr')).some(r => r.innerText.includes('ping'))",
    )
    .await;
    // The chart counts what the log lists (every status: a delivery's status may move between
    // the two reads, its hour cannot).
    until(
        c,
        "the chart's total equal to the log's rows",
        "(() => { const n = document.querySelectorAll('#log-body tr').length; \
           const t = Array.from(document.querySelectorAll('.chart tbody td.num')) \
             .reduce((a, td) => a + Number(td.textContent), 0); return n > 0 && n === t; })()",
    )
    .await;
    click(c, "#log-body [data-action=attempts]").await;
    until(
        c,
        "the attempts",
        "!document.getElementById('detail-section').hidden && document.activeElement.id === 'detail-h'",
    )
    .await;

    // Rotate: the new secret is shown once, with a copy button and a warning.
    js(c, "window.confirm = () => true;").await;
    click(c, &format!("[data-endpoint=\"{id}\"] [data-action=rotate]")).await;
    let secret = until(
        c,
        "the new secret",
        "!document.getElementById('secret-section').hidden && document.getElementById('secret-value').value",
    )
    .await;
    assert!(secret.as_str().expect("secret").len() > 20, "{secret}");
    assert!(
        js(
            c,
            "return document.querySelector('#secret-section .warning').innerText;"
        )
        .await
        .as_str()
        .expect("warning")
        .contains("only this once")
    );
    let res = app
        .api(Method::GET, "/api/v1/webhook-endpoints", &acme.token)
        .send()
        .await
        .expect("send");
    assert!(
        !body(res).await["data"][0]["previousSecretExpiresAt"].is_null(),
        "the rotation happened"
    );
    axe(c, axe_js, "with the new secret and the attempts").await;
    screenshot(c, 1440, "portal-1440.png").await;
    screenshot(c, 320, "portal-320.png").await;
    assert_eq!(
        js(c, "return document.documentElement.scrollWidth <= 320;").await,
        json!(true),
        "no horizontal scroll at 320 px"
    );

    // Spanish: the switch changes the page, `<html lang>` and the address's `?lang=`.
    viewport(c, 1200, 900).await;
    js(
        c,
        "const s = document.getElementById('lang'); s.value = 'es'; \
         s.dispatchEvent(new Event('change'));",
    )
    .await;
    until(
        c,
        "the page in Spanish",
        "document.documentElement.lang === 'es' && document.querySelector('h1').innerText === 'Portal de webhooks'",
    )
    .await;
    assert!(
        js(c, "return location.search;")
            .await
            .as_str()
            .expect("search")
            .contains("lang=es")
    );
    assert!(
        js(c, "return document.getElementById('endpoints').innerText;")
            .await
            .as_str()
            .expect("text")
            .contains("Enviar evento de prueba")
    );
    axe(c, axe_js, "in Spanish").await;
    let (problems, _) = console_problems(c).await;
    assert!(problems.is_empty(), "console: {problems:?}");

    // Revoking the token that minted the link ends the session: the next action says so.
    let res = app
        .internal(Method::DELETE, &format!("/tokens/{}", acme.token_id))
        .send()
        .await
        .expect("send");
    assert!(res.status().is_success());
    click(c, &format!("[data-endpoint=\"{id}\"] [data-action=test]")).await;
    until(
        c,
        "the ended session's message",
        "document.getElementById('alert').innerText.includes('Su sesión ha terminado') \
         && document.getElementById('endpoints-section').hidden",
    )
    .await;

    // The link was spent: opening it again says so, in the language asked for.
    c.goto("about:blank").await.expect("blank");
    c.goto(&format!("{front}/portal?lang=es#code={code}"))
        .await
        .expect("again");
    let alert = until(
        c,
        "the spent link's message",
        "document.getElementById('alert').innerText",
    )
    .await;
    assert!(
        alert.as_str().expect("alert").contains("ya se usó"),
        "{alert}"
    );
    axe(c, axe_js, "a spent link").await;

    // Neither the code nor the session's bearer ever reached the server in a URL or a
    // `Referer`; the page sent no `Referer` at all.
    // Nothing of the session is kept in the browser.
    assert_eq!(
        js(
            c,
            "return [document.cookie, localStorage.length, sessionStorage.length];"
        )
        .await,
        json!(["", 0, 0])
    );
    let seen = seen.lock().expect("seen").clone();
    assert!(
        seen.iter()
            .any(|(m, u, _)| m == "POST" && u == "/portal/v1/sessions")
    );
    assert!(
        seen.iter()
            .any(|(_, u, _)| u.starts_with("/api/v1/webhook-deliveries?"))
    );
    for (method, uri, referer) in &seen {
        assert!(!uri.contains(&code), "{method} {uri} carries the code");
        assert!(!uri.contains("pk_live_"), "{method} {uri} carries a bearer");
        assert_eq!(referer, &None, "{method} {uri} sent a Referer");
    }
}

#[tokio::test]
async fn the_portals_actions_reach_a_real_receiver() {
    let Some(driver) = driver() else { return };
    let rx = crate::receiver::Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let c = browser(&driver).await;
    let result = AssertUnwindSafe(actions(&app, &rx, &c))
        .catch_unwind()
        .await;
    let _ = c.close().await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// The partner's deliveries once every one satisfies `done`.
async fn deliveries_when(
    app: &TestApp,
    token: &str,
    n: usize,
    done: &'static str,
) -> Vec<serde_json::Value> {
    crate::helpers::eventually(&format!("{n} deliveries {done}"), || async {
        let v = app.get_ok("/api/v1/webhook-deliveries", token).await;
        let d = v["data"].as_array().expect("deliveries").clone();
        (d.len() == n && d.iter().all(|x| x["status"] == done)).then_some(d)
    })
    .await
}

async fn actions(app: &TestApp, rx: &crate::receiver::Receiver, c: &Client) {
    let acme = app.seed("acme", false).await;
    let endpoint = app
        .create_webhook_endpoint(
            &acme.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    let id = endpoint["id"].as_str().expect("id").to_owned();
    // The receiver is broken: the first delivery fails all its attempts (1 + 2 retries).
    rx.answer_with(&[500, 500, 500]);
    app.ingest_lead(&crate::helpers::lead_body("acme", json!({})))
        .await;
    deliveries_when(app, &acme.token, 1, "failed").await;

    let (code, _) = mint(app, &acme.token).await;
    viewport(c, 1200, 900).await;
    c.goto(&app.url(&format!("/portal#code={code}")))
        .await
        .expect("portal");
    until(
        c,
        "the failed delivery in the log",
        "document.querySelector('#log-body .badge.failed')",
    )
    .await;
    until(
        c,
        "the chart's failed count",
        "Array.from(document.querySelectorAll('.legend li')).some(l => l.innerText.includes('Failed: 1'))",
    )
    .await;
    js(c, "window.confirm = () => true;").await;

    // The receiver is fixed: Resend delivers it.
    click(c, "#log-body [data-action=resend]").await;
    until(
        c,
        "the announcement",
        "document.getElementById('status').innerText.includes('queued again')",
    )
    .await;
    deliveries_when(app, &acme.token, 1, "delivered").await;
    assert_eq!(
        rx.received().len(),
        4,
        "three failed attempts and the resent one"
    );

    // Disable, then enable, from the page; the reason is said in plain words.
    click(
        c,
        &format!("[data-endpoint=\"{id}\"] [data-action=disable]"),
    )
    .await;
    until(
        c,
        "the disabled endpoint",
        &format!(
            "(document.querySelector('[data-endpoint=\"{id}\"] .reason')?.innerText || '') \
             .includes('disabled by hand')"
        ),
    )
    .await;
    click(c, &format!("[data-endpoint=\"{id}\"] [data-action=enable]")).await;
    until(
        c,
        "the enabled endpoint",
        &format!("document.querySelector('[data-endpoint=\"{id}\"] .badge.enabled')"),
    )
    .await;
    // Broken again: a second delivery fails; once fixed, Recover (since 24 hours ago) sends it.
    rx.answer_with(&[500, 500, 500]);
    app.ingest_lead(&crate::helpers::lead_body("acme", json!({})))
        .await;
    crate::helpers::eventually("the second delivery failed", || async {
        let v = app.get_ok("/api/v1/webhook-deliveries", &acme.token).await;
        let d = v["data"].as_array().expect("deliveries").clone();
        (d.len() == 2 && d.iter().any(|x| x["status"] == "failed")).then_some(())
    })
    .await;
    click(
        c,
        &format!("[data-endpoint=\"{id}\"] [data-action=recover]"),
    )
    .await;
    until(
        c,
        "the recovery's announcement",
        "document.getElementById('status').innerText.includes('1 failed deliveries queued again')",
    )
    .await;
    deliveries_when(app, &acme.token, 2, "delivered").await;
    assert_eq!(
        rx.received().len(),
        8,
        "4 for the first, 3 failed and 1 recovered for the second"
    );
    let (problems, _) = console_problems(c).await;
    assert!(problems.is_empty(), "console: {problems:?}");
}

/// The page ends its session when the session expires, and says so.
#[tokio::test]
async fn the_portal_says_when_its_session_has_expired() {
    let Some(driver) = driver() else { return };
    let app =
        TestApp::spawn_with(|c| c.portal_session_ttl = std::time::Duration::from_secs(3)).await;
    let c = browser(&driver).await;
    let result = AssertUnwindSafe(async {
        let acme = app.seed("acme", false).await;
        let (code, _) = mint(&app, &acme.token).await;
        c.goto(&app.url(&format!("/portal#code={code}")))
            .await
            .expect("portal");
        until(
            &c,
            "the page",
            "!document.getElementById('endpoints-section').hidden",
        )
        .await;
        until(
            &c,
            "the expiry message",
            "document.getElementById('alert').innerText.includes('Your session has ended') \
             && document.getElementById('endpoints-section').hidden",
        )
        .await;
    })
    .catch_unwind()
    .await;
    let _ = c.close().await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}
