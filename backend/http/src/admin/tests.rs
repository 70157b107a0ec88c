use vestibule_shared::settings::*;

/// `queueingMethod` is documented as the enum it is, in the admin view, the patch, the
/// room's info and the ticket status.
#[test]
fn the_queueing_method_is_a_documented_enum() {
    let (_, document) = crate::documented_routes();
    let json = serde_json::to_value(&document).unwrap();
    let schemas = &json["components"]["schemas"];
    assert_eq!(
        schemas["QueueingMethod"]["enum"],
        serde_json::json!(["fifo", "random"]),
        "{}",
        schemas["QueueingMethod"]
    );
    for schema in [
        "RoomSettings",
        "RoomSettingsPatch",
        "RoomInfo",
        "TicketStatus",
    ] {
        let property = schemas[schema]["properties"]["queueingMethod"].to_string();
        assert!(
            property.contains("#/components/schemas/QueueingMethod"),
            "{schema}: {property}"
        );
    }
}

/// The OpenAPI attributes need literals; this keeps them equal to the one set of bounds.
#[test]
fn the_documented_bounds_are_the_settings_bounds() {
    let (_, document) = crate::documented_routes();
    let json = serde_json::to_value(&document).unwrap();
    for schema in ["RoomSettings", "RoomSettingsPatch"] {
        let properties = &json["components"]["schemas"][schema]["properties"];
        let bounds = |field: &str| {
            let property = &properties[field];
            (property["minimum"].as_f64(), property["maximum"].as_f64())
        };
        assert_eq!(
            bounds("admissionRatePerSec"),
            (
                Some(ADMISSION_RATE_PER_SEC_MIN),
                Some(ADMISSION_RATE_PER_SEC_MAX)
            ),
            "{schema}: {properties}"
        );
        assert_eq!(
            bounds("tokenTtlSecs"),
            (
                Some(TOKEN_TTL_SECS_MIN as f64),
                Some(TOKEN_TTL_SECS_MAX as f64)
            ),
            "{schema}: {properties}"
        );
        assert_eq!(
            bounds("maxActiveUsers"),
            (
                Some(MAX_ACTIVE_USERS_MIN as f64),
                Some(MAX_ACTIVE_USERS_MAX as f64)
            ),
            "{schema}: {properties}"
        );
        assert_eq!(
            properties["checkoutUrl"]["maxLength"].as_u64(),
            Some(CHECKOUT_URL_MAX_CHARS as u64),
            "{schema}: {properties}"
        );
        let secs = |min: u64, max: u64| (Some(min as f64), Some(max as f64));
        assert_eq!(
            bounds("abandonAfterSecs"),
            secs(ABANDON_AFTER_SECS_MIN, ABANDON_AFTER_SECS_MAX),
            "{schema}: {properties}"
        );
        assert_eq!(
            bounds("holdPlaceSecs"),
            secs(HOLD_PLACE_SECS_MIN, HOLD_PLACE_SECS_MAX),
            "{schema}: {properties}"
        );
        assert_eq!(
            bounds("stock"),
            (Some(0.0), Some(STOCK_MAX as f64)),
            "{schema}: {properties}"
        );
        for field in ["soldOutMessageEn", "soldOutMessageKo"] {
            assert_eq!(
                properties[field]["maxLength"].as_u64(),
                Some(SOLD_OUT_MESSAGE_MAX_CHARS as u64),
                "{schema}: {properties}"
            );
            assert_eq!(
                properties[field]["pattern"].as_str(),
                Some(SOLD_OUT_MESSAGE_PATTERN),
                "{schema}: {properties}"
            );
        }
        assert_eq!(
            bounds("proofOfWorkDifficulty"),
            secs(0, u64::from(PROOF_OF_WORK_DIFFICULTY_MAX)),
            "{schema}: {properties}"
        );
        assert_eq!(
            bounds("proofOfWorkAutoJoinsPerSec"),
            secs(
                *PROOF_OF_WORK_AUTO_JOINS_PER_SEC.start(),
                *PROOF_OF_WORK_AUTO_JOINS_PER_SEC.end()
            ),
            "{schema}: {properties}"
        );
    }
}
