//! `vestibule demo`: the server on the embedded store (memory only) with a room `demo` that
//! synthetic shoppers join, so a newcomer sees a real line move within seconds: the page at
//! `/?room=demo` (position falling) and the console at `/console/` (charts drawing).
//!
//! The shoppers are real HTTP clients of this process (join, poll by `nextPollAfterMs`, order
//! with the entry token), so every figure moves as in a sale. [`INITIAL_LINE`] arrive at once
//! (a line from the first second), then arrivals follow a triangle between
//! [`LOW_PER_SEC`] and [`HIGH_PER_SEC`] every [`CYCLE_SECS`] (the line grows, then drains, against
//! an admission rate of [`DEMO_RATE`]); one in ten admitted shoppers never checks out (their
//! tokens expire after [`DEMO_TTL_SECS`]).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::sync::watch;

/// The demo room's slug.
pub const DEMO_ROOM: &str = "demo";
/// Its admission rate, shoppers per second.
pub const DEMO_RATE: &str = "5";
/// Its entry token TTL, seconds (short, so expiries show).
pub const DEMO_TTL_SECS: &str = "30";
/// Shoppers who arrive in the first second.
pub const INITIAL_LINE: u32 = 60;
/// Fewest arrivals per second.
pub const LOW_PER_SEC: f64 = 1.0;
/// Most arrivals per second.
pub const HIGH_PER_SEC: f64 = 9.0;
/// One rise and fall of arrivals, seconds.
pub const CYCLE_SECS: f64 = 120.0;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// The configuration of a demo: the flags as parsed for `vestibule demo` (`matches` are its
/// matches), with the demo's values wherever the command line gave none, environment variables
/// included: the embedded store in memory, the demo room and its rate and token TTL. The
/// operator's own flags win (a port, an admin token, …); `--rooms` adds rooms beside the demo
/// room, which always comes first.
pub fn configure(mut config: crate::Config, matches: &clap::ArgMatches) -> crate::Config {
    let given = |id: &str| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    if !given("data_dir") {
        config.data_dir = crate::config::DataDir(None);
    }
    if !given("admission_rate") {
        config.admission_rate = DEMO_RATE.parse().expect("the demo rate is a number");
    }
    if !given("token_ttl_secs") {
        config.token_ttl_secs = DEMO_TTL_SECS.parse().expect("the demo TTL is a number");
    }
    let mut rooms = vec![DEMO_ROOM.to_owned()];
    if given("rooms") {
        rooms.extend(config.rooms.into_iter().filter(|room| room != DEMO_ROOM));
    }
    config.rooms = rooms;
    config
}

/// Arrivals per second `elapsed_secs` into the demo: a triangle wave from [`LOW_PER_SEC`] up to
/// [`HIGH_PER_SEC`] and back every [`CYCLE_SECS`], starting on the rise.
pub fn arrivals_per_sec(elapsed_secs: f64) -> f64 {
    let phase = (elapsed_secs % CYCLE_SECS) / CYCLE_SECS;
    let rise = if phase < 0.5 {
        phase * 2.0
    } else {
        (1.0 - phase) * 2.0
    };
    LOW_PER_SEC + (HIGH_PER_SEC - LOW_PER_SEC) * rise
}

/// A small pseudo-random number in `0..1` (xorshift; the demo needs no secrecy).
fn unit(seed: &mut u64) -> f64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    (*seed >> 11) as f64 / (1u64 << 53) as f64
}

/// Sends shoppers to the server at `address` until `stop` turns true.
pub async fn shoppers(address: SocketAddr, mut stop: watch::Receiver<bool>) {
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let base = format!("http://{address}/api/v1/rooms/{DEMO_ROOM}");
    let started = Instant::now();
    let mut seed = u64::from(started.elapsed().subsec_nanos()) | 0x9e37_79b9_7f4a_7c15;
    let mut owed = f64::from(INITIAL_LINE);
    let tick = Duration::from_millis(100);
    loop {
        tokio::select! {
            () = tokio::time::sleep(tick) => {}
            _ = stop.changed() => return,
        }
        owed += arrivals_per_sec(started.elapsed().as_secs_f64()) * tick.as_secs_f64();
        while owed >= 1.0 {
            owed -= 1.0;
            let checks_out = unit(&mut seed) < 0.9;
            let checkout_secs = 2.0 + 6.0 * unit(&mut seed);
            tokio::spawn(shopper(
                client.clone(),
                base.clone(),
                checks_out,
                checkout_secs,
            ));
        }
    }
}

/// One call; the JSON body (`Null` when there is none or it is not JSON).
async fn call(
    client: &HttpClient,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Option<Value> {
    let mut request = hyper::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(Bytes::from(body.to_owned()))).ok()?;
    let response = client.request(request).await.ok()?;
    let bytes = response.into_body().collect().await.ok()?.to_bytes();
    Some(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// One shopper: joins, polls by the hints until admitted, then orders (or walks away).
async fn shopper(client: HttpClient, base: String, checks_out: bool, checkout_secs: f64) {
    let Some(mut status) = call(&client, "POST", &format!("{base}/tickets"), &[], "").await else {
        return;
    };
    let Some(ticket) = status["ticketId"].as_str().map(str::to_owned) else {
        return;
    };
    let poll = format!("{base}/tickets/{ticket}");
    // At most an hour of waiting: a demo left running sheds stuck shoppers.
    let deadline = Instant::now() + Duration::from_secs(3600);
    while status["status"] == "WAITING" && Instant::now() < deadline {
        let hint = status["nextPollAfterMs"]
            .as_u64()
            .unwrap_or(1000)
            .clamp(250, 5000);
        tokio::time::sleep(Duration::from_millis(hint)).await;
        match call(&client, "GET", &poll, &[], "").await {
            Some(next) if next["status"].is_string() => status = next,
            _ => {}
        }
    }
    let Some(token) = status["entryToken"].as_str() else {
        return;
    };
    if !checks_out {
        return;
    }
    tokio::time::sleep(Duration::from_secs_f64(checkout_secs)).await;
    let _ = call(
        &client,
        "POST",
        &format!("{base}/orders"),
        &[
            ("content-type", "application/json"),
            ("x-entry-token", token),
            ("idempotency-key", &ticket),
        ],
        r#"{"sku":"demo-sneaker","quantity":1}"#,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_rise_and_fall_between_the_bounds() {
        assert_eq!(arrivals_per_sec(0.0), LOW_PER_SEC);
        assert_eq!(arrivals_per_sec(CYCLE_SECS / 2.0), HIGH_PER_SEC);
        assert_eq!(arrivals_per_sec(CYCLE_SECS), LOW_PER_SEC);
        assert!((arrivals_per_sec(CYCLE_SECS / 4.0) - 5.0).abs() < 1e-9);
    }

    /// `vestibule demo ARGS`, as the binary configures it.
    fn demo(args: &[&str]) -> crate::Config {
        let mut all = vec!["vestibule", "demo"];
        all.extend_from_slice(args);
        let parsed = crate::cli::parse_from(all);
        let Some(crate::cli::Command::Demo(config)) = parsed.cli.command else {
            panic!("a demo");
        };
        configure(config, parsed.matches.subcommand_matches("demo").unwrap())
    }

    #[test]
    fn the_demo_room_comes_first_and_the_operator_flags_win() {
        let plain = demo(&["--bind", "0.0.0.0:8080"]);
        assert_eq!(plain.rooms, [DEMO_ROOM]);
        assert_eq!(plain.data_dir, crate::config::DataDir(None));
        assert_eq!(plain.admission_rate, 5.0);
        assert_eq!(plain.token_ttl_secs, 30);
        assert_eq!(plain.bind.port(), 8080);
        let own = demo(&["--rooms", "extra,demo", "--admission-rate", "50"]);
        assert_eq!(own.rooms, [DEMO_ROOM, "extra"]);
        assert_eq!(own.admission_rate, 50.0);
        own.validate().unwrap();
    }

    #[test]
    fn the_random_numbers_stay_in_the_unit_interval() {
        let mut seed = 42;
        assert!((0..1000)
            .map(|_| unit(&mut seed))
            .all(|x| (0.0..1.0).contains(&x)));
    }
}
