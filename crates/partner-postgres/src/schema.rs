// @generated automatically by Diesel CLI.

diesel::table! {
    analytics_events (id) {
        id -> Uuid,
        run_id -> Text,
        partner_id -> Text,
        sub_id -> Nullable<Int2>,
        event -> Text,
        product -> Nullable<Text>,
        amount_cents -> Nullable<Int8>,
        occurred_at -> Timestamptz,
        test_source -> Text,
        recorded_at -> Timestamptz,
    }
}

diesel::table! {
    api_tokens (id) {
        id -> Uuid,
        user_id -> Uuid,
        token_hash -> Bytea,
        token_prefix -> Text,
        created_at -> Timestamptz,
        expires_at -> Nullable<Timestamptz>,
        revoked_at -> Nullable<Timestamptz>,
        last_used_at -> Nullable<Timestamptz>,
        portal_of -> Nullable<Uuid>,
    }
}

diesel::table! {
    care_service_flags (service) {
        service -> Text,
        enabled -> Bool,
    }
}

diesel::table! {
    catalog_products (kind, id) {
        kind -> Text,
        id -> Uuid,
        doc -> Jsonb,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    coupon_blocks (partner_id, created_at) {
        partner_id -> Text,
        created_at -> Timestamptz,
        n -> Int8,
        older -> Int8,
    }
}

diesel::table! {
    coupon_counts (partner_id, created_at, product_slug, status, expires_at) {
        partner_id -> Text,
        created_at -> Timestamptz,
        product_slug -> Text,
        status -> Text,
        expires_at -> Timestamptz,
        n -> Int8,
    }
}

diesel::table! {
    coupon_totals (partner_id, status, product_slug, expires_at) {
        partner_id -> Text,
        status -> Text,
        product_slug -> Text,
        expires_at -> Timestamptz,
        n -> Int8,
    }
}

diesel::table! {
    coupons (id) {
        id -> Uuid,
        code -> Text,
        partner_id -> Text,
        sub_id -> Nullable<Int2>,
        product_slug -> Text,
        months -> Int2,
        status -> Text,
        expires_at -> Nullable<Timestamptz>,
        redeemed_at -> Nullable<Timestamptz>,
        redeemed_email -> Nullable<Text>,
        redeemed_provider_primary_external_id -> Nullable<Text>,
        voided_at -> Nullable<Timestamptz>,
        bulk_order_id -> Uuid,
        purchaser_email -> Text,
        purchaser_source -> Text,
        unit_price_cents -> Int8,
        notes -> Nullable<Text>,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    domain_events (id) {
        id -> Uuid,
        partner_id -> Text,
        kind -> Text,
        subject -> Text,
        extra -> Jsonb,
        created_at -> Timestamptz,
        txid -> Int8,
        seq -> Int8,
    }
}

diesel::table! {
    event_feed_pruned (partner_id) {
        partner_id -> Text,
        txid -> Int8,
        seq -> Int8,
    }
}

diesel::table! {
    idempotency_keys (caller, key) {
        caller -> Text,
        key -> Text,
        fingerprint -> Bytea,
        created_at -> Timestamptz,
        lease_until -> Timestamptz,
        expires_at -> Timestamptz,
        status -> Nullable<Int2>,
        content_type -> Nullable<Text>,
        body -> Nullable<Bytea>,
    }
}

diesel::table! {
    leads (id) {
        id -> Uuid,
        partner_id -> Text,
        sub_id -> Nullable<Int2>,
        first_name -> Text,
        last_name -> Text,
        email -> Text,
        email_consent -> Bool,
        phone -> Nullable<Text>,
        sms_consent -> Bool,
        origin -> Text,
        location -> Text,
        question_id -> Nullable<Text>,
        is_test -> Bool,
        test_source -> Nullable<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    orders (order_id) {
        order_id -> Text,
        partner_id -> Text,
        sub_id -> Nullable<Int2>,
        created_date -> Timestamptz,
        product -> Text,
        amount_cents -> Int8,
        commission_cents -> Int8,
        status -> Text,
        is_test -> Bool,
        source -> Text,
        customer_name -> Nullable<Text>,
        customer_email -> Nullable<Text>,
        recorded_at -> Timestamptz,
    }
}

diesel::table! {
    partner_prices (partner_id, kind, product_id) {
        partner_id -> Text,
        kind -> Text,
        product_id -> Uuid,
        doc -> Jsonb,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    partners (partner_id) {
        partner_id -> Text,
        name -> Text,
        email -> Text,
        active -> Bool,
        dna_access -> Bool,
        headless_links -> Bool,
        default_lang -> Text,
        enabled_langs -> Array<Text>,
        cs_subscription_active -> Bool,
        cs_manual_override -> Bool,
        cs_yearly_bundle -> Bool,
        cs_services -> Array<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    payouts (id) {
        id -> Uuid,
        partner_id -> Text,
        email -> Text,
        created_on -> Date,
        payout_date -> Date,
        amount_cents -> Int8,
        status -> Text,
        receipt_url -> Nullable<Text>,
        note -> Nullable<Text>,
    }
}

diesel::table! {
    portal_codes (code_hash) {
        code_hash -> Bytea,
        token_id -> Uuid,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
        used_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    portal_users (id) {
        id -> Uuid,
        partner_id -> Text,
        email -> Text,
        admin -> Bool,
        created_at -> Timestamptz,
        deleted_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    sub_accounts (id) {
        id -> Uuid,
        partner_id -> Text,
        sub_id -> Int2,
        nickname -> Text,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    webhook_action_budgets (partner_id) {
        partner_id -> Text,
        calls -> Array<Nullable<Timestamptz>>,
    }
}

diesel::table! {
    webhook_deliveries (id) {
        id -> Uuid,
        endpoint_id -> Uuid,
        partner_id -> Text,
        event_id -> Uuid,
        kind -> Text,
        status -> Text,
        attempts -> Int4,
        next_attempt_at -> Nullable<Timestamptz>,
        last_status_code -> Nullable<Int4>,
        last_error -> Nullable<Text>,
        created_at -> Timestamptz,
        delivered_at -> Nullable<Timestamptz>,
        lease_token -> Nullable<Uuid>,
        attempt_base -> Int4,
        last_attempt_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    webhook_endpoint_queue (endpoint_id) {
        endpoint_id -> Uuid,
        due_at -> Timestamptz,
    }
}

diesel::table! {
    webhook_endpoints (id) {
        id -> Uuid,
        partner_id -> Text,
        url -> Text,
        events -> Array<Text>,
        lead_created_delay_seconds -> Nullable<Int4>,
        custom_header_name -> Nullable<Text>,
        custom_header_value -> Nullable<Text>,
        secret -> Nullable<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        disabled_at -> Nullable<Timestamptz>,
        disabled_reason -> Nullable<Text>,
        failing_since -> Nullable<Timestamptz>,
        previous_secret -> Nullable<Text>,
        previous_secret_expires_at -> Nullable<Timestamptz>,
    }
}

diesel::joinable!(analytics_events -> partners (partner_id));
diesel::joinable!(api_tokens -> portal_users (user_id));
diesel::joinable!(coupons -> partners (partner_id));
diesel::joinable!(domain_events -> partners (partner_id));
diesel::joinable!(event_feed_pruned -> partners (partner_id));
diesel::joinable!(leads -> partners (partner_id));
diesel::joinable!(orders -> partners (partner_id));
diesel::joinable!(partner_prices -> partners (partner_id));
diesel::joinable!(payouts -> partners (partner_id));
diesel::joinable!(portal_codes -> api_tokens (token_id));
diesel::joinable!(portal_users -> partners (partner_id));
diesel::joinable!(sub_accounts -> partners (partner_id));
diesel::joinable!(webhook_action_budgets -> partners (partner_id));
diesel::joinable!(webhook_deliveries -> domain_events (event_id));
diesel::joinable!(webhook_deliveries -> partners (partner_id));
diesel::joinable!(webhook_deliveries -> webhook_endpoints (endpoint_id));
diesel::joinable!(webhook_endpoint_queue -> webhook_endpoints (endpoint_id));
diesel::joinable!(webhook_endpoints -> partners (partner_id));

diesel::allow_tables_to_appear_in_same_query!(
    analytics_events,
    api_tokens,
    care_service_flags,
    catalog_products,
    coupon_blocks,
    coupon_counts,
    coupon_totals,
    coupons,
    domain_events,
    event_feed_pruned,
    idempotency_keys,
    leads,
    orders,
    partner_prices,
    partners,
    payouts,
    portal_codes,
    portal_users,
    sub_accounts,
    webhook_action_budgets,
    webhook_deliveries,
    webhook_endpoint_queue,
    webhook_endpoints,
);
