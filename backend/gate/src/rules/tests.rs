use super::*;

fn rules(texts: &[&str]) -> Vec<GateRule> {
    texts.iter().map(|t| GateRule::parse(t).unwrap()).collect()
}

#[test]
fn rules_match_by_segment_prefix_with_wildcards_and_rooms() {
    let rules = rules(&["/checkout=main", "/drops/*/buy=drop", "/rooms/{room}/pay"]);
    let room = |path: &str| gated_room(&rules, path);
    assert_eq!(room("/checkout").as_deref(), Some("main"));
    assert_eq!(room("/checkout/").as_deref(), Some("main"));
    assert_eq!(room("/checkout/pay?x=1").as_deref(), Some("main"));
    assert_eq!(room("/checkouts"), None);
    assert_eq!(room("/checkout-old"), None);
    // A format suffix names the same action in Rails and Spring MVC: gated too.
    assert_eq!(room("/checkout.json").as_deref(), Some("main"));
    assert_eq!(room("/CHECKOUT.html/x").as_deref(), Some("main"));
    assert_eq!(room("/drops/sneaker/buy.json").as_deref(), Some("drop"));
    assert_eq!(room("/cart"), None);
    assert_eq!(room("/"), None);
    assert_eq!(room("/drops/sneaker/buy").as_deref(), Some("drop"));
    assert_eq!(room("/drops/sneaker"), None);
    assert_eq!(room("/rooms/flash/pay/now").as_deref(), Some("flash"));
    assert_eq!(room("/rooms/flash"), None);
}

#[test]
fn an_escaped_slash_in_a_wildcard_segment_is_gated_both_ways() {
    let rules = rules(&["/drops/*/buy=main", "/rooms/{room}/checkout"]);
    // Decoded first it is /drops/a/b/buy (no match); an origin routing on raw segments
    // reads /drops/{a%2Fb}/buy: gated.
    for path in ["/drops/a%2Fb/buy", "/drops/%2F/buy", "/drops/a%2fb/BUY"] {
        assert_eq!(gated_room(&rules, path).as_deref(), Some("main"), "{path}");
    }
    assert_eq!(
        gated_room(&rules, "/rooms/main%2Fx/checkout").as_deref(),
        Some("main/x")
    );
    assert_eq!(gated_room(&rules, "/drops/a/b/buy"), None);
    assert_eq!(gated_room(&rules, "/drops/a%2Fb/view"), None);
}

#[test]
fn no_spelling_of_a_gated_path_slips_past() {
    let rules = rules(&["/checkout=main"]);
    for path in [
        "/CHECKOUT",
        "//checkout",
        "/./checkout",
        "/cart/../checkout",
        "/%63heckout",
        "/%2e/checkout",
        "/checkout;jsessionid=1",
        "\\checkout",
        "/x/..%2fcheckout",
        "/checkout%2fpay",
    ] {
        assert_eq!(gated_room(&rules, path).as_deref(), Some("main"), "{path}");
    }
}

#[test]
fn paths_an_origin_could_read_otherwise_are_ambiguous() {
    for path in [
        "/checkout/../x",
        "/checkout/..%2fx",
        "/checkout/..;/x",
        "/checkout/%2e%2e/x",
        "/checkout/%2E%2E/x",
        "/checkout/x/../..",
        "/checkout/./pay",
        "/x\\..\\checkout",
        "/checkout%00",
        "/checkout%09",
        "/%252e%252e/checkout",
        "/checkout%252fpay",
        // Segments an origin may trim, and escapes that are not UTF-8 (each of
        // these would reach the origin as a path no rule names).
        "/checkout.",
        "/checkout%2e",
        "/checkout%20",
        "/checkout%09",
        "/%20checkout",
        "/checkout./pay",
        "/checkout.;x",
        "/checkout%C0%AF",
        "/caf%E9",
    ] {
        assert!(is_ambiguous_path(path), "{path}");
    }
    for path in [
        "/",
        "/checkout",
        "/checkout/pay",
        "/checkout.json",
        "/drops/7/buy",
        "/a..b/c",
        "/%ED%95%9C%EA%B8%80",
    ] {
        assert!(!is_ambiguous_path(path), "{path}");
    }
}

#[test]
fn a_rule_names_its_path_for_its_room() {
    let rules = rules(&["/drops/*/buy=main", "/checkout=main", "/rooms/{room}/pay"]);
    let first = |room: &str| rules.iter().find_map(|rule| rule.path_for(room));
    assert_eq!(first("main").as_deref(), Some("/checkout"));
    assert_eq!(first("flash").as_deref(), Some("/rooms/flash/pay"));
}

#[test]
fn bad_patterns_are_refused() {
    for text in [
        "checkout=main",
        "/=main",
        "/checkout",
        "/checkout=Main",
        "/{room}/{room}",
        "/{room}/pay=main",
        "/check*=main",
        "/..=main",
    ] {
        assert!(GateRule::parse(text).is_err(), "{text}");
    }
    assert!(GateRule::parse("/*=main").unwrap().covers("/_vestibule/"));
    assert!(GateRule::parse("/_vestibule=main")
        .unwrap()
        .covers("/_vestibule/"));
    assert!(!GateRule::parse("/checkout=main")
        .unwrap()
        .covers("/_vestibule/"));
}

#[test]
fn same_origin_paths_are_kept() {
    for path in [
        "/",
        "/checkout",
        "/checkout?step=2&x=%2F",
        "/a/b#frag",
        "/%ED%95%9C",
    ] {
        assert_eq!(safe_return_path(path), path);
    }
}

#[test]
fn every_open_redirect_variant_becomes_the_root() {
    let long = format!("/{}", "a".repeat(MAX_RETURN_LEN));
    for evil in [
        "",
        "//evil.example",
        "//evil.example/checkout",
        "///evil.example",
        "/\\evil.example",
        "\\\\evil.example",
        "/a\\b",
        "https://evil.example",
        "http://evil.example/checkout",
        "HTTPS://evil.example",
        "javascript:alert(1)",
        "data:text/html,hi",
        "evil.example",
        " /checkout",
        "/\t/evil.example",
        "/\n/evil.example",
        "/\r\n/evil.example",
        "/checkout\u{0}",
        "/checkout\u{7f}",
        "/checkout\u{85}",
        // Escapes a decoding origin reads as another path, or the gate refuses.
        "/%2F%2Fevil.example",
        "/%2f%2fevil.example/checkout",
        "/a/%2F%2Fevil",
        "/%5Cevil.example",
        "/%5cevil.example",
        "/checkout%09",
        "/%09/evil.example",
        "/%0a/evil.example",
        "/%0B/evil.example",
        "/%0d/evil.example",
        "/checkout/../admin",
        "/checkout%2e",
        long.as_str(),
    ] {
        assert_eq!(safe_return_path(evil), "/", "{evil:?}");
    }
}

#[test]
fn the_join_url_carries_an_encoded_safe_return() {
    assert_eq!(
        join_url("/_vestibule/", "main", "/checkout?step=2&a=b c"),
        "/_vestibule/?room=main&return=%2Fcheckout%3Fstep%3D2%26a%3Db%20c"
    );
    assert_eq!(
        join_url("/_vestibule/", "main", "//evil.example"),
        "/_vestibule/?room=main&return=%2F"
    );
}

#[test]
fn only_html_gets_and_heads_are_navigations() {
    let mut html = HeaderMap::new();
    html.insert(
        header::ACCEPT,
        "text/html,application/xhtml+xml;q=0.9".parse().unwrap(),
    );
    let mut json = HeaderMap::new();
    json.insert(header::ACCEPT, "application/json".parse().unwrap());
    assert!(is_navigation(&Method::GET, &html));
    assert!(is_navigation(&Method::HEAD, &html));
    assert!(!is_navigation(&Method::POST, &html));
    assert!(!is_navigation(&Method::GET, &json));
    assert!(!is_navigation(&Method::GET, &HeaderMap::new()));
}
