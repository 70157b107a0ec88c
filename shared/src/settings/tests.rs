//! Unit tests of the settings' bounds and checks.

use super::*;

#[test]
fn bounds_are_inclusive_and_reject_what_lies_outside() {
    assert!(check_admission_rate(0.0).is_ok());
    assert!(check_admission_rate(100_000.0).is_ok());
    for bad in [-0.5, 100_000.5, f64::NAN, f64::INFINITY] {
        assert_eq!(
            check_admission_rate(bad),
            Err(SettingOutOfRange::AdmissionRate)
        );
    }
    assert!(check_token_ttl_secs(1).is_ok() && check_token_ttl_secs(86_400).is_ok());
    assert_eq!(check_token_ttl_secs(0), Err(SettingOutOfRange::TokenTtl));
    assert_eq!(
        check_token_ttl_secs(86_401),
        Err(SettingOutOfRange::TokenTtl)
    );
    assert!(check_max_active_users(None).is_ok());
    assert!(check_max_active_users(Some(10_000_000)).is_ok());
    assert!(check_max_active_users(Some(0)).is_err());
    assert!(check_max_active_users(Some(10_000_001)).is_err());
    assert!(check_abandon_after_secs(1).is_ok() && check_abandon_after_secs(86_400).is_ok());
    assert!(check_abandon_after_secs(0).is_err() && check_abandon_after_secs(86_401).is_err());
    assert!(check_hold_place_secs(0).is_ok() && check_hold_place_secs(86_400).is_ok());
    assert_eq!(
        check_hold_place_secs(86_401),
        Err(SettingOutOfRange::HoldPlace)
    );
}

#[test]
fn a_patch_names_its_first_bad_field_with_the_bounds() {
    let patch = RoomSettingsPatch {
        token_ttl_secs: Some(0),
        max_active_users: Some(Some(0)),
        ..RoomSettingsPatch::default()
    };
    let error = patch.validate().unwrap_err();
    assert_eq!(error.api_field(), "tokenTtlSecs");
    assert_eq!(error.to_string(), "1–86400 s");
    assert_eq!(
        SettingOutOfRange::AdmissionRate.to_string(),
        "0–100000 shoppers/s"
    );
    let cleared = RoomSettingsPatch {
        max_active_users: Some(None),
        ..RoomSettingsPatch::default()
    };
    assert_eq!(cleared.validate(), Ok(()));
}

#[test]
fn stock_and_sold_out_messages_have_bounds() {
    assert!(check_stock(None).is_ok() && check_stock(Some(0)).is_ok());
    assert!(check_stock(Some(STOCK_MAX)).is_ok());
    assert_eq!(
        check_stock(Some(STOCK_MAX + 1)),
        Err(SettingOutOfRange::Stock)
    );
    assert!(is_valid_sold_out_message("매진되었습니다"));
    for bad in ["", "   ", "a\nb", "tab\there"] {
        assert!(!is_valid_sold_out_message(bad), "{bad:?}");
    }
    assert!(!is_valid_sold_out_message(
        &"a".repeat(SOLD_OUT_MESSAGE_MAX_CHARS + 1)
    ));
    let patch = RoomSettingsPatch {
        sold_out_message_ko: Some(Some(String::new())),
        ..RoomSettingsPatch::default()
    };
    assert_eq!(
        patch.validate().unwrap_err().api_field(),
        "soldOutMessageKo"
    );
    let cleared = RoomSettingsPatch {
        sold_out_message_en: Some(None),
        stock: Some(None),
        ..RoomSettingsPatch::default()
    };
    assert_eq!(cleared.validate(), Ok(()));
}

#[test]
fn a_checkout_url_is_a_path_here_or_on_a_configured_storefront() {
    let shops = vec![
        "https://shop.example".to_owned(),
        "http://127.0.0.1:3000".into(),
    ];
    for good in [
        "/checkout?room=main",
        "/",
        "https://shop.example/checkout",
        "https://shop.example?x=1",
        "https://shop.example",
        "http://127.0.0.1:3000/buy",
    ] {
        assert_eq!(check_checkout_url(good, &shops), Ok(()), "{good}");
    }
    for bad in [
        "",
        "checkout",
        "//evil.example/x",
        "/\\evil.example",
        "/\t/evil.example",
        "/a b",
        "https://evil.example/checkout",
        "https://shop.example.evil.example/",
        "HTTPS://Shop.Example/cart",
        "https://shop.example@evil.example/",
        "https://shop.example:444/",
        "http://shop.example/",
        "https://user@shop.example/",
        "javascript:alert(1)",
        "data:text/html,x",
        "ftp://shop.example/",
    ] {
        assert_eq!(
            check_checkout_url(bad, &shops),
            Err(SettingOutOfRange::CheckoutUrl),
            "{bad:?}"
        );
    }
    let long = format!("/{}", "a".repeat(CHECKOUT_URL_MAX_CHARS));
    assert!(check_checkout_url(&long, &shops).is_err());
    assert!(check_checkout_url("https://shop.example/", &[]).is_err());
    assert_eq!(
        checkout_url_pattern(&shops[..1]),
        concat!(
            r"^(/([^/\\\s\x00-\x1f\x7f-\x9f][^\s\x00-\x1f\x7f-\x9f]*)?",
            r"|(https://shop\.example)([/?#][^\s\x00-\x1f\x7f-\x9f]*)?)$"
        )
    );
    assert_eq!(
        url_origin("https://Shop.example:8443/a?b").as_deref(),
        Some("https://shop.example:8443")
    );
}

#[test]
fn auto_rate_patches_are_checked_and_null_turns_the_loop_off() {
    let on: RoomSettingsPatch = serde_json::from_str(
        r#"{"autoRate": {"min": 10, "max": 400, "targetP95Ms": 500, "maxErrorRate": 0.01}}"#,
    )
    .unwrap();
    assert_eq!(on.validate(), Ok(()));
    assert!(matches!(on.auto_rate, Some(Some(_))));
    let off: RoomSettingsPatch = serde_json::from_str(r#"{"autoRate": null}"#).unwrap();
    assert_eq!((off.validate(), off.auto_rate), (Ok(()), Some(None)));
    for wrong in [
        r#"{"min": -1, "max": 10, "targetP95Ms": 500, "maxErrorRate": 0.01}"#,
        r#"{"min": 1, "max": 1e9, "targetP95Ms": 500, "maxErrorRate": 0.01}"#,
        r#"{"min": 1, "max": 10, "targetP95Ms": 0, "maxErrorRate": 0.01}"#,
        r#"{"min": 1, "max": 10, "targetP95Ms": 500, "maxErrorRate": 0.9}"#,
    ] {
        let patch: RoomSettingsPatch =
            serde_json::from_str(&format!(r#"{{"autoRate": {wrong}}}"#)).unwrap();
        assert_eq!(
            patch.validate(),
            Err(SettingOutOfRange::AutoRate),
            "{wrong}"
        );
    }
    let unknown =
        r#"{"autoRate": {"min": 1, "max": 10, "targetP95Ms": 500, "maxErrorRate": 0, "x": 1}}"#;
    assert!(serde_json::from_str::<RoomSettingsPatch>(unknown).is_err());
}
