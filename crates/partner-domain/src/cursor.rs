//! Opaque keyset cursors for the leads listing.
//!
//! A cursor names the last row of a page: (createdAt, id), the listing's sort key. It is
//! authenticated with HMAC-SHA256 under a server key and bound to the partner it was issued to,
//! so a client can neither forge a position nor replay another tenant's cursor; anything that
//! does not verify is rejected before a query runs.

use std::fmt;

use ring::hmac;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::token::constant_time_eq;
use crate::values::PartnerId;

/// A position in a (createdAt desc, id desc) listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub created_at: OffsetDateTime,
    pub id: Uuid,
}

/// The key that signs cursors.
#[derive(Clone)]
pub struct CursorKey(hmac::Key);

impl fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CursorKey(..)")
    }
}

const PAYLOAD: usize = 16 + 8;
const MAC: usize = 16;
const VERSION: &str = "c1";

impl CursorKey {
    pub fn new(secret: &[u8]) -> Self {
        Self(hmac::Key::new(hmac::HMAC_SHA256, secret))
    }

    fn mac(&self, partner: &PartnerId, payload: &[u8]) -> [u8; MAC] {
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(VERSION.as_bytes());
        ctx.update(partner.as_str().as_bytes());
        ctx.update(&[0]);
        ctx.update(payload);
        let tag = ctx.sign();
        let mut out = [0u8; MAC];
        out.copy_from_slice(&tag.as_ref()[..MAC]);
        out
    }

    /// The cursor text for `pos`, valid only for `partner`.
    pub fn encode(&self, partner: &PartnerId, pos: Position) -> String {
        let mut payload = [0u8; PAYLOAD];
        payload[..16].copy_from_slice(pos.id.as_bytes());
        let micros =
            i64::try_from(pos.created_at.unix_timestamp_nanos() / 1000).unwrap_or(i64::MAX);
        payload[16..].copy_from_slice(&micros.to_be_bytes());
        let mac = self.mac(partner, &payload);
        let mut out = String::with_capacity(VERSION.len() + 2 * (PAYLOAD + MAC));
        out.push_str(VERSION);
        for b in payload.iter().chain(mac.iter()) {
            out.push_str(&format!("{b:02x}"));
        }
        out
    }

    /// The position in `text`, or `None` when it was not issued by this server to `partner`.
    pub fn decode(&self, partner: &PartnerId, text: &str) -> Option<Position> {
        let hex = text.strip_prefix(VERSION)?;
        if hex.len() != 2 * (PAYLOAD + MAC)
            || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return None;
        }
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
            .collect::<Result<_, _>>()
            .ok()?;
        let (payload, mac) = bytes.split_at(PAYLOAD);
        if !constant_time_eq(mac, &self.mac(partner, payload)) {
            return None;
        }
        let id = Uuid::from_slice(&payload[..16]).ok()?;
        let micros = i64::from_be_bytes(payload[16..].try_into().ok()?);
        let created_at =
            OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1000).ok()?;
        Some(Position { created_at, id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn acme() -> PartnerId {
        PartnerId::parse("acme").expect("id")
    }

    #[test]
    fn round_trip() {
        let key = CursorKey::new(b"k");
        let pos = Position {
            created_at: datetime!(2026-11-21 10:00:00.123 UTC),
            id: Uuid::from_u128(42),
        };
        let text = key.encode(&acme(), pos);
        assert_eq!(key.decode(&acme(), &text), Some(pos));
    }

    #[test]
    fn tampering_other_tenants_and_other_keys_fail() {
        let key = CursorKey::new(b"k");
        let pos = Position {
            created_at: datetime!(2026-11-21 10:00 UTC),
            id: Uuid::from_u128(42),
        };
        let text = key.encode(&acme(), pos);
        // Flip each character in turn.
        for i in 0..text.len() {
            let mut b = text.clone().into_bytes();
            b[i] = if b[i] == b'0' { b'1' } else { b'0' };
            let t = String::from_utf8(b).expect("ascii");
            if t != text {
                assert_eq!(key.decode(&acme(), &t), None, "flip at {i}");
            }
        }
        assert_eq!(
            key.decode(&PartnerId::parse("beta").expect("id"), &text),
            None
        );
        assert_eq!(CursorKey::new(b"other").decode(&acme(), &text), None);
        for junk in [
            "",
            "c1",
            "c1zz",
            &text.to_uppercase(),
            &format!("{text}00"),
            "🦀🦀",
        ] {
            assert_eq!(key.decode(&acme(), junk), None);
        }
    }
}
