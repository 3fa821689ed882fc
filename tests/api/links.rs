//! Shareable links (DNA, medical intake, Care Services), the operator catalog, and the public
//! catalog.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_error, body, partner_body};

const MED_A: &str = "00000000-0000-4000-8000-00000000000a";
const MED_B: &str = "00000000-0000-4000-8000-00000000000b";
const MED_C: &str = "00000000-0000-4000-8000-00000000000c";
const DNA: &str = "00000000-0000-4000-8000-0000000000d1";

fn medical(
    name: &str,
    slug: Option<&str>,
    langs: &[&str],
    categories: &[&str],
    active: bool,
) -> Value {
    json!({
        "name": name, "categories": categories, "details": "Available in 48 states",
        "imageUrl": "https://img.test/p.png", "imageFileId": "00000000-0000-4000-8000-0000000000f1",
        "imageSourceUrl": "https://img.test/src.png", "active": active,
        "legacyPath": format!("forms/{}", name.to_lowercase()), "selfHostedSlug": slug, "selfHostedLangs": langs,
        "suggestedPrices": "$199 - $1299",
        "tiers": [
            { "key": "m1", "label": "1 month", "months": 1, "minPrice": 199, "maxPrice": 399, "recommendedPrice": 299, "commission": 50 },
            { "key": "m3", "label": "3 months", "months": 3, "minPrice": 999, "maxPrice": 1499, "recommendedPrice": 1299, "commission": 150 }
        ]
    })
}

fn care(service: &str, slug: &str, months: &[u8]) -> Value {
    let tiers: Vec<Value> = months
        .iter()
        .map(|m| json!({ "key": format!("m{m}"), "label": format!("{m} months"), "months": m, "userPrice": 25 * u32::from(*m), "commission": 5 }))
        .collect();
    json!({ "service": service, "slug": slug, "productName": format!("{service} plan"), "description": "Care",
            "imageUrl": "https://img.test/c.png", "tiers": tiers })
}

async fn put(app: &TestApp, path: &str, b: &Value) -> reqwest::Response {
    app.internal(Method::PUT, path)
        .json(b)
        .send()
        .await
        .expect("send")
}

/// A partner with headless links on, `es` enabled, and three medical products: configured for
/// self-hosted intake (with `es`), not configured, and inactive.
async fn catalog_app() -> (TestApp, crate::helpers::Seeded) {
    let app = TestApp::spawn_with(|c| {
        c.intake_url = url::Url::parse("https://intake.test").expect("url");
        c.legacy_intake_url = url::Url::parse("https://legacy.test").expect("url");
        c.care_services_url = url::Url::parse("https://care.test").expect("url");
    })
    .await;
    let s = app.seed("acme", false).await;
    assert_eq!(
        put(
            &app,
            &format!("/medical-products/{MED_A}"),
            &medical(
                "Semaglutide",
                Some("sema"),
                &["en", "es"],
                &["weight-loss"],
                true
            )
        )
        .await
        .status(),
        201
    );
    assert_eq!(
        put(
            &app,
            &format!("/medical-products/{MED_B}"),
            &medical(
                "Finasteride",
                None,
                &[],
                &["hair-loss", "mens-health"],
                true
            )
        )
        .await
        .status(),
        201
    );
    assert_eq!(
        put(
            &app,
            &format!("/medical-products/{MED_C}"),
            &medical("Retired", Some("old"), &[], &["weight-loss"], false)
        )
        .await
        .status(),
        201
    );
    (app, s)
}

fn by_name<'a>(links: &'a Value, name: &str) -> &'a Value {
    links["data"]
        .as_array()
        .expect("data")
        .iter()
        .find(|l| l["productName"] == name)
        .expect("product")
}

#[tokio::test]
async fn medical_links_headless_vs_legacy() {
    let (app, s) = catalog_app().await;
    let links = app.get_ok("/api/v1/medical-intake-links", &s.token).await;
    assert_eq!(links["sub"], Value::Null);
    assert_eq!(
        links["data"].as_array().map(Vec::len),
        Some(2),
        "inactive products are not listed"
    );
    let sema = by_name(&links, "Semaglutide");
    assert_eq!(sema["urlStyle"], "headless");
    assert_eq!(sema["url"], "https://intake.test/sema?partner_id=acme");
    assert_eq!(
        sema["legacyUrl"],
        "https://legacy.test/forms/semaglutide?partner_id=acme"
    );
    assert_eq!(sema["email"], "ops@acme.test");
    assert_eq!(sema["category"], json!(["weight-loss"]));
    assert_eq!(
        sema["tiers"][0],
        json!({ "key": "m1", "label": "1 month", "minPrice": 199, "maxPrice": 399, "userPrice": 299, "commission": 50 })
    );
    let fin = by_name(&links, "Finasteride");
    assert_eq!(fin["urlStyle"], "legacy");
    assert_eq!(fin["url"], fin["legacyUrl"]);
    let mut keys: Vec<&String> = sema.as_object().expect("obj").keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "category",
            "details",
            "email",
            "imageUrl",
            "legacyUrl",
            "partnerId",
            "productName",
            "recordId",
            "suggestedPrices",
            "tiers",
            "url",
            "urlStyle"
        ]
    );

    // The partner switch off: every product is legacy.
    let mut off = partner_body(true);
    off["headlessLinks"] = json!(false);
    app.put_partner("acme", &off).await;
    let links = app.get_ok("/api/v1/medical-intake-links", &s.token).await;
    let sema = by_name(&links, "Semaglutide");
    assert_eq!(
        (sema["urlStyle"].clone(), sema["url"].clone()),
        (json!("legacy"), sema["legacyUrl"].clone())
    );
}

#[tokio::test]
async fn medical_links_for_a_sub_account_and_invalid_subs() {
    let (app, s) = catalog_app().await;
    app.api(Method::POST, "/api/v1/sub-accounts", &s.token)
        .json(&json!({ "subId": "7", "nickname": "Desk" }))
        .send()
        .await
        .expect("send");
    let links = app
        .get_ok("/api/v1/medical-intake-links?sub=7", &s.token)
        .await;
    assert_eq!(links["sub"], "7");
    let sema = by_name(&links, "Semaglutide");
    assert_eq!(sema["url"], "https://intake.test/sema?partner_id=acme.7");
    assert_eq!(
        sema["legacyUrl"],
        "https://legacy.test/forms/semaglutide?partner_id=acme.7"
    );
    assert!(!sema["url"].as_str().expect("url").contains("sub="));
    for bad in ["8", "0", "251", "07", "x", ""] {
        let res = app
            .api(
                Method::GET,
                &format!("/api/v1/medical-intake-links?sub={bad}"),
                &s.token,
            )
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    // A lead through that link lands on the sub-account.
    let row = app
        .ingest_lead(&crate::helpers::lead_body("acme.7", json!({})))
        .await;
    assert_eq!(row["subId"], "7");
}

#[tokio::test]
async fn medical_link_languages() {
    let (app, s) = catalog_app().await;
    let url = |links: &Value| {
        by_name(links, "Semaglutide")["url"]
            .as_str()
            .expect("url")
            .to_owned()
    };
    assert_eq!(
        url(&app
            .get_ok("/api/v1/medical-intake-links?lang=es", &s.token)
            .await),
        "https://intake.test/sema?partner_id=acme&lang=es"
    );
    assert_eq!(
        url(&app
            .get_ok("/api/v1/medical-intake-links?lang=en", &s.token)
            .await),
        "https://intake.test/sema?partner_id=acme&lang=en"
    );
    // Unknown: the default (en, not carried). Never an error.
    assert_eq!(
        url(&app
            .get_ok("/api/v1/medical-intake-links?lang=fr", &s.token)
            .await),
        "https://intake.test/sema?partner_id=acme"
    );
    // Provider-hosted links never carry lang.
    let links = app
        .get_ok("/api/v1/medical-intake-links?lang=es", &s.token)
        .await;
    assert!(
        !by_name(&links, "Finasteride")["url"]
            .as_str()
            .expect("url")
            .contains("lang")
    );
    // Disabled for the partner: falls back to the default.
    let mut en_only = partner_body(true);
    en_only["enabledLangs"] = json!(["en"]);
    app.put_partner("acme", &en_only).await;
    assert_eq!(
        url(&app
            .get_ok("/api/v1/medical-intake-links?lang=es", &s.token)
            .await),
        "https://intake.test/sema?partner_id=acme"
    );
    // A Spanish default is carried without asking.
    let mut es = partner_body(true);
    es["defaultLang"] = json!("es");
    app.put_partner("acme", &es).await;
    assert_eq!(
        url(&app.get_ok("/api/v1/medical-intake-links", &s.token).await),
        "https://intake.test/sema?partner_id=acme&lang=es"
    );
}

#[tokio::test]
async fn dna_links_need_dna_access() {
    let (app, s) = catalog_app().await;
    let dna = json!({ "productName": "Ancestry Kit", "description": "DNA", "intakePath": "dna/ancestry",
        "productImageUrl": "https://img.test/dna.png", "minimumPrice": 79, "recommendedPrice": 99,
        "maximumPrice": 149, "parentProduct": ["DNA"], "available": true });
    assert_eq!(
        put(&app, &format!("/dna-products/{DNA}"), &dna)
            .await
            .status(),
        201
    );
    assert_eq!(
        put(&app, &format!("/dna-products/{DNA}"), &dna)
            .await
            .status(),
        200,
        "replaced"
    );
    let links = app.get_ok("/api/v1/dna-links", &s.token).await;
    let l = &links["data"][0];
    assert_eq!(
        l["intakeUrl"],
        "https://legacy.test/dna/ancestry?partner_id=acme"
    );
    assert_eq!(l["userSetPrice"], json!(99));
    let res = put(
        &app,
        &format!("/partners/acme/dna-prices/{DNA}"),
        &json!({ "userSetPrice": 120.5 }),
    )
    .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        app.get_ok("/api/v1/dna-links", &s.token).await["data"][0]["userSetPrice"],
        json!(120.5)
    );
    for bad in [
        json!({ "userSetPrice": 150 }),
        json!({ "userSetPrice": 78.99 }),
        json!({ "price": 100 }),
    ] {
        assert_error(
            put(&app, &format!("/partners/acme/dna-prices/{DNA}"), &bad).await,
            400,
            "invalid_request",
        )
        .await;
    }
    assert_error(
        put(
            &app,
            &format!("/partners/acme/dna-prices/{MED_A}"),
            &json!({ "userSetPrice": 100 }),
        )
        .await,
        404,
        "not_found",
    )
    .await;
    let mut no_dna = partner_body(true);
    no_dna["dnaAccess"] = json!(false);
    app.put_partner("acme", &no_dna).await;
    let res = app
        .api(Method::GET, "/api/v1/dna-links", &s.token)
        .send()
        .await
        .expect("send");
    // Account state comes before the rate limit: no budget charged, no rate-limit headers.
    assert!(res.headers().get("x-ratelimit-limit").is_none());
    assert_error(res, 403, "forbidden").await;
    assert_error(
        app.request(Method::GET, "/api/v1/dna-links")
            .send()
            .await
            .expect("send"),
        401,
        "missing_bearer",
    )
    .await;
}

#[tokio::test]
async fn partner_medical_prices_are_validated_and_used() {
    let (app, s) = catalog_app().await;
    let res = put(
        &app,
        &format!("/partners/acme/medical-prices/{MED_A}"),
        &json!({ "tierPrices": { "m1": 249.99 } }),
    )
    .await;
    assert_eq!(res.status(), StatusCode::OK);
    let links = app.get_ok("/api/v1/medical-intake-links", &s.token).await;
    let tiers = &by_name(&links, "Semaglutide")["tiers"];
    assert_eq!(
        (tiers[0]["userPrice"].clone(), tiers[1]["userPrice"].clone()),
        (json!(249.99), json!(1299))
    );
    for bad in [
        json!({ "tierPrices": { "m1": 400 } }),
        json!({ "tierPrices": { "m1": 198 } }),
        json!({ "tierPrices": { "m6": 300 } }),
        json!({ "tierPrices": { "m1": 1.001 } }),
    ] {
        assert_error(
            put(
                &app,
                &format!("/partners/acme/medical-prices/{MED_A}"),
                &bad,
            )
            .await,
            400,
            "invalid_request",
        )
        .await;
    }
    assert_error(
        put(
            &app,
            &format!("/partners/ghost/medical-prices/{MED_A}"),
            &json!({ "tierPrices": {} }),
        )
        .await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn operator_catalog_validation() {
    let (app, _) = catalog_app().await;
    let id = "00000000-0000-4000-8000-0000000000e1";
    let mut cases: Vec<(&str, Value)> = Vec::new();
    let mut m = medical("X", None, &[], &["weight-loss"], true);
    m["tiers"][0]["months"] = json!(12);
    cases.push(("medical months 12", m));
    let mut m = medical("X", None, &[], &["weight-loss"], true);
    m["tiers"][0]["recommendedPrice"] = json!(500);
    cases.push(("recommended above max", m));
    cases.push((
        "unknown category",
        medical("X", None, &[], &["surgery"], true),
    ));
    cases.push((
        "unknown lang",
        medical("X", Some("x"), &["fr"], &["wellness"], true),
    ));
    let mut m = medical("X", None, &[], &["wellness"], true);
    m["imageUrl"] = json!("javascript:alert(1)");
    cases.push(("bad image url", m));
    let mut m = medical("X", None, &[], &["wellness"], true);
    m["legacyPath"] = json!("../../etc");
    cases.push(("path traversal", m));
    let mut m = medical("X", None, &[], &["wellness"], true);
    m["tiers"] = json!([]);
    cases.push(("no tiers", m));
    for (what, b) in cases {
        let res = put(&app, &format!("/medical-products/{id}"), &b).await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{what}");
    }
    assert_error(
        put(
            &app,
            &format!("/care-service-products/{id}"),
            &care("primary-care", "p", &[2]),
        )
        .await,
        400,
        "invalid_request",
    )
    .await;
    assert_error(
        put(
            &app,
            &format!("/care-service-products/{id}"),
            &care("surgery", "p", &[1]),
        )
        .await,
        400,
        "invalid_request",
    )
    .await;
    assert_error(
        put(
            &app,
            "/medical-products/not-a-uuid",
            &medical("X", None, &[], &["wellness"], true),
        )
        .await,
        400,
        "invalid_request",
    )
    .await;
    let res = put(
        &app,
        &format!("/care-service-products/{id}"),
        &care("primary-care", "primary", &[1, 12]),
    )
    .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let stored = body(res).await["data"].clone();
    assert_eq!(stored["id"], id);
    assert!(stored["createdAt"].is_string());
}

async fn care_app(access: Value) -> (TestApp, crate::helpers::Seeded) {
    let app = TestApp::spawn_with(|c| {
        c.care_services_url = url::Url::parse("https://care.test").expect("url")
    })
    .await;
    let s = app.seed("acme", false).await;
    let mut p = partner_body(true);
    p["careServices"] = access;
    app.put_partner("acme", &p).await;
    for (i, (service, months)) in [
        ("primary-care", vec![1u8, 3, 12]),
        ("dermatology", vec![1, 6]),
        ("urgent-care", vec![12]),
    ]
    .iter()
    .enumerate()
    {
        let id = format!("00000000-0000-4000-8000-0000000001{i:02}");
        assert_eq!(
            put(
                &app,
                &format!("/care-service-products/{id}"),
                &care(service, service, months)
            )
            .await
            .status(),
            201
        );
    }
    (app, s)
}

fn services(links: &Value) -> Vec<String> {
    links["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|l| l["service"].as_str().expect("service").to_owned())
        .collect()
}

#[tokio::test]
async fn care_services_access_combinations() {
    let combos = [
        (
            json!({ "subscriptionActive": true, "manualOverride": false, "yearlyBundle": true, "services": [] }),
            vec!["primary-care", "urgent-care", "dermatology"],
        ),
        (
            json!({ "subscriptionActive": true, "manualOverride": false, "yearlyBundle": false, "services": ["dermatology"] }),
            vec!["dermatology"],
        ),
        (
            json!({ "subscriptionActive": false, "manualOverride": true, "yearlyBundle": false, "services": ["primary-care"] }),
            vec!["primary-care"],
        ),
        (
            json!({ "subscriptionActive": false, "manualOverride": false, "yearlyBundle": true, "services": ["primary-care"] }),
            vec![],
        ),
        (
            json!({ "subscriptionActive": true, "manualOverride": true, "yearlyBundle": false, "services": [] }),
            vec![],
        ),
    ];
    for (access, expected) in combos {
        let (app, s) = care_app(access.clone()).await;
        let links = app.get_ok("/api/v1/care-service-links", &s.token).await;
        let mut got = services(&links);
        got.sort();
        let mut want: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
        want.sort();
        assert_eq!(got, want, "{access}");
    }
    // A global category flag switched off hides the service from everyone.
    let (app, s) = care_app(json!({ "subscriptionActive": true, "manualOverride": false, "yearlyBundle": true, "services": [] })).await;
    app.internal(Method::PUT, "/care-services/feature-flags")
        .json(&json!({ "dermatology": false }))
        .send()
        .await
        .expect("send");
    let mut got = services(&app.get_ok("/api/v1/care-service-links", &s.token).await);
    got.sort();
    assert_eq!(got, ["primary-care", "urgent-care"]);
}

#[tokio::test]
async fn care_links_urls_filters_and_echo() {
    let (app, s) = care_app(json!({ "subscriptionActive": true, "manualOverride": false, "yearlyBundle": true, "services": [] })).await;
    app.api(Method::POST, "/api/v1/sub-accounts", &s.token)
        .json(&json!({ "subId": "12", "nickname": "Vet desk" }))
        .send()
        .await
        .expect("send");
    let all = app.get_ok("/api/v1/care-service-links", &s.token).await;
    assert_eq!(
        (
            all["sub"].clone(),
            all["service"].clone(),
            all["duration"].clone()
        ),
        (Value::Null, Value::Null, Value::Null)
    );
    let primary = all["data"]
        .as_array()
        .expect("data")
        .iter()
        .find(|l| l["service"] == "primary-care")
        .expect("primary")
        .clone();
    assert_eq!(
        primary["url"],
        "https://care.test/primary-care?partner_id=acme"
    );
    assert_eq!(
        primary["redeemUrl"],
        "https://care.test/primary-care?partner_id=acme&redeem=true"
    );
    assert_eq!(primary["tiers"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        primary["tiers"][2]["url"],
        "https://care.test/primary-care?partner_id=acme&m=12"
    );
    let mut keys: Vec<&String> = primary.as_object().expect("obj").keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "description",
            "imageUrl",
            "productName",
            "recordId",
            "redeemUrl",
            "service",
            "tiers",
            "url"
        ]
    );

    let q = app
        .get_ok(
            "/api/v1/care-service-links?duration=12&sub=12&lang=es",
            &s.token,
        )
        .await;
    assert_eq!(
        (q["sub"].clone(), q["duration"].clone()),
        (json!("12"), json!(12))
    );
    let mut got = services(&q);
    got.sort();
    assert_eq!(
        got,
        ["primary-care", "urgent-care"],
        "dermatology has no 12-month tier"
    );
    for l in q["data"].as_array().expect("data") {
        let slug = l["service"].as_str().expect("service");
        assert_eq!(
            l["url"],
            format!("https://care.test/{slug}?partner_id=acme&sub=12&m=12&lang=es")
        );
        assert_eq!(
            l["redeemUrl"],
            format!("https://care.test/{slug}?partner_id=acme&sub=12&lang=es&redeem=true")
        );
        assert_eq!(l["tiers"].as_array().map(Vec::len), Some(1));
    }
    let q = app
        .get_ok("/api/v1/care-service-links?service=dermatology", &s.token)
        .await;
    assert_eq!(
        (services(&q), q["service"].clone()),
        (vec!["dermatology".to_owned()], json!("dermatology"))
    );
    for bad in [
        "service=surgery",
        "duration=2",
        "duration=12.0",
        "sub=0",
        "sub=251",
        "sub=5",
    ] {
        let res = app
            .api(
                Method::GET,
                &format!("/api/v1/care-service-links?{bad}"),
                &s.token,
            )
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
}

#[tokio::test]
async fn care_services_disabled_is_404_before_authentication() {
    let app = TestApp::spawn_with(|c| c.care_services_enabled = false).await;
    let s = app.seed("acme", false).await;
    assert_error(
        app.request(Method::GET, "/api/v1/care-service-links")
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;
    assert_error(
        app.api(Method::GET, "/api/v1/care-service-links", &s.token)
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;
    // The other link endpoints are unaffected.
    assert_eq!(
        app.api(Method::GET, "/api/v1/medical-intake-links", &s.token)
            .send()
            .await
            .expect("send")
            .status(),
        200
    );
}

fn assert_catalog_headers(res: &reqwest::Response) {
    let h = res.headers();
    assert!(
        h["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("application/json")
    );
    assert_eq!(
        h["cache-control"],
        "no-store, no-cache, must-revalidate, proxy-revalidate"
    );
    assert_eq!(h["cdn-cache-control"], "no-store");
    assert_eq!(h["access-control-allow-methods"], "GET, OPTIONS");
    assert_eq!(h["access-control-allow-headers"], "Content-Type");
}

#[tokio::test]
async fn public_catalog_lists_active_products_with_attribution_and_prices() {
    let (app, _) = catalog_app().await;
    put(
        &app,
        &format!("/partners/acme/medical-prices/{MED_A}"),
        &json!({ "tierPrices": { "m1": 250 } }),
    )
    .await;
    let res = app
        .request(Method::GET, "/api/weight-loss?partner_id=acme")
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_catalog_headers(&res);
    let b = body(res).await;
    assert_eq!(
        b["count"], 1,
        "the inactive weight-loss product is not listed"
    );
    let p = &b["products"][0];
    assert_eq!(p["intakeUrl"], "https://intake.test/sema?partner_id=acme");
    assert_eq!(
        (
            p["price1Month"].clone(),
            p["price3Month"].clone(),
            p["price6Month"].clone()
        ),
        (json!("$250.00"), json!("$1299.00"), json!("$0.00"))
    );
    assert_eq!(
        (p["imageKind"].clone(), p["image"].clone()),
        (json!("file"), json!("https://img.test/p.png"))
    );
    let mut keys: Vec<&String> = p.as_object().expect("obj").keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "details",
            "id",
            "image",
            "imageFileId",
            "imageKind",
            "imageSourceUrl",
            "intakeUrl",
            "name",
            "price1Month",
            "price3Month",
            "price6Month"
        ]
    );

    let all = body(
        app.request(Method::GET, "/api/all-products?partner_id=acme")
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(all["count"], 2);
    for (path, count) in [
        ("mens-health", 1),
        ("hair-loss", 1),
        ("womens-health", 0),
        ("wellness", 0),
    ] {
        let b = body(
            app.request(Method::GET, &format!("/api/{path}?partner_id=acme"))
                .send()
                .await
                .expect("send"),
        )
        .await;
        assert_eq!(b["count"], count, "{path}");
        assert_eq!(b["products"].as_array().map(Vec::len), Some(count));
    }
    // A sub-account code is carried into intakeUrl.
    let sub = body(
        app.request(Method::GET, "/api/weight-loss?partner_id=acme.7")
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(
        sub["products"][0]["intakeUrl"],
        "https://intake.test/sema?partner_id=acme.7"
    );
    // No stale cache: an operator change shows at once.
    put(
        &app,
        &format!("/medical-products/{MED_B}"),
        &medical("Finasteride", None, &[], &["weight-loss"], true),
    )
    .await;
    let b = body(
        app.request(Method::GET, "/api/weight-loss?partner_id=acme")
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(b["count"], 2);
}

#[tokio::test]
async fn public_catalog_errors_and_preflight_carry_the_headers() {
    let (app, _) = catalog_app().await;
    for (q, status, code) in [
        ("", 400, "invalid_request"),
        ("?partner_id=", 400, "invalid_request"),
        ("?partner_id=a%20b", 400, "invalid_request"),
        ("?partner_id=ghost", 404, "not_found"),
    ] {
        let res = app
            .request(Method::GET, &format!("/api/weight-loss{q}"))
            .send()
            .await
            .expect("send");
        assert_catalog_headers(&res);
        assert_error(res, status, code).await;
    }
    app.put_partner("acme", &partner_body(false)).await;
    let res = app
        .request(Method::GET, "/api/all-products?partner_id=acme")
        .send()
        .await
        .expect("send");
    assert_catalog_headers(&res);
    assert_error(res, 404, "not_found").await;
    let res = app
        .request(Method::OPTIONS, "/api/hair-loss")
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        res.headers()["access-control-allow-methods"],
        "GET, OPTIONS"
    );
    let res = app
        .request(Method::POST, "/api/hair-loss?partner_id=acme")
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(res.headers()["cdn-cache-control"], "no-store");
}

#[tokio::test]
async fn the_embedded_care_services_view() {
    let (app, _s) = care_app(json!({ "subscriptionActive": true, "manualOverride": false, "yearlyBundle": true, "services": [] })).await;
    let mut odd = care("veterinary-care", "vet", &[1]);
    odd["productName"] = json!("Pets & <Vets>");
    put(
        &app,
        "/care-service-products/00000000-0000-4000-8000-000000000199",
        &odd,
    )
    .await;
    app.internal(Method::PUT, "/care-services/feature-flags")
        .json(&json!({ "dermatology": false }))
        .send()
        .await
        .expect("send");
    let page = |q: &str| {
        app.request(Method::GET, &format!("/embed/care-services?{q}"))
            .send()
    };

    let res = page("partner_id=acme").await.expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("text/html")
    );
    let html = res.text().await.expect("text");
    assert!(
        html.contains("partner-api-docs-height"),
        "posts its height to the host page"
    );
    assert!(
        html.contains("data-service=\"primary-care\"")
            && html.contains("data-service=\"urgent-care\"")
    );
    assert!(
        !html.contains("data-service=\"dermatology\""),
        "respects category feature flags"
    );
    assert!(
        html.contains("Pets &amp; &lt;Vets&gt;") && !html.contains("<Vets>"),
        "text is escaped"
    );
    assert!(
        html.contains("data-url=\"https://care.test/primary-care?partner_id=acme&amp;m=12\""),
        "every tier carries its link"
    );
    assert!(
        html.contains("href=\"https://care.test/primary-care?partner_id=acme\" target=\"_top\"><span class=\"cta-text\">Get started"),
        "without m the button opens the product"
    );
    assert!(!html.contains(" checked"), "nothing preselected without m");
    let csp = res_csp(&page("partner_id=acme").await.expect("send"));
    assert!(
        csp.contains("frame-ancestors *") && csp.contains("script-src 'sha256-"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"), "{csp}");

    let html = page("partner_id=acme&service=primary-care&m=12&sub=7")
        .await
        .expect("send")
        .text()
        .await
        .expect("text");
    assert!(
        !html.contains("data-service=\"urgent-care\""),
        "service filter"
    );
    assert!(
        html.contains("name=\"tier-0\" value=\"12\" data-url=\"https://care.test/primary-care?partner_id=acme&amp;sub=7&amp;m=12\" data-cta=\"Start with 12 months\" checked>"),
        "m preselects a duration"
    );
    assert!(html.contains("href=\"https://care.test/primary-care?partner_id=acme&amp;sub=7&amp;m=12\" target=\"_top\"><span class=\"cta-text\">Start with 12 months"));

    let html = page("partner_id=acme&redeem=true")
        .await
        .expect("send")
        .text()
        .await
        .expect("text");
    assert!(html.contains("redeem=true") && html.contains("Redeem a code"));
    assert!(
        html.contains("12 characters") && html.contains("Acme"),
        "says what a code is and where it came from"
    );
    assert!(
        !html.contains("name=\"tier-"),
        "no tiers: the code fixes the duration"
    );
    assert!(
        !html.contains("m=12"),
        "the redemption screen carries no duration"
    );

    for (q, status, code) in [
        ("", 400, "invalid_request"),
        ("partner_id=acme&m=2", 400, "invalid_request"),
        ("partner_id=acme&service=surgery", 400, "invalid_request"),
        ("partner_id=ghost", 404, "not_found"),
    ] {
        assert_error(page(q).await.expect("send"), status, code).await;
    }
}

fn res_csp(res: &reqwest::Response) -> String {
    res.headers()["content-security-policy"]
        .to_str()
        .expect("ascii")
        .to_owned()
}

#[tokio::test]
async fn the_embedded_view_speaks_the_language_of_the_links() {
    let (app, _s) = care_app(json!({ "subscriptionActive": true, "manualOverride": false, "yearlyBundle": true, "services": [] })).await;
    let mut p = partner_body(true);
    p["name"] = json!("Acme <Salud>");
    p["defaultLang"] = json!("es");
    p["enabledLangs"] = json!(["en", "es"]);
    p["careServices"] = json!({ "subscriptionActive": true, "manualOverride": false, "yearlyBundle": true, "services": [] });
    app.put_partner("acme", &p).await;
    let page = |q: &str| {
        let req = app.request(Method::GET, &format!("/embed/care-services?{q}"));
        async move { req.send().await.expect("send").text().await.expect("text") }
    };

    let html = page("partner_id=acme&m=3").await;
    assert!(html.contains("<html lang=\"es\">"), "partner default");
    assert!(html.contains("Servicios de atención") && html.contains("Comenzar con 3 meses"));
    assert!(html.contains("m=3&amp;lang=es"), "links carry the language");
    assert!(
        html.contains("href=\"?partner_id=acme&amp;m=3&amp;lang=en\" lang=\"en\""),
        "a switch to English keeps the other parameters"
    );
    assert!(html.contains("lang=es\" lang=\"es\" hreflang=\"es\" aria-current=\"true\""));

    let html = page("partner_id=acme&lang=en&redeem=true").await;
    assert!(html.contains("<html lang=\"en\">") && html.contains("Redeem your Care Services code"));
    assert!(
        html.contains("Acme &lt;Salud&gt; buys codes") && !html.contains("<Salud>"),
        "the partner's name is escaped"
    );

    p["defaultLang"] = json!("en");
    p["enabledLangs"] = json!(["en"]);
    app.put_partner("acme", &p).await;
    let html = page("partner_id=acme&lang=es").await;
    assert!(html.contains("<html lang=\"en\">"), "es is not enabled");
    assert!(!html.contains("class=\"langs\""), "one language: no switch");
}

#[tokio::test]
async fn the_embedded_view_is_off_with_the_care_services_api() {
    let app = TestApp::spawn_with(|c| c.care_services_enabled = false).await;
    app.seed("acme", false).await;
    let res = app
        .request(Method::GET, "/embed/care-services?partner_id=acme")
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
}
