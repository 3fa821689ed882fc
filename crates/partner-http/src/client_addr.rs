//! The client address of a public request (extensions.md §12, "Public surfaces are limited"):
//! the peer's, or, when the peer is a trusted proxy (`PARTNER_TRUSTED_PROXIES`), the right-most
//! `X-Forwarded-For` hop that is not one.

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

/// The proxies whose `X-Forwarded-For` is believed: addresses and ranges. Empty by default: the
/// header is then never read, so a client cannot choose its own budget.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(nets: Vec<IpNet>) -> Self {
        Self(nets)
    }

    /// A comma-separated list of IP addresses and CIDR ranges (`10.0.0.0/8, 192.0.2.7, ::1`);
    /// the entry that does not parse is the error.
    pub fn parse(list: &str) -> Result<Self, String> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<IpNet>()
                    .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| s.to_owned())
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|n| n.contains(&ip))
    }

    /// The client address of a request from `peer` carrying the `X-Forwarded-For` values `xff`
    /// (every such header line, in order). From an untrusted peer the header is ignored. From a
    /// trusted one the hops are read right to left, skipping trusted proxies; the first other
    /// hop is the client. A hop that is not an address ends the walk at the proxy that wrote it;
    /// a chain of trusted proxies only ends at its left-most hop.
    pub fn client<'a>(&self, peer: IpAddr, xff: impl Iterator<Item = &'a [u8]>) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.contains(peer) {
            return peer;
        }
        let hops: Vec<&[u8]> = xff
            .flat_map(|line| line.split(|b| *b == b','))
            .map(<[u8]>::trim_ascii)
            .collect();
        let mut client = peer;
        for hop in hops.iter().rev() {
            let Some(ip) = parse_hop(hop) else {
                return client;
            };
            client = ip;
            if !self.contains(ip) {
                return ip;
            }
        }
        client
    }
}

/// One `X-Forwarded-For` hop: an address, also as `1.2.3.4:port` or `[v6]:port`.
fn parse_hop(hop: &[u8]) -> Option<IpAddr> {
    let s = std::str::from_utf8(hop).ok()?;
    s.parse::<IpAddr>()
        .ok()
        .or_else(|| s.parse::<SocketAddr>().ok().map(|a| a.ip()))
        .map(|ip| ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    fn client(t: &TrustedProxies, peer: &str, xff: &[&str]) -> IpAddr {
        t.client(ip(peer), xff.iter().map(|s| s.as_bytes()))
    }

    #[test]
    fn parses_addresses_and_ranges_and_names_the_bad_entry() {
        let t = TrustedProxies::parse(" 10.0.0.0/8, 192.0.2.7 ,::1,2001:db8::/32,").expect("ok");
        assert!(t.contains(ip("10.1.2.3")) && t.contains(ip("192.0.2.7")));
        assert!(!t.contains(ip("192.0.2.8")) && !t.contains(ip("11.0.0.1")));
        assert!(t.contains(ip("::1")) && t.contains(ip("2001:db8::5")));
        assert!(t.contains(ip("::ffff:10.9.9.9")), "IPv4-mapped peers match");
        assert_eq!(
            TrustedProxies::parse("10.0.0.0/8,proxy"),
            Err("proxy".into())
        );
        assert_eq!(
            TrustedProxies::parse("10.0.0.0/33"),
            Err("10.0.0.0/33".into())
        );
        assert!(TrustedProxies::parse("").expect("empty").is_empty());
    }

    #[test]
    fn the_header_counts_only_from_a_trusted_peer() {
        let none = TrustedProxies::default();
        assert_eq!(
            client(&none, "203.0.113.9", &["1.1.1.1"]),
            ip("203.0.113.9")
        );
        let t = TrustedProxies::parse("10.0.0.0/8").expect("ok");
        assert_eq!(client(&t, "203.0.113.9", &["1.1.1.1"]), ip("203.0.113.9"));
        assert_eq!(client(&t, "10.0.0.2", &[]), ip("10.0.0.2"));
        // Right-most untrusted hop: whatever the client wrote to the left is ignored.
        assert_eq!(
            client(&t, "10.0.0.2", &["6.6.6.6, 198.51.100.4", "10.0.0.3"]),
            ip("198.51.100.4")
        );
        assert_eq!(
            client(&t, "10.0.0.2", &["198.51.100.4:4711"]),
            ip("198.51.100.4")
        );
        assert_eq!(
            client(&t, "10.0.0.2", &["[2001:db8::9]:80"]),
            ip("2001:db8::9")
        );
        // Garbage ends the walk at the proxy that passed it on.
        assert_eq!(
            client(&t, "10.0.0.2", &["198.51.100.4, unknown, 10.0.0.3"]),
            ip("10.0.0.3")
        );
        // Only trusted hops: the left-most.
        assert_eq!(
            client(&t, "10.0.0.2", &["10.0.0.7, 10.0.0.3"]),
            ip("10.0.0.7")
        );
    }
}
