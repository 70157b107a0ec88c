//! The "scheduled drop" stage (docs/DESIGN.md "Scheduled opening and the draw"):
//! `shoppers` join a room's pre-queue over `join_secs` on Redis, the draw runs at the opening;
//! reports the draw's duration (the leader's `vestibule_draw_duration_ms`: the `draw.lua` steps
//! that walk the pre-queue kept in drawn order since the joins; target < 1 s for 100,000
//! tickets), next to a ceiling measured on the same Redis in the same run (one script that
//! `ZADD`s as many members, [`zadd_ceiling_ms`]), and checks that
//! the draw verifies (`verify-draw`'s check) and that the admission order equals the published
//! permutation (every drawn ticket's token expiry is non-decreasing along the drawn places).

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use hyper::Method;
use vestibule::room::status::rfc3339_from_ms;
use vestibule_shared::draw::DrawInfo;
use vestibule_shared::{paths, TicketState, TicketStatus};

use crate::flash_sale::unix_ms;
use crate::http::HttpClient;
use crate::procs::{start_vestibule, RedisProcess, ADMIN_TOKEN};
use crate::report::{Report, Verdict};

const ROOM: &str = "main";

async fn status(
    client: &HttpClient,
    method: Method,
    path: &str,
    key: Option<&str>,
) -> anyhow::Result<TicketStatus> {
    let headers: Vec<(&str, &str)> = key
        .map(|key| ("idempotency-key", key))
        .into_iter()
        .collect();
    let answer = client.send(method, path, &headers, None).await?;
    if !answer.status.is_success() {
        bail!(
            "{path}: {} {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        );
    }
    Ok(serde_json::from_slice(&answer.body)?)
}

/// Every page of the room's draw.
async fn draw_pages(client: &HttpClient) -> anyhow::Result<Vec<DrawInfo>> {
    let mut pages = Vec::new();
    let mut offset = 0;
    loop {
        let answer = client
            .get(&format!("/api/v1/rooms/{ROOM}/draw?offset={offset}"))
            .await?;
        let page: DrawInfo = serde_json::from_slice(&answer.body)?;
        let next = page.next_offset;
        pages.push(page);
        match next {
            Some(next) => offset = next,
            None => return Ok(pages),
        }
    }
}

/// One scheduled drop of `shoppers` joining over `join_secs`; adds its rows to `report`.
///
/// # Errors
/// When a process does not start or an answer is not what the API promises.
pub async fn run(
    vestibule: &std::path::Path,
    shoppers: u64,
    join_secs: f64,
    report: &mut Report,
) -> anyhow::Result<()> {
    let redis = RedisProcess::start()?;
    // The default store bound (1 s): every step of the draw must stay well under it.
    let server = start_vestibule(vestibule, &redis.url(), ROOM, 20_000.0, 100, &[])?;
    let client = HttpClient::new(&server.base(), 256);
    let admin_header = format!("Bearer {ADMIN_TOKEN}");
    let admin = [("authorization", admin_header.as_str())];
    let now = unix_ms();
    let opens_at = now + (join_secs * 1000.0) as u64 + 3_000;
    let patch = format!(
        r#"{{"opensAt":"{}","prequeueOpensAt":"{}","paused":true}}"#,
        rfc3339_from_ms(opens_at),
        rfc3339_from_ms(now)
    );
    let patch: &'static str = Box::leak(patch.into_boxed_str());
    let answer = client
        .send(Method::PATCH, &paths::admin_room(ROOM), &admin, Some(patch))
        .await?;
    if !answer.status.is_success() {
        bail!("PATCH: {}", String::from_utf8_lossy(&answer.body));
    }
    // Joins spread evenly over join_secs.
    let started = Instant::now();
    let mut joins = tokio::task::JoinSet::new();
    for n in 0..shoppers {
        let client = client.clone();
        let due = Duration::from_secs_f64(join_secs * n as f64 / shoppers as f64);
        joins.spawn(async move {
            tokio::time::sleep_until(tokio::time::Instant::from_std(started + due)).await;
            let key = format!("drop-{n}");
            status(&client, Method::POST, &paths::tickets(ROOM), Some(&key)).await
        });
    }
    let mut tickets = Vec::with_capacity(shoppers as usize);
    while let Some(joined) = joins.join_next().await {
        let ticket = joined??;
        if ticket.status != TicketState::PreQueue {
            bail!("a pre-queue join answered {:?}", ticket.status);
        }
        tickets.push(ticket);
    }
    let joined_in = started.elapsed().as_secs_f64();
    // The opening: wait for the draw.
    let deadline = Instant::now() + Duration::from_secs_f64(join_secs + 60.0);
    let pages = loop {
        let pages = draw_pages(&client).await?;
        if pages[0].state == vestibule_shared::draw::DrawState::Drawn {
            break pages;
        }
        if Instant::now() > deadline {
            bail!("no draw within a minute of the opening");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let metrics = String::from_utf8_lossy(&client.get("/metrics").await?.body).to_string();
    let draw_ms =
        vestibule_tests::metric_value(&metrics, "vestibule_draw_duration_ms{room=\"main\"}");
    let longest_step_ms =
        vestibule_tests::metric_value(&metrics, "vestibule_draw_longest_step_ms{room=\"main\"}");
    let ceiling_ms = zadd_ceiling_ms(&redis, shoppers)?;
    let verified = vestibule::verify_draw::verify(&pages, None).map_err(anyhow::Error::msg);
    let published: Vec<String> = pages.iter().flat_map(|p| p.tags.clone()).collect();
    // Admission in the drawn order: admit everyone at 20,000/s, then read every token expiry.
    client
        .send(
            Method::PATCH,
            &paths::admin_room(ROOM),
            &admin,
            Some(r#"{"paused":false}"#),
        )
        .await?;
    tokio::time::sleep(Duration::from_secs_f64(shoppers as f64 / 20_000.0 + 2.0)).await;
    let by_tag: std::collections::HashMap<String, String> = tickets
        .iter()
        .map(|t| {
            (
                t.ticket_tag.clone().unwrap_or_default(),
                t.ticket_id.clone(),
            )
        })
        .collect();
    let mut polls = tokio::task::JoinSet::new();
    for (place, tag) in published.iter().enumerate() {
        let id = by_tag
            .get(tag)
            .context("a published tag no shopper holds")?
            .clone();
        let client = client.clone();
        polls.spawn(async move {
            let polled = status(&client, Method::GET, &paths::ticket(ROOM, &id), None).await?;
            let expiry = polled.token_expires_at.and_then(|at| {
                time::OffsetDateTime::parse(&at, &time::format_description::well_known::Rfc3339)
                    .ok()
            });
            anyhow::Ok((place, expiry))
        });
    }
    let mut expiries = vec![time::OffsetDateTime::UNIX_EPOCH; published.len()];
    while let Some(polled) = polls.join_next().await {
        let (place, expiry) = polled??;
        expiries[place] = expiry.context("a drawn shopper was not admitted")?;
    }
    let in_order = expiries.windows(2).all(|w| w[0] <= w[1]) && published.len() as u64 == shoppers;
    let label =
        format!("scheduled drop, {shoppers} pre-queue tickets (joined over {joined_in:.1} s)");
    report.row(
        format!("{label}: draw duration"),
        format!("{draw_ms:.0} ms"),
        "< 1 s for 100,000 on Redis",
        Verdict::from(draw_ms < 1000.0),
        format!(
            "draw.lua steps of 10,000, the longest {longest_step_ms:.0} ms; {:.1}× a bare ZADD \
             of {shoppers} members in one script on the same Redis ({ceiling_ms:.0} ms)",
            draw_ms / ceiling_ms.max(1.0)
        ),
    );
    report.row(
        format!("{label}: verifies; admission order = published permutation"),
        format!(
            "{}; {}",
            if verified.is_ok() {
                "verifies"
            } else {
                "does NOT verify"
            },
            if in_order { "in order" } else { "NOT in order" }
        ),
        "both",
        Verdict::from(verified.is_ok() && in_order),
        "token expiries non-decreasing along the drawn places",
    );
    report.value(&format!("draw_ms_{shoppers}"), draw_ms);
    report.value(&format!("zadd_ceiling_ms_{shoppers}"), ceiling_ms);
    report.value(&format!("draw_longest_step_ms_{shoppers}"), longest_step_ms);
    Ok(())
}

/// The ceiling the draw is compared with: one Lua script that `ZADD`s `n` members shaped like the
/// pre-queue's (76 + 22 characters, score 0) in batches of 1,000 into a scratch key, timed from
/// the client (round trip included), ms. The key is deleted after.
///
/// # Errors
/// Redis's.
pub fn zadd_ceiling_ms(redis: &RedisProcess, n: u64) -> anyhow::Result<f64> {
    const SCRIPT: &str = r"
local n = tonumber(ARGV[1])
for from = 1, n, 1000 do
  local args = {}
  for i = from, math.min(n, from + 999) do
    args[#args + 1] = 0
    args[#args + 1] = string.format('%076d', i) .. 'abcdefghijklmnopqrstuv'
  end
  redis.call('ZADD', KEYS[1], unpack(args))
end
return redis.call('ZCARD', KEYS[1])";
    let mut connection = redis.connection()?;
    let script = redis::Script::new(SCRIPT);
    script.prepare_invoke().load(&mut connection)?;
    let started = Instant::now();
    let _: u64 = script.key("bench:ceiling").arg(n).invoke(&mut connection)?;
    let millis = started.elapsed().as_secs_f64() * 1000.0;
    redis::cmd("DEL")
        .arg("bench:ceiling")
        .query::<()>(&mut connection)?;
    Ok(millis)
}
