//! The client's IP address for trust decisions (the per-client join limit).
//!
//! Without `--client-ip-header` it is the TCP peer. Behind trusted proxies it is read from the
//! forwarding header, and only the part the proxies wrote is believed: every line of the header
//! is one list (a client may send lines of its own, which come first), and the address taken is
//! the one `--trusted-proxy-hops` places from the end (1 = the last, appended by the proxy next
//! to Vestibule). Entries may be IPv4, IPv6, `host:port`, `[v6]:port`, or RFC 7239 `for=`
//! elements (`Forwarded: for="[2001:db8::1]:443";proto=https`). Anything malformed or a list
//! shorter than the hop count falls back to the TCP peer: a client can never pick its address.

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::{Extensions, HeaderMap};

/// Where to read the client's address from.
#[derive(Debug, Clone, Copy)]
pub struct ClientIpSource<'a> {
    /// The forwarding header set by the trusted proxies; `None` = the TCP peer.
    pub header: Option<&'a str>,
    /// How many trusted proxies append to that header (≥ 1): the address is this many places
    /// from the end of the list.
    pub trusted_hops: usize,
}

/// The client's IP address: from the forwarding header when configured and well formed, else
/// the TCP peer (`None` only in in-process tests without a peer).
pub fn client_ip(
    headers: &HeaderMap,
    extensions: &Extensions,
    source: ClientIpSource<'_>,
) -> Option<IpAddr> {
    source
        .header
        .and_then(|name| forwarded_ip(headers, name, source.trusted_hops))
        .or_else(|| {
            extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(peer)| peer.ip())
        })
}

/// The client a per-client limit counts for `ip`: an IPv4 address as it is (an IPv4-mapped IPv6
/// address as its IPv4), an IPv6 address as its /64 prefix — one subscriber usually holds a
/// whole /64 and can use a new address for every request, so counting whole addresses would
/// let one IPv6 client reset its allowance at will.
pub fn limit_key(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => Ipv4Text::new(v4).as_str().to_owned(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => Ipv4Text::new(v4).as_str().to_owned(),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                format!("{}/64", std::net::Ipv6Addr::from(prefix))
            }
        },
    }
}

/// An IPv4 address in dotted decimal, as `Display` writes it, written digit by digit on the
/// stack: `Display`'s formatting machinery cost a join ~1% of its instructions (the join
/// limit's client) and the gate's forwarding headers more than the rest of them together.
pub struct Ipv4Text {
    text: [u8; 15],
    len: usize,
}

impl Ipv4Text {
    /// `v4` as text.
    pub fn new(v4: std::net::Ipv4Addr) -> Self {
        let mut text = [0u8; 15];
        let mut len = 0;
        for (n, octet) in v4.octets().into_iter().enumerate() {
            if n > 0 {
                text[len] = b'.';
                len += 1;
            }
            if octet >= 100 {
                text[len] = b'0' + octet / 100;
                len += 1;
            }
            if octet >= 10 {
                text[len] = b'0' + octet / 10 % 10;
                len += 1;
            }
            text[len] = b'0' + octet % 10;
            len += 1;
        }
        Self { text, len }
    }

    /// The text: digits and dots, 7 to 15 bytes.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.text[..self.len]).expect("digits and dots are UTF-8")
    }
}

/// The address `hops` places from the end of all lines of header `name`, if well formed.
fn forwarded_ip(headers: &HeaderMap, name: &str, hops: usize) -> Option<IpAddr> {
    let mut entries = Vec::new();
    for line in headers.get_all(name) {
        entries.extend(line.to_str().ok()?.split(',').map(str::trim));
    }
    let index = entries.len().checked_sub(hops.max(1))?;
    parse_entry(entries[index])
}

/// One list entry: `1.2.3.4`, `1.2.3.4:80`, `2001:db8::1`, `[2001:db8::1]:443`, or an RFC 7239
/// element whose `for=` holds one of those (quoted or not).
fn parse_entry(entry: &str) -> Option<IpAddr> {
    let node = if entry.contains('=') {
        entry.split(';').find_map(|pair| {
            let (name, value) = pair.split_once('=')?;
            name.trim()
                .eq_ignore_ascii_case("for")
                .then(|| value.trim().trim_matches('"'))
        })?
    } else {
        entry
    };
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(socket) = node.parse::<SocketAddr>() {
        return Some(socket.ip());
    }
    node.strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|inner| inner.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> Extensions {
        let mut extensions = Extensions::new();
        extensions.insert(ConnectInfo::<SocketAddr>("127.0.0.9:9".parse().unwrap()));
        extensions
    }

    fn ip_of(lines: &[&str], header: &str, hops: usize) -> IpAddr {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append(
                axum::http::HeaderName::from_bytes(header.as_bytes()).unwrap(),
                line.parse().unwrap(),
            );
        }
        let source = ClientIpSource {
            header: Some(header),
            trusted_hops: hops,
        };
        client_ip(&headers, &peer(), source).unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn without_a_configured_header_the_peer_is_the_client() {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", "1.2.3.4".parse().unwrap());
        let source = ClientIpSource {
            header: None,
            trusted_hops: 1,
        };
        assert_eq!(client_ip(&headers, &peer(), source), Some(ip("127.0.0.9")));
    }

    #[test]
    fn the_last_entry_across_all_header_lines_is_the_one_the_proxy_wrote() {
        // A made-up first line from the client, then the line the proxy appended.
        let lines = ["6.6.6.6", "198.51.100.7"];
        assert_eq!(ip_of(&lines, "x-forwarded-for", 1), ip("198.51.100.7"));
        let lines = ["6.6.6.6, 7.7.7.7", "198.51.100.7, 10.0.0.2"];
        assert_eq!(ip_of(&lines, "x-forwarded-for", 1), ip("10.0.0.2"));
        assert_eq!(ip_of(&lines, "x-forwarded-for", 2), ip("198.51.100.7"));
    }

    #[test]
    fn ipv6_and_host_port_forms_are_understood() {
        for (entry, expected) in [
            ("2001:db8::1", "2001:db8::1"),
            ("[2001:db8::1]", "2001:db8::1"),
            ("[2001:db8::1]:443", "2001:db8::1"),
            ("203.0.113.5:61000", "203.0.113.5"),
            (" 203.0.113.5 ", "203.0.113.5"),
        ] {
            assert_eq!(
                ip_of(&[entry], "x-forwarded-for", 1),
                ip(expected),
                "{entry}"
            );
        }
    }

    #[test]
    fn rfc_7239_forwarded_elements_give_their_for_address() {
        let lines = [
            r#"for=6.6.6.6"#,
            r#"for="[2001:db8::7]:4711";proto=https, for=192.0.2.60;by=203.0.113.43"#,
        ];
        assert_eq!(ip_of(&lines, "forwarded", 1), ip("192.0.2.60"));
        assert_eq!(ip_of(&lines, "forwarded", 2), ip("2001:db8::7"));
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_64_prefix_and_a_mapped_ipv4_as_itself() {
        assert_eq!(limit_key(ip("2001:db8:1:2::1")), "2001:db8:1:2::/64");
        assert_eq!(
            limit_key(ip("2001:db8:1:2:a5f3:19c2:7e01:d4b8")),
            "2001:db8:1:2::/64"
        );
        assert_ne!(limit_key(ip("2001:db8:1:3::1")), "2001:db8:1:2::/64");
        assert_eq!(limit_key(ip("::ffff:198.51.100.7")), "198.51.100.7");
        assert_eq!(limit_key(ip("198.51.100.7")), "198.51.100.7");
    }

    #[test]
    fn ipv4_text_is_what_display_writes() {
        // Every octet value in every place (one-, two- and three-digit octets beside each other).
        for place in 0..4 {
            for value in 0..=255u8 {
                let mut octets = [7, 10, 100, 255];
                octets[place] = value;
                let v4 = std::net::Ipv4Addr::from(octets);
                assert_eq!(Ipv4Text::new(v4).as_str(), v4.to_string());
            }
        }
    }

    #[test]
    fn anything_malformed_or_too_short_falls_back_to_the_peer() {
        for lines in [
            vec!["not-an-ip"],
            vec!["1.2.3.4", "unknown"],
            vec!["1.2.3.4, "],
            vec!["999.1.1.1"],
            vec!["[2001:db8::1"],
            vec!["for=_hidden"],
        ] {
            assert_eq!(
                ip_of(&lines, "x-forwarded-for", 1),
                ip("127.0.0.9"),
                "{lines:?}"
            );
        }
        // Two hops trusted, but only one entry: the proxies did not write what they should.
        assert_eq!(ip_of(&["1.2.3.4"], "x-forwarded-for", 2), ip("127.0.0.9"));
    }
}
