//! Tables `diesel print-schema` cannot generate (see `diesel.toml`), declared by hand.

diesel::table! {
    /// One row per attempt of a delivery. The table has no primary key (rows are only appended
    /// and read by delivery); `table!` needs one, so the pair that identifies an attempt is
    /// declared here.
    webhook_attempts (delivery_id, attempted_at) {
        delivery_id -> Uuid,
        attempted_at -> Timestamptz,
        status_code -> Nullable<Int4>,
        duration_ms -> Nullable<Int4>,
        error -> Nullable<Text>,
    }
}

diesel::joinable!(webhook_attempts -> crate::schema::webhook_deliveries (delivery_id));

// A delivery's attempt log read for a token names the delivery in an `EXISTS` sub-select.
use crate::schema::webhook_deliveries;
diesel::allow_tables_to_appear_in_same_query!(webhook_attempts, webhook_deliveries);
