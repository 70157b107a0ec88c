//! The HTTP edge's one error type, mapped to the JSON body `{"error": code, "message": …}`.
//!
//! Also the extractor wrappers [`Json`] and [`Path`], whose rejections become [`ApiError`] so that
//! bad input gets the same JSON shape as every other error, the [`json_error_bodies`]
//! middleware that gives a JSON body to errors made by layers (405, 408, 413 …), and
//! [`log_errors`], the one place errors are logged.

use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use vestibule_shared::{error_code, ErrorBody};

use crate::observe::AnswerCode;
use vestibule_store::StoreError;

/// Every error an API request can end in.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 `bad_request`: malformed body, path or header.
    #[error("{0}")]
    BadRequest(String),
    /// 400 `invalid_field`: a well-formed value out of range.
    #[error("{0}")]
    InvalidField(String),
    /// 401 `unauthorized`: the admin API needs a bearer token.
    #[error("this endpoint needs Authorization: Bearer <admin token>")]
    Unauthorized,
    /// 401 `unauthorized`: the storefront's entry endpoints need the origin API key.
    #[error("this endpoint needs Authorization: Bearer <origin API key>")]
    OriginUnauthorized,
    /// 403 `forbidden`: wrong admin token, or the admin API is off.
    #[error("{0}")]
    Forbidden(String),
    /// 403 `entry_token_*`: the entry token layer refused the request.
    #[error("{message}")]
    EntryToken {
        /// One of the `entry_token_*` codes of [`error_code`].
        code: &'static str,
        /// What was wrong.
        message: String,
    },
    /// 403 `user_assertion_invalid`.
    #[error("{0}")]
    UserAssertion(String),
    /// A join refused by the room's bot defences (docs/bots.md): 403
    /// `user_assertion_required` or a `proof_of_work_*` code (409 reused, else 403).
    #[error("{message}")]
    JoinRefused {
        /// One of the codes of [`error_code`].
        code: &'static str,
        /// What the client should do.
        message: &'static str,
    },
    /// 404 `room_not_found`.
    #[error("no room named {0:?}")]
    RoomNotFound(String),
    /// 409 `room_exists`: a create names a room that exists.
    #[error("a room named {0:?} exists")]
    RoomExists(String),
    /// 409 `room_not_empty`: a delete without `?force=true` while tickets wait or are active.
    #[error("room {room:?} has {waiting} waiting and {active} active; delete with ?force=true to end their tickets")]
    RoomNotEmpty {
        /// Room slug.
        room: String,
        /// Shoppers waiting.
        waiting: u64,
        /// Active users.
        active: u64,
    },
    /// 410 `room_deleted`: an operator deleted the room while this server ran.
    #[error("room {0:?} was deleted by an operator: every ticket in it has ended")]
    RoomDeleted(String),
    /// 404 `ticket_not_found`.
    #[error("no such ticket in room {0}")]
    TicketNotFound(String),
    /// 404 `not_found`: no such route.
    #[error("no such endpoint")]
    NotFound,
    /// 405 `method_not_allowed`.
    #[error("this endpoint does not take that method")]
    MethodNotAllowed,
    /// 409 `conflict`.
    #[error("{0}")]
    Conflict(String),
    /// 409 `sold_out`: the room is sold out (a new join), or no unit is left for an order.
    #[error("{0}")]
    SoldOut(String),
    /// 409 `room_closed`: the room is closed to new joins.
    #[error("{0}")]
    RoomClosed(String),
    /// 409 `entry_token_consumed`: the entry token was already used or its session released.
    #[error("{0}")]
    EntryConsumed(String),
    /// 409 `idempotency_key_reused`: the key was used for another request.
    #[error("{0}")]
    IdempotencyKeyReused(String),
    /// 412 `precondition_failed`: `If-Match` names a settings version that is not current.
    #[error("If-Match names settings version {expected}, but the version in force is {current}; read the room again")]
    PreconditionFailed {
        /// The version the client sent.
        expected: u64,
        /// The version in force.
        current: u64,
    },
    /// 413 `payload_too_large`.
    #[error("the request body is larger than this server accepts")]
    PayloadTooLarge,
    /// 431 `request_headers_too_large`: more header bytes or fields than
    /// [`MAX_HEADER_BYTES`] / [`MAX_HEADER_FIELDS`].
    #[error("the request's header fields are too large: at most {MAX_HEADER_FIELDS} fields and {MAX_HEADER_BYTES} bytes (each field counted as name + value + 32, RFC 7541 §4.1)")]
    HeadersTooLarge,
    /// 415 `unsupported_media_type`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 429 `rate_limited`, with `Retry-After`.
    #[error("too many requests from this client; retry after {retry_after_secs} s")]
    RateLimited {
        /// Seconds to wait.
        retry_after_secs: u64,
    },
    /// 503 `store_unavailable`: the store was not reached, nothing changed; `Retry-After` is
    /// added by the `retry_after` layer.
    #[error("the waiting room's store is unreachable; nothing was changed, retry later")]
    StoreUnavailable {
        /// What failed (logged, not sent).
        #[source]
        source: StoreError,
    },
    /// 504 `store_timeout`: a change was sent to the store and not confirmed in time, so it may
    /// or may not have happened; `Retry-After` is added by the `retry_after` layer.
    #[error(
        "the waiting room's store did not confirm this change in time: it may or may not have \
         happened; read the resource again before retrying, or retry with the same \
         Idempotency-Key"
    )]
    StoreTimeout {
        /// What failed (logged, not sent).
        #[source]
        source: StoreError,
    },
    /// 500 `internal`: a fault of our own; logged in full, answered generically.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl ApiError {
    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) | Self::InvalidField(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized | Self::OriginUnauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) | Self::EntryToken { .. } | Self::UserAssertion(_) => {
                StatusCode::FORBIDDEN
            }
            Self::JoinRefused { code, .. } => match *code {
                error_code::POW_REUSED => StatusCode::CONFLICT,
                _ => StatusCode::FORBIDDEN,
            },
            Self::RoomNotFound(_) | Self::TicketNotFound(_) | Self::NotFound => {
                StatusCode::NOT_FOUND
            }
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict(_)
            | Self::EntryConsumed(_)
            | Self::IdempotencyKeyReused(_)
            | Self::SoldOut(_)
            | Self::RoomClosed(_)
            | Self::RoomExists(_)
            | Self::RoomNotEmpty { .. } => StatusCode::CONFLICT,
            Self::RoomDeleted(_) => StatusCode::GONE,
            Self::PreconditionFailed { .. } => StatusCode::PRECONDITION_FAILED,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::StoreUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::StoreTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable code of the JSON body.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => error_code::BAD_REQUEST,
            Self::InvalidField(_) => error_code::INVALID_FIELD,
            Self::Unauthorized | Self::OriginUnauthorized => error_code::UNAUTHORIZED,
            Self::Forbidden(_) => error_code::FORBIDDEN,
            Self::EntryToken { code, .. } | Self::JoinRefused { code, .. } => code,
            Self::UserAssertion(_) => error_code::USER_ASSERTION_INVALID,
            Self::RoomNotFound(_) => error_code::ROOM_NOT_FOUND,
            Self::TicketNotFound(_) => error_code::TICKET_NOT_FOUND,
            Self::NotFound => error_code::NOT_FOUND,
            Self::MethodNotAllowed => error_code::METHOD_NOT_ALLOWED,
            Self::Conflict(_) => error_code::CONFLICT,
            Self::SoldOut(_) => error_code::SOLD_OUT,
            Self::RoomClosed(_) => error_code::ROOM_CLOSED,
            Self::RoomExists(_) => error_code::ROOM_EXISTS,
            Self::RoomNotEmpty { .. } => error_code::ROOM_NOT_EMPTY,
            Self::RoomDeleted(_) => error_code::ROOM_DELETED,
            Self::EntryConsumed(_) => error_code::TOKEN_CONSUMED,
            Self::IdempotencyKeyReused(_) => error_code::IDEMPOTENCY_KEY_REUSED,
            Self::PreconditionFailed { .. } => error_code::PRECONDITION_FAILED,
            Self::PayloadTooLarge => error_code::PAYLOAD_TOO_LARGE,
            Self::HeadersTooLarge => error_code::HEADERS_TOO_LARGE,
            Self::UnsupportedMediaType(_) => error_code::UNSUPPORTED_MEDIA_TYPE,
            Self::RateLimited { .. } => error_code::RATE_LIMITED,
            Self::StoreUnavailable { .. } => error_code::STORE_UNAVAILABLE,
            Self::StoreTimeout { .. } => error_code::STORE_TIMEOUT,
            Self::Internal(_) => error_code::INTERNAL,
        }
    }
}

impl From<StoreError> for ApiError {
    /// Not reached → 503, sent but unconfirmed → 504, anything else → 500.
    fn from(source: StoreError) -> Self {
        match source {
            StoreError::Unavailable(_) | StoreError::RoomLost(_) => {
                Self::StoreUnavailable { source }
            }
            StoreError::OutcomeUnknown(_) => Self::StoreTimeout { source },
            StoreError::Corrupt(_) => Self::Internal(anyhow::Error::new(source)),
            StoreError::Refused(refusal) => Self::refused_join(refusal),
            StoreError::RoomGone(room) => Self::RoomDeleted(room),
        }
    }
}

impl ApiError {
    /// 409 `sold_out` or `room_closed` for a join the room's sale refused.
    pub fn refused_join(refusal: vestibule_store::JoinRefusal) -> Self {
        match refusal {
            vestibule_store::JoinRefusal::SoldOut => {
                Self::SoldOut("this room is sold out: no new places are given".into())
            }
            vestibule_store::JoinRefusal::Closed => Self::RoomClosed(
                "this room is closed to new shoppers; those already in line keep their places"
                    .into(),
            ),
        }
    }
}

/// The JSON error response for a status and message.
pub fn error_response(status: StatusCode, code: &'static str, message: String) -> Response {
    let body = ErrorBody {
        error: code.to_owned(),
        message,
    };
    let mut response = (status, axum::Json(body)).into_response();
    response.extensions_mut().insert(AnswerCode(code));
    response
}

/// The error a response was made from, kept in the response's extensions so that one layer,
/// [`log_errors`], logs every error (a handler or extractor only returns it).
#[derive(Debug, Clone)]
pub struct ErrorReport(pub Arc<ApiError>);

impl IntoResponse for ApiError {
    /// The JSON body (`ErrorBody`), `Retry-After` for 429, and the error itself as an
    /// [`ErrorReport`] extension. Logs nothing: [`log_errors`] does.
    fn into_response(self) -> Response {
        let mut response = error_response(self.status(), self.code(), self.to_string());
        if let Self::RateLimited { retry_after_secs } = &self {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
        }
        response
            .extensions_mut()
            .insert(ErrorReport(Arc::new(self)));
        response
    }
}

/// Logs every error answer once, at a level that fits who must act: 5xx at `error` (our fault:
/// `internal`, with its cause chain) or `warn` (store outages, with the store's reason), 4xx at
/// `debug` (the client's mistake). Reads the [`ErrorReport`] an [`ApiError`] leaves on its
/// response; errors made by layers (408, 413 …) are logged by status alone. Each line carries
/// the request's method and redacted path (`crate::redacted_path`) as fields of its own:
/// the per-request span is at `debug`, so at the default level no span is made or formatted.
pub async fn log_errors(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let uri = request.uri().clone();
    let response = next.run(request).await;
    log_error_answer(&response, &method, uri.path());
    response
}

/// What [`log_errors`] does to one answer of `method` `path` (the router's answer layer calls
/// it directly). The path is redacted only when a line is written.
pub fn log_error_answer(response: &Response, method: &Method, path: &str) {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return;
    }
    let status = status.as_u16();
    let path = || crate::redacted_path(path);
    match response
        .extensions()
        .get::<ErrorReport>()
        .map(|report| &*report.0)
    {
        Some(ApiError::Internal(error)) => {
            tracing::error!(status, %method, path = %path(), error = format!("{error:#}"), "internal error");
        }
        Some(ApiError::StoreUnavailable { source } | ApiError::StoreTimeout { source }) => {
            tracing::warn!(status, %method, path = %path(), error = %source, "store call failed");
        }
        Some(error) => {
            tracing::debug!(status, %method, path = %path(), code = error.code(), message = %error, "request refused");
        }
        None if status >= 500 => tracing::error!(status, %method, path = %path(), "server error"),
        None => tracing::debug!(status, %method, path = %path(), "request refused"),
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => Self::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                Self::UnsupportedMediaType("send the body as Content-Type: application/json".into())
            }
            _ => Self::BadRequest(rejection.body_text()),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        Self::BadRequest(rejection.body_text())
    }
}

/// `axum::Json` whose rejection is an [`ApiError`] (JSON body, right status).
#[derive(Debug, Clone, Copy, Default, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct Json<T>(pub T);

impl<T: serde::Serialize> IntoResponse for Json<T> {
    /// `axum::Json`'s answer, written into a buffer sized for a ticket's status (~300 bytes) at
    /// once: axum's starts at 128 bytes and grew twice for every poll (~1.4k instructions of a
    /// poll's ~32k, callgrind).
    fn into_response(self) -> Response {
        let mut body = Vec::with_capacity(512);
        match serde_json::to_writer(&mut body, &self.0) {
            Ok(()) => {
                let length = HeaderValue::from(body.len());
                let mut response = Response::new(axum::body::Body::from(body));
                let headers = response.headers_mut();
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                headers.insert(header::CONTENT_LENGTH, length);
                response
            }
            Err(error) => ApiError::Internal(anyhow::Error::new(error)).into_response(),
        }
    }
}

/// `axum::extract::Path` whose rejection is an [`ApiError`].
#[derive(Debug, Clone, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);

/// Adds `Retry-After: secs` to every 503 and 504 that has none (store outages: the handler does
/// not know the configured pause).
pub async fn retry_after(
    axum::extract::State(secs): axum::extract::State<u64>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = next.run(request).await;
    add_retry_after(&mut response, secs);
    response
}

/// What [`retry_after`] does to one answer (the router's answer layer calls it directly).
pub fn add_retry_after(response: &mut Response, secs: u64) {
    let status = response.status();
    if (status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::GATEWAY_TIMEOUT)
        && !response.headers().contains_key(header::RETRY_AFTER)
    {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
}

/// Gives every error response without a JSON body one (errors made by layers and by axum itself:
/// 405, 408, 413, …), so clients only ever see the one error shape.
pub async fn json_error_bodies(request: Request, next: Next) -> Response {
    json_error_body(next.run(request).await)
}

/// What [`json_error_bodies`] does to one answer (the router's answer layer calls it directly).
pub fn json_error_body(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/json"));
    if is_json {
        return response;
    }
    let (code, message) = match status {
        StatusCode::METHOD_NOT_ALLOWED => (
            error_code::METHOD_NOT_ALLOWED,
            "this endpoint does not take that method",
        ),
        StatusCode::REQUEST_TIMEOUT => (error_code::REQUEST_TIMEOUT, "the request took too long"),
        StatusCode::PAYLOAD_TOO_LARGE => (
            error_code::PAYLOAD_TOO_LARGE,
            "the request body is too large",
        ),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => (
            error_code::HEADERS_TOO_LARGE,
            "the request's header fields are too large",
        ),
        StatusCode::NOT_FOUND => (error_code::NOT_FOUND, "no such endpoint"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            error_code::UNSUPPORTED_MEDIA_TYPE,
            "unsupported content type",
        ),
        status if status.is_server_error() => (error_code::INTERNAL, "internal error"),
        _ => (error_code::BAD_REQUEST, "the request was not understood"),
    };
    let mut replaced = error_response(status, code, message.to_owned());
    for name in [header::RETRY_AFTER, header::ALLOW] {
        if let Some(value) = response.headers().get(&name) {
            replaced.headers_mut().insert(name, value.clone());
        }
    }
    replaced
}

/// Most bytes of a request's header fields this server reads, each field counted as its name,
/// its value and 32 (RFC 7541 §4.1, how HTTP/2 counts them), so that both protocols have the
/// same limit: nginx's default for a request's headers (`large_client_header_buffers 4 8k`).
/// The protocol layers' own limits sit above it (the server's connections), so a request between
/// the two gets this JSON answer over either protocol.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// Most header fields in one request, over either protocol: below hyper's HTTP/1.1 parser's
/// 100 (raising that would cost every request two allocations), so that 81–100 fields get this
/// JSON answer and only more than 100 get hyper's bare 431. Browsers send about 20.
pub const MAX_HEADER_FIELDS: usize = 80;

/// 431 when `headers` other than `Host` exceed [`MAX_HEADER_BYTES`] or [`MAX_HEADER_FIELDS`].
///
/// # Errors
/// [`ApiError::HeadersTooLarge`].
pub fn check_header_size(headers: &HeaderMap) -> Result<(), ApiError> {
    // `Host` is left out of both counts: over HTTP/2 it is the `:authority` pseudo-header, which
    // the application never sees, and the limits must be the same over both protocols.
    let fields = headers.len() - headers.get_all(header::HOST).iter().count();
    if fields > MAX_HEADER_FIELDS {
        return Err(ApiError::HeadersTooLarge);
    }
    let bytes: usize = headers
        .iter()
        .filter(|(name, _)| *name != header::HOST)
        .map(|(name, value)| name.as_str().len() + value.len() + 32)
        .sum();
    if bytes > MAX_HEADER_BYTES {
        return Err(ApiError::HeadersTooLarge);
    }
    Ok(())
}

/// 404 for paths no route serves.
pub async fn unknown_endpoint() -> ApiError {
    ApiError::NotFound
}

#[cfg(test)]
mod tests;
