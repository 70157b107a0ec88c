//! `vestibule verify-draw`: recomputes a room's draw from what `GET /api/v1/rooms/{room}/draw`
//! publishes and says whether it matches (docs/DESIGN.md "Scheduled opening and the draw").
//!
//! Checks: the draw is `DRAWN`; SHA-256 of the seed equals the commitment `seedSha256`; the pages
//! list exactly `count` tags without gaps; ordering those tags by HMAC-SHA256(seed, tag) gives
//! the published order. Exit code 0 when all hold, 1 when one does not, 2 when the input cannot
//! be read. Input: an `http://` URL of the draw endpoint (every page is fetched, following
//! `nextOffset`), or a file holding one answer or a JSON array of pages.

use std::process::ExitCode;

use clap::Args;
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use vestibule_shared::draw::{DrawInfo, DrawState};

use crate::room::opening::{draw_order, seed_bytes, seed_commitment};

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
    checked(pages, tag).map_err(|reason| {
        if reason.starts_with("incomplete: ") {
            Refuted::Incomplete(reason)
        } else {
            Refuted::Mismatch(reason)
        }
    })
}

fn checked(pages: &[DrawInfo], tag: Option<&str>) -> Result<Verified, String> {
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
        if page.seed.as_deref() != Some(seed_hex) || page.count != first.count {
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
    let recomputed = draw_order(&seed, tags.clone(), Clone::clone);
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
    match verify(&pages, args.tag.as_deref()) {
        Ok(verified) => {
            println!(
                "verify-draw: OK: the draw of {} tickets matches its seed and commitment",
                verified.count
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
mod tests {
    use super::*;
    use crate::room::opening::draw_order;

    fn drawn(seed: &str, tags: Vec<String>) -> DrawInfo {
        let bytes = seed_bytes(seed).unwrap();
        DrawInfo {
            room: "main".into(),
            state: DrawState::Drawn,
            opens_at: None,
            prequeue_opens_at: None,
            seed_sha256: Some(seed_commitment(&bytes)),
            seed: Some(seed.into()),
            algorithm: String::new(),
            drawn_at: None,
            count: tags.len() as u64,
            offset: 0,
            tags,
            next_offset: None,
        }
    }

    #[test]
    fn a_true_draw_verifies_and_any_change_is_caught() {
        let seed = "ab".repeat(32);
        let tags: Vec<String> = (0..300).map(|i| format!("{i:012x}")).collect();
        let ordered = draw_order(&seed_bytes(&seed).unwrap(), tags, Clone::clone);
        let good = drawn(&seed, ordered.clone());
        let third = ordered[2].clone();
        assert_eq!(
            verify(std::slice::from_ref(&good), Some(&third)),
            Ok(Verified {
                count: 300,
                place: Some(3)
            })
        );
        let mut swapped = good.clone();
        swapped.tags.swap(0, 1);
        assert!(
            matches!(verify(&[swapped], None), Err(Refuted::Mismatch(why)) if why.contains("place 1"))
        );
        let mut other_seed = good.clone();
        other_seed.seed_sha256 = Some("00".repeat(32));
        assert!(
            matches!(verify(&[other_seed], None), Err(Refuted::Mismatch(why)) if why.contains("commitment"))
        );
        let mut short = good.clone();
        short.tags.pop();
        assert!(matches!(
            verify(&[short], None),
            Err(Refuted::Incomplete(_))
        ));
        // Two pages in any order verify as one.
        let mut head = good.clone();
        head.tags.truncate(100);
        head.next_offset = Some(100);
        let mut tail = good.clone();
        tail.tags = ordered[100..].to_vec();
        tail.offset = 100;
        assert!(verify(&[tail, head], None).is_ok());
    }
}
