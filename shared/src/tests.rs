//! Serde shapes of the API types.

use super::*;

#[test]
fn ticket_status_serializes_with_camel_case_fields_and_screaming_states() {
    let status = TicketStatus {
        ticket_id: "t".into(),
        room: "main".into(),
        status: TicketState::TokenIssued,
        position: None,
        eta_seconds: None,
        eta_seconds_high: None,
        reason: None,
        eta_basis: None,
        next_poll_after_ms: 1000,
        entry_token: Some("main.x".into()),
        token_expires_at: Some("2026-11-27T09:00:00Z".into()),
        checkout_url: Some("/checkout?room=main".into()),
        room_state: RoomState::Open,
        place_kept: false,
        heartbeat_after_ms: None,
        sold_out_message: None,
        opens_at: None,
        ticket_tag: None,
        message_en: None,
        message_ko: None,
        beyond_stock: false,
        queueing_method: None,
        display_name_en: None,
        display_name_ko: None,
    };
    let json = serde_json::to_value(&status).unwrap();
    assert!(
        json.get("queueingMethod").is_none(),
        "absent in a FIFO room"
    );
    assert_eq!(json["status"], "TOKEN_ISSUED");
    assert_eq!(json["nextPollAfterMs"], 1000);
    assert_eq!(json["entryToken"], "main.x");
    assert!(json["position"].is_null());
    assert_eq!(json["roomState"], "OPEN");
}

#[test]
fn settings_patch_tells_absent_cap_from_null_cap() {
    let absent: RoomSettingsPatch = serde_json::from_str("{}").unwrap();
    assert_eq!(absent.max_active_users, None);
    let cleared: RoomSettingsPatch = serde_json::from_str(r#"{"maxActiveUsers":null}"#).unwrap();
    assert_eq!(cleared.max_active_users, Some(None));
    let set: RoomSettingsPatch = serde_json::from_str(r#"{"maxActiveUsers":5}"#).unwrap();
    assert_eq!(set.max_active_users, Some(Some(5)));
    let written_as_float: RoomSettingsPatch =
        serde_json::from_str(r#"{"maxActiveUsers":5.0,"tokenTtlSecs":60.0}"#).unwrap();
    assert_eq!(written_as_float.max_active_users, Some(Some(5)));
    assert_eq!(written_as_float.token_ttl_secs, Some(60));
    for bad in [
        r#"{"tokenTtlSecs":1.5}"#,
        r#"{"tokenTtlSecs":-1}"#,
        r#"{"tokenTtlSecs":"1"}"#,
    ] {
        assert!(
            serde_json::from_str::<RoomSettingsPatch>(bad).is_err(),
            "{bad}"
        );
    }
    let order: OrderRequest = serde_json::from_str(r#"{"quantity":2.0}"#).unwrap();
    assert_eq!(order.quantity, Some(2));
    assert!(serde_json::from_str::<RoomSettingsPatch>(r#"{"bogus":1}"#).is_err());
}

#[test]
fn room_slugs_follow_the_design_rule() {
    assert!(is_valid_room_slug("main"));
    assert!(is_valid_room_slug("black-friday-2026"));
    assert!(!is_valid_room_slug(""));
    assert!(!is_valid_room_slug("Main"));
    assert!(!is_valid_room_slug("a_b"));
    assert!(!is_valid_room_slug("방"));
    assert!(!is_valid_room_slug(&"a".repeat(65)));
}

#[test]
fn the_queueing_method_is_lowercase_on_the_wire() {
    assert_eq!(
        serde_json::to_value(QueueingMethod::Random).unwrap(),
        "random"
    );
    assert_eq!(QueueingMethod::parse("fifo"), Some(QueueingMethod::Fifo));
    assert_eq!(QueueingMethod::parse("Random"), None);
    // A room's info from a server that predates the field reads as FIFO.
    let info: RoomInfo = serde_json::from_value(serde_json::json!({
        "room": "main", "state": "OPEN", "waiting": 0, "activeUsers": 0,
        "admissionRatePerSec": 1.0, "tokenTtlSecs": 60
    }))
    .unwrap();
    assert_eq!(info.queueing_method, QueueingMethod::Fifo);
}
