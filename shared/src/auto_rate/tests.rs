use super::*;

fn with_url(url: &str) -> AutoRate {
    AutoRate {
        min: 10.0,
        max: 400.0,
        target_p95_ms: 500,
        max_error_rate: 0.01,
        health_url: Some(url.to_owned()),
    }
}

/// Health URLs the check takes.
const GOOD_URLS: &[&str] = &[
    "https://shop.example/vestibule-health",
    "http://127.0.0.1:8080/health?room=main#x",
    "HTTPS://Shop.Example",
    "http://[::1]:9000/",
    "http://localhost:1/a/b@c",
    "http://shop.example.:65535/",
    "http://xn--shp-sna.example/",
    "http://[2001:db8::7]/",
];

/// Health URLs the check refuses (within the length).
const BAD_URLS: &[&str] = &[
    // Bad scheme.
    "ftp://shop.example/health",
    "javascript://shop.example/%0aalert(1)",
    "file:///etc/passwd",
    // Not a URL.
    "shop.example/health",
    "/health",
    "",
    "https://",
    "https:///health",
    "https://shop.example:/health",
    "https://shop.example:123456/",
    "https://user:secret@shop.example/health",
    "https://shop example/health",
    "https://shop.example/he alth",
    "https://shop.example/\u{7f}",
    "https://[]/",
    "https://[::1/",
    "https://shop_example/",
    "https://shöp.example/",
    // No such port or host.
    "https://shop.example:0/",
    "https://shop.example:65536/",
    "https://shop.example:99999/",
    "https://shop.example:080/",
    "https://.../",
    "https://-a-/",
    "https://shop..example/",
    "https://-shop.example/",
];

#[test]
fn a_health_url_is_an_absolute_http_url_within_its_length() {
    for good in GOOD_URLS {
        assert_eq!(with_url(good).validate(), Ok(()), "{good}");
    }
    let long = format!("https://shop.example/{}", "a".repeat(HEALTH_URL_MAX_CHARS));
    let longest = &long[..HEALTH_URL_MAX_CHARS];
    assert_eq!(
        with_url(longest).validate(),
        Ok(()),
        "exactly 2048 characters"
    );
    for bad in BAD_URLS.iter().copied().chain([long.as_str()]) {
        assert_eq!(
            with_url(bad).validate(),
            Err(SettingOutOfRange::AutoRateHealthUrl),
            "{bad:?}"
        );
    }
}

/// The OpenAPI document's pattern is what the fuzzer builds URLs from: it must take exactly
/// what the check takes.
#[test]
fn the_health_url_pattern_takes_what_the_check_takes() {
    let pattern = regex::Regex::new(HEALTH_URL_PATTERN).unwrap();
    for url in GOOD_URLS.iter().chain(BAD_URLS) {
        assert_eq!(
            pattern.is_match(url),
            check_health_url(url).is_ok(),
            "{url:?}"
        );
    }
}

#[test]
fn the_health_url_rides_the_json_and_is_optional() {
    let without = r#"{"min":10.0,"max":400.0,"targetP95Ms":500,"maxErrorRate":0.01}"#;
    let read: AutoRate = serde_json::from_str(without).unwrap();
    assert_eq!(read.health_url, None);
    assert_eq!(
        serde_json::to_string(&read).unwrap(),
        without,
        "absent stays absent"
    );
    let with = with_url("https://shop.example/health");
    let json = serde_json::to_value(&with).unwrap();
    assert_eq!(json["healthUrl"], "https://shop.example/health");
    assert_eq!(serde_json::from_value::<AutoRate>(json).unwrap(), with);
    let null = r#"{"min":1,"max":2,"targetP95Ms":500,"maxErrorRate":0,"healthUrl":null}"#;
    assert_eq!(
        serde_json::from_str::<AutoRate>(null).unwrap().health_url,
        None
    );
    let misspelt = r#"{"min":1,"max":2,"targetP95Ms":500,"maxErrorRate":0,"healthURL":"x"}"#;
    assert!(serde_json::from_str::<AutoRate>(misspelt).is_err());
}

#[test]
fn signals_are_checked_within_their_bounds() {
    let good = OriginSignals {
        requests: 400,
        p50_ms: 40.0,
        p95_ms: 90.0,
        error_rate: 0.01,
        in_flight: 3,
        sent: Some(420),
        window_secs: Some(2),
    };
    assert_eq!(good.check(), Ok(()));
    let wrong = [
        OriginSignals {
            requests: SIGNALS_REQUESTS_MAX + 1,
            ..good
        },
        OriginSignals {
            sent: Some(SIGNALS_REQUESTS_MAX + 1),
            ..good
        },
        OriginSignals {
            p95_ms: -1.0,
            ..good
        },
        OriginSignals {
            p50_ms: f64::NAN,
            ..good
        },
        OriginSignals {
            p95_ms: SIGNALS_LATENCY_MS_MAX + 1.0,
            ..good
        },
        OriginSignals {
            error_rate: 1.5,
            ..good
        },
        OriginSignals {
            window_secs: Some(0),
            ..good
        },
        OriginSignals {
            window_secs: Some(SIGNALS_WINDOW_SECS_MAX + 1),
            ..good
        },
    ];
    for signals in wrong {
        assert!(signals.check().is_err(), "{signals:?}");
    }
}
