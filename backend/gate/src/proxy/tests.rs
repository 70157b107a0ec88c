use super::*;

#[test]
fn connection_cannot_remove_what_the_gate_sets() {
    let mut headers = HeaderMap::new();
    headers.insert(
        "connection",
        "x-vestibule-entry, host, x-forwarded-for".parse().unwrap(),
    );
    headers.insert("x-vestibule-entry", "{}".parse().unwrap());
    headers.insert("host", "shop.example".parse().unwrap());
    remove_hop_by_hop(&mut headers);
    assert!(headers.contains_key("x-vestibule-entry"));
    assert!(headers.contains_key("host"));
    assert!(!headers.contains_key("connection"));
}

#[test]
fn hop_by_hop_headers_and_those_connection_names_are_removed() {
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("connection", "keep-alive, x-private-hop"),
        ("keep-alive", "timeout=5"),
        ("x-private-hop", "1"),
        ("te", "trailers"),
        ("trailer", "x-sum"),
        ("upgrade", "h2c"),
        ("proxy-authorization", "Basic eA=="),
        ("cookie", "a=1"),
        ("x-end-to-end", "kept"),
    ] {
        headers.insert(HeaderName::from_static(name), value.parse().unwrap());
    }
    remove_hop_by_hop(&mut headers);
    let left: Vec<_> = headers.keys().map(HeaderName::as_str).collect();
    assert_eq!(left, ["cookie", "x-end-to-end"]);
}

#[test]
fn only_an_http11_connection_upgrade_is_an_upgrade() {
    let mut headers = HeaderMap::new();
    headers.insert(header::UPGRADE, "websocket".parse().unwrap());
    assert_eq!(requested_upgrade(&headers, Version::HTTP_11), None);
    headers.insert(header::CONNECTION, "keep-alive, Upgrade".parse().unwrap());
    assert_eq!(
        requested_upgrade(&headers, Version::HTTP_11).unwrap(),
        "websocket"
    );
    assert_eq!(requested_upgrade(&headers, Version::HTTP_2), None);
}
