//! A tiny storefront whose `/checkout` only admitted shoppers reach, on another origin than the
//! waiting room.
//!
//! Run Vestibule with this shop as the room's checkout (its origin allowed):
//!
//! ```sh
//! cargo run -p vestibule -- --cors-origins http://localhost:3000 \
//!     --checkout-url http://localhost:3000/checkout
//! cargo run -p vestibule-guard --example storefront
//! ```
//!
//! (port 3000; `VESTIBULE_URL`, `ROOM`, `AUDIENCE` and `SHOP_BIND` override the defaults,
//! `ORIGIN_API_KEY` turns on the single-use check and the signals report for `autoRate`,
//! `SECURE_COOKIE=0` drops `Secure` for a shop on plain HTTP that is not `localhost`). Then open
//! <http://localhost:3000/checkout>: the shop sends you to the waiting room, which, once you are
//! admitted, posts your entry token to the shop's hand-off route (a top-level form navigation); the
//! shop sets its own cookie and sends you back to `/checkout`. Without a browser:
//!
//! ```sh
//! curl -i localhost:3000/checkout                              # 403 JSON with joinUrl
//! curl -i -H 'Accept: text/html' localhost:3000/checkout       # 303 to the waiting room
//! curl -i -H "X-Entry-Token: $ENTRY_TOKEN" localhost:3000/checkout   # 200 once admitted
//! ```

use axum::response::Html;
use axum::routing::get;
use axum::{Extension, Router};
use vestibule_guard::{EntryClaims, EntryGuard};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let vestibule = env("VESTIBULE_URL", "http://127.0.0.1:8080");
    let room = env("ROOM", "main");
    let mut guard = EntryGuard::builder(&room, env("AUDIENCE", "storefront"))
        .jwks_url(format!("{vestibule}/.well-known/jwks.json"))
        .waiting_room(format!("{vestibule}/"))
        .secure_cookie(env("SECURE_COOKIE", "1") != "0");
    if let Ok(key) = std::env::var("ORIGIN_API_KEY") {
        // Each token used once, and the checkout's health reported for the room's `autoRate`.
        guard = guard
            .consume_online(&vestibule, &key)
            .report_signals(&vestibule, key);
    }
    let guard = guard.build().await?;
    let listener = tokio::net::TcpListener::bind(env("SHOP_BIND", "127.0.0.1:3000")).await?;
    println!("storefront on http://{}", listener.local_addr()?);
    axum::serve(listener, shop(&guard)).await?;
    Ok(())
}

/// The shop: a public home page, the guarded checkout and the guard's hand-off route.
fn shop(guard: &EntryGuard) -> Router {
    let checkout = Router::new()
        .route("/checkout", get(checkout))
        .layer(guard.clone());
    Router::new()
        .route(
            "/",
            get(|| async {
                Html("<h1>The shop</h1><p>The sale is at <a href=\"/checkout\">/checkout</a>.</p>")
            }),
        )
        .merge(checkout)
        .merge(guard.handoff())
}

async fn checkout(Extension(entry): Extension<EntryClaims>) -> Html<String> {
    Html(format!(
        "<!doctype html><title>Checkout</title><h1 id=\"checkout\">Checkout</h1>\
         <p>Room {} (shopper {}), open until {} (Unix s).</p>",
        entry.room, entry.sub, entry.exp
    ))
}
