//! `vestibule verify-draw`: recomputes a room's draw from what `GET /api/v1/rooms/{room}/draw`
//! publishes and says whether it matches (docs/DESIGN.md "Scheduled opening and the draw").
//!
//! Checks: the draw is `DRAWN`; SHA-256 of the seed equals the commitment `seedSha256`; the pages
//! list exactly `count` tags without gaps; the seed is mixed (issue 42): SHA-256 of the sorted
//! tags is recomputed (and must equal `tagsSha256` when given), a beacon's randomness must be
//! supplied and be SHA-256 of its signature, and the mixed seed is recomputed from the committed
//! seed, that hash and the randomness (and must equal `drawSeed` when given); ordering the tags
//! by HMAC-SHA256(mixed seed, tag) gives the published order. A draw published without the mix
//! (made before it) is refused unless `--unmixed` asks to check it under that older algorithm.
//! Exit code 0 when all hold, 1 when one does not, 2 when the input cannot be read or is
//! incomplete, 3 when it holds but `--tag` is not in the draw. Input: an `http://` URL of the draw
//! endpoint (every page is fetched, following `nextOffset`), or a file holding one answer or a
//! JSON array of pages.

use std::process::ExitCode;

use clap::Args;
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sha2::{Digest as _, Sha256};
use vestibule_shared::draw::{DrawInfo, DrawState, DRAW_ALGORITHM_UNMIXED};

use crate::room::opening::{
    draw_order, hex32, mixed_seed, seed_bytes, seed_commitment, tags_sha256,
};

/// `vestibule verify-draw SOURCE [--tag TAG]` (its help is the command's, in [`crate::cli`]).
#[derive(Debug, Args)]
pub struct VerifyDraw {
    /// The draw endpoint's URL, or a file with its JSON.
    ///
    /// The URL: `http://host/api/v1/rooms/ROOM/draw` (every page is fetched); the file: one
    /// answer, or a JSON array of pages.
    #[arg(value_name = "URL|FILE")]
    pub source: String,
    /// A ticket tag (`ticketTag` of a ticket status) whose place to print.
    #[arg(long)]
    pub tag: Option<String>,
    /// Also accept a draw published without the mix (made before it): ordered by the committed
    /// seed alone, which whoever could write the store before the pre-queue opened could have
    /// chosen.
    #[arg(long)]
    pub unmixed: bool,
}

/// Why a draw was not verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refuted {
    /// Pages are missing (a saved file that holds only some of them): nothing can be said about
    /// the draw yet (exit 2).
    Incomplete(String),
    /// The draw does not follow from its seed and commitment (exit 1).
    Mismatch(String),
}

impl std::fmt::Display for Refuted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Incomplete(why) | Self::Mismatch(why) => f.write_str(why),
        }
    }
}

/// What a verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Tickets drawn.
    pub count: u64,
    /// The place of the `--tag` asked about (1-based), if it was drawn.
    pub place: Option<u64>,
}

/// Checks a draw from all its pages (any order).
///
/// # Errors
/// [`Refuted::Incomplete`] when tags are missing; [`Refuted::Mismatch`] when the draw does not
/// match, in one sentence.
pub fn verify(pages: &[DrawInfo], tag: Option<&str>) -> Result<Verified, Refuted> {
    verify_with(pages, tag, false)
}

/// [`verify`], and with `unmixed` a draw published without the mix is checked under the older
/// algorithm (its order keyed with the committed seed alone) instead of refused.
///
/// # Errors
/// As [`verify`].
pub fn verify_with(
    pages: &[DrawInfo],
    tag: Option<&str>,
    unmixed: bool,
) -> Result<Verified, Refuted> {
    checked(pages, tag, unmixed).map_err(|reason| {
        if reason.starts_with("incomplete: ") {
            Refuted::Incomplete(reason)
        } else {
            Refuted::Mismatch(reason)
        }
    })
}

/// The seed the order follows from: the mixed one (issue 42) recomputed from the committed seed,
/// the published tags and the beacon's value; or, for a draw published without the mix and only
/// when `unmixed` allows it, the committed seed itself.
fn order_seed(
    first: &DrawInfo,
    seed: &[u8],
    tags: &[String],
    unmixed: bool,
) -> Result<Vec<u8>, String> {
    if first.tags_sha256.is_none() && first.algorithm == DRAW_ALGORITHM_UNMIXED {
        if unmixed {
            return Ok(seed.to_vec());
        }
        return Err(
            "the draw is not mixed (published without tagsSha256, by the algorithm \
             before it): whoever could write the store before the pre-queue opened could have \
             chosen its order; --unmixed checks it under that algorithm"
                .into(),
        );
    }
    let tags_hash = tags_sha256(tags);
    if let Some(published) = first.tags_sha256.as_deref() {
        if published != tags_hash {
            return Err(format!(
                "SHA-256 of the sorted tags is {tags_hash}, but tagsSha256 published was \
                 {published}"
            ));
        }
    }
    let randomness = match &first.beacon {
        None => None,
        Some(beacon) => {
            let round = &beacon.drand;
            let Some(randomness) = beacon.randomness.as_deref() else {
                return Err(format!(
                    "incomplete: the value of drand round {} of chain {} is not supplied",
                    round.round, round.chain_hash
                ));
            };
            if randomness.len() != 64 || seed_bytes(randomness).is_none() {
                return Err("the beacon's randomness is not 64 hex digits".into());
            }
            // drand's randomness is SHA-256 of the round's signature: the value mixed in must be
            // the one the signature gives (the BLS signature itself is checked against the
            // chain's public key by drand's own tools, not here).
            if let Some(signature) = beacon.signature.as_deref() {
                let bytes = crate::room::opening::hex_bytes(signature)
                    .ok_or("the beacon's signature is not hex")?;
                let digest: String = Sha256::digest(&bytes)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                if !digest.eq_ignore_ascii_case(randomness) {
                    return Err(format!(
                        "the beacon's randomness {randomness} is not SHA-256 of its signature \
                         ({digest})"
                    ));
                }
            }
            Some(randomness)
        }
    };
    let mixed = mixed_seed(seed, &tags_hash, randomness).ok_or("the beacon's value is not hex")?;
    if let Some(published) = first.draw_seed.as_deref() {
        if published != hex32(&mixed) {
            return Err(format!(
                "the mixed seed is {}, but drawSeed published was {published}",
                hex32(&mixed)
            ));
        }
    }
    Ok(mixed.to_vec())
}

fn checked(pages: &[DrawInfo], tag: Option<&str>, unmixed: bool) -> Result<Verified, String> {
    let mut pages: Vec<&DrawInfo> = pages.iter().collect();
    pages.sort_by_key(|page| page.offset);
    let first = pages.first().ok_or("no draw answer was given")?;
    if first.state != DrawState::Drawn {
        return Err(format!(
            "the draw is not made yet (state {:?})",
            first.state
        ));
    }
    let seed_hex = first
        .seed
        .as_deref()
        .ok_or("a DRAWN answer without its seed")?;
    let seed = seed_bytes(seed_hex).ok_or("the seed is not 64 hex digits")?;
    let commitment = first.seed_sha256.as_deref().unwrap_or_default();
    if seed_commitment(&seed) != commitment {
        return Err(format!(
            "SHA-256 of the seed is {}, but the commitment published was {commitment}",
            seed_commitment(&seed)
        ));
    }
    let mut tags: Vec<String> = Vec::new();
    for page in &pages {
        if page.seed.as_deref() != Some(seed_hex)
            || page.count != first.count
            || page.tags_sha256 != first.tags_sha256
            || page.draw_seed != first.draw_seed
            || page.beacon != first.beacon
            || page.algorithm != first.algorithm
        {
            return Err(format!(
                "the page at offset {} is of another draw",
                page.offset
            ));
        }
        if page.offset != tags.len() as u64 {
            return Err(format!(
                "incomplete: tags {}–{} are missing (a page starts at {}): fetch every page",
                tags.len(),
                page.offset,
                page.offset
            ));
        }
        tags.extend(page.tags.iter().cloned());
    }
    if tags.len() as u64 != first.count {
        return Err(format!(
            "incomplete: {} of {} tags; fetch the rest from offset {} (nextOffset)",
            tags.len(),
            first.count,
            tags.len()
        ));
    }
    let order_seed = order_seed(first, &seed, &tags, unmixed)?;
    let recomputed = draw_order(&order_seed, tags.clone(), Clone::clone);
    if let Some(k) = (0..tags.len()).find(|&k| recomputed[k] != tags[k]) {
        return Err(format!(
            "place {} is {}, but the seed puts {} there",
            k + 1,
            tags[k],
            recomputed[k]
        ));
    }
    let place = tag.and_then(|tag| tags.iter().position(|t| t == tag).map(|k| k as u64 + 1));
    Ok(Verified {
        count: first.count,
        place,
    })
}

/// Every page of the draw at `url` (plain `http://`), following `nextOffset`.
///
/// # Errors
/// The transport's or the JSON's error, as text.
pub async fn fetch_pages(url: &str) -> Result<Vec<DrawInfo>, String> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let base = url.split('?').next().unwrap_or(url).to_owned();
    let mut pages = Vec::new();
    let mut offset = 0u64;
    loop {
        let uri: hyper::Uri = format!("{base}?offset={offset}")
            .parse()
            .map_err(|error| format!("{url}: {error}"))?;
        let response = client
            .get(uri)
            .await
            .map_err(|error| format!("{url}: {error}"))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|error| format!("{url}: {error}"))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!(
                "{url}: HTTP {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        let page: DrawInfo =
            serde_json::from_slice(&body).map_err(|error| format!("{url}: {error}"))?;
        let next = page.next_offset;
        pages.push(page);
        match next {
            Some(next) if next > offset => offset = next,
            _ => return Ok(pages),
        }
    }
}

/// Reads a file with one draw answer or an array of pages.
///
/// # Errors
/// The file's or the JSON's error, as text.
pub fn read_pages(path: &str) -> Result<Vec<DrawInfo>, String> {
    let text = std::fs::read_to_string(path).map_err(|error| format!("{path}: {error}"))?;
    serde_json::from_str::<Vec<DrawInfo>>(&text)
        .or_else(|_| serde_json::from_str::<DrawInfo>(&text).map(|page| vec![page]))
        .map_err(|error| format!("{path}: not a draw answer: {error}"))
}

/// Runs the subcommand: prints the verdict, returns the exit code.
pub async fn run(args: VerifyDraw) -> ExitCode {
    let pages = if args.source.starts_with("https://") {
        Err(
            "https is not fetched here: save the answer (every page) with curl and pass the file"
                .into(),
        )
    } else if args.source.starts_with("http://") {
        fetch_pages(&args.source).await
    } else {
        read_pages(&args.source)
    };
    let pages = match pages {
        Ok(pages) => pages,
        Err(error) => {
            eprintln!("verify-draw: cannot read the draw: {error}");
            return ExitCode::from(2);
        }
    };
    match verify_with(&pages, args.tag.as_deref(), args.unmixed) {
        Ok(verified) => {
            println!(
                "verify-draw: OK: the draw of {} tickets matches its seed and commitment{}",
                verified.count,
                if args.unmixed && pages.first().is_some_and(|p| p.tags_sha256.is_none()) {
                    " (unmixed: its seed alone orders it)"
                } else {
                    ", mixed with its tags"
                }
            );
            match (args.tag, verified.place) {
                (Some(tag), Some(place)) => {
                    println!("verify-draw: ticket {tag} is at place {place}")
                }
                (Some(tag), None) => {
                    println!("verify-draw: ticket {tag} is not in the draw");
                    return ExitCode::from(3);
                }
                _ => {}
            }
            ExitCode::SUCCESS
        }
        Err(Refuted::Incomplete(reason)) => {
            eprintln!("verify-draw: cannot check the draw: {reason}");
            ExitCode::from(2)
        }
        Err(Refuted::Mismatch(reason)) => {
            println!("verify-draw: MISMATCH: {reason}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests;
