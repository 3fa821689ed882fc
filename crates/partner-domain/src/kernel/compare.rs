//! Comparison of secrets (MACs, hashes, signatures) in constant time.
//!
//! ```
//! use partner_domain::kernel::compare::constant_time_eq;
//!
//! assert!(constant_time_eq(b"secret", b"secret"));
//! assert!(!constant_time_eq(b"secret", b"secreT"));
//! assert!(!constant_time_eq(b"secret", b"secret!"));
//! ```

/// Compares two byte strings in time that depends only on their lengths, so a comparison never
/// leaks how many leading bytes matched.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_works() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
