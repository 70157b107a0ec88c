//! `GET /api/v1/openapi.json`: the OpenAPI 3.1 document.
//!
//! Generated from the same declarations that build the router: every route is registered with
//! `utoipa_axum::routes!` from its handler's `#[utoipa::path]`, so a path exists once and the
//! document cannot list a route the server lacks (or miss one it has). This module adds what is
//! common to many operations: the response classes for errors made by layers and by the store,
//! the enum of error codes, the admin security scheme, and the links a client follows from a
//! join to its poll, stream and leave.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoResponses, Modify, OpenApi};
use vestibule_shared::{error_code, ErrorBody};

use crate::state::AppState;

/// Errors any operation can meet before its handler runs (layers).
#[derive(IntoResponses)]
pub enum EdgeErrors {
    /// The request (its body) took longer than `--request-timeout-secs`.
    #[response(status = 408)]
    RequestTimeout(ErrorBody),
    /// The body is larger than `--max-body-bytes`.
    #[response(status = 413)]
    PayloadTooLarge(ErrorBody),
    /// More than 80 header fields or 32 KiB of them (`request_headers_too_large`; each field
    /// counted as name + value + 32 bytes).
    #[response(status = 431)]
    HeadersTooLarge(ErrorBody),
}

/// The store could not be read: nothing happened; retry after `Retry-After` seconds.
#[derive(IntoResponses)]
pub enum StoreReadErrors {
    /// The store is unreachable (`store_unavailable`); nothing happened.
    #[response(status = 503, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")))]
    Unavailable(ErrorBody),
}

/// A change could not be made (503: surely not applied) or was not confirmed (504: re-read, or
/// retry with the same `Idempotency-Key`).
#[derive(IntoResponses)]
pub enum StoreWriteErrors {
    /// The store is unreachable (`store_unavailable`): the change surely did not happen.
    #[response(status = 503, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")))]
    Unavailable(ErrorBody),
    /// The store did not confirm the change in time (`store_timeout`): it may or may not have
    /// happened. Retry it: a join or an order with the same `Idempotency-Key` finds what the
    /// first try did; a leave, a release or a settings change means the same done twice.
    #[response(status = 504, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")))]
    Timeout(ErrorBody),
}

struct AdminSecurity;

impl Modify for AdminSecurity {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        components.add_security_scheme(
            "origin_key",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Every operation on a room (a path with `{room}`) may meet a room an operator deleted while
/// the server ran: 410 `room_deleted`. Said once here rather than on each route.
fn deleted_rooms_are_gone(json: &mut Value) {
    let Some(paths) = json["paths"].as_object_mut() else {
        return;
    };
    for (path, operations) in paths.iter_mut() {
        if !path.contains("{room}") {
            continue;
        }
        let Some(operations) = operations.as_object_mut() else {
            continue;
        };
        for operation in operations.values_mut() {
            let responses = &mut operation["responses"];
            if responses.is_object() && responses.get("410").is_none() {
                responses["410"] = json!({
                    "description": "The room was deleted by an operator while this server ran: \
                        every ticket in it has ended (`room_deleted`)",
                    "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/ErrorBody"}}},
                });
            }
        }
    }
}

/// `CreateRoom` as one object: `room` and every field of `RoomSettingsPatch`, no others. (utoipa
/// writes the flattened patch as `allOf`, where the patch's `additionalProperties: false` would
/// forbid `room` itself.)
fn create_room_is_one_object(json: &mut Value) {
    let schemas = &mut json["components"]["schemas"];
    let mut properties = schemas["RoomSettingsPatch"]["properties"].clone();
    let Some(fields) = properties.as_object_mut() else {
        return;
    };
    fields.insert(
        "room".into(),
        json!({
            "type": "string",
            "pattern": "^[a-z0-9-]{1,64}$",
            "description": "The new room's slug.",
            "example": "drop-7",
        }),
    );
    let description = schemas["CreateRoom"]["description"].clone();
    schemas["CreateRoom"] = json!({
        "type": "object",
        "description": description,
        "required": ["room"],
        "properties": properties,
        "additionalProperties": false,
    });
}

/// The finished document as JSON: the router's document plus what `utoipa` cannot say from
/// the declarations — the enum of error codes, the links from a join to its ticket (written as
/// JSON because utoipa 5 serializes a link's `operationId` as `operation_id`), and the shape of
/// each event of the SSE stream (OpenAPI 3.1 reads the `schema` of `text/event-stream` as the
/// schema of one event; its `data` is TicketStatus JSON).
pub fn finished(document: &utoipa::openapi::OpenApi) -> Value {
    let mut json = serde_json::to_value(document).unwrap_or_else(|_| json!({}));
    // `error` is a string in Rust (clients must accept codes added later); the document lists
    // every code the server sends today.
    json["components"]["schemas"]["ErrorBody"]["properties"]["error"] = json!({
        "type": "string",
        "description": "Stable machine-readable code.",
        "enum": error_code::ALL,
        "examples": ["ticket_not_found"],
    });
    // `healthUrl`'s rule is written once, beside its check (a Rust item, not an attribute).
    let health_url = &mut json["components"]["schemas"]["AutoRate"]["properties"]["healthUrl"];
    if health_url.is_object() {
        health_url["pattern"] = json!(vestibule_shared::auto_rate::HEALTH_URL_PATTERN);
    }
    headers_are_plain_strings(&mut json);
    create_room_is_one_object(&mut json);
    deleted_rooms_are_gone(&mut json);
    let join = &mut json["paths"]["/api/v1/rooms/{room}/tickets"]["post"]["responses"];
    for status in ["200", "201"] {
        if join[status].is_object() {
            join[status]["links"] = json!({
                "poll": ticket_link("poll"),
                "events": ticket_link("events"),
                "leave": ticket_link("leave"),
            });
        }
    }
    let stream = &mut json["paths"]["/api/v1/rooms/{room}/tickets/{ticketId}/events"]["get"]
        ["responses"]["200"]["content"]["text/event-stream"];
    if stream.is_object() {
        let status = json!({
            "type": "object",
            "description": "A change of the ticket (the first one at once).",
            "required": ["event", "data"],
            "properties": {
                "event": {"type": "string", "enum": ["status"]},
                "id": {"type": "string", "pattern": "^([0-9]+|end)$",
                       "description": "0, 1, 2, … within one stream; `end` on the final status"},
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": {"$ref": "#/components/schemas/TicketStatus"},
                },
                "retry": {"type": "integer"},
            },
        });
        let keepalive = json!({
            "type": "object",
            "description": "Sent after 10 s without news; a stream silent for two of these is dead.",
            "required": ["event", "data"],
            "properties": {
                "event": {"type": "string", "enum": ["keepalive"]},
                "data": {"type": "string", "enum": ["{}"]},
                "id": {"type": "string"},
            },
        });
        stream["schema"] =
            json!({"description": "One event of the stream.", "oneOf": [status, keepalive]});
    }
    super::admin_events::describe_stream(&mut json);
    self_contained(&mut json);
    json
}

/// Drops from every description what a reader of the document alone cannot follow: pointers to
/// the repository's files (`docs/…`, `README`), to issues, and to Rust items (`[`x::y`]`); a
/// rustdoc link to a plain name keeps the name. The Rust docs keep their pointers.
fn self_contained(json: &mut Value) {
    match json {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(text) if key == "description" || key == "summary" => {
                        *text = without_pointers(text);
                    }
                    other => self_contained(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(self_contained),
        _ => {}
    }
}

/// Whether a phrase points outside the document.
fn is_pointer(phrase: &str) -> bool {
    let phrase = phrase.trim();
    phrase.contains("docs/")
        || phrase.contains(".md")
        || phrase.contains("README")
        || phrase.starts_with("issue ")
        || phrase.starts_with("see [`")
        || is_code_path(phrase)
}

/// `x::y` (a Rust path), as opposed to `2001:db8::/32`.
fn is_code_path(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.windows(4).any(|w| {
        (w[0].is_ascii_alphabetic() || w[0] == b'_')
            && w[1] == b':'
            && w[2] == b':'
            && (w[3].is_ascii_alphabetic() || w[3] == b'_')
    })
}

/// `text` without its pointers ([`is_pointer`]): in each parenthesis the comma-separated parts
/// that point are dropped, and the parenthesis with them when nothing is left.
fn without_pointers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('(') {
        let Some(close) = rest[open..].find(')').map(|at| open + at) else {
            break;
        };
        let inside = &rest[open + 1..close];
        let kept: Vec<&str> = inside
            .split(", ")
            .filter(|part| !is_pointer(part))
            .collect();
        out.push_str(&rest[..open]);
        if kept.is_empty() {
            // The space before the parenthesis goes with it.
            if out.ends_with(' ') || out.ends_with('\n') {
                out.pop();
            }
        } else {
            out.push('(');
            out.push_str(&kept.join(", "));
            out.push(')');
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    // Rustdoc links to plain names: `[`TicketStatus`]` → `TicketStatus`.
    out.replace("[`", "`").replace("`]", "`")
}

/// An optional header is absent or a string, never JSON `null` (utoipa types `Option<String>`
/// as `["string", "null"]`, which a client would send as the text `null`).
fn headers_are_plain_strings(json: &mut Value) {
    let Some(paths) = json["paths"].as_object_mut() else {
        return;
    };
    for operation in paths.values_mut().filter_map(Value::as_object_mut) {
        for operation in operation.values_mut() {
            let Some(parameters) = operation
                .get_mut("parameters")
                .and_then(Value::as_array_mut)
            else {
                continue;
            };
            for parameter in parameters.iter_mut().filter(|p| p["in"] == "header") {
                if parameter["schema"]["type"].is_array() {
                    parameter["schema"]["type"] = json!("string");
                }
            }
        }
    }
}

/// A link from a join's answer to an operation on its ticket.
fn ticket_link(operation: &str) -> Value {
    json!({
        "operationId": operation,
        "parameters": {"room": "$request.path.room", "ticketId": "$response.body#/ticketId"},
        "description": format!("The `{operation}` operation on the ticket just made"),
    })
}

/// The API description's fixed parts; the paths come from the router.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Vestibule API",
        version = "1",
        description = "Virtual waiting room: join a room's queue, poll or stream your position, \
            check out with an entry token.\n\n\
            Errors are `{\"error\": code, \"message\": text}` with a stable code (the enum of \
            `ErrorBody.error`). Every write can be retried: 503 `store_unavailable` means nothing \
            happened; 504 `store_timeout` means the change may have happened (re-read, or retry \
            with the same `Idempotency-Key`). Clients must treat ticket states they do not know \
            as \"keep polling at nextPollAfterMs\"."
    ),
    tags(
        (name = "tickets", description = "A shopper's place in a room: join, poll, stream, leave"),
        (name = "rooms", description = "Public facts about a room"),
        (name = "checkout", description = "The demo checkout behind the entry token"),
        (name = "gate", description = "Gate mode: an entry token becomes the storefront's session cookie"),
        (name = "tokens", description = "Entry tokens for storefronts: public keys (JWKS), single-use consume, session release"),
        (name = "admin", description = "The operator's live knobs (bearer admin token)"),
        (name = "health", description = "Liveness, readiness and metrics"),
    ),
    components(schemas(
        vestibule_shared::TicketStatus, vestibule_shared::TicketState, vestibule_shared::WaitReason, vestibule_shared::EtaBasis, vestibule_shared::RoomInfo,
        vestibule_shared::RoomState, vestibule_shared::RoomSettings, vestibule_shared::RoomSettingsPatch,
        vestibule_shared::OrderRequest, vestibule_shared::OrderReceipt, vestibule_shared::ErrorBody,
        vestibule_shared::entry::EntryClaims, vestibule_shared::entry::EntryTokenBody,
        vestibule_shared::entry::EntryReleased, vestibule_shared::draw::DrawInfo,
        vestibule_shared::draw::DrawState, vestibule_shared::draw::RoomNotOpen,
        vestibule_shared::entry::EntryReleased, vestibule_shared::bots::Challenge,
        vestibule_shared::bots::TopClients, vestibule_shared::bots::ClientJoins,
        vestibule_shared::admin_events::AdminEvent, vestibule_shared::admin_events::RoomFigures,
        vestibule_shared::admin_events::FigureHistory, vestibule_shared::admin_events::FigurePoint,
        vestibule_shared::admin_events::SaleSummary,
        vestibule_shared::admin_events::RoomLeader,
        vestibule_shared::auto_rate::OriginSignals, vestibule_shared::auto_rate::AutoRateFigures,
        vestibule_shared::auto_rate::AutoRateChange, vestibule_shared::auto_rate::AutoRateReason,
    )),
    modifiers(&AdminSecurity)
)]
pub struct ApiDoc;

/// Serves the finished document (built once, from the router's declarations), with the
/// `pattern` of `checkoutUrl` written for `cors_origins`, and `requireUserAssertion` limited to
/// `false` on a server without `--user-assertion-secret` (nobody could join such a room).
pub fn router(
    document: &utoipa::openapi::OpenApi,
    cors_origins: &[String],
    assertions: bool,
) -> Router<AppState> {
    let mut json = finished(document);
    // `checkoutUrl`'s rule depends on this server's storefront origins.
    let pattern = vestibule_shared::settings::checkout_url_pattern(cors_origins);
    for schema in ["RoomSettings", "RoomSettingsPatch", "CreateRoom"] {
        let property = &mut json["components"]["schemas"][schema]["properties"]["checkoutUrl"];
        if property.is_object() {
            property["pattern"] = json!(pattern);
        }
    }
    for schema in ["RoomSettingsPatch", "CreateRoom"] {
        let property =
            &mut json["components"]["schemas"][schema]["properties"]["requireUserAssertion"];
        if !assertions && property.is_object() {
            property["enum"] = json!([false]);
        }
    }
    // Serialized once and shared by every answer (a reference count, not a 110 KB copy): an
    // HTTP/2 peer that opens many streams for it and reads none holds one document, not one per
    // stream.
    let json = axum::body::Bytes::from(json.to_string());
    Router::new().route(
        "/api/v1/openapi.json",
        get(move || {
            let json = json.clone();
            async move { ([(header::CONTENT_TYPE, "application/json")], json).into_response() }
        }),
    )
}
