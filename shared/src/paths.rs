//! The API's paths, built from their parts: one spelling for clients, tests and the benchmark.
//!
//! Each function returns a server-absolute path (`/api/v1/...`) to join to a base URL. Parts are
//! inserted as given, not percent-encoded: room slugs (`[a-z0-9-]{1,64}`) and ticket ids
//! (22 URL-safe base64 characters) need none, and tests pass malformed ones on purpose. The
//! server declares the same routes as `#[utoipa::path(path = "...")]` literals in
//! `backend/src/http/`, with `{room}` and `{ticketId}` placeholders.

/// The API's root: every versioned path starts with it.
pub const API_V1: &str = "/api/v1";
/// The OpenAPI document (JSON).
pub const OPENAPI: &str = "/api/v1/openapi.json";
/// Liveness: 200 while the process serves.
pub const HEALTHZ: &str = "/healthz";
/// Readiness: 200 when the store answers, else 503.
pub const READYZ: &str = "/readyz";
/// Prometheus metrics (text format).
pub const METRICS: &str = "/metrics";

/// A room's public info: `GET /api/v1/rooms/{room}`.
pub fn room(room: &str) -> String {
    format!("{API_V1}/rooms/{room}")
}

/// A room's queue: `POST` joins it (`/api/v1/rooms/{room}/tickets`).
pub fn tickets(room: &str) -> String {
    format!("{API_V1}/rooms/{room}/tickets")
}

/// One ticket: `GET` polls it, `DELETE` leaves (`/api/v1/rooms/{room}/tickets/{ticketId}`).
///
/// Built by concatenation, not `format!`: it is every join's `Location` (a `format!` of string
/// arguments goes through the formatter's padding machinery, ~0.5k instructions).
pub fn ticket(room: &str, ticket_id: &str) -> String {
    [API_V1, "/rooms/", room, "/tickets/", ticket_id].concat()
}

/// A ticket's SSE stream: `/api/v1/rooms/{room}/tickets/{ticketId}/events`.
pub fn events(room: &str, ticket_id: &str) -> String {
    format!("{API_V1}/rooms/{room}/tickets/{ticket_id}/events")
}

/// A waiting ticket's presence without a poll (a hidden tab): `POST` →
/// `/api/v1/rooms/{room}/tickets/{ticketId}/heartbeat`.
pub fn heartbeat(room: &str, ticket_id: &str) -> String {
    format!("{API_V1}/rooms/{room}/tickets/{ticket_id}/heartbeat")
}

/// The demo checkout behind the entry-token layer: `POST /api/v1/rooms/{room}/orders`.
pub fn orders(room: &str) -> String {
    format!("{API_V1}/rooms/{room}/orders")
}

/// A room's live settings (bearer token): `GET`/`PATCH /api/v1/admin/rooms/{room}`.
pub fn admin_room(room: &str) -> String {
    format!("{API_V1}/admin/rooms/{room}")
}

/// The rooms (bearer token): `GET` lists, `POST` creates.
pub fn admin_rooms() -> String {
    format!("{API_V1}/admin/rooms")
}

/// A room's audit log of admin changes (bearer token).
pub fn admin_room_audit(room: &str) -> String {
    format!("{API_V1}/admin/rooms/{room}/audit")
}

/// Who is waiting in a room, paged (bearer token).
pub fn admin_room_waiters(room: &str) -> String {
    format!("{API_V1}/admin/rooms/{room}/waiters")
}

/// The last hour of a room's figures (bearer token).
pub fn admin_room_history(room: &str) -> String {
    format!("{API_V1}/admin/rooms/{room}/history")
}

/// A room's sale summary (bearer token).
pub fn admin_room_summary(room: &str) -> String {
    format!("{API_V1}/admin/rooms/{room}/summary")
}

/// Every room's figures once a second (bearer token, SSE): `GET /api/v1/admin/events`.
pub const ADMIN_EVENTS: &str = "/api/v1/admin/events";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_server_absolute_and_spelled_like_the_routes() {
        assert_eq!(room("main"), "/api/v1/rooms/main");
        assert_eq!(tickets("main"), "/api/v1/rooms/main/tickets");
        assert_eq!(ticket("main", "abc"), "/api/v1/rooms/main/tickets/abc");
        assert_eq!(events("vip", "abc"), "/api/v1/rooms/vip/tickets/abc/events");
        assert_eq!(orders("main"), "/api/v1/rooms/main/orders");
        assert_eq!(admin_room("main"), "/api/v1/admin/rooms/main");
        assert!(OPENAPI.starts_with(API_V1));
    }
}
