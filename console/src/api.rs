//! The admin API calls of the console, all same-origin: the console lives at `{base}console/`
//! and the API at `{base}api/v1/` (any mount prefix, e.g. gate mode's `/_vestibule/`). Every
//! call sends the admin token (kept in `sessionStorage`) as `Authorization: Bearer …`.

use gloo_net::http::{Request, RequestBuilder};
use leptos::prelude::window;
use serde_json::Value;

use crate::i18n::{t, Lang, Text};

/// Where the token is kept (this tab only: `sessionStorage`).
const TOKEN_KEY: &str = "vestibule-console:admin-token";

/// The header a change answers with: the ids of the audit entries it made (comma-separated).
pub const AUDIT_IDS_HEADER: &str = "x-audit-ids";

/// Why a call did not give the expected answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The server answered with an error status.
    Status {
        /// HTTP status, e.g. 409.
        status: u16,
        /// The JSON error code (`room_exists`, …), empty when the body was not the error shape.
        code: String,
        /// The server's message.
        message: String,
    },
    /// No answer (offline, server down).
    Network,
}

impl ApiError {
    /// 401 or 403: the token is missing or wrong; the console signs out.
    pub fn is_auth(&self) -> bool {
        matches!(
            self,
            Self::Status {
                status: 401 | 403,
                ..
            }
        )
    }

    /// The error code, e.g. `"room_not_empty"`.
    pub fn code(&self) -> &str {
        match self {
            Self::Status { code, .. } => code,
            Self::Network => "",
        }
    }

    /// One line for the operator.
    pub fn describe(&self, lang: Lang) -> String {
        match self {
            Self::Status {
                status: 404, code, ..
            } if code.is_empty() || code == "not_found" => {
                format!(
                    "{}: {}",
                    t(lang, Text::Failed),
                    t(lang, Text::NotOnThisServer)
                )
            }
            Self::Status {
                status,
                code,
                message,
            } => format!(
                "{} (HTTP {status} {code}): {message}",
                t(lang, Text::Failed)
            ),
            Self::Network => format!("{}: network", t(lang, Text::Failed)),
        }
    }
}

/// A successful answer: its JSON body (`Null` when empty), `ETag` and audit ids.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// The body.
    pub body: Value,
    /// The `ETag` header (the settings' version).
    pub etag: Option<String>,
    /// The audit entries the change made ([`AUDIT_IDS_HEADER`]).
    pub audit_ids: Vec<String>,
}

/// The base the console was loaded from, without its own folder: `/console/` → `/`,
/// `/_vestibule/console/` → `/_vestibule/`.
pub fn site_base(pathname: &str) -> String {
    let folder = match pathname.rfind('/') {
        Some(last) => &pathname[..=last],
        None => "/",
    };
    folder.strip_suffix("console/").unwrap_or(folder).to_owned()
}

/// `{base}api/v1/{rest}`.
pub fn api_url(rest: &str) -> String {
    let pathname = window().location().pathname().unwrap_or_default();
    format!("{}api/v1/{rest}", site_base(&pathname))
}

fn storage() -> Option<web_sys::Storage> {
    window().session_storage().ok().flatten()
}

/// The admin token of this tab, if signed in.
pub fn stored_token() -> Option<String> {
    storage()?
        .get_item(TOKEN_KEY)
        .ok()
        .flatten()
        .filter(|token| !token.is_empty())
}

/// Keeps (or, with `None`, forgets) the admin token for this tab.
pub fn store_token(token: Option<&str>) {
    if let Some(storage) = storage() {
        let _ = match token {
            Some(token) => storage.set_item(TOKEN_KEY, token),
            None => storage.remove_item(TOKEN_KEY),
        };
    }
}

fn authorized(request: RequestBuilder) -> RequestBuilder {
    let request = request.header("Accept", "application/json");
    match stored_token() {
        Some(token) => request.header("Authorization", &format!("Bearer {token}")),
        None => request,
    }
}

/// One call: `method` on `{base}api/v1/{rest}` with an optional JSON body.
///
/// # Errors
/// [`ApiError::Status`] for any non-2xx answer, [`ApiError::Network`] without an answer.
pub async fn call(method: &str, rest: &str, body: Option<&Value>) -> Result<Answer, ApiError> {
    exchange(method, rest, body, None).await
}

/// [`call`] with a JSON body and `If-Match: <etag>` when one is known (412 when the settings
/// changed since).
///
/// # Errors
/// As [`call`].
pub async fn call_if_match(
    method: &str,
    rest: &str,
    body: &Value,
    etag: Option<&str>,
) -> Result<Answer, ApiError> {
    exchange(method, rest, Some(body), etag).await
}

async fn exchange(
    method: &str,
    rest: &str,
    body: Option<&Value>,
    etag: Option<&str>,
) -> Result<Answer, ApiError> {
    let url = api_url(rest);
    let builder = match method {
        "POST" => Request::post(&url),
        "PATCH" => Request::patch(&url),
        "DELETE" => Request::delete(&url),
        _ => Request::get(&url),
    };
    let mut builder = authorized(builder).cache(web_sys::RequestCache::NoStore);
    if let Some(etag) = etag {
        builder = builder.header("If-Match", etag);
    }
    let sent = match body {
        Some(body) => {
            builder
                .json(body)
                .map_err(|_| ApiError::Network)?
                .send()
                .await
        }
        None => builder.send().await,
    };
    let response = sent.map_err(|_| ApiError::Network)?;
    let text = response.text().await.unwrap_or_default();
    let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if !response.ok() {
        return Err(ApiError::Status {
            status: response.status(),
            code: json["error"].as_str().unwrap_or_default().to_owned(),
            message: json["message"].as_str().unwrap_or_default().to_owned(),
        });
    }
    let headers = response.headers();
    Ok(Answer {
        body: json,
        etag: headers.get("etag"),
        audit_ids: headers
            .get(AUDIT_IDS_HEADER)
            .map(|ids| {
                ids.split(',')
                    .map(str::trim)
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::site_base;

    #[test]
    fn the_api_is_beside_the_console_folder() {
        assert_eq!(site_base("/console/"), "/");
        assert_eq!(site_base("/console/index.html"), "/");
        assert_eq!(site_base("/_vestibule/console/"), "/_vestibule/");
        assert_eq!(site_base("/"), "/");
    }
}
