//! Diesel table definitions, kept by hand in step with `migrations/`.

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
    care_service_flags (service) {
        service -> Text,
        enabled -> Bool,
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
    api_tokens (id) {
        id -> Uuid,
        user_id -> Uuid,
        token_hash -> Bytea,
        token_prefix -> Text,
        created_at -> Timestamptz,
        expires_at -> Nullable<Timestamptz>,
        revoked_at -> Nullable<Timestamptz>,
        last_used_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    sub_accounts (id) {
        id -> Uuid,
        partner_id -> Text,
        sub_id -> SmallInt,
        nickname -> Text,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    leads (id) {
        id -> Uuid,
        partner_id -> Text,
        sub_id -> Nullable<SmallInt>,
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

diesel::joinable!(api_tokens -> portal_users (user_id));
diesel::joinable!(portal_users -> partners (partner_id));
diesel::joinable!(sub_accounts -> partners (partner_id));
diesel::allow_tables_to_appear_in_same_query!(
    partners,
    care_service_flags,
    portal_users,
    api_tokens,
    sub_accounts
);
