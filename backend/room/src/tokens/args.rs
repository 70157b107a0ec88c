//! The flags of signed entry tokens and of the storefront's entry endpoints, flattened into
//! [`crate::Config`].

use std::path::PathBuf;

/// Entry-token signing and verification settings.
#[derive(Clone, clap::Args)]
pub struct TokenArgs {
    /// Ed25519 key (PKCS#8 PEM file) that signs entry tokens.
    ///
    /// The current key; its public half is published in the JWKS. Unset: a key is generated
    /// once and shared through the store (Redis key `vestibule:signing-key`, also on a cluster;
    /// `signing-key.pem` in `--data-dir`; memory with `--data-dir none`). Whoever can read that
    /// copy can mint tokens: use a file in production (`openssl genpkey -algorithm ed25519 -out
    /// key.pem`).
    #[arg(long, env = "VESTIBULE_SIGNING_KEY_FILE", value_name = "FILE")]
    pub signing_key_file: Option<PathBuf>,

    /// An earlier signing key, still accepted (repeatable).
    ///
    /// PEM: PKCS#8 private key or SPKI public key. Still published and accepted until tokens
    /// signed with it have expired, never used to sign (key rotation). Env: comma-separated
    /// paths.
    #[arg(
        long = "previous-signing-key-file",
        env = "VESTIBULE_PREVIOUS_SIGNING_KEY_FILES",
        value_delimiter = ',',
        value_name = "FILE",
        hide_short_help = true
    )]
    pub previous_signing_key_files: Vec<PathBuf>,

    /// The key that will sign next, accepted ahead of its use.
    ///
    /// PEM: PKCS#8 private key or SPKI public key. Published in the JWKS and accepted from now
    /// on, never used to sign, so that once any replica signs with it every replica and every
    /// verifier already knows it (rotation step 1 of 3, see docs/storefront.md, "Rotating the
    /// signing key").
    #[arg(
        long,
        env = "VESTIBULE_NEXT_SIGNING_KEY_FILE",
        value_name = "FILE",
        hide_short_help = true
    )]
    pub next_signing_key_file: Option<PathBuf>,

    /// The `iss` claim of entry tokens; verifiers check it.
    #[arg(
        long,
        env = "VESTIBULE_TOKEN_ISSUER",
        default_value = "vestibule",
        value_name = "ISS"
    )]
    pub token_issuer: String,

    /// The `aud` claim of entry tokens; verifiers check it.
    ///
    /// The storefront that accepts them.
    #[arg(
        long,
        env = "VESTIBULE_TOKEN_AUDIENCE",
        default_value = "storefront",
        value_name = "AUD"
    )]
    pub token_audience: String,

    /// Bearer key of the storefront's entry endpoints.
    ///
    /// For `…/entries/consume` and `…/entries/release`, ≥ 16 characters, never logged; unset =
    /// those endpoints answer 403 (release by the token's holder still works).
    #[arg(
        long,
        env = "VESTIBULE_ORIGIN_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub origin_api_key: Option<String>,
}

impl TokenArgs {
    /// Checks the values that clap cannot.
    ///
    /// # Errors
    /// A one-line reason naming the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.token_issuer.trim().is_empty() {
            return Err("--token-issuer must not be empty".into());
        }
        if self.token_audience.trim().is_empty() {
            return Err("--token-audience must not be empty".into());
        }
        if let Some(key) = &self.origin_api_key {
            if key.chars().count() < 16 {
                return Err("--origin-api-key must be at least 16 characters".into());
            }
        }
        Ok(())
    }
}

/// The origin API key is a secret: Debug (and so startup logs of the config) never shows it.
impl std::fmt::Debug for TokenArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenArgs")
            .field("signing_key_file", &self.signing_key_file)
            .field(
                "previous_signing_key_files",
                &self.previous_signing_key_files,
            )
            .field("next_signing_key_file", &self.next_signing_key_file)
            .field("token_issuer", &self.token_issuer)
            .field("token_audience", &self.token_audience)
            .field(
                "origin_api_key",
                &self.origin_api_key.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        tokens: TokenArgs,
    }

    #[test]
    fn the_origin_key_never_shows_in_debug_and_short_keys_are_refused() {
        let probe = Probe::parse_from([
            "x",
            "--origin-api-key",
            "origin-secret-0123456789",
            "--previous-signing-key-file",
            "a.pem",
            "--previous-signing-key-file",
            "b.pem",
        ]);
        let shown = format!("{:?}", probe.tokens);
        assert!(!shown.contains("origin-secret"), "{shown}");
        assert!(shown.contains("<redacted>"));
        assert_eq!(probe.tokens.previous_signing_key_files.len(), 2);
        assert!(probe.tokens.validate().is_ok());
        let short = Probe::parse_from(["x", "--origin-api-key", "short"]);
        assert!(short
            .tokens
            .validate()
            .unwrap_err()
            .contains("--origin-api-key"));
    }
}
