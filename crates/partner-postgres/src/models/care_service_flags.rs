//! `care_service_flags` rows: the global Care Services category switches.

use partner_domain::account::CareFlags;
use partner_domain::kernel::values::CareService;

/// One switch: the service's name and whether it is on.
pub(crate) type FlagRow = (String, bool);

/// The switches as the domain knows them; a row naming no known service is ignored.
pub(crate) fn flags(rows: Vec<FlagRow>) -> CareFlags {
    let mut flags = CareFlags::default();
    for (service, on) in rows {
        if let Some(s) = CareService::parse(&service) {
            flags.set(s, on);
        }
    }
    flags
}
