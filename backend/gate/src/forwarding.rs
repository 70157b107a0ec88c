//! The `X-Forwarded-*` headers a proxied request reaches the origin with, and whether a request
//! came over HTTPS.
//!
//! What a client sends in these headers is believed only from trusted proxies: those that
//! write `--client-ip-header`, `--trusted-proxy-hops` of them (as for the client's address,
//! `http::client_ip`). Without `--client-ip-header` Vestibule faces clients directly and writes
//! the headers afresh.
//! - `X-Forwarded-For`: the trusted chain, then the TCP peer. With `--client-ip-header
//!   X-Forwarded-For` the chain is the last `--trusted-proxy-hops` entries of all its lines (what
//!   the proxies wrote; anything a client put before them is dropped); with another header
//!   (`Forwarded`, `X-Real-IP`) it is the client's address read from it.
//! - `X-Forwarded-Proto`: a trusted proxy's value (with `--client-ip-header Forwarded`, the
//!   `proto=` of the client's element), else `http` (Vestibule serves plain HTTP).
//! - `X-Forwarded-Host`: a trusted proxy's value (with `Forwarded`, the client's element's
//!   `host=`), else the request's `Host`.
//! - `Forwarded` (RFC 7239) is removed unless it is the trusted header; then it goes on as the
//!   trusted proxies' elements (the last `--trusted-proxy-hops`: anything a client put before them
//!   is dropped) and one for this hop, `for=<peer>`, as `X-Forwarded-For` does.
//! - Facing clients directly, every other `X-Forwarded-*` a client sent (`-Port`, `-Prefix`,
//!   `-Server`, …, which origins build URLs from too) is dropped. Behind trusted proxies those
//!   are the proxies' to set or overwrite.

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::{header, Extensions, HeaderMap, HeaderName, HeaderValue};

use vestibule_http::client_ip::{client_ip, ClientIpSource, Ipv4Text};

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// The trusted forwarding header's name, when trusted proxies are configured.
fn trusted_header(source: ClientIpSource<'_>) -> Option<HeaderName> {
    source
        .header
        .and_then(|name| HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes()).ok())
}

/// All comma-separated entries of every line of `name`, trimmed.
fn entries(headers: &HeaderMap, name: &HeaderName) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|line| line.to_str().ok())
        .flat_map(|line| line.split(','))
        .map(|entry| entry.trim().to_owned())
        .filter(|entry| !entry.is_empty())
        .collect()
}

/// A trusted proxy's value of a single-valued header: the entry `hops` from the end when the
/// proxies appended, else the only one there (a proxy that overwrote it).
fn trusted_value(
    headers: &HeaderMap,
    name: &HeaderName,
    source: ClientIpSource<'_>,
) -> Option<String> {
    trusted_header(source)?;
    let list = entries(headers, name);
    let hops = source.trusted_hops.max(1);
    list.len()
        .checked_sub(hops)
        .and_then(|index| list.get(index))
        .or_else(|| list.first())
        .cloned()
}

/// The last `hops` entries of all lines of `name` (what the trusted proxies wrote), or none when
/// the list is shorter (then it is not theirs).
fn trusted_entries(headers: &HeaderMap, name: &HeaderName, hops: usize) -> Vec<String> {
    let list = entries(headers, name);
    list.len()
        .checked_sub(hops.max(1))
        .map(|start| list[start..].to_vec())
        .unwrap_or_default()
}

/// A parameter of an RFC 7239 element (`for=…;proto=https;host=…`), unquoted; names compare
/// without case.
fn element_param(element: &str, name: &str) -> Option<String> {
    element.split(';').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// The RFC 7239 element this hop adds: `for=192.0.2.1`, or `for="[2001:db8::1]"` (a colon
/// needs quotes).
fn element_for(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => format!("for={v4}"),
        IpAddr::V6(v6) => format!("for=\"[{v6}]\""),
    }
}

/// Whether the request reached the first trusted proxy over HTTPS (`X-Forwarded-Proto:
/// https`, or `proto=https` in the client's `Forwarded` element, from trusted proxies); always
/// false without `--client-ip-header`.
pub fn came_over_https(headers: &HeaderMap, source: ClientIpSource<'_>) -> bool {
    let proto = match trusted_header(source) {
        None => None,
        Some(name) if name == header::FORWARDED => {
            trusted_entries(headers, &name, source.trusted_hops)
                .first()
                .and_then(|element| element_param(element, "proto"))
        }
        Some(_) => trusted_value(headers, &X_FORWARDED_PROTO, source),
    };
    proto.is_some_and(|proto| proto.eq_ignore_ascii_case("https"))
}

/// An address as a header value: IPv4 written digit by digit ([`Ipv4Text`]: the formatting
/// machinery of `Display` cost more than the rest of the forwarding headers together), IPv6 by
/// `Display`.
fn ip_value(ip: IpAddr) -> HeaderValue {
    let IpAddr::V4(v4) = ip else {
        return HeaderValue::from_str(&ip.to_string()).expect("an address is a header value");
    };
    HeaderValue::from_str(Ipv4Text::new(v4).as_str()).expect("digits and dots are a header value")
}

/// The TCP peer of a request, if known.
pub fn peer_ip(extensions: &Extensions) -> Option<IpAddr> {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip())
}

/// Rewrites the forwarding headers of a request about to go to the origin (module docs).
pub fn set_forwarding_headers(
    headers: &mut HeaderMap,
    extensions: &Extensions,
    source: ClientIpSource<'_>,
) {
    let peer = peer_ip(extensions);
    let Some(trusted) = trusted_header(source) else {
        // Facing clients directly (the default): nothing they sent in these headers is kept.
        // Built without the lists, copies and formatting the trusted path needs (that path was
        // 8% of a proxied request's instructions in a profile).
        let host = headers
            .get(header::HOST)
            .filter(|value| value.to_str().is_ok())
            .cloned();
        let sent: Vec<HeaderName> = headers
            .keys()
            .filter(|name| name.as_str().starts_with("x-forwarded-"))
            .cloned()
            .collect();
        for name in sent {
            headers.remove(name);
        }
        headers.remove(header::FORWARDED);
        if let Some(value) = peer.map(ip_value) {
            headers.insert(X_FORWARDED_FOR, value);
        }
        headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static("http"));
        if let Some(value) = host {
            headers.insert(X_FORWARDED_HOST, value);
        }
        return;
    };
    let hops = source.trusted_hops.max(1);
    // RFC 7239 elements the trusted proxies wrote, passed on with this hop's (`Forwarded` only).
    let mut elements = None;
    let (mut chain, proto, host) = if trusted == header::FORWARDED {
        let kept = trusted_entries(headers, &trusted, hops);
        let chain = kept
            .iter()
            .filter_map(|element| element_param(element, "for"))
            .collect();
        // The first of them is the client's: the scheme and host it asked for.
        let proto = kept.first().and_then(|e| element_param(e, "proto"));
        let host = kept.first().and_then(|e| element_param(e, "host"));
        elements = Some(kept);
        (chain, proto, host)
    } else {
        let chain = if trusted == X_FORWARDED_FOR {
            trusted_entries(headers, &trusted, hops)
        } else {
            client_ip(headers, extensions, source)
                .filter(|ip| Some(*ip) != peer)
                .map(|ip| vec![ip.to_string()])
                .unwrap_or_default()
        };
        (
            chain,
            trusted_value(headers, &X_FORWARDED_PROTO, source),
            trusted_value(headers, &X_FORWARDED_HOST, source),
        )
    };
    chain.extend(peer.map(|ip| ip.to_string()));
    let proto = proto
        .filter(|proto| proto.eq_ignore_ascii_case("https") || proto.eq_ignore_ascii_case("http"))
        .unwrap_or_else(|| "http".to_owned());
    let host = host.or_else(|| {
        headers
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    });
    headers.remove(&X_FORWARDED_FOR);
    headers.remove(&X_FORWARDED_PROTO);
    headers.remove(&X_FORWARDED_HOST);
    headers.remove(header::FORWARDED);
    if let Ok(value) = HeaderValue::from_str(&chain.join(", ")) {
        if !chain.is_empty() {
            headers.insert(X_FORWARDED_FOR, value);
        }
    }
    if let Ok(value) = HeaderValue::from_str(&proto.to_ascii_lowercase()) {
        headers.insert(X_FORWARDED_PROTO, value);
    }
    if let Some(value) = host.and_then(|host| HeaderValue::from_str(&host).ok()) {
        headers.insert(X_FORWARDED_HOST, value);
    }
    if let Some(mut elements) = elements {
        elements.extend(peer.map(element_for));
        if let Ok(value) = HeaderValue::from_str(&elements.join(", ")) {
            if !elements.is_empty() {
                headers.insert(header::FORWARDED, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client address source the flags `args` give (`--client-ip-header`,
    /// `--trusted-proxy-hops`, default 1).
    fn config<'a>(args: &[&'a str]) -> ClientIpSource<'a> {
        let flag = |name: &str| {
            args.iter()
                .position(|arg| *arg == name)
                .map(|at| args[at + 1])
        };
        ClientIpSource {
            header: flag("--client-ip-header"),
            trusted_hops: flag("--trusted-proxy-hops").map_or(1, |hops| hops.parse().unwrap()),
        }
    }

    fn request(lines: &[(&str, &str)]) -> (HeaderMap, Extensions) {
        let mut headers = HeaderMap::new();
        for (name, value) in lines {
            headers.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        let mut extensions = Extensions::new();
        extensions.insert(ConnectInfo::<SocketAddr>("10.0.0.2:5000".parse().unwrap()));
        (headers, extensions)
    }

    fn forwarded(config: ClientIpSource<'_>, lines: &[(&str, &str)]) -> HeaderMap {
        let (mut headers, extensions) = request(lines);
        set_forwarding_headers(&mut headers, &extensions, config);
        headers
    }

    #[test]
    fn addresses_are_written_as_display_writes_them() {
        for text in [
            "0.0.0.0",
            "10.0.0.2",
            "127.0.0.1",
            "192.168.100.9",
            "255.255.255.255",
            "1.20.199.200",
            "::1",
            "2001:db8::7",
            "::ffff:10.0.0.1",
        ] {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(ip_value(ip), ip.to_string().as_str(), "{text}");
        }
    }

    #[test]
    fn facing_clients_directly_without_a_host_or_a_peer_no_such_header_is_passed_on() {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", "6.6.6.6".parse().unwrap());
        headers.insert("x-forwarded-host", "evil.example".parse().unwrap());
        set_forwarding_headers(&mut headers, &Extensions::new(), config(&[]));
        assert!(!headers.contains_key("x-forwarded-for"));
        assert!(!headers.contains_key("x-forwarded-host"));
        assert_eq!(headers["x-forwarded-proto"], "http");
        // A Host that is not visible ASCII is not copied.
        let (mut headers, extensions) = request(&[("x-forwarded-host", "evil.example")]);
        headers.insert(
            header::HOST,
            HeaderValue::from_bytes(b"caf\xe9.example").unwrap(),
        );
        set_forwarding_headers(&mut headers, &extensions, config(&[]));
        assert!(!headers.contains_key("x-forwarded-host"));
        assert_eq!(headers["x-forwarded-for"], "10.0.0.2");
    }

    #[test]
    fn facing_clients_directly_nothing_they_send_is_believed() {
        let headers = forwarded(
            config(&[]),
            &[
                ("host", "shop.example"),
                ("x-forwarded-for", "6.6.6.6"),
                ("x-forwarded-proto", "https"),
                ("x-forwarded-host", "evil.example"),
                ("forwarded", "for=6.6.6.6"),
            ],
        );
        assert_eq!(headers["x-forwarded-for"], "10.0.0.2");
        assert_eq!(headers["x-forwarded-proto"], "http");
        assert_eq!(headers["x-forwarded-host"], "shop.example");
        assert!(!headers.contains_key("forwarded"));
        assert!(!came_over_https(&headers, config(&[])));
    }

    #[test]
    fn behind_trusted_proxies_their_part_of_the_chain_is_kept_and_the_peer_appended() {
        let trusted = config(&[
            "--client-ip-header",
            "X-Forwarded-For",
            "--trusted-proxy-hops",
            "2",
        ]);
        let lines = [
            ("host", "shop.example"),
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "198.51.100.7, 10.0.0.1"),
            ("x-forwarded-proto", "https"),
        ];
        let headers = forwarded(trusted, &lines);
        assert_eq!(
            headers["x-forwarded-for"],
            "198.51.100.7, 10.0.0.1, 10.0.0.2"
        );
        assert_eq!(headers["x-forwarded-proto"], "https");
        let (raw, _) = request(&lines);
        assert!(came_over_https(&raw, trusted));
    }

    #[test]
    fn a_forwarded_header_gives_the_client_address() {
        let trusted = config(&["--client-ip-header", "Forwarded"]);
        let headers = forwarded(
            trusted,
            &[
                ("forwarded", "for=198.51.100.7;proto=https"),
                ("x-forwarded-for", "6.6.6.6"),
            ],
        );
        assert_eq!(headers["x-forwarded-for"], "198.51.100.7, 10.0.0.2");
        assert_eq!(
            headers["forwarded"],
            "for=198.51.100.7;proto=https, for=10.0.0.2"
        );
        assert_eq!(headers["x-forwarded-proto"], "https");
    }

    #[test]
    fn behind_trusted_forwarded_proxies_only_their_elements_go_on_and_the_clients_say_nothing() {
        // A client's own element, and its `proto=`/`host=`, never reach the origin.
        let trusted = config(&[
            "--client-ip-header",
            "Forwarded",
            "--trusted-proxy-hops",
            "2",
        ]);
        let lines = [
            ("host", "shop.example"),
            (
                "forwarded",
                "for=6.6.6.6;host=evil.example;proto=https, for=198.51.100.1;host=shop.example",
            ),
            ("forwarded", "for=\"[2001:db8::9]\""),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "evil.example"),
        ];
        let headers = forwarded(trusted, &lines);
        assert_eq!(
            headers["forwarded"],
            "for=198.51.100.1;host=shop.example, for=\"[2001:db8::9]\", for=10.0.0.2"
        );
        assert_eq!(
            headers["x-forwarded-for"],
            "198.51.100.1, [2001:db8::9], 10.0.0.2"
        );
        assert_eq!(headers["x-forwarded-proto"], "http");
        assert_eq!(headers["x-forwarded-host"], "shop.example");
        let (raw, _) = request(&lines);
        assert!(!came_over_https(&raw, trusted));
        // Fewer elements than trusted hops: none of them is the proxies'.
        let headers = forwarded(trusted, &[("forwarded", "garbage;;;")]);
        assert_eq!(headers["forwarded"], "for=10.0.0.2");
        assert_eq!(headers["x-forwarded-for"], "10.0.0.2");
    }

    #[test]
    fn facing_clients_directly_no_forwarding_header_of_theirs_reaches_the_origin() {
        let headers = forwarded(
            config(&[]),
            &[
                ("host", "shop.example"),
                ("x-forwarded-port", "8443"),
                ("x-forwarded-prefix", "/evil"),
                ("x-forwarded-server", "evil"),
            ],
        );
        let mut forwarding: Vec<_> = headers
            .keys()
            .map(HeaderName::as_str)
            .filter(|name| name.starts_with("x-forwarded-") || *name == "forwarded")
            .collect();
        forwarding.sort_unstable();
        assert_eq!(
            forwarding,
            ["x-forwarded-for", "x-forwarded-host", "x-forwarded-proto"]
        );
    }
}
