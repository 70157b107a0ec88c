//! The values of flags that clap cannot parse by itself, and the Redis URL made safe to log.

use std::path::PathBuf;
use std::str::FromStr;

use vestibule_shared::settings;

/// Parses `--admission-rate` within the settings' bounds (clap has no ranged `f64` parser).
pub(super) fn admission_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text.trim().parse().map_err(|error| format!("{error}"))?;
    settings::check_admission_rate(rate).map_err(|bounds| format!("must be {bounds}"))?;
    Ok(rate)
}

/// The embedded store's data dir: a folder, or none (`none`: nothing survives a restart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDir(pub Option<PathBuf>);

impl FromStr for DataDir {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(match text {
            "none" => Self(None),
            path => Self(Some(PathBuf::from(path))),
        })
    }
}

/// Replaces the password of `scheme://user:password@host`, and the value of a `pass` or
/// `password` query parameter (`redis+unix:///run/redis.sock?pass=…`), with `***`.
pub fn redact_url_password(url: &str) -> String {
    let (address, query) = match url.split_once('?') {
        Some((address, query)) => (address, Some(query)),
        None => (url, None),
    };
    let address = match address.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((credentials, host)) => {
                let user = credentials.split(':').next().unwrap_or("");
                format!("{scheme}://{user}:***@{host}")
            }
            None => address.to_owned(),
        },
        None => address.to_owned(),
    };
    match query {
        None => address,
        Some(query) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _)) if name == "pass" || name == "password" => {
                        format!("{name}=***")
                    }
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{address}?{}", query.join("&"))
        }
    }
}
