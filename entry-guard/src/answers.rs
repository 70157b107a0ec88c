//! What a shopper is answered: a refusal (303 to the waiting room, 403 JSON, or 503 with
//! `Retry-After`), the hand-off that sets the shop's cookie, and the `return` path rule.

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};
use axum::response::IntoResponse;

use crate::{codes, Guard};

/// Why a request was refused: an `entry_token_*` code and a message.
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

impl Refusal {
    pub(crate) fn token(code: &'static str, message: &str) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            code,
            message: message.to_owned(),
        }
    }

    pub(crate) fn unavailable(message: String) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: codes::CHECK_UNAVAILABLE,
            message,
        }
    }
}

impl Guard {
    /// Where a refused shopper joins: the waiting room with `room` and `return` (`back`).
    fn join_url(&self, back: &str) -> String {
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("room", &self.room)
            .append_pair("return", safe_return(back))
            .finish();
        let separator = if self.waiting_room.contains('?') {
            '&'
        } else {
            '?'
        };
        format!("{}{separator}{query}", self.waiting_room)
    }

    /// The answer to a refused request: a navigation refused a token goes to the waiting room
    /// (303); one whose token cannot be checked now gets an HTML page (503); anything else JSON.
    pub(crate) fn refuse(&self, navigation: bool, back: &str, refusal: Refusal) -> Response<Body> {
        let join = self.join_url(back);
        let unavailable = refusal.status == StatusCode::SERVICE_UNAVAILABLE;
        let mut response = match (navigation, unavailable) {
            (true, false) => (StatusCode::SEE_OTHER, [(header::LOCATION, join)]).into_response(),
            (true, true) => (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::response::Html(RETRY_PAGE),
            )
                .into_response(),
            (false, _) => {
                let body = serde_json::json!({
                    "error": refusal.code,
                    "message": refusal.message,
                    "joinUrl": join,
                });
                (refusal.status, axum::Json(body)).into_response()
            }
        };
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if unavailable {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(self.retry_after_secs),
            );
        }
        response
    }

    /// The hand-off: a posted token for the cookie, then `return`.
    pub(crate) async fn hand_off(&self, headers: &HeaderMap, body: &[u8]) -> Response<Body> {
        let is_form = headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .is_some_and(|kind| {
                kind.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            });
        if !is_form {
            let body = serde_json::json!({
                "error": "unsupported_media_type",
                "message": "send the body as Content-Type: application/x-www-form-urlencoded",
            });
            return (StatusCode::UNSUPPORTED_MEDIA_TYPE, axum::Json(body)).into_response();
        }
        let (mut token, mut back) = (String::new(), "/".to_owned());
        for (name, value) in form_urlencoded::parse(body) {
            match name.as_ref() {
                "entryToken" => token = value.trim().to_owned(),
                "return" => back = value.into_owned(),
                _ => {}
            }
        }
        let back = safe_return(&back).to_owned();
        // Verified offline only: an online consume uses the token on the page it opens.
        let claims = match self.verify(&token).await {
            Ok(claims) => claims,
            Err(refusal) => return self.refuse(true, &back, refusal),
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let max_age = claims.exp.saturating_sub(now).max(1);
        let cookie = format!(
            "{}={token}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax{}",
            self.cookie,
            if self.secure_cookie { "; Secure" } else { "" }
        );
        let mut response = StatusCode::SEE_OTHER.into_response();
        let out = response.headers_mut();
        if let (Ok(location), Ok(cookie)) =
            (HeaderValue::from_str(&back), HeaderValue::from_str(&cookie))
        {
            out.insert(header::LOCATION, location);
            out.insert(header::SET_COOKIE, cookie);
        }
        out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        // The page after it need not learn the waiting room's URL.
        out.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
        response
    }
}

/// What a browser is shown when its token cannot be checked now (503, `Retry-After`).
const RETRY_PAGE: &str = "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\">\
    <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
    <title>One moment</title><main><h1>One moment</h1>\
    <p>The waiting room cannot confirm your entry right now. Your place is kept.</p>\
    <p><a href=\"\">Try again</a></p></main></html>";

/// Whether a request is a browser navigation: GET/HEAD accepting `text/html`.
pub(crate) fn is_navigation(method: &Method, headers: &HeaderMap) -> bool {
    matches!(*method, Method::GET | Method::HEAD)
        && headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .any(|accept| accept.to_ascii_lowercase().contains("text/html"))
}

/// `candidate` when it is a clean same-origin path, else `/`: one leading `/` (not `//`), no
/// `\`, no control character, at most 2048 bytes, and a path part (before `?`/`#`) with no
/// escaped `/`, `\` or control character and no dot segment — the rule Vestibule's gate applies
/// to `return`.
pub fn safe_return(candidate: &str) -> &str {
    let path = candidate.split(['?', '#']).next().unwrap_or_default();
    let decoded: Vec<u8> = percent_decode(path.as_bytes());
    let decoded_ok = std::str::from_utf8(&decoded).is_ok_and(|text| {
        !text.chars().any(char::is_control)
            && !text.contains('\\')
            && text
                .split('/')
                .all(|segment| segment != "." && segment != "..")
    });
    let lower = path.to_ascii_lowercase();
    let safe = candidate.starts_with('/')
        && !candidate.starts_with("//")
        && !candidate.contains('\\')
        && !candidate.chars().any(char::is_control)
        && candidate.len() <= 2048
        && !lower.contains("%2f")
        && !lower.contains("%5c")
        && decoded_ok;
    if safe {
        candidate
    } else {
        "/"
    }
}

/// `bytes` with each `%XX` escape decoded once (a malformed escape stays as it is).
fn percent_decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(u8::try_from(high * 16 + low).unwrap_or(b'%'));
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_clean_same_origin_paths_are_returned_to() {
        for kept in ["/", "/checkout?size=42", "/checkout?x=%2F", "/a/b#top"] {
            assert_eq!(safe_return(kept), kept);
        }
        for evil in [
            "",
            "//evil.example",
            "/\\evil.example",
            "https://evil.example/",
            "/%2F%2Fevil.example",
            "/%5Cevil.example",
            "/%09/evil.example",
            "/%0a/x",
            "/%0B/x",
            "/%0d/x",
            "/checkout/../admin",
            "/\t/evil.example",
        ] {
            assert_eq!(safe_return(evil), "/", "{evil:?}");
        }
    }
}
