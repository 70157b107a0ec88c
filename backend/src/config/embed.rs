//! The embedding flags (issue 18, flattened into [`crate::Config`]): the checkout URL and the
//! token-sharing switch every room starts with. Like `--admission-rate`, they only seed a new
//! room; an operator changes them live with the admin `PATCH` (`checkoutUrl`,
//! `shareTokenWithEmbedder`).

use clap::Args;
use vestibule_shared::settings;

/// Where admitted shoppers go, and whether a storefront embedding the page gets the token.
#[derive(Debug, Clone, Default, Args)]
pub struct EmbedArgs {
    /// A new room's checkout URL: a path here (`/checkout?room=main`) or an http(s) URL on an
    /// origin of `--cors-origins`; unset = the page's demo checkout.
    #[arg(long, env = "VESTIBULE_CHECKOUT_URL")]
    pub checkout_url: Option<String>,

    /// A new room hands the entry token to the storefront embedding the page (`postMessage`
    /// to a `--cors-origins` origin, or the widget's `vestibule:admitted` event).
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

#[cfg(test)]
mod tests {
    use super::*;

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
