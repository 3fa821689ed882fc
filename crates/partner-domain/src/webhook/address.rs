//! Which addresses count as internal, and the endpoint URLs accepted: deliveries never go to
//! loopback, private or otherwise non-global addresses (unless allowed for tests).

use std::net::IpAddr;

use crate::kernel::values::ValueError;

/// Whether `ip` is anything but a global unicast address: loopback, private, link-local,
/// shared, reserved, documentation, multicast, and for IPv6 everything outside `2000::/3` (so
/// IPv4-mapped and -translated forms, NAT64 `64:ff9b::/96` and `64:ff9b:1::/48`, site-local
/// `fec0::/10`, unique local, discard `100::/64`) plus the tunnelling and special blocks inside it
/// (Teredo `2001::/32`, 6to4 `2002::/16`, ORCHID, benchmarking, documentation). A tunnel or
/// translation prefix can reach an internal IPv4 host, so it is refused whatever it embeds.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..=127).contains(&b)) // carrier-grade NAT
                || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
                || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast
                || (a == 198 && (18..=19).contains(&b)) // benchmarking
                || a >= 240 // reserved
        }
        IpAddr::V6(v6) => {
            let [s0, s1, ..] = v6.segments();
            let global_unicast = (s0 & 0xe000) == 0x2000;
            !global_unicast
                || (s0 == 0x2001 && s1 < 0x0200) // IETF protocol assignments: Teredo, ORCHID, benchmarking…
                || (s0 == 0x2001 && s1 == 0x0db8) // documentation
                || s0 == 0x2002 // 6to4
                || (s0 == 0x3fff && s1 < 0x1000) // documentation (3fff::/20)
        }
    }
}

/// An endpoint URL: absolute `https`, a host, no credentials, at most 2,048 characters. When
/// `allow_private` is false a literal internal IP address is refused here; names are checked when
/// resolved (at save where possible, and at every send).
pub fn parse_endpoint_url(s: &str, allow_private: bool) -> Result<url::Url, ValueError> {
    let bad = |reason| ValueError::invalid("url", reason);
    if s.len() > 2048 || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(bad("must be an absolute https URL"));
    }
    let u = url::Url::parse(s).map_err(|_| bad("must be an absolute https URL"))?;
    if u.scheme() != "https" {
        return Err(bad("only https URLs are accepted"));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(bad(
            "credentials in the URL are not accepted; use customHeader",
        ));
    }
    let internal = match u.host() {
        None => return Err(bad("must have a host")),
        Some(url::Host::Ipv4(ip)) => is_internal(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => is_internal(IpAddr::V6(ip)),
        Some(url::Host::Domain(d)) => {
            // `localhost.` is the same name as `localhost`.
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
    };
    if internal && !allow_private {
        return Err(bad(
            "must not point at a loopback, private or internal address",
        ));
    }
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "192.88.99.1",
            // extensions.md §7: IPv6 forms that can reach an internal IPv4 host, and the rest of
            // what is not global unicast.
            "64:ff9b::a00:1",
            "64:ff9b::7f00:1",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::1",
            "2002:808:808::1",
            "2001::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "::ffff:0:7f00:1",
            "::ffff:0:808:808",
            "::ffff:8.8.8.8",
            "fec0::1",
            "100::1",
            "::127.0.0.1",
            "2001:db8::1",
            "3fff::1",
            "2001:2::1",
            "2001:10::1",
            "ff02::1",
        ] {
            assert!(is_internal(ip.parse().expect("ip")), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "2a00:1450:4001:80b::200e",
            "2001:4860:4860::8888",
        ] {
            assert!(!is_internal(ip.parse().expect("ip")), "{ip}");
        }
    }

    #[test]
    fn endpoint_urls() {
        assert!(parse_endpoint_url("https://hooks.example.com/partner", false).is_ok());
        for bad in [
            "http://hooks.example.com",
            "ftp://x.test",
            "https://user:pw@x.test",
            "https://127.0.0.1/h",
            "https://[::1]/h",
            "https://10.0.0.5/h",
            "https://localhost./h",
            "https://a.localhost./h",
            "https://[64:ff9b::a00:1]/h",
            "https://[2002:7f00:1::1]/h",
            "https://localhost/h",
            "https://a.localhost/h",
            "not a url",
        ] {
            assert!(parse_endpoint_url(bad, false).is_err(), "{bad}");
        }
        assert!(
            parse_endpoint_url("https://127.0.0.1:8443/h", true).is_ok(),
            "allowed for tests"
        );
        assert!(
            parse_endpoint_url("http://127.0.0.1/h", true).is_err(),
            "https only, always"
        );
    }
}
