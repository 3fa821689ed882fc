//! The audit trail of cross-partner reads (extensions §12): every read by an admin token of a
//! partner other than its own writes one `info` line with target `audit` and counts in
//! `partner_cross_reads_total`.

use partner_domain::account::auth::Principal;
use partner_domain::kernel::values::PartnerId;

/// The counter of cross-partner reads.
pub const CROSS_READS: &str = "partner_cross_reads_total";

/// Records that `me` read `rows` rows of `partner` at `path`, when `partner` is not its own.
pub(crate) fn cross_read(me: &Principal, partner: &PartnerId, path: &str, rows: usize) {
    if !me.reads_another_partner(partner) {
        return;
    }
    metrics::counter!(CROSS_READS).increment(1);
    tracing::info!(
        target: "audit",
        tokenId = %me.token_id(),
        userId = %me.user_id(),
        partnerId = %partner,
        path,
        rows,
        "cross-partner read"
    );
}
