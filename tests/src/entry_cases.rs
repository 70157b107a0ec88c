//! One table of entry tokens and the refusal each must get, run against both verifiers: the
//! gate (`tests/tests/gate.rs`) and the storefront's layer (`entry-guard/tests/guard.rs`). The
//! tokens are signed here with [`KEY_PEM`], the key the Vestibule under test signs with
//! (`--signing-key-file`), so each case changes one thing of a token that would otherwise pass
//! the offline check.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

/// The signing key of the Vestibule under test (Ed25519, PKCS#8 PEM; a test key, public here).
pub const KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEII8rSCn/qh1QWw4fDf7wiUNsUsqINlL64GqQIf+qUgv9
-----END PRIVATE KEY-----
";

/// Another key, which Vestibule never published.
pub const OTHER_KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEICPI4y/me53Ocb2mRtunC7eHe6jhl9yS4sgWAI20mJNp
-----END PRIVATE KEY-----
";

/// Writes [`KEY_PEM`] to `dir/signing-key.pem` and returns the path (for `--signing-key-file`).
///
/// # Panics
/// When the file cannot be written.
pub fn key_file(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("signing-key.pem");
    std::fs::write(&path, KEY_PEM).expect("the key file is written");
    path
}

/// One case: a token (none = no token at all) and the `entry_token_*` code it must get.
#[derive(Debug)]
pub struct Case {
    /// What is wrong with it.
    pub name: &'static str,
    /// The token.
    pub token: Option<String>,
    /// The refusal code.
    pub code: &'static str,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn sign(pem: &str, kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = kid.map(str::to_owned);
    let key = EncodingKey::from_ed_pem(pem.as_bytes()).expect("an Ed25519 key");
    jsonwebtoken::encode(&header, claims, &key).expect("signed")
}

/// The table for `room`, `audience` and issuer `vestibule`, with `kid` the key id Vestibule
/// publishes for [`KEY_PEM`] (read from its JWKS).
pub fn cases(kid: &str, room: &str, audience: &str) -> Vec<Case> {
    let claims = |change: &dyn Fn(&mut Value)| {
        let now = now();
        let mut claims = json!({
            "iss": "vestibule", "aud": audience, "room": room, "sub": "0123456789ab",
            "iat": now - 10, "exp": now + 120, "jti": format!("{room}.case"),
        });
        change(&mut claims);
        claims
    };
    let ours = |change: &dyn Fn(&mut Value)| Some(sign(KEY_PEM, Some(kid), &claims(change)));
    let good = sign(KEY_PEM, Some(kid), &claims(&|_| {}));
    let tampered = {
        let (head, rest) = good.split_once('.').unwrap();
        let (_, signature) = rest.split_once('.').unwrap();
        let payload =
            URL_SAFE_NO_PAD.encode(claims(&|c| c["sub"] = json!("ffffffffffff")).to_string());
        format!("{head}.{payload}.{signature}")
    };
    let unsigned = {
        let header =
            URL_SAFE_NO_PAD.encode(json!({"alg": "none", "typ": "JWT", "kid": kid}).to_string());
        let payload = URL_SAFE_NO_PAD.encode(claims(&|_| {}).to_string());
        format!("{header}.{payload}.")
    };
    vec![
        Case {
            name: "no token",
            token: None,
            code: "entry_token_missing",
        },
        Case {
            name: "not a JWT",
            token: Some("garbage".into()),
            code: "entry_token_unknown",
        },
        Case {
            // No leeway: a token is refused from the second after its `exp`.
            name: "expired two seconds ago",
            token: ours(&|c| c["exp"] = json!(now() - 2)),
            code: "entry_token_expired",
        },
        Case {
            name: "expired and of another room",
            token: ours(&|c| {
                c["exp"] = json!(now() - 2);
                c["room"] = json!("elsewhere");
            }),
            code: "entry_token_expired",
        },
        Case {
            name: "another room",
            token: ours(&|c| c["room"] = json!("elsewhere")),
            code: "entry_token_wrong_room",
        },
        Case {
            name: "another audience",
            token: ours(&|c| c["aud"] = json!("another-shop")),
            code: "entry_token_unknown",
        },
        Case {
            name: "another issuer",
            token: ours(&|c| c["iss"] = json!("someone")),
            code: "entry_token_unknown",
        },
        Case {
            name: "no sub",
            token: ours(&|c| {
                c.as_object_mut().unwrap().remove("sub");
            }),
            code: "entry_token_unknown",
        },
        Case {
            name: "no exp",
            token: ours(&|c| {
                c.as_object_mut().unwrap().remove("exp");
            }),
            code: "entry_token_unknown",
        },
        Case {
            name: "another key, its own kid",
            token: Some(sign(OTHER_KEY_PEM, Some("not-published"), &claims(&|_| {}))),
            code: "entry_token_unknown",
        },
        Case {
            name: "another key, our kid",
            token: Some(sign(OTHER_KEY_PEM, Some(kid), &claims(&|_| {}))),
            code: "entry_token_unknown",
        },
        Case {
            name: "no kid",
            token: Some(sign(KEY_PEM, None, &claims(&|_| {}))),
            code: "entry_token_unknown",
        },
        Case {
            name: "a tampered payload",
            token: Some(tampered),
            code: "entry_token_unknown",
        },
        Case {
            name: "alg none",
            token: Some(unsigned),
            code: "entry_token_unknown",
        },
    ]
}
