//! The signing keys: the current Ed25519 key (signs) and earlier keys (verify only), each named
//! by its `kid`, the RFC 7638 JWK thumbprint (SHA-256) of its public key.
//!
//! Where the current key comes from (docs/DESIGN.md "Entry tokens"): `--signing-key-file`, or,
//! without one, a key generated once and shared by every process on the same store so that
//! replicas verify each other's tokens — Redis key [`REDIS_KEY`] (written with `SET NX`, read by
//! all), the file [`DATA_DIR_FILE`] in the embedded store's data dir (mode 0600, kept across
//! restarts), or memory only with `--data-dir none` (tokens die with the process).

use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey};
use ed25519_dalek::{SigningKey, VerifyingKey};
use jsonwebtoken::jwk::{
    AlgorithmParameters, CommonParameters, EllipticCurve, Jwk, OctetKeyPairParameters,
    OctetKeyPairType, ThumbprintHash,
};
use jsonwebtoken::{DecodingKey, EncodingKey};

use super::args::TokenArgs;
use vestibule_store::redis::RedisStore;

/// The Redis key that holds a generated signing key (PEM), shared by every replica.
pub const REDIS_KEY: &str = "vestibule:signing-key";
/// The file in `--data-dir` that holds a generated signing key (PEM).
pub const DATA_DIR_FILE: &str = "signing-key.pem";

/// Why the keys could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// A key file could not be read.
    #[error("reading {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// What failed.
        reason: String,
    },
    /// A PEM text is not an Ed25519 key of the kind expected.
    #[error("{what} is not an Ed25519 {kind} key in PEM (PKCS#8): {reason}")]
    NotEd25519 {
        /// Which key (a path or "the shared key").
        what: String,
        /// `private` or `private or public`.
        kind: &'static str,
        /// The parser's reason.
        reason: String,
    },
}

/// One public key: what the JWKS publishes and what verifies a token with its `kid`.
#[derive(Clone)]
pub struct PublicKey {
    /// RFC 7638 thumbprint (SHA-256, base64url) of the key's JWK.
    pub kid: String,
    /// The Ed25519 public key, base64url (the JWK's `x`).
    pub x: String,
    decoding: DecodingKey,
}

impl PublicKey {
    fn new(verifying: &VerifyingKey) -> Self {
        let x = URL_SAFE_NO_PAD.encode(verifying.as_bytes());
        let jwk = Jwk {
            common: CommonParameters::default(),
            algorithm: AlgorithmParameters::OctetKeyPair(OctetKeyPairParameters {
                key_type: OctetKeyPairType::OctetKeyPair,
                curve: EllipticCurve::Ed25519,
                x: x.clone(),
            }),
        };
        // The thumbprint of an OKP key is SHA-256 over {"crv","kty","x"}: it cannot fail.
        let kid = jwk.thumbprint(ThumbprintHash::SHA256).unwrap_or_default();
        Self {
            kid,
            decoding: DecodingKey::from_ed_der(verifying.as_bytes()),
            x,
        }
    }

    /// The key that checks signatures made with this key.
    pub fn decoding_key(&self) -> &DecodingKey {
        &self.decoding
    }
}

/// The current signing key and the other keys accepted (the next key announced ahead of its
/// use, and earlier keys until their tokens expire), verify only.
pub struct KeyRing {
    current: PublicKey,
    signer: EncodingKey,
    previous: Vec<PublicKey>,
    /// The current key's PEM when it is the generated, shared one (no key file).
    shared_pem: Option<String>,
}

impl KeyRing {
    /// A ring from the current key (PKCS#8 PEM, private) and earlier keys (PKCS#8 private or
    /// SPKI public PEM), each given with a name for error messages.
    ///
    /// # Errors
    /// [`KeyError::NotEd25519`] for a text that is not such a key.
    pub fn new(current: (&str, &str), previous: &[(String, String)]) -> Result<Self, KeyError> {
        let (what, pem) = current;
        let signing = SigningKey::from_pkcs8_pem(pem).map_err(|error| KeyError::NotEd25519 {
            what: what.to_owned(),
            kind: "private",
            reason: error.to_string(),
        })?;
        let der = signing
            .to_pkcs8_der()
            .map_err(|error| KeyError::NotEd25519 {
                what: what.to_owned(),
                kind: "private",
                reason: error.to_string(),
            })?;
        let current = PublicKey::new(&signing.verifying_key());
        let mut ring = Self {
            signer: EncodingKey::from_ed_der(der.as_bytes()),
            current,
            previous: Vec::new(),
            shared_pem: None,
        };
        for (what, pem) in previous {
            let verifying = match SigningKey::from_pkcs8_pem(pem) {
                Ok(key) => key.verifying_key(),
                Err(_) => VerifyingKey::from_public_key_pem(pem).map_err(|error| {
                    KeyError::NotEd25519 {
                        what: what.clone(),
                        kind: "private or public",
                        reason: error.to_string(),
                    }
                })?,
            };
            let key = PublicKey::new(&verifying);
            if key.kid != ring.current.kid && ring.find(&key.kid).is_none() {
                ring.previous.push(key);
            }
        }
        Ok(ring)
    }

    /// A fresh Ed25519 key from the OS CSPRNG, as PKCS#8 PEM.
    ///
    /// # Panics
    /// If the operating system's random source fails (no safe way to make a key then).
    pub fn generate_pem() -> String {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).expect("the OS random source works");
        SigningKey::from_bytes(&seed)
            .to_pkcs8_pem(LineEnding::LF)
            .expect("an Ed25519 key encodes as PKCS#8")
            .to_string()
    }

    /// The `kid` new tokens are signed with.
    pub fn current_kid(&self) -> &str {
        &self.current.kid
    }

    /// The key that signs new tokens.
    pub fn signer(&self) -> &EncodingKey {
        &self.signer
    }

    /// The public key named `kid` (current or previous).
    pub fn find(&self, kid: &str) -> Option<&PublicKey> {
        self.public_keys().find(|key| key.kid == kid)
    }

    /// Every public key, the current one first.
    pub fn public_keys(&self) -> impl Iterator<Item = &PublicKey> {
        std::iter::once(&self.current).chain(&self.previous)
    }

    /// Loads the ring the flags name; without `--signing-key-file`, the key shared through
    /// `shared` (generated by whichever process came first).
    ///
    /// # Errors
    /// An unreadable or invalid key file, or a store that cannot keep the shared key.
    pub async fn load(args: &TokenArgs, shared: SharedKey<'_>) -> anyhow::Result<Self> {
        let current = match &args.signing_key_file {
            Some(path) => (path.display().to_string(), read(path)?),
            None => ("the shared signing key".to_owned(), shared.get().await?),
        };
        // The next key is verify-only like the previous ones; listed first after the current.
        let previous = args
            .next_signing_key_file
            .iter()
            .chain(&args.previous_signing_key_files)
            .map(|path| Ok((path.display().to_string(), read(path)?)))
            .collect::<Result<Vec<_>, KeyError>>()?;
        let mut ring = Self::new((&current.0, &current.1), &previous)?;
        if args.signing_key_file.is_none() {
            ring.shared_pem = Some(current.1);
        }
        Ok(ring)
    }

    /// The current key's PEM when it is the generated key shared through the store.
    pub fn shared_pem(&self) -> Option<&str> {
        self.shared_pem.as_deref()
    }
}

/// How often a replica writes its generated key back to Redis.
pub const KEEP_PERIOD: std::time::Duration = std::time::Duration::from_secs(5);

/// Keeps the generated key in Redis: every [`KEEP_PERIOD`] this replica writes its copy back
/// with `SET NX` (Redis restarted empty, or the key was deleted), so that a replica started later
/// adopts it instead of generating another. Warns when another key is in force (tokens signed
/// with it do not verify here). Ends on shutdown.
pub async fn keep_in_redis(
    redis: std::sync::Arc<RedisStore>,
    pem: String,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut warned = false;
    loop {
        tokio::select! {
            () = tokio::time::sleep(KEEP_PERIOD) => {}
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        }
        match redis.shared_signing_key(REDIS_KEY, &pem).await {
            Ok(in_force) if in_force != pem && !warned => {
                warned = true;
                tracing::warn!(
                    "another entry-token signing key is in Redis ({REDIS_KEY}); tokens signed \
                     with it do not verify on this replica: give every replica --signing-key-file"
                );
            }
            Ok(_) | Err(_) => {}
        }
    }
}

/// Where a generated signing key is kept when no key file is given.
pub enum SharedKey<'a> {
    /// In Redis at [`REDIS_KEY`], shared by every replica.
    Redis(&'a RedisStore),
    /// In [`DATA_DIR_FILE`] of the embedded store's data dir.
    DataDir(&'a Path),
    /// In this process's memory only.
    Memory,
}

impl SharedKey<'_> {
    /// The key in force (PEM), generating and storing one if there is none yet.
    async fn get(&self) -> anyhow::Result<String> {
        let candidate = KeyRing::generate_pem();
        match self {
            Self::Redis(store) => Ok(store.shared_signing_key(REDIS_KEY, &candidate).await?),
            Self::DataDir(dir) => Ok(key_in_dir(dir, &candidate)?),
            Self::Memory => {
                tracing::info!("entry tokens signed with a key kept in memory only (--data-dir none): a restart invalidates every token");
                Ok(candidate)
            }
        }
    }
}

/// The key kept in `dir`, writing `candidate` there (mode 0600) if there is none.
fn key_in_dir(dir: &Path, candidate: &str) -> Result<String, KeyError> {
    use std::io::Write as _;
    let path = dir.join(DATA_DIR_FILE);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(&path) {
        Ok(mut file) => {
            file.write_all(candidate.as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|error| KeyError::Read {
                    path: path.display().to_string(),
                    reason: error.to_string(),
                })?;
            Ok(candidate.to_owned())
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => read(&path),
        Err(error) => Err(KeyError::Read {
            path: path.display().to_string(),
            reason: error.to_string(),
        }),
    }
}

fn read(path: &Path) -> Result<String, KeyError> {
    std::fs::read_to_string(path).map_err(|error| KeyError::Read {
        path: path.display().to_string(),
        reason: error.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kid_is_the_rfc_7638_thumbprint() {
        // RFC 8037 appendix A.3: the thumbprint of its Ed25519 example key.
        let x = URL_SAFE_NO_PAD
            .decode("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
            .unwrap();
        let verifying = VerifyingKey::from_bytes(&x.try_into().unwrap()).unwrap();
        assert_eq!(
            PublicKey::new(&verifying).kid,
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
        );
    }

    #[test]
    fn a_ring_signs_with_the_current_key_and_lists_previous_ones_once() {
        let old = KeyRing::generate_pem();
        let new = KeyRing::generate_pem();
        let old_ring = KeyRing::new(("old", &old), &[]).unwrap();
        let ring = KeyRing::new(
            ("new", &new),
            &[("old".into(), old.clone()), ("again".into(), old.clone())],
        )
        .unwrap();
        assert_ne!(ring.current_kid(), old_ring.current_kid());
        let kids: Vec<_> = ring.public_keys().map(|k| k.kid.clone()).collect();
        assert_eq!(kids, [ring.current_kid(), old_ring.current_kid()]);
        assert!(ring.find(old_ring.current_kid()).is_some());
        let error = KeyRing::new(("bad.pem", "not a key"), &[]).err().unwrap();
        assert!(error.to_string().contains("bad.pem"), "{error}");
    }

    #[test]
    fn a_generated_key_is_kept_in_the_data_dir_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let first = key_in_dir(dir.path(), &KeyRing::generate_pem()).unwrap();
        let second = key_in_dir(dir.path(), &KeyRing::generate_pem()).unwrap();
        assert_eq!(first, second);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join(DATA_DIR_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
