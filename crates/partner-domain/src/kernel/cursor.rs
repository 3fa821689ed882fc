//! Opaque keyset cursors for the leads listing.
//!
//! A cursor names the last row of a page: (createdAt, id), the listing's sort key. It is
//! authenticated with HMAC-SHA256 under a server key and bound to the partner it was issued to,
//! so a client can neither forge a position nor replay another tenant's cursor; anything that
//! does not verify is rejected. A listing whose statement resolves the partner from the token
//! (one round trip) reads at the [`peek`]ed position before the MAC can be checked, only among
//! the token's own partner's rows, and discards what it read unless the cursor then verifies.
//!
//! ```
//! use partner_domain::kernel::cursor::{CursorKey, FeedPosition};
//!
//! // The key never shows in logs.
//! assert_eq!(format!("{:?}", CursorKey::new(b"secret")), "CursorKey(..)");
//! // Feed positions order by transaction id, then sequence number.
//! assert!(FeedPosition { txid: 7, seq: 9 } < FeedPosition { txid: 8, seq: 1 });
//! ```

use std::fmt::{self, Write};

use ring::hmac;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::kernel::compare::constant_time_eq;
use crate::kernel::values::PartnerId;

/// A position in a (createdAt desc, id desc) listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The row's `createdAt`.
    pub created_at: OffsetDateTime,
    /// The row's id (the tie-breaker).
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
    /// A key (HMAC-SHA256) from secret bytes.
    pub fn new(secret: &[u8]) -> Self {
        Self(hmac::Key::new(hmac::HMAC_SHA256, secret))
    }

    fn mac(&self, partner: &PartnerId, payload: &[u8]) -> [u8; MAC] {
        self.mac_as(VERSION, partner, payload)
    }

    /// The MAC of `payload` for `partner` under the cursor format `version` (each format signs
    /// its own name, so a cursor of one kind never verifies as another).
    fn mac_as(&self, version: &str, partner: &PartnerId, payload: &[u8]) -> [u8; MAC] {
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(version.as_bytes());
        ctx.update(partner.as_str().as_bytes());
        ctx.update(&[0]);
        ctx.update(payload);
        let tag = ctx.sign();
        // The first MAC bytes of the 32-byte tag.
        let mut out = [0u8; MAC];
        for (o, t) in out.iter_mut().zip(tag.as_ref()) {
            *o = *t;
        }
        out
    }

    /// The cursor text for `pos`, valid only for `partner`.
    pub fn encode(&self, partner: &PartnerId, pos: Position) -> String {
        let micros =
            i64::try_from(pos.created_at.unix_timestamp_nanos() / 1000).unwrap_or(i64::MAX);
        let mut payload = [0u8; PAYLOAD];
        for (p, b) in payload
            .iter_mut()
            .zip(pos.id.as_bytes().iter().chain(&micros.to_be_bytes()))
        {
            *p = *b;
        }
        let mac = self.mac(partner, &payload);
        let mut out = String::with_capacity(VERSION.len() + 2 * (PAYLOAD + MAC));
        out.push_str(VERSION);
        for b in payload.iter().chain(mac.iter()) {
            let _ = write!(out, "{b:02x}");
        }
        out
    }

    /// The position in `text`, or `None` when it was not issued by this server to `partner`.
    /// Total over arbitrary text: every slice is checked, nothing panics.
    pub fn decode(&self, partner: &PartnerId, text: &str) -> Option<Position> {
        let (payload, mac) = split(text)?;
        if !constant_time_eq(&mac, &self.mac(partner, &payload)) {
            return None;
        }
        position(&payload)
    }
}

/// A position in the events feed: the writing transaction's id, then the event's sequence number
/// (ascending; `docs/decisions.md`, "Events feed position").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FeedPosition {
    /// The id of the transaction that wrote the event.
    pub txid: i64,
    /// The event's sequence number.
    pub seq: i64,
}

const FEED_VERSION: &str = "e1";
const FEED_PAYLOAD: usize = 16;

impl CursorKey {
    /// The events feed's cursor text for `pos`, valid only for `partner`.
    pub fn encode_feed(&self, partner: &PartnerId, pos: FeedPosition) -> String {
        let mut payload = [0u8; FEED_PAYLOAD];
        for (p, b) in payload
            .iter_mut()
            .zip(pos.txid.to_be_bytes().iter().chain(&pos.seq.to_be_bytes()))
        {
            *p = *b;
        }
        let mac = self.mac_as(FEED_VERSION, partner, &payload);
        let mut out = String::with_capacity(FEED_VERSION.len() + 2 * (FEED_PAYLOAD + MAC));
        out.push_str(FEED_VERSION);
        for b in payload.iter().chain(mac.iter()) {
            let _ = write!(out, "{b:02x}");
        }
        out
    }

    /// The feed position in `text`, or `None` when it was not issued by this server to `partner`.
    pub fn decode_feed(&self, partner: &PartnerId, text: &str) -> Option<FeedPosition> {
        let (payload, mac) = split_feed(text)?;
        if !constant_time_eq(&mac, &self.mac_as(FEED_VERSION, partner, &payload)) {
            return None;
        }
        feed_position(&payload)
    }
}

/// The feed position a well-formed feed cursor names, NOT verified (as [`peek`]).
pub fn peek_feed(text: &str) -> Option<FeedPosition> {
    split_feed(text).and_then(|(payload, _)| feed_position(&payload))
}

fn split_feed(text: &str) -> Option<([u8; FEED_PAYLOAD], [u8; MAC])> {
    let bytes = hex_bytes(text.strip_prefix(FEED_VERSION)?, FEED_PAYLOAD + MAC)?;
    let (payload, mac) = bytes.split_at_checked(FEED_PAYLOAD)?;
    Some((payload.try_into().ok()?, mac.try_into().ok()?))
}

fn feed_position(payload: &[u8; FEED_PAYLOAD]) -> Option<FeedPosition> {
    let (txid, seq) = payload.split_first_chunk::<8>()?;
    Some(FeedPosition {
        txid: i64::from_be_bytes(*txid),
        seq: i64::from_be_bytes(seq.try_into().ok()?),
    })
}

/// `len` bytes written as lowercase hex, or `None`.
fn hex_bytes(hex: &str, len: usize) -> Option<Vec<u8>> {
    if hex.len() != 2 * len {
        return None;
    }
    hex.as_bytes()
        .chunks_exact(2)
        .map(|pair| match pair {
            [hi, lo] => Some(nibble(*hi)? << 4 | nibble(*lo)?),
            _ => None,
        })
        .collect()
}

/// The position a well-formed cursor names, NOT verified: for a read that must start before the
/// partner (to which the MAC binds the cursor) is known, because the same statement resolves it
/// from the token. Such a read is bounded to the token's own partner by the statement, and its
/// result must be discarded unless [`CursorKey::decode`] later yields the same position for the
/// authenticated partner.
pub fn peek(text: &str) -> Option<Position> {
    let (payload, _) = split(text)?;
    position(&payload)
}

/// Payload and MAC of a cursor's text, or `None` when it is not well-formed.
fn split(text: &str) -> Option<([u8; PAYLOAD], [u8; MAC])> {
    let bytes = hex_bytes(text.strip_prefix(VERSION)?, PAYLOAD + MAC)?;
    let (payload, mac) = bytes.split_at_checked(PAYLOAD)?;
    Some((payload.try_into().ok()?, mac.try_into().ok()?))
}

fn position(payload: &[u8; PAYLOAD]) -> Option<Position> {
    let (id, micros) = payload.split_first_chunk::<16>()?;
    let micros: [u8; 8] = micros.try_into().ok()?;
    let created_at =
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(i64::from_be_bytes(micros)) * 1000)
            .ok()?;
    Some(Position {
        created_at,
        id: Uuid::from_bytes(*id),
    })
}

/// The value of a lowercase hex digit.
fn nibble(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feed_cursors_round_trip_bound_to_their_partner_and_kind() {
        let key = CursorKey::new(b"k");
        let pos = FeedPosition {
            txid: 1_234_567,
            seq: i64::MAX,
        };
        let text = key.encode_feed(&acme(), pos);
        assert_eq!(key.decode_feed(&acme(), &text), Some(pos));
        assert_eq!(peek_feed(&text), Some(pos));
        let beta = PartnerId::parse("beta").expect("id");
        assert_eq!(key.decode_feed(&beta, &text), None);
        assert_eq!(CursorKey::new(b"other").decode_feed(&acme(), &text), None);
        // A listing cursor is not a feed cursor, nor the reverse.
        let listing = key.encode(
            &acme(),
            Position {
                created_at: time::macros::datetime!(2026-01-01 0:00 UTC),
                id: Uuid::nil(),
            },
        );
        assert_eq!(key.decode_feed(&acme(), &listing), None);
        assert_eq!(key.decode(&acme(), &text), None);
        for bad in [
            "",
            "e1",
            "e1zz",
            text.get(..text.len() - 1).unwrap_or(""),
            &format!("{text}0"),
        ] {
            assert_eq!(peek_feed(bad), None, "{bad}");
        }
    }
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

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// Instants `time` can hold, at the microsecond precision PostgreSQL stores.
        fn position() -> impl Strategy<Value = Position> {
            let first = time::PrimitiveDateTime::MIN.assume_utc().unix_timestamp();
            let last = time::PrimitiveDateTime::MAX.assume_utc().unix_timestamp();
            (first..=last, 0..1_000_000i128, any::<u128>()).prop_map(|(secs, micros, id)| {
                Position {
                    created_at: OffsetDateTime::from_unix_timestamp_nanos(
                        i128::from(secs) * 1_000_000_000 + micros * 1000,
                    )
                    .expect("in range"),
                    id: Uuid::from_u128(id),
                }
            })
        }

        fn partner() -> impl Strategy<Value = PartnerId> {
            "[A-Za-z0-9_-]{1,64}".prop_map(|s| PartnerId::parse(&s).expect("valid"))
        }

        proptest! {
            /// Anything a client sends: no panic, and nothing verifies by chance.
            #[test]
            fn decode_never_panics_and_rejects_arbitrary_text(
                text in prop_oneof![
                    any::<String>(),
                    "c1[0-9a-f]{80}",
                    "c1[0-9a-fA-F\\-]{78,82}",
                    "c1.{80}",
                ],
                p in partner(),
            ) {
                prop_assert_eq!(CursorKey::new(b"k").decode(&p, &text), None);
            }

            #[test]
            fn cursors_round_trip(pos in position(), p in partner(), secret in any::<Vec<u8>>()) {
                let key = CursorKey::new(&secret);
                let text = key.encode(&p, pos);
                prop_assert_eq!(text.len(), 2 + 2 * (PAYLOAD + MAC));
                prop_assert_eq!(key.decode(&p, &text), Some(pos));
                prop_assert_eq!(peek(&text), Some(pos));
            }

            /// Any change to a cursor, or presenting it for another partner or under another
            /// key, fails verification.
            #[test]
            fn tampering_is_rejected(
                pos in position(),
                p in partner(),
                other in partner(),
                at in any::<prop::sample::Index>(),
                with in "[0-9a-f]|.",
            ) {
                let key = CursorKey::new(b"k");
                let text = key.encode(&p, pos);
                let i = at.index(text.len());
                let mut tampered = text.clone();
                tampered.replace_range(i..=i, &with);
                if tampered != text {
                    prop_assert_eq!(key.decode(&p, &tampered), None, "{}", tampered);
                }
                if other != p {
                    prop_assert_eq!(key.decode(&other, &text), None);
                }
                prop_assert_eq!(CursorKey::new(b"k2").decode(&p, &text), None);
            }
        }
    }
}
