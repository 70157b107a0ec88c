//! A tiny storefront whose `/checkout` only admitted shoppers reach.
//!
//! Run Vestibule (`cargo run -p vestibule`, port 8080), then
//! `cargo run -p vestibule-guard --example storefront` (port 3000; `VESTIBULE_URL` and `ROOM`
//! override the defaults, `ORIGIN_API_KEY` turns on the single-use check). Then:
//!
//! ```sh
//! curl -i localhost:3000/checkout                              # 403 JSON with joinUrl
//! curl -i -H 'Accept: text/html' localhost:3000/checkout       # 303 to the waiting room
//! curl -i -H "X-Entry-Token: $ENTRY_TOKEN" localhost:3000/checkout   # 200 once admitted
//! ```

use axum::routing::get;
use axum::{Extension, Router};
use vestibule_guard::{EntryClaims, EntryGuard};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let vestibule =
        std::env::var("VESTIBULE_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let room = std::env::var("ROOM").unwrap_or_else(|_| "main".into());
    let mut guard = EntryGuard::builder(&room)
        .jwks_url(format!("{vestibule}/.well-known/jwks.json"))
        .waiting_room(format!("{vestibule}/"));
    if let Ok(key) = std::env::var("ORIGIN_API_KEY") {
        guard = guard.consume_online(&vestibule, key);
    }
    let checkout = Router::new()
        .route("/checkout", get(checkout))
        .layer(guard.build()?);
    let app = Router::new()
        .route(
            "/",
            get(|| async { "Welcome to the shop. The sale is at /checkout." }),
        )
        .merge(checkout);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("storefront on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

async fn checkout(Extension(entry): Extension<EntryClaims>) -> String {
    format!(
        "Checkout for room {} (shopper {}), open until {} (Unix s).",
        entry.room, entry.sub, entry.exp
    )
}
