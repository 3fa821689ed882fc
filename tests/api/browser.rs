//! The embedded Care Services view in a real browser: headless Chromium driven over WebDriver
//! (`/usr/bin/chromedriver`) with fantoccini. A partner page on another origin frames the view
//! with the host snippet of `docs/embedding.md`; screenshots land in `target/screenshots/`.
//!
//! Without chromedriver the test prints `SKIP` and passes, except under `CI=true`, where
//! `.ci/run` installs the browser and its absence is a failure.

use std::net::TcpStream;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use actix_web::{App, HttpResponse, HttpServer, web};
use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use fantoccini::wd::{Capabilities, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder, Locator};
use futures_util::FutureExt as _;
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, eventually_within, partner_body};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
/// Product images point at this host, which the browser is told does not exist: the view must
/// fall back to its placeholders (and the test needs no network).
const IMAGE_HOST: &str = "img.test";

/// A chromedriver process on a free port with a throwaway browser profile.
pub(crate) struct Driver {
    child: Child,
    port: u16,
    profile: PathBuf,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// Starts chromedriver, or `None` (after saying so) when the browser is not installed here.
pub(crate) fn driver() -> Option<Driver> {
    let missing: Vec<_> = [CHROMEDRIVER, CHROMIUM]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if !missing.is_empty() {
        let msg = format!(
            "{} not installed (apt-get install chromium chromium-driver; .ci/run installs them)",
            missing.join(" and ")
        );
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "browser tests cannot run in CI: {msg}"
        );
        eprintln!("SKIP browser tests of the embedded view: {msg}");
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let profile = std::env::temp_dir().join(format!("embed-chromium-{}", uuid::Uuid::new_v4()));
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let driver = Driver {
        child,
        port,
        profile,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not listen");
        // The polling interval of a blocking wait for chromedriver's port (no runtime here).
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(driver)
}

pub(crate) async fn browser(d: &Driver) -> Client {
    let mut caps = Capabilities::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": CHROMIUM,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
                format!("--user-data-dir={}", d.profile.display()),
                format!("--host-resolver-rules=MAP {IMAGE_HOST} ~NOTFOUND"),
                "--window-size=1200,900",
            ],
        }),
    );
    caps.insert("goog:loggingPrefs".into(), json!({ "browser": "ALL" }));
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", d.port))
        .await
        .expect("webdriver session")
}

/// chromedriver's console log since the last call (`POST /session/{id}/se/log`).
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.into()))
    }
}

/// Console errors and warnings, except the product images' failed loads (deliberate here), and
/// how many of those image failures were logged (proof that the log is read at all).
pub(crate) async fn console_problems(c: &Client) -> (Vec<String>, usize) {
    let log = c.issue_cmd(BrowserLog).await.expect("browser log");
    let (images, problems): (Vec<String>, Vec<String>) = log
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| matches!(e["level"].as_str(), Some("SEVERE" | "WARNING")))
        .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
        .partition(|m| m.contains(IMAGE_HOST) && m.contains("Failed to load resource"));
    (problems, images.len())
}

pub(crate) async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.expect("script runs")
}

/// Polls `script` (a JS expression) until it is truthy; its last value.
pub(crate) async fn until(c: &Client, what: &str, script: &str) -> Value {
    eventually_within(Duration::from_secs(15), what, || async {
        let v = js(c, &format!("return ({script});")).await;
        (!(v.is_null() || v == json!(false) || v == json!(0) || v == json!(""))).then_some(v)
    })
    .await
}

/// Sets the viewport (not the window) to `width` x `height` CSS pixels.
pub(crate) async fn viewport(c: &Client, width: u32, height: u32) {
    c.set_window_size(width, height).await.expect("window size");
    let inner = js(c, "return [window.innerWidth, window.innerHeight];").await;
    let dw = i64::from(width) - inner[0].as_i64().expect("width");
    let dh = i64::from(height) - inner[1].as_i64().expect("height");
    if dw != 0 || dh != 0 {
        let w = u32::try_from(i64::from(width) + dw).expect("width");
        let h = u32::try_from(i64::from(height) + dh).expect("height");
        c.set_window_size(w, h).await.expect("window size");
    }
    let inner = js(c, "return window.innerWidth;").await;
    assert_eq!(inner, json!(width), "viewport width");
}

fn screenshots_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot directory");
    dir
}

/// A full-page screenshot of the current page at `width` CSS pixels.
pub(crate) async fn screenshot(c: &Client, width: u32, name: &str) -> PathBuf {
    viewport(c, width, 800).await;
    let h = js(
        c,
        "return Math.ceil(document.documentElement.getBoundingClientRect().height);",
    )
    .await
    .as_u64()
    .expect("height");
    viewport(c, width, u32::try_from(h).expect("height")).await;
    let png = c.screenshot().await.expect("screenshot");
    let path = screenshots_dir().join(name);
    std::fs::write(&path, png).expect("write screenshot");
    path
}

pub(crate) async fn tab(c: &Client) {
    let key: char = Key::Tab.into();
    c.perform_actions(
        KeyActions::new("keyboard".into())
            .then(KeyAction::Down { value: key })
            .then(KeyAction::Up { value: key }),
    )
    .await
    .expect("tab");
}

/// The host snippet of `docs/embedding.md` (its first `html` block), pointed at `app`.
fn host_snippet(app: &TestApp, query: &str) -> String {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/embedding.md"),
    )
    .expect("docs/embedding.md");
    let start = doc.find("```html\n").expect("an html block") + "```html\n".len();
    let len = doc[start..].find("```").expect("end of the html block");
    let snippet = &doc[start..start + len];
    assert!(snippet.contains("https://catalog.example.com") && snippet.contains("YOUR_PARTNER_ID"));
    snippet
        .replace("https://catalog.example.com", &app.address)
        .replace("YOUR_PARTNER_ID", query)
}

/// A partner's page on another origin (`localhost`, another port) that frames the view with the
/// documented snippet and records every height message it receives in `window.heights` (and
/// when the last one came in `window.heightAt`, `performance.now()`'s milliseconds).
fn host_page(snippet: String) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Acme Health</title><link rel=\"icon\" href=\"data:,\"></head>\
         <body style=\"margin:0;font-family:sans-serif\"><header style=\"padding:16px\">Acme Health</header>\
         <script>window.heights = []; window.addEventListener(\"message\", function (e) {{\
         if (e.data && e.data.type === \"partner-api-docs-height\") {{ window.heights.push(e.data.height); \
         window.heightAt = performance.now(); }} }});</script>\
         {snippet}<footer style=\"padding:16px\">Footer</footer></body></html>"
    );
    let server = HttpServer::new(move || {
        let html = html.clone();
        App::new().default_service(web::to(move || {
            let html = html.clone();
            async move {
                HttpResponse::Ok()
                    .content_type("text/html; charset=utf-8")
                    .body(html)
            }
        }))
    })
    .workers(1)
    .bind(("127.0.0.1", port))
    .expect("bind host page")
    .run();
    tokio::spawn(server);
    format!("http://localhost:{port}/")
}

/// A partner with both languages and all five Care Services, with images that fail to load.
async fn app_with_services() -> TestApp {
    let app = TestApp::spawn_with(|c| {
        c.care_services_url = url::Url::parse("https://care.test").expect("url")
    })
    .await;
    app.seed("acme", false).await;
    let mut p = partner_body(true);
    p["name"] = json!("Acme Health");
    p["enabledLangs"] = json!(["en", "es"]);
    p["careServices"] = json!({ "subscriptionActive": true, "manualOverride": false, "yearlyBundle": true, "services": [] });
    assert!(app.put_partner("acme", &p).await.status().is_success());
    let products = [
        (
            "primary-care",
            "Primary Care",
            "Unlimited online visits with a licensed clinician for everyday health, prescriptions and follow-ups.",
            &[(1, 29), (3, 79), (12, 279)][..],
        ),
        (
            "urgent-care",
            "Urgent Care",
            "Video visits the same day for colds, infections, rashes and minor injuries.",
            &[(1, 19), (12, 179)][..],
        ),
        (
            "mental-health",
            "Mental Health",
            "Therapy and medication support with licensed therapists and prescribers, from home.",
            &[(1, 89), (3, 249), (6, 469)][..],
        ),
        (
            "dermatology",
            "Dermatology",
            "Send photos of a skin, hair or nail concern and get a treatment plan from a dermatologist.",
            &[(3, 59), (12, 199)][..],
        ),
        (
            "veterinary-care",
            "Veterinary Care",
            "Video visits with licensed veterinarians for your dog or cat, day or night.",
            &[(1, 15), (12, 149)][..],
        ),
    ];
    for (i, (service, name, description, tiers)) in products.iter().enumerate() {
        let tiers: Vec<Value> = tiers
            .iter()
            .map(|(m, price)| json!({ "key": format!("m{m}"), "label": format!("{m} months"), "months": m, "userPrice": price, "commission": 5 }))
            .collect();
        let res = app
            .internal(
                Method::PUT,
                &format!("/care-service-products/00000000-0000-4000-8000-0000000002{i:02}"),
            )
            .json(&json!({ "service": service, "slug": service, "productName": name,
                "description": description, "imageUrl": format!("https://{IMAGE_HOST}/{service}.png"), "tiers": tiers }))
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), 201);
    }
    app
}

#[tokio::test]
async fn the_embedded_view_in_a_real_browser() {
    let Some(driver) = driver() else { return };
    let app = app_with_services().await;
    let c = browser(&driver).await;
    // Close the session (and so the browser) whether or not the checks pass.
    let result = AssertUnwindSafe(run(&app, &c)).catch_unwind().await;
    let _ = c.close().await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// Waits until the frame has the last height the view posted, no new height has come for a
/// second (the view has finished laying out: a height taken while it still moved could be one
/// the next step never passes), and `check` (a JS expression of `h`, that height) holds;
/// returns the height. On a timeout, says what the heights were.
async fn frame_settles(c: &Client, what: &str, check: &str) -> f64 {
    let script = format!(
        "var h = window.heights.length ? window.heights[window.heights.length - 1] : 0; \
         var frame = document.getElementById('care-services').getBoundingClientRect().height; \
         var quiet = window.heightAt === undefined ? 0 : performance.now() - window.heightAt; \
         return [h > 0 && frame === h && quiet >= 1000 && ({check}), h, frame, quiet, \
         window.heights.slice(-12), innerWidth];"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = js(c, &script).await;
        if v[0] == json!(true) {
            return v[1].as_f64().expect("height");
        }
        assert!(
            Instant::now() < deadline,
            "timed out after 30 s waiting for {what}: last posted height, frame height, ms since \
             the last post, the last posted heights, window width: {v}"
        );
        // The polling interval, not a wait for anything.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn run(app: &TestApp, c: &Client) {
    let embed = |q: &str| app.url(&format!("/embed/care-services?partner_id=acme{q}"));

    // A partner page on another origin frames the view; the height message sizes the frame.
    let host = host_page(host_snippet(app, "acme&amp;m=12"));
    viewport(c, 1200, 900).await;
    c.goto(&host).await.expect("host page");
    let wide = frame_settles(c, "the frame to take the posted height", "true").await;
    assert!(wide > 300.0, "a real height: {wide}");
    let posts = js(c, "return window.heights.length;").await;

    // The window narrows: the cards stack, the page grows, and the frame follows.
    viewport(c, 390, 900).await;
    let narrow = frame_settles(c, "the frame to grow at 390 px", &format!("h > {wide}")).await;
    assert!(
        js(c, "return window.heights.length;").await.as_u64() > posts.as_u64(),
        "a new message after the resize"
    );
    // And back: it shrinks again (the height is the content's, not the frame's).
    viewport(c, 1200, 900).await;
    frame_settles(
        c,
        "the frame to shrink at 1200 px",
        &format!("h < {narrow}"),
    )
    .await;

    // Inside the frame: placeholders for the failed images, and the tier selection drives the
    // button's link.
    c.enter_frame(0).await.expect("enter frame");
    until(
        c,
        "failed images to give way to placeholders",
        "document.querySelectorAll('.media img').length === 0 && document.querySelectorAll('.ph').length === 5",
    )
    .await;
    let cta = c
        .find(Locator::Css("[data-service=primary-care] a.cta"))
        .await
        .expect("button");
    assert_eq!(
        cta.attr("href").await.expect("href").as_deref(),
        Some("https://care.test/primary-care?partner_id=acme&m=12"),
        "m=12 preselected"
    );
    c.find(Locator::Css("[data-service=primary-care] input[value='3']"))
        .await
        .expect("3 months")
        .click()
        .await
        .expect("click");
    assert_eq!(
        cta.attr("href").await.expect("href").as_deref(),
        Some("https://care.test/primary-care?partner_id=acme&m=3")
    );
    assert!(
        cta.text()
            .await
            .expect("text")
            .contains("Start with 3 months")
    );
    c.enter_parent_frame().await.expect("leave frame");
    let (problems, _) = console_problems(c).await;
    assert!(problems.is_empty(), "console: {problems:?}");

    // Keyboard only: Tab reaches every link and button in order, each with a visible focus.
    c.goto(&embed("&m=12")).await.expect("view");
    let expected = js(
        c,
        "return [...document.querySelectorAll('a')].map(a => a.getAttribute('href'));",
    )
    .await;
    let mut reached = Vec::new();
    for _ in 0..60 {
        tab(c).await;
        let focus = js(
            c,
            "const e = document.activeElement; if (!e || e === document.body) return null; \
             const s = getComputedStyle(e); \
             return { tag: e.tagName, href: e.getAttribute('href'), outline: s.outlineStyle, width: s.outlineWidth };",
        )
        .await;
        if focus.is_null() {
            break;
        }
        assert_ne!(focus["outline"], "none", "visible focus: {focus}");
        if focus["tag"] == "A" {
            reached.push(focus["href"].clone());
        }
    }
    assert_eq!(Value::Array(reached), expected, "every link, in page order");
    let buttons = js(c, "return document.querySelectorAll('a.cta').length;").await;
    assert_eq!(buttons, json!(5));

    // From 320 px phones up: nothing wider than the viewport.
    for q in ["&m=12", "&redeem=true&lang=es"] {
        c.goto(&embed(q)).await.expect("view");
        for width in [320, 390, 768, 1200] {
            viewport(c, width, 800).await;
            let overflow = js(
                c,
                "return document.documentElement.scrollWidth - window.innerWidth;",
            )
            .await;
            assert_eq!(
                overflow,
                json!(0),
                "horizontal overflow at {width} px ({q})"
            );
        }
    }

    // Screenshots for review and for docs/embedding.md.
    c.goto(&embed("&m=12")).await.expect("view");
    until(
        c,
        "placeholders",
        "document.querySelectorAll('.media img').length === 0",
    )
    .await;
    for width in [320, 390, 1200] {
        let path = screenshot(c, width, &format!("care-services-{width}.png")).await;
        println!("screenshot: {}", path.display());
    }

    // The Bulk Code Redemption screen.
    c.goto(&embed("&redeem=true")).await.expect("redeem");
    let h1 = c.find(Locator::Css("h1")).await.expect("h1");
    assert_eq!(
        h1.text().await.expect("text"),
        "Redeem your Care Services code"
    );
    let code = c
        .find(Locator::Css(".code"))
        .await
        .expect("example code")
        .text()
        .await
        .expect("text");
    assert!(
        code.len() == 12
            && code
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()),
        "{code}"
    );
    let about = c
        .find(Locator::Css(".about"))
        .await
        .expect("about")
        .text()
        .await
        .expect("text");
    assert!(
        about.contains("12 characters") && about.contains("Acme Health"),
        "{about}"
    );
    let hrefs = js(
        c,
        "return [...document.querySelectorAll('a.cta')].map(a => a.getAttribute('href'));",
    )
    .await;
    let hrefs = hrefs.as_array().expect("hrefs");
    assert_eq!(hrefs.len(), 5);
    for h in hrefs {
        let h = h.as_str().expect("href");
        assert!(
            h.contains("redeem=true") && !h.contains("&m=") && !h.contains("?m="),
            "{h}"
        );
    }
    assert_eq!(
        js(c, "return document.querySelectorAll('input').length;").await,
        json!(0),
        "no tiers on the redemption screen"
    );
    let path = screenshot(c, 390, "redeem-390.png").await;
    println!("screenshot: {}", path.display());

    // Spanish, through the language switch.
    c.goto(&embed("")).await.expect("view");
    c.find(Locator::Css(".langs a[lang=es]"))
        .await
        .expect("Español")
        .click()
        .await
        .expect("click");
    until(
        c,
        "the Spanish page",
        "document.documentElement.lang === 'es'",
    )
    .await;
    assert_eq!(
        c.find(Locator::Css("h1"))
            .await
            .expect("h1")
            .text()
            .await
            .expect("text"),
        "Servicios de atención"
    );
    let path = screenshot(c, 390, "care-services-es-390.png").await;
    println!("screenshot: {}", path.display());

    let (problems, failed_images) = console_problems(c).await;
    assert!(problems.is_empty(), "console: {problems:?}");
    assert!(failed_images > 0, "the console log is read");
}
