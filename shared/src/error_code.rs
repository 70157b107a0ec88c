//! The stable error codes of [`crate::ErrorBody::error`], with the HTTP status each comes with.
/// 400: the request body, path or a header is malformed.
pub const BAD_REQUEST: &str = "bad_request";
/// 400: a field has a value out of range.
pub const INVALID_FIELD: &str = "invalid_field";
/// 408: the request took longer than the server's request timeout.
pub const REQUEST_TIMEOUT: &str = "request_timeout";
/// 401: the admin API needs `Authorization: Bearer <admin token>`; the entry endpoints
/// for storefronts need `Authorization: Bearer <origin API key>`.
pub const UNAUTHORIZED: &str = "unauthorized";
/// 403: no `X-Entry-Token` on a protected path.
pub const TOKEN_MISSING: &str = "entry_token_missing";
/// 403: the entry token was never issued (or is malformed).
pub const TOKEN_UNKNOWN: &str = "entry_token_unknown";
/// 403: the entry token's TTL passed.
pub const TOKEN_EXPIRED: &str = "entry_token_expired";
/// 403: the entry token belongs to another room.
pub const TOKEN_WRONG_ROOM: &str = "entry_token_wrong_room";
/// 403: the entry token was already used (or its ticket left).
pub const TOKEN_USED: &str = "entry_token_used";
/// 403: the signed user assertion is malformed, expired or forged.
pub const USER_ASSERTION_INVALID: &str = "user_assertion_invalid";
/// 403: the room needs a signed `X-User-Assertion` on joins (one place per person).
pub const USER_ASSERTION_REQUIRED: &str = "user_assertion_required";
/// 403: the room needs `X-Proof-Of-Work` on joins (get a challenge first).
pub const POW_REQUIRED: &str = "proof_of_work_required";
/// 403: `X-Proof-Of-Work` is not `{challenge}:{nonce}` or the challenge is not one of ours.
pub const POW_MALFORMED: &str = "proof_of_work_malformed";
/// 403: the nonce's digest has fewer leading zero bits than the challenge asks.
pub const POW_WRONG: &str = "proof_of_work_wrong";
/// 403: the challenge is past its `expiresAtMs` (or its difficulty is below the room's).
pub const POW_EXPIRED: &str = "proof_of_work_expired";
/// 403: the challenge was issued for another room.
pub const POW_WRONG_ROOM: &str = "proof_of_work_wrong_room";
/// 409: the challenge was already used by a join (on any replica).
pub const POW_REUSED: &str = "proof_of_work_reused";
/// 403: the admin API is disabled or the bearer token is wrong.
pub const FORBIDDEN: &str = "forbidden";
/// 404: no such room.
pub const ROOM_NOT_FOUND: &str = "room_not_found";
/// 404: no such ticket in the room (never issued, or forgotten an hour after it ended).
pub const TICKET_NOT_FOUND: &str = "ticket_not_found";
/// 404: no such route.
pub const NOT_FOUND: &str = "not_found";
/// 405: the route exists but not with this method.
pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
/// 409: the request conflicts with the ticket's state.
pub const CONFLICT: &str = "conflict";
/// 409: a join before the room's pre-queue opens (`prequeueOpensAt`, or `opensAt` without a
/// pre-queue); the body also carries `opensAt` and `prequeueOpensAt` ([`crate::draw::RoomNotOpen`])
/// and `Retry-After` says when joins start.
pub const ROOM_NOT_OPEN: &str = "room_not_open";
/// 409: the entry token was already consumed by `…/entries/consume` (or an order), or its
/// session was released.
pub const TOKEN_CONSUMED: &str = "entry_token_consumed";
/// 409: the room is sold out: a join that would make a new ticket, or an order (or
/// `…/entries/consume`) with a live entry token when no unit of stock is left (the token is not
/// used up by the refusal). Tell it apart from every other refusal by this code.
pub const SOLD_OUT: &str = "sold_out";
/// 409: the room is closed to new joins (shoppers already in line keep their places).
pub const ROOM_CLOSED: &str = "room_closed";
/// 409: `POST /api/v1/admin/rooms` names a room that exists.
pub const ROOM_EXISTS: &str = "room_exists";
/// 409: `DELETE /api/v1/admin/rooms/{room}` without `?force=true` while tickets wait or are active.
pub const ROOM_NOT_EMPTY: &str = "room_not_empty";
/// 410: the room was deleted by an operator while this server ran: every ticket in it has ended.
pub const ROOM_DELETED: &str = "room_deleted";
/// 409: an `Idempotency-Key` already used for a different request (another body).
pub const IDEMPOTENCY_KEY_REUSED: &str = "idempotency_key_reused";
/// 412: `If-Match` names a version of the room settings that is no longer current.
pub const PRECONDITION_FAILED: &str = "precondition_failed";
/// 413: the request body is larger than allowed.
pub const PAYLOAD_TOO_LARGE: &str = "payload_too_large";
/// 431: the request's header fields are larger or more than allowed (32 KiB, 80 fields).
pub const HEADERS_TOO_LARGE: &str = "request_headers_too_large";
/// 415: the body is not `application/json`.
pub const UNSUPPORTED_MEDIA_TYPE: &str = "unsupported_media_type";
/// 429: a per-client abuse limit was hit (see `Retry-After`).
pub const RATE_LIMITED: &str = "rate_limited";
/// 503: the store is unreachable (see `Retry-After`); the request surely changed nothing.
pub const STORE_UNAVAILABLE: &str = "store_unavailable";
/// 504: the store did not confirm a change in time (see `Retry-After`): it may or may not
/// have happened. Re-read before retrying, or retry with the same `Idempotency-Key`.
pub const STORE_TIMEOUT: &str = "store_timeout";
/// 500: a fault of Vestibule's own; never caused by client input.
pub const INTERNAL: &str = "internal";
/// 502 (gate mode): the storefront behind the gate could not be reached.
pub const UPSTREAM_UNAVAILABLE: &str = "upstream_unavailable";
/// 504 (gate mode): the storefront did not answer within `--upstream-timeout-secs`.
pub const UPSTREAM_TIMEOUT: &str = "upstream_timeout";

/// Every code above, for documents and clients that list them.
pub const ALL: &[&str] = &[
    BAD_REQUEST,
    INVALID_FIELD,
    REQUEST_TIMEOUT,
    UNAUTHORIZED,
    TOKEN_MISSING,
    TOKEN_UNKNOWN,
    TOKEN_EXPIRED,
    TOKEN_WRONG_ROOM,
    TOKEN_USED,
    USER_ASSERTION_INVALID,
    USER_ASSERTION_REQUIRED,
    POW_REQUIRED,
    POW_MALFORMED,
    POW_WRONG,
    POW_EXPIRED,
    POW_WRONG_ROOM,
    POW_REUSED,
    FORBIDDEN,
    ROOM_NOT_FOUND,
    TICKET_NOT_FOUND,
    NOT_FOUND,
    METHOD_NOT_ALLOWED,
    CONFLICT,
    ROOM_NOT_OPEN,
    TOKEN_CONSUMED,
    IDEMPOTENCY_KEY_REUSED,
    PRECONDITION_FAILED,
    PAYLOAD_TOO_LARGE,
    HEADERS_TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
    RATE_LIMITED,
    STORE_UNAVAILABLE,
    STORE_TIMEOUT,
    INTERNAL,
    UPSTREAM_UNAVAILABLE,
    UPSTREAM_TIMEOUT,
    SOLD_OUT,
    ROOM_CLOSED,
    ROOM_EXISTS,
    ROOM_NOT_EMPTY,
    ROOM_DELETED,
];
