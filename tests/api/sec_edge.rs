//! Security review (issue 23), the edge of the service: custom header names (S-08), what the
//! log may hold (S-02), parser rejections (S-10, S-11) and cross-partner reads by admin tokens
//! (S-04). Each test is named after its finding.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{TestApp, assert_error, body};

const ENDPOINTS: &str = "/api/v1/webhook-endpoints";

/// Names a delivery sets itself, hop-by-hop names, credentials and proxy headers, in the
/// spellings a receiver mapping headers to CGI names would merge with the real ones.
const RESERVED_NAMES: [&str; 27] = [
    "X_Partner_Signature",
    "x_partner_event",
    "webhook-signature",
    "Webhook-Id",
    "WEBHOOK_TIMESTAMP",
    "Connection",
    "Keep-Alive",
    "Proxy-Connection",
    "TE",
    "Trailer",
    "Upgrade",
    "Expect",
    "Content-Encoding",
    "Content_Type",
    "Proxy-Authorization",
    "Cookie",
    "Forwarded",
    "X-Forwarded-For",
    "x_forwarded_proto",
    "X-Forwarded-Host",
    "X-Real-IP",
    "x_real_ip",
    // Beyond the ruling's list (the attacker re-try): httpoxy, dots, client-address overrides.
    "Proxy",
    "X.Partner.Signature",
    "X-Forwarded",
    "True-Client-IP",
    "X-HTTP-Method-Override",
];

#[tokio::test]
async fn s08_reserved_custom_header_names_are_refused_on_create_and_patch() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let created = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": "https://hooks.example.com", "events": ["lead.created"],
                     "customHeader": { "name": "X_Api_Key", "value": "k" } }),
        )
        .await;
    let id = created["id"].as_str().expect("id").to_owned();
    for name in RESERVED_NAMES {
        let header = json!({ "name": name, "value": "x" });
        // Partner API: create and patch.
        let res = app
            .api(Method::POST, ENDPOINTS, &s.token)
            .json(
                &json!({ "url": "https://hooks.example.com", "events": ["lead.created"],
                           "customHeader": header }),
            )
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
        let res = app
            .api(Method::PATCH, &format!("{ENDPOINTS}/{id}"), &s.token)
            .json(&json!({ "customHeader": header }))
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
        // Operator API: create and patch.
        let res = app
            .internal(Method::POST, "/partners/acme/webhook-endpoints")
            .json(
                &json!({ "url": "https://hooks.example.com", "events": ["lead.created"],
                           "customHeader": header }),
            )
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
        let res = app
            .internal(
                Method::PATCH,
                &format!("/partners/acme/webhook-endpoints/{id}"),
            )
            .json(&json!({ "customHeader": header }))
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    // The endpoint kept its header; nothing reserved was stored.
    let list = app.get_ok(ENDPOINTS, &s.token).await;
    let rows = list["data"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{list}");
    assert_eq!(rows[0]["customHeader"]["name"], "X_Api_Key");
}

#[tokio::test]
async fn s02_no_log_level_puts_secrets_or_personal_data_into_the_log() {
    // Every level open, and the statement-logging crates named explicitly.
    let server = crate::process::LoggedServer::start(
        "trace,tokio_postgres=trace,postgres_protocol=trace,diesel=trace,diesel_async=trace,\
         reqwest=trace,hyper=trace,hyper_util=trace,rustls=trace,actix_http=trace,actix_web=trace",
    )
    .await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let internal = |m: Method, p: &str| {
        client
            .request(m, format!("{}/internal/v1{p}", server.address))
            .bearer_auth(crate::helpers::INTERNAL_TOKEN)
    };
    let res = internal(Method::PUT, "/partners/acme")
        .json(&crate::helpers::partner_body(true))
        .send()
        .await
        .expect("send");
    assert!(res.status().is_success(), "{}", res.status());
    let user = body(
        internal(Method::POST, "/users")
            .json(&json!({ "email": "staff@acme.test", "partnerId": "acme", "admin": false }))
            .send()
            .await
            .expect("send"),
    )
    .await;
    let user_id = user["data"]["id"].as_str().expect("user id").to_owned();
    let token = body(
        internal(Method::POST, &format!("/users/{user_id}/tokens"))
            .send()
            .await
            .expect("send"),
    )
    .await["data"]["token"]
        .as_str()
        .expect("token")
        .to_owned();

    let header_value = format!("hv-{}", uuid::Uuid::new_v4().simple());
    // A credential in the target's query (the URL check sends credentials to customHeader, but
    // a query is the partner's own business).
    let url_key = format!("uk-{}", uuid::Uuid::new_v4().simple());
    let created = body(
        client
            .post(format!("{}{ENDPOINTS}", server.address))
            .bearer_auth(&token)
            .json(
                &json!({ "url": format!("https://hooks.example.com/s02?key={url_key}"), "events": ["lead.created"],
                           "secret": true,
                           "customHeader": { "name": "X-Api-Key", "value": header_value } }),
            )
            .send()
            .await
            .expect("send"),
    )
    .await;
    let secret = created["data"]["secret"]
        .as_str()
        .unwrap_or_else(|| panic!("a secret in {created}"))
        .to_owned();
    let email = format!("s02-{}@example.com", uuid::Uuid::new_v4().simple());
    let phone = "+1 555 0142";
    let res = internal(Method::POST, "/leads")
        .json(&crate::helpers::lead_body(
            "acme",
            json!({ "email": email, "phone": phone, "lastName": "Zyxwvutsrq" }),
        ))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), 201);
    for path in ["/api/v1/leads", ENDPOINTS] {
        let res = client
            .get(format!("{}{path}", server.address))
            .bearer_auth(&token)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), 200, "{path}");
    }
    // A webhook-portal link, its exchange, a call with the session, and a refused exchange.
    let link = body(
        client
            .post(format!("{}/api/v1/portal-sessions", server.address))
            .bearer_auth(&token)
            .send()
            .await
            .expect("send"),
    )
    .await;
    let code = link["data"]["url"]
        .as_str()
        .and_then(|u| u.split_once("#code="))
        .map(|(_, c)| c.to_owned())
        .unwrap_or_else(|| panic!("a link in {link}"));
    let exchange = |code: String| {
        client
            .post(format!("{}/portal/v1/sessions", server.address))
            .json(&json!({ "code": code }))
            .send()
    };
    let session = body(exchange(code.clone()).await.expect("send")).await;
    let portal = session["data"]["token"]
        .as_str()
        .unwrap_or_else(|| panic!("a session in {session}"))
        .to_owned();
    assert_eq!(exchange(code.clone()).await.expect("send").status(), 400);
    let res = client
        .get(format!("{}{ENDPOINTS}", server.address))
        .bearer_auth(&portal)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), 200);
    // The worker claims the delivery and tries it.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let log = server.stop().await;

    assert!(
        log.contains("\"level\":\"DEBUG\"") || log.contains("\"level\":\"TRACE\""),
        "the filter let no debug line through; log:\n{log}"
    );
    let digits: String = phone.chars().filter(char::is_ascii_digit).collect();
    for (what, needle) in [
        ("webhook secret", secret.as_str()),
        ("webhook secret key", secret.trim_start_matches("whsec_")),
        ("custom header value", header_value.as_str()),
        ("credential in the endpoint's query", url_key.as_str()),
        ("lead e-mail", email.as_str()),
        ("lead phone", phone),
        ("lead phone digits", digits.as_str()),
        ("lead last name", "Zyxwvutsrq"),
        ("partner token", token.as_str()),
        ("portal code", code.as_str()),
        ("portal session bearer", portal.as_str()),
        ("operator token", crate::helpers::INTERNAL_TOKEN),
        ("token pepper", crate::helpers::PEPPER),
    ] {
        // The value as text, and as tokio_postgres prints a bound parameter: its bytes, in
        // decimal (`Some([119, 104, …])`).
        let bytes = format!("{:?}", needle.as_bytes());
        let bytes = bytes.trim_start_matches('[').trim_end_matches(']');
        for form in [needle, bytes] {
            if let Some(at) = log.find(form) {
                let start = log[..at].rfind('\n').map_or(0, |i| i + 1);
                let line: String = log[start..].chars().take(300).collect();
                panic!("the {what} is in the log, on the line starting: {line}");
            }
        }
    }
}

/// The value of the sample `name` (with its labels, as exported) in a Prometheus text page.
fn sample(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test]
async fn s04_cross_partner_reads_by_admin_tokens_are_audited_and_counted() {
    let server = crate::process::LoggedServer::start("info").await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let metrics = || async {
        client
            .get(format!("{}/metrics", server.metrics_address))
            .send()
            .await
            .expect("send")
            .text()
            .await
            .expect("metrics")
    };
    assert_eq!(
        sample(&metrics().await, "partner_cross_reads_total"),
        Some(0.0),
        "exported from the start"
    );
    let (admin_token_id, admin_user_id, admin_token) = server.seed(&client, "hq", true).await;
    let (_, _, beta_token) = server.seed(&client, "beta", false).await;
    let res = server
        .internal(&client, Method::POST, "/care-services-coupons/bulk-orders")
        .json(
            &json!({ "partnerId": "beta", "productSlug": "primary", "months": 12, "quantity": 3,
                       "unitPriceCents": 9900, "purchaserEmail": "buyer@beta.test",
                       "purchaserSource": "portal" }),
        )
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), 201);
    let get = |token: &str, query: &str| {
        client
            .get(format!(
                "{}/api/v1/care-services-coupons{query}",
                server.address
            ))
            .bearer_auth(token)
            .send()
    };
    // Not cross-partner reads: the admin's own partner, named or not; a partner's own read.
    for (token, query) in [
        (admin_token.as_str(), ""),
        (admin_token.as_str(), "?partner_id=hq"),
        (beta_token.as_str(), "?partner_id=beta"),
    ] {
        assert_eq!(get(token, query).await.expect("send").status(), 200);
    }
    // Two cross-partner reads: JSON and CSV.
    let page = body(get(&admin_token, "?partner_id=beta").await.expect("send")).await;
    assert_eq!(page["data"].as_array().map(Vec::len), Some(3), "{page}");
    let res = get(&admin_token, "?partner_id=beta&format=csv&limit=2")
        .await
        .expect("send");
    assert_eq!(res.status(), 200);
    assert_eq!(
        sample(&metrics().await, "partner_cross_reads_total"),
        Some(2.0)
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let log = server.log();
    let audit: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"] == "audit")
        .collect();
    assert_eq!(
        audit.len(),
        2,
        "one audit line per cross-partner read:\n{log}"
    );
    for (line, rows) in audit.iter().zip([3, 2]) {
        assert_eq!(line["level"], "INFO", "{line}");
        assert_eq!(line["tokenId"], admin_token_id.as_str(), "{line}");
        assert_eq!(line["userId"], admin_user_id.as_str(), "{line}");
        assert_eq!(line["partnerId"], "beta", "{line}");
        assert_eq!(line["path"], "/api/v1/care-services-coupons", "{line}");
        assert_eq!(line["rows"], rows, "{line}");
    }
    server.stop().await;
}

/// Sends `bytes` on a new connection to `address` (`http://host:port`), then reads the answer
/// until the server closes: its status and its body as JSON (`Null` when not JSON).
async fn raw_request(address: &str, bytes: &[u8]) -> (u16, serde_json::Value, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = address.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(host).await.expect("connect");
    // The server may answer (and stop reading) before everything is written.
    let _ = stream.write_all(bytes).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(15),
        stream.read_to_end(&mut answer),
    )
    .await;
    assert!(read.is_ok(), "no answer within 15 s");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let json = text
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(serde_json::Value::Null);
    (status, json, text)
}

#[tokio::test]
async fn s10_s11_parser_rejections_answer_the_error_body_are_counted_and_not_logged_as_errors() {
    let server = crate::process::LoggedServer::start("info").await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let metrics = || async {
        client
            .get(format!("{}/metrics", server.metrics_address))
            .send()
            .await
            .expect("send")
            .text()
            .await
            .expect("metrics")
    };
    let reasons = [
        "request_line_too_long",
        "headers_too_large",
        "too_many_headers",
        "header_timeout",
        "malformed",
    ];
    let count = |page: &str, reason: &str| {
        sample(
            page,
            &format!("http_rejected_requests_total{{reason=\"{reason}\"}}"),
        )
    };
    let page = metrics().await;
    for r in reasons {
        assert_eq!(count(&page, r), Some(0.0), "{r} exported from the start");
    }

    let mut cases: Vec<(&str, Vec<u8>, u16)> = Vec::new();
    // A request line over 16 KiB (a 17 kB query string).
    cases.push((
        "request_line_too_long",
        format!(
            "GET /api/v1/catalog?q={} HTTP/1.1\r\nHost: x\r\n\r\n",
            "a".repeat(17 * 1024)
        )
        .into_bytes(),
        414,
    ));
    // Headers over 32 KiB.
    cases.push((
        "headers_too_large",
        format!(
            "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
            "b".repeat(33 * 1024)
        )
        .into_bytes(),
        431,
    ));
    // Over 100 header fields (200, as the review sent).
    let mut many = String::from("GET /healthz HTTP/1.1\r\nHost: x\r\n");
    for i in 0..200 {
        many.push_str(&format!("X-H{i}: v\r\n"));
    }
    many.push_str("\r\n");
    cases.push(("too_many_headers", many.into_bytes(), 431));
    // Not HTTP.
    cases.push((
        "malformed",
        b"GET /healthz HTTP/1.1\r\nNo colon here\r\n\r\n".to_vec(),
        400,
    ));
    // Body framing actix-http would refuse with an empty 400 (issue 23, N3).
    for framing in [
        "Content-Length: abc",
        "Content-Length: -1",
        "Content-Length: 1\r\nContent-Length: 2",
        "Content-Length: 2\r\nTransfer-Encoding: chunked",
        "Transfer-Encoding: gzip, chunked",
    ] {
        cases.push((
            "malformed",
            format!("POST /internal/v1/leads HTTP/1.1\r\nHost: x\r\n{framing}\r\n\r\n{{}}")
                .into_bytes(),
            400,
        ));
    }
    for (reason, bytes, status) in &cases {
        let (got, json, text) = raw_request(&server.address, bytes).await;
        assert_eq!(got, *status, "{reason}: {text}");
        assert_eq!(json["error"]["code"], "invalid_request", "{reason}: {text}");
        assert!(
            json["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{reason}: {text}"
        );
        assert!(
            text.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{text}"
        );
    }
    // Headers not complete 5 s after the first byte.
    let started = std::time::Instant::now();
    let (got, json, text) =
        raw_request(&server.address, b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await;
    assert_eq!(got, 408, "{text}");
    assert_eq!(json["error"]["code"], "invalid_request", "{text}");
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(4900)
            && waited < std::time::Duration::from_secs(8),
        "answered after {waited:?}"
    );
    // A normal request on the same server still works, on a keep-alive connection with a body.
    let res = client
        .get(format!("{}/healthz", server.address))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), 200);

    let page = metrics().await;
    for r in reasons {
        let expected = if r == "header_timeout" {
            1.0
        } else {
            cases.iter().filter(|c| c.0 == r).count() as f64
        };
        assert_eq!(count(&page, r), Some(expected), "{r}:\n{page}");
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let log = server.stop().await;
    for line in log.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        assert!(
            v["level"] != "ERROR" && v["level"] != "WARN",
            "rejections are logged at most at debug: {line}"
        );
    }
}
