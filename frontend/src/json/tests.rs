use vestibule_shared::{
    bots::Challenge, draw::RoomNotOpen, embed::EmbeddingInfo, OrderReceipt, OrderRequest,
    TicketStatus,
};

use super::*;

/// Every answer the serde derives read, read the same here.
fn same_as_serde<T>(text: &str)
where
    T: FromJson + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    assert_eq!(
        decode::<T>(text),
        serde_json::from_str::<T>(text).ok(),
        "{text}"
    );
}

#[test]
fn ticket_statuses_decode_as_serde_does() {
    let full = serde_json::json!({
        "ticketId": "Zb3n0W6m1q8VqL2pX9cT4A", "room": "main", "status": "WAITING",
        "position": 42, "etaSeconds": 3, "etaSecondsHigh": 5, "reason": "CAP_REACHED",
        "nextPollAfterMs": 3000, "entryToken": null, "tokenExpiresAt": null,
        "checkoutUrl": null, "roomState": "OPEN", "placeKept": true,
        "soldOutMessage": {"en": "Gone \"all\" \u{1F600}", "ko": null}, "heartbeatAfterMs": 60000,
        "opensAt": "2026-11-27T09:00:00Z", "ticketTag": "0123456789ab",
        "messageEn": "Sizes 42–44\nsold out", "messageKo": "품절", "beyondStock": true,
        "queueingMethod": "random", "displayNameEn": "Drop 7", "displayNameKo": "드롭 7",
        "unknownField": [1, {"x": -2.5e3}]
    });
    same_as_serde::<TicketStatus>(&full.to_string());
    same_as_serde::<TicketStatus>(&serde_json::to_string_pretty(&full).unwrap());
    let minimal = r#"{"ticketId":"t","room":"r","status":"TOKEN_ISSUED","nextPollAfterMs":1000,
        "roomState":"PAUSED","entryToken":"main.x","reason":"SOMETHING_NEW"}"#;
    same_as_serde::<TicketStatus>(minimal);
    assert!(decode::<TicketStatus>(minimal).is_some());
    for wrong in [
        r#"{"ticketId":"t","room":"r","status":"NEW_STATE","nextPollAfterMs":1,"roomState":"OPEN"}"#,
        r#"{"ticketId":"t","room":"r","status":"WAITING","nextPollAfterMs":1.5,"roomState":"OPEN"}"#,
        r#"{"ticketId":"t","room":"r","status":"WAITING","nextPollAfterMs":-1,"roomState":"OPEN"}"#,
        r#"{"ticketId":"t","room":"r","status":"WAITING","roomState":"OPEN"}"#,
        r#"{"ticketId":"t","room":"r","status":"WAITING","nextPollAfterMs":1,"roomState":"OPEN","position":"3"}"#,
        r#"{"ticketId":"t","room":"r","status":"WAITING","nextPollAfterMs":1,"roomState":"OPEN","placeKept":null}"#,
        "<html>captive portal</html>",
        "",
        "{\"ticketId\":\"t\"",
    ] {
        same_as_serde::<TicketStatus>(wrong);
        assert_eq!(decode::<TicketStatus>(wrong), None, "{wrong}");
    }
}

#[test]
fn other_answers_decode_as_serde_does() {
    same_as_serde::<Challenge>(
        r#"{"challenge":"abc","difficulty":18,"expiresAtMs":1700000000000,"algorithm":"sha256-leading-zero-bits"}"#,
    );
    same_as_serde::<Challenge>(
        r#"{"challenge":"abc","difficulty":300,"expiresAtMs":1,"algorithm":"x"}"#,
    );
    same_as_serde::<OrderReceipt>(r#"{"orderId":"o-1","room":"main","sku":"DEMO","quantity":1}"#);
    // Every error body reads as the refusal's larger shape (`api::read_answer`).
    same_as_serde::<RoomNotOpen>(r#"{"error":"sold_out","message":"The room is sold out."}"#);
    same_as_serde::<RoomNotOpen>(r#"{"error":"x"}"#);
    same_as_serde::<EmbeddingInfo>(
        r#"{"room":"main","allowedOrigins":["https://shop.example"],"shareTokenWithEmbedder":false}"#,
    );
    same_as_serde::<EmbeddingInfo>(
        r#"{"room":"main","allowedOrigins":[1],"shareTokenWithEmbedder":false}"#,
    );
}

#[test]
fn strings_round_trip_with_escapes() {
    for text in [
        "plain",
        "quote \" backslash \\ slash /",
        "line\nbreak\ttab\u{1}",
        "한국어 😀",
    ] {
        let written = Writer::object().string("k", Some(text)).end();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&written).unwrap()["k"],
            text
        );
        assert_eq!(
            parse(&written).unwrap().get("k"),
            Some(&Json::Str(text.to_owned()))
        );
    }
    assert_eq!(parse(r#""\ud83d\ude00""#), Some(Json::Str("😀".to_owned())));
    assert_eq!(parse(r#""\ud83d""#), None);
    assert_eq!(parse("01"), None);
    assert_eq!(parse("[1,]"), None);
    assert_eq!(parse("18446744073709551616"), Some(Json::Other));
}

#[test]
fn request_bodies_are_what_serde_wrote() {
    let order = OrderRequest {
        sku: Some("DEMO-SKU".to_owned()),
        quantity: Some(1),
    };
    assert_eq!(
        order_request(&order),
        serde_json::to_string(&order).unwrap()
    );
    let none = OrderRequest::default();
    assert_eq!(order_request(&none), serde_json::to_string(&none).unwrap());
    let receipt_value = OrderReceipt {
        order_id: "o".to_owned(),
        room: "main".to_owned(),
        sku: "S".to_owned(),
        quantity: 2,
    };
    assert_eq!(
        receipt(&receipt_value),
        serde_json::to_string(&receipt_value).unwrap()
    );
}

#[test]
fn refused_joins_decode_as_serde_does() {
    for text in [
        r#"{"error":"room_not_open","message":"m","opensAt":"2026-11-27T09:00:00Z",
            "prequeueOpensAt":null,"displayNameEn":"Drop 7"}"#,
        r#"{"error":"sold_out","message":"m","opensAt":null,"prequeueOpensAt":null,
            "soldOutMessage":{"en":"Gone","ko":null},"displayNameKo":"드롭 7"}"#,
        r#"{"error":"room_closed","message":"m"}"#,
        r#"{"error":"sold_out","message":"m","soldOutMessage":"gone"}"#,
    ] {
        same_as_serde::<RoomNotOpen>(text);
    }
}
