//! Gate mode's flags (flattened into [`crate::Config`]) and their validation.
//!
//! `--upstream` turns gate mode on; the other flags only matter with it (docs/DESIGN.md "Gate
//! mode"). [`GateConfig::validate`] gives a one-line reason naming the flag.

use std::time::Duration;

use clap::Args;

use super::rules::GateRule;

/// Where Vestibule's own routes live in gate mode unless `--mount-prefix` says otherwise.
pub const DEFAULT_MOUNT_PREFIX: &str = "/_vestibule/";

/// Paths that stay at the root in gate mode: health and metrics (for load balancers) and the
/// JWKS (where JWT libraries look for it; also served under the prefix).
pub const ROOT_PATHS: &[&str] = &["/healthz", "/readyz", "/metrics", "/.well-known/jwks.json"];

/// Gate mode: Vestibule in front of a storefront (the origin) as a reverse proxy.
#[derive(Debug, Clone, Default, Args)]
pub struct GateConfig {
    /// The storefront to proxy to; set = gate mode.
    ///
    /// `http://host[:port]` (no path). In gate mode Vestibule's page and API move under
    /// `--mount-prefix` and every other request goes to the origin (docs/storefront.md, "Put
    /// Vestibule in front of your store").
    #[arg(long, env = "VESTIBULE_UPSTREAM", value_name = "URL")]
    pub upstream: Option<String>,

    /// Where Vestibule's page and API live in gate mode.
    ///
    /// `/healthz`, `/readyz`, `/metrics` and `/.well-known/jwks.json` stay at the root (the keys
    /// under the prefix too). Path segments of `[A-Za-z0-9._~-]`, e.g. `/_vestibule/`.
    #[arg(
        long,
        env = "VESTIBULE_MOUNT_PREFIX",
        default_value = DEFAULT_MOUNT_PREFIX,
        value_name = "PREFIX"
    )]
    pub mount_prefix: String,

    /// A path that needs admission to a room (repeatable).
    ///
    /// `PATTERN=ROOM`, repeatable, or comma-separated in the environment: segments are literals,
    /// `*` (any one segment) or `{room}` (the room is that segment; `=ROOM` is then left out). A
    /// pattern matches the paths that start with its segments, e.g. `/checkout=main`,
    /// `/drops/*/buy=main`, `/rooms/{room}/checkout`. Segments match whole, but a literal also
    /// names itself with a format suffix (`/checkout=main` gates `/checkout.json`, which Rails
    /// and Spring route to the same action).
    #[arg(
        long = "gate",
        env = "VESTIBULE_GATES",
        value_delimiter = ',',
        value_name = "PATTERN=ROOM"
    )]
    pub gates: Vec<String>,

    /// Seconds the origin may take to answer (gate mode).
    ///
    /// To answer a request's headers, connect included; past it the shopper gets 504. An
    /// answer's body then streams for as long as it takes.
    #[arg(
        long,
        env = "VESTIBULE_UPSTREAM_TIMEOUT_SECS",
        default_value_t = 30,
        value_name = "SECS",
        help_heading = "Limits and timeouts"
    )]
    pub upstream_timeout_secs: u64,

    /// A second address serving `/metrics` alone, no token.
    ///
    /// A private interface for the scraper. In gate mode the main port's `/metrics`, on the
    /// storefront's own domain, needs the admin token.
    #[arg(
        long,
        env = "VESTIBULE_METRICS_BIND",
        value_name = "ADDR",
        help_heading = "Serving"
    )]
    pub metrics_bind: Option<std::net::SocketAddr>,
}

impl GateConfig {
    /// Whether gate mode is on.
    pub fn enabled(&self) -> bool {
        self.upstream.is_some()
    }

    /// The mount prefix with one leading and one trailing `/`, e.g. `/_vestibule/`.
    pub fn prefix(&self) -> String {
        format!("/{}/", self.mount_prefix.trim_matches('/'))
    }

    /// Where Vestibule's page lives: the mount prefix in gate mode, else `/` (the demo checkout
    /// link of a `TOKEN_ISSUED` answer starts here).
    pub fn page_base(&self) -> String {
        if self.upstream.is_some() {
            self.prefix()
        } else {
            "/".to_owned()
        }
    }

    /// A room's checkout in gate mode: the first path a `--gate` rule names for it alone
    /// (literal segments, `{room}` filled in; see [`GateRule::path_for`]). `None` outside gate
    /// mode or when no rule names one path (the page's demo checkout is used then).
    pub fn default_checkout(&self, room: &str) -> Option<String> {
        if !self.enabled() {
            return None;
        }
        self.rules().iter().find_map(|rule| rule.path_for(room))
    }

    /// The bound on the origin's answer (headers).
    pub fn upstream_timeout(&self) -> Duration {
        Duration::from_secs(self.upstream_timeout_secs)
    }

    /// The parsed gate rules (call after [`GateConfig::validate`]; invalid rules are left out).
    pub fn rules(&self) -> Vec<GateRule> {
        self.gates
            .iter()
            .filter_map(|text| GateRule::parse(text).ok())
            .collect()
    }

    /// Checks every gate flag against the configured `rooms`.
    ///
    /// # Errors
    /// A one-line reason naming the flag, e.g. `--upstream "ftp://x" must be http://host[:port]`.
    pub fn validate(&self, rooms: &[String]) -> Result<(), String> {
        let Some(upstream) = &self.upstream else {
            if !self.gates.is_empty() {
                return Err("--gate needs --upstream (gate mode)".into());
            }
            return Ok(());
        };
        upstream_authority(upstream)?;
        let prefix = self.mount_prefix.trim_matches('/');
        let well_formed = !prefix.is_empty()
            && prefix.split('/').all(|segment| {
                !segment.is_empty()
                    && segment
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._~-".contains(&b))
                    && segment != "."
                    && segment != ".."
            });
        if !well_formed || !self.mount_prefix.starts_with('/') {
            return Err(format!(
                "--mount-prefix {:?} must be a path like /_vestibule/ (segments of A-Z a-z 0-9 . _ ~ -)",
                self.mount_prefix
            ));
        }
        if ROOT_PATHS.contains(&format!("/{prefix}").as_str()) {
            return Err(format!(
                "--mount-prefix {:?} is taken by a root path",
                self.mount_prefix
            ));
        }
        if !(1..=3600).contains(&self.upstream_timeout_secs) {
            return Err(format!(
                "--upstream-timeout-secs must be 1–3600, got {}",
                self.upstream_timeout_secs
            ));
        }
        let mount = self.prefix();
        for text in &self.gates {
            let rule =
                GateRule::parse(text).map_err(|reason| format!("--gate {text:?}: {reason}"))?;
            if let Some(room) = rule.fixed_room() {
                if !rooms.iter().any(|r| r == room) {
                    return Err(format!(
                        "--gate {text:?} names room {room:?}, which is not in --rooms"
                    ));
                }
            }
            if rule.covers(&mount) {
                return Err(format!(
                    "--gate {text:?} would gate Vestibule's own {mount} (shoppers could never join)"
                ));
            }
        }
        Ok(())
    }
}

/// The `host[:port]` of an upstream URL `http://host[:port][/]`.
///
/// # Errors
/// A one-line reason for anything else (another scheme, a path, a query, credentials).
pub fn upstream_authority(text: &str) -> Result<String, String> {
    let bad = |why: &str| format!("--upstream {text:?} must be http://host[:port] ({why})");
    let url = url::Url::parse(text).map_err(|error| bad(&error.to_string()))?;
    if url.scheme() != "http" {
        return Err(bad("only http:// origins are supported"));
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(bad("no path, query or fragment"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("no credentials"));
    }
    let host = url.host_str().ok_or_else(|| bad("no host"))?;
    Ok(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(upstream: Option<&str>, prefix: &str, gates: &[&str]) -> GateConfig {
        GateConfig {
            upstream: upstream.map(str::to_owned),
            mount_prefix: prefix.into(),
            gates: gates.iter().map(|g| (*g).to_owned()).collect(),
            upstream_timeout_secs: 30,
            metrics_bind: None,
        }
    }

    #[test]
    fn a_good_gate_configuration_passes() {
        let rooms = ["main".to_owned(), "drop".to_owned()];
        let config = gate(
            Some("http://127.0.0.1:3000"),
            "/_vestibule/",
            &[
                "/checkout=main",
                "/drops/*/buy=drop",
                "/rooms/{room}/checkout",
            ],
        );
        config.validate(&rooms).unwrap();
        assert_eq!(config.rules().len(), 3);
        assert_eq!(gate(None, "/shop-queue", &[]).prefix(), "/shop-queue/");
        assert_eq!(
            upstream_authority("http://origin.internal:8081/").unwrap(),
            "origin.internal:8081"
        );
    }

    #[test]
    fn bad_flags_are_refused_with_the_flag_named() {
        let rooms = ["main".to_owned()];
        for (config, flag) in [
            (gate(Some("ftp://x"), "/_v/", &[]), "--upstream"),
            (
                gate(Some("https://shop.example"), "/_v/", &[]),
                "--upstream",
            ),
            (
                gate(Some("http://shop.example/app"), "/_v/", &[]),
                "--upstream",
            ),
            (
                gate(Some("http://u:p@shop.example"), "/_v/", &[]),
                "--upstream",
            ),
            (gate(Some("not a url"), "/_v/", &[]), "--upstream"),
            (gate(Some("http://o"), "/", &[]), "--mount-prefix"),
            (gate(Some("http://o"), "_v", &[]), "--mount-prefix"),
            (gate(Some("http://o"), "/a b/", &[]), "--mount-prefix"),
            (gate(Some("http://o"), "/{room}/", &[]), "--mount-prefix"),
            (gate(Some("http://o"), "/../", &[]), "--mount-prefix"),
            (gate(Some("http://o"), "/healthz", &[]), "--mount-prefix"),
            (
                gate(Some("http://o"), "/_v/", &["/checkout=ghost"]),
                "--gate",
            ),
            (gate(Some("http://o"), "/_v/", &["/checkout"]), "--gate"),
            (gate(Some("http://o"), "/_v/", &["checkout=main"]), "--gate"),
            (gate(Some("http://o"), "/_v/", &["/=main"]), "--gate"),
            (gate(Some("http://o"), "/_v/", &["/_v=main"]), "--gate"),
            (gate(None, "/_v/", &["/checkout=main"]), "--gate"),
        ] {
            let reason = config.validate(&rooms).unwrap_err();
            assert!(reason.contains(flag), "{config:?} gave {reason}");
        }
        let mut slow = gate(Some("http://o"), "/_v/", &[]);
        slow.upstream_timeout_secs = 0;
        assert!(slow
            .validate(&rooms)
            .unwrap_err()
            .contains("--upstream-timeout-secs"));
    }
}
