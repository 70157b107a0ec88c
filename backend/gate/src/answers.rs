//! What the gate answers itself instead of the origin: refusals (303 to the waiting room for a
//! browser, 403 JSON with `joinUrl` for anything else) and faults (502/503/504, JSON for API
//! clients, a small HTML page for browsers). Never cached.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde_json::json;
use vestibule_shared::error_code;

use vestibule_http::entry_cookie::cleared_cookie;

/// A refused request for `room`: a browser navigation gets `303 See Other` to `join_url`,
/// anything else `403 {"error": code, "message": …, "joinUrl": …}`. With `clear_cookie`, the
/// room's session cookie (which held the refused token) is deleted.
pub fn refusal(
    room: &str,
    code: &str,
    message: &str,
    join_url: &str,
    navigation: bool,
    clear_cookie: bool,
) -> Response {
    let mut response = if navigation {
        (StatusCode::SEE_OTHER, [(header::LOCATION, join_url)]).into_response()
    } else {
        let body = json!({"error": code, "message": message, "joinUrl": join_url});
        (StatusCode::FORBIDDEN, axum::Json(body)).into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if clear_cookie {
        if let Some(value) = cleared_cookie(room) {
            headers.insert(header::SET_COOKIE, value);
        }
    }
    response
}

/// A fault answered by the gate (`status` 404, 502, 503 or 504): the JSON error body, or for a
/// browser navigation a small HTML page saying the same; `Retry-After: retry_after_secs` on
/// 502/503/504.
pub fn fault(
    status: StatusCode,
    code: &'static str,
    message: &str,
    navigation: bool,
    retry_after_secs: u64,
) -> Response {
    let mut response = if navigation {
        let title = match code {
            error_code::UPSTREAM_TIMEOUT => "The shop is slow to answer",
            error_code::UPSTREAM_UNAVAILABLE => "The shop is not answering",
            _ if status.is_server_error() => "The waiting room is busy",
            _ if status == StatusCode::BAD_REQUEST => "Bad request",
            _ => "Not found",
        };
        let page = format!(
            "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
             <title>{title}</title><main><h1>{title}</h1><p>{message}.</p>\
             <p><a href=\"\">Try again</a></p></main></html>",
            // A message may quote part of the request's path.
            message = html_escape::encode_safe(message)
        );
        (status, Html(page)).into_response()
    } else {
        vestibule_http::error::error_response(status, code, message.to_owned())
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if status.is_server_error() {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_browser_is_sent_to_the_waiting_room_and_an_api_client_told_where_it_is() {
        let join = "/_vestibule/?room=main&return=%2Fcheckout";
        let browser = refusal("main", "entry_token_missing", "m", join, true, false);
        assert_eq!(browser.status(), StatusCode::SEE_OTHER);
        assert_eq!(browser.headers()[header::LOCATION], join);
        let api = refusal("main", "entry_token_expired", "m", join, false, true);
        assert_eq!(api.status(), StatusCode::FORBIDDEN);
        let cleared = api.headers()[header::SET_COOKIE].to_str().unwrap();
        assert!(cleared.starts_with("vestibule_entry_main=;") && cleared.contains("Max-Age=0"));
    }

    #[tokio::test]
    async fn a_path_quoted_in_a_page_cannot_inject_markup() {
        let page = fault(
            StatusCode::NOT_FOUND,
            "room_not_found",
            "no room named \"<script>x</script>\"",
            true,
            2,
        );
        let body = axum::body::to_bytes(page.into_body(), 10_000)
            .await
            .unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(
            !text.contains("<script>") && text.contains("&lt;script&gt;"),
            "{text}"
        );
    }

    #[test]
    fn faults_carry_retry_after_and_html_only_for_browsers() {
        let page = fault(
            StatusCode::BAD_GATEWAY,
            "upstream_unavailable",
            "down",
            true,
            2,
        );
        assert!(page.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html"));
        assert_eq!(page.headers()[header::RETRY_AFTER], "2");
        let json = fault(
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
            "slow",
            false,
            2,
        );
        assert_eq!(json.headers()[header::CONTENT_TYPE], "application/json");
    }
}
