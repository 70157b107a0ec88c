//! The embedding flags (flattened into [`crate::Config`]): the checkout URL and the
//! token-sharing switch every room starts with. Like `--admission-rate`, they only seed a new
//! room; an operator changes them live with the admin `PATCH` (`checkoutUrl`,
//! `shareTokenWithEmbedder`).

use clap::Args;
use vestibule_shared::settings;

/// Where admitted shoppers go, and whether a storefront embedding the page gets the token.
#[derive(Debug, Clone, Default, Args)]
pub struct EmbedArgs {
    /// Where a new room sends admitted shoppers.
    ///
    /// A path here (`/checkout?room=main`) or an http(s) URL on an origin of `--cors-origins`
    /// (room setting `checkoutUrl`); on another origin, the page hands the token to that shop
    /// (docs/storefront.md). Unset = in gate mode the room's first gated path, else the page's
    /// demo checkout.
    #[arg(long, env = "VESTIBULE_CHECKOUT_URL", value_name = "URL")]
    pub checkout_url: Option<String>,

    /// New rooms hand the entry token to the embedding shop.
    ///
    /// Through `postMessage` to a `--cors-origins` origin, or the widget's `vestibule:admitted`
    /// event (room setting `shareTokenWithEmbedder`).
    #[arg(
        long,
        env = "VESTIBULE_SHARE_TOKEN_WITH_EMBEDDER",
        default_value_t = false
    )]
    pub share_token_with_embedder: bool,
}

impl EmbedArgs {
    /// Checks `--checkout-url` against the storefront origins (`--cors-origins`).
    ///
    /// # Errors
    /// A one-line reason naming the flag.
    pub fn validate(&self, cors_origins: &[String]) -> Result<(), String> {
        match &self.checkout_url {
            Some(url) => settings::check_checkout_url(url, cors_origins)
                .map_err(|bounds| format!("--checkout-url {url:?} must be {bounds}")),
            None => Ok(()),
        }
    }
}

/// Checks one `--cors-origins` value: an http(s) origin spelled exactly as browsers send it in
/// `Origin` (lowercase ASCII host, punycode for IDN, no default port, no userinfo, path, query or
/// fragment). It is compared as spelled by CORS, `postMessage`, the checkout URL rule and
/// `frame-ancestors`, so anything else would silently never match, or widen the CSP (a space or
/// `*` adds a source, a `;` a directive).
///
/// # Errors
/// A one-line reason naming the flag, with the browser's spelling when there is one.
pub fn check_origin(origin: &str) -> Result<(), String> {
    let parsed = url::Url::parse(origin).ok().filter(|url| {
        matches!(url.scheme(), "http" | "https")
            && url.username().is_empty()
            && url.password().is_none()
    });
    match parsed.map(|url| url.origin().ascii_serialization()) {
        Some(serialized)
            if serialized == origin
                && origin
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-._:/[]".contains(c)) =>
        {
            Ok(())
        }
        Some(serialized) if serialized != "null" => Err(format!(
            "--cors-origins: {origin:?} must be an origin as browsers send it: {serialized:?}"
        )),
        _ => Err(format!(
            "--cors-origins: {origin:?} must look like https://shop.example (no path)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storefront_origins_are_spelled_as_browsers_send_them() {
        for good in [
            "https://shop.example",
            "http://127.0.0.1:8081",
            "https://[::1]:8443",
        ] {
            // (`https://shop.example.` is an origin of its own: it never matches `shop.example`.)
            assert_eq!(check_origin(good), Ok(()), "{good}");
        }
        for (bad, hint) in [
            ("https://shop.example *", None),
            ("https://shop.example;script-src", None),
            ("https://*.shop.example", None),
            ("https://user@shop.example", None),
            ("javascript:alert(1)", None),
            ("shop.example", None),
            ("https://Shop.Example", Some("\"https://shop.example\"")),
            ("https://shop.example:443", Some("\"https://shop.example\"")),
            ("https://shop.example/en", Some("\"https://shop.example\"")),
            ("https://bücher.example", Some("xn--bcher-kva")),
        ] {
            let reason = check_origin(bad).expect_err(bad);
            assert!(reason.starts_with("--cors-origins"), "{reason}");
            if let Some(hint) = hint {
                assert!(reason.contains(hint), "{bad}: {reason}");
            }
        }
    }

    #[test]
    fn the_checkout_url_flag_needs_a_configured_origin() {
        let shops = ["https://shop.example".to_owned()];
        let args = |url: &str| EmbedArgs {
            checkout_url: Some(url.to_owned()),
            share_token_with_embedder: false,
        };
        assert!(args("https://shop.example/checkout")
            .validate(&shops)
            .is_ok());
        assert!(args("/checkout").validate(&[]).is_ok());
        let refused = args("https://evil.example/").validate(&shops).unwrap_err();
        assert!(refused.starts_with("--checkout-url"), "{refused}");
        assert!(EmbedArgs::default().validate(&[]).is_ok());
    }
}
