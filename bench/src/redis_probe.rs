//! Reading and loading Redis directly, in the key layout the server uses (docs/internals.md):
//! `vestibule:{room}:g1:queue` (ZSET ticket id → arrival seq), `vestibule:{room}:g1:seq`
//! (counter), `vestibule:{room}:g1:ticket:{id}` (HASH state, tok, exp once admitted). The bench's
//! rooms are created once each, on a Redis of their own: generation 1.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::flash_sale::Shopper;

/// The key of `name` in `room`'s first generation, e.g. `vestibule:{main}:g1:queue`.
pub fn key(room: &str, name: &str) -> String {
    format!("vestibule:{{{room}}}:g1:{name}")
}

/// `INFO <section>` as a map of `field → value`.
///
/// # Errors
/// When Redis does not answer.
pub fn info(
    connection: &mut redis::Connection,
    section: &str,
) -> anyhow::Result<HashMap<String, String>> {
    let text: String = redis::cmd("INFO").arg(section).query(connection)?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect())
}

/// One reading of the counters a stage compares before and after.
#[derive(Debug, Clone, Copy)]
pub struct RedisSample {
    /// When it was taken.
    pub at: Instant,
    /// `total_commands_processed` (every command, including those run inside scripts).
    pub commands: u64,
    /// `used_cpu_user + used_cpu_sys`, seconds.
    pub cpu_secs: f64,
    /// `used_memory`, bytes.
    pub used_memory: u64,
}

impl RedisSample {
    /// Reads the counters now.
    ///
    /// # Errors
    /// When Redis does not answer.
    pub fn take(connection: &mut redis::Connection) -> anyhow::Result<Self> {
        let fields = info(connection, "all")?;
        let number = |name: &str| -> f64 {
            fields
                .get(name)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        Ok(Self {
            at: Instant::now(),
            commands: number("total_commands_processed") as u64,
            cpu_secs: number("used_cpu_user") + number("used_cpu_sys"),
            used_memory: number("used_memory") as u64,
        })
    }

    /// Commands per second from `earlier` to this sample (this INFO call excluded).
    pub fn commands_per_sec_since(&self, earlier: &Self) -> f64 {
        let secs = self.at.duration_since(earlier.at).as_secs_f64().max(1e-3);
        (self.commands.saturating_sub(earlier.commands + 1)) as f64 / secs
    }

    /// Redis CPU as percent of one core from `earlier` to this sample.
    pub fn cpu_percent_since(&self, earlier: &Self) -> f64 {
        let secs = self.at.duration_since(earlier.at).as_secs_f64().max(1e-3);
        (self.cpu_secs - earlier.cpu_secs) / secs * 100.0
    }
}

/// `MEMORY USAGE key SAMPLES 0` (exact), 0 when the key is missing.
///
/// # Errors
/// When Redis does not answer.
pub fn memory_usage(connection: &mut redis::Connection, key: &str) -> anyhow::Result<u64> {
    let bytes: Option<u64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query(connection)?;
    Ok(bytes.unwrap_or(0))
}

/// `ZCARD key`.
///
/// # Errors
/// When Redis does not answer.
pub fn zcard(connection: &mut redis::Connection, key: &str) -> anyhow::Result<u64> {
    Ok(redis::cmd("ZCARD").arg(key).query(connection)?)
}

/// A deterministic, well-formed ticket id for bulk-loaded shopper `n`: 22 URL-safe base64
/// characters of 128 pseudo-random bits, like the server's ids (same length, same alphabet).
pub fn bulk_ticket_id(salt: u64, n: u64) -> String {
    let high = splitmix64(salt ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let low = splitmix64(high ^ n);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&high.to_le_bytes());
    bytes[8..].copy_from_slice(&low.to_le_bytes());
    base64_url(&bytes)
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// URL-safe base64 without padding.
fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len() * 4 / 3 + 2);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let symbols = chunk.len() + 1;
        for i in 0..symbols {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// Appends `count` waiting shoppers to `room`'s queue, with arrival seqs after those there, as
/// the join script would (ZADD id → seq, and the seq counter), in pipelined batches.
/// Returns the ids in arrival order and the time it took.
///
/// # Errors
/// When Redis does not answer.
pub fn bulk_load(
    connection: &mut redis::Connection,
    room: &str,
    count: u64,
    salt: u64,
) -> anyhow::Result<(Vec<String>, Duration)> {
    let started = Instant::now();
    let queue = key(room, "queue");
    let seq_key = key(room, "seq");
    let first: u64 = redis::cmd("INCRBY")
        .arg(&seq_key)
        .arg(count)
        .query::<u64>(connection)
        .context("reserving seqs")?
        - count
        + 1;
    let mut ids = Vec::with_capacity(count as usize);
    let mut pipe = redis::pipe();
    let mut pending = 0;
    for chunk_start in (0..count).step_by(1000) {
        let chunk_end = (chunk_start + 1000).min(count);
        let mut command = redis::cmd("ZADD");
        command.arg(&queue);
        for n in chunk_start..chunk_end {
            let id = bulk_ticket_id(salt, first + n);
            command.arg(first + n).arg(&id);
            ids.push(id);
        }
        pipe.add_command(command).ignore();
        pending += 1;
        if pending == 20 {
            pipe.query::<()>(connection)?;
            pipe = redis::pipe();
            pending = 0;
        }
    }
    if pending > 0 {
        pipe.query::<()>(connection)?;
    }
    Ok((ids, started.elapsed()))
}

/// The stored `state` and `exp` (token expiry, Unix ms) of each ticket, in pipelined batches.
///
/// # Errors
/// When Redis does not answer.
pub fn ticket_states(
    connection: &mut redis::Connection,
    room: &str,
    ids: &[String],
) -> anyhow::Result<Vec<(Option<String>, Option<u64>)>> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(1000) {
        let mut pipe = redis::pipe();
        for id in chunk {
            pipe.cmd("HMGET")
                .arg(key(room, &format!("ticket:{id}")))
                .arg("state")
                .arg("exp");
        }
        let replies: Vec<(Option<String>, Option<u64>)> = pipe.query(connection)?;
        out.extend(replies);
    }
    Ok(out)
}

/// When the store admitted each shopper's ticket, Unix ms, by ticket id: a ticket's token expiry
/// minus the token TTL the server ran with is the tick time that admitted it, to the millisecond.
/// Shoppers without a ticket, and tickets never admitted, are left out.
///
/// # Errors
/// When Redis does not answer.
pub fn admission_times(
    connection: &mut redis::Connection,
    room: &str,
    shoppers: &[Shopper],
    token_ttl_secs: u64,
) -> anyhow::Result<HashMap<String, u64>> {
    let ids: Vec<String> = shoppers
        .iter()
        .filter_map(|s| s.ticket_id.clone())
        .collect();
    let stored = ticket_states(connection, room, &ids)?;
    Ok(ids
        .into_iter()
        .zip(stored)
        .filter_map(|(id, (_, exp))| exp.map(|exp| (id, exp - token_ttl_secs * 1000)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_ids_look_like_server_ids_and_differ() {
        let a = bulk_ticket_id(7, 1);
        let b = bulk_ticket_id(7, 2);
        assert_eq!(a.len(), 22);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert_ne!(a, b);
    }

    #[test]
    fn base64_matches_known_vectors() {
        assert_eq!(base64_url(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_url(b"fo"), "Zm8");
        assert_eq!(base64_url(&[0xfb, 0xff]), "-_8");
    }
}
