//! `GET {base}widget.js`: the script widget. A storefront page with
//! `<div data-vestibule-room="main"></div>` and
//! `<script type="module" src="https://ROOM-HOST/widget.js"></script>` gets the waiting view
//! mounted into that element (in a shadow root), by the page's own WASM: this small module
//! names the page's hashed files as trunk wrote them into `dist/index.html`, loads the JS glue
//! and the WASM from the script's own folder (cross-origin: CORS answers the `--cors-origins`
//! storefronts only) and leaves the API base in `window.vestibuleWidget` for the WASM to read.
//!
//! The module is made once, when the router is built, from the page's `index.html`; it goes out
//! `no-cache` like the HTML, since it names the current asset hashes.

use axum::http::{header, HeaderValue};
use axum::response::IntoResponse;
use axum::Router;

use crate::state::AppState;

/// The page's files the widget loads, by their names in `dist/` (e.g. `vestibule-frontend-1f2e.js`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageAssets {
    /// wasm-bindgen's JS glue (an ES module whose default export instantiates the WASM).
    pub glue: String,
    /// The WASM.
    pub wasm: String,
    /// The stylesheet.
    pub css: String,
}

impl PageAssets {
    /// The asset names trunk wrote into `index_html` as relative URLs (`'./name'` or
    /// `"./name"`); `None` unless there is one `.js`, one `.wasm` and one `.css`.
    pub fn from_index(index_html: &str) -> Option<Self> {
        let mut names = Vec::new();
        for quote in ['"', '\''] {
            let opening = format!("{quote}./");
            let mut rest = index_html;
            while let Some(at) = rest.find(&opening) {
                rest = &rest[at + opening.len()..];
                let Some(end) = rest.find(quote) else { break };
                names.push(&rest[..end]);
                rest = &rest[end..];
            }
        }
        let plain = |name: &&str| {
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        let one = |suffix: &str| {
            let mut found: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| n.ends_with(suffix) && plain(n))
                .collect();
            found.dedup();
            (found.len() == 1).then(|| found[0].to_owned())
        };
        Some(Self {
            glue: one(".js")?,
            wasm: one(".wasm")?,
            css: one(".css")?,
        })
    }

    /// The widget module for these files.
    pub fn module(&self) -> String {
        format!(
            r#"// Vestibule's waiting-room widget: mounts the waiting view into each element with
// data-vestibule-room on this page (README "Embedding the page in a storefront").
const base = new URL("./", import.meta.url).href;
if (!window.vestibuleWidget && document.querySelector("[data-vestibule-room]")) {{
  window.vestibuleWidget = {{ base, css: base + "{css}" }};
  const glue = await import(base + "{glue}");
  await glue.default({{ module_or_path: base + "{wasm}" }});
}}
"#,
            css = self.css,
            glue = self.glue,
            wasm = self.wasm,
        )
    }
}

/// The `/widget.js` route when the built page names its files; none otherwise.
pub fn router(index_html: &str) -> Router<AppState> {
    let Some(assets) = PageAssets::from_index(index_html) else {
        tracing::warn!("dist/index.html names no single .js, .wasm and .css: no /widget.js");
        return Router::new();
    };
    let module = assets.module();
    Router::new().route(
        "/widget.js",
        axum::routing::get(move || async move {
            (
                [
                    (
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("text/javascript; charset=utf-8"),
                    ),
                    (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
                ],
                module,
            )
                .into_response()
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_widget_names_the_files_trunk_wrote() {
        let index = r#"<script type="module">
import init, * as bindings from './vestibule-frontend-a1b2.js';
const wasm = await init({ module_or_path: './vestibule-frontend-a1b2_bg.wasm' });
</script>
<link rel="modulepreload" href="./vestibule-frontend-a1b2.js" crossorigin="anonymous">
<link rel="stylesheet" href="./style-c3d4.css" integrity="sha384-x"/>"#;
        let assets = PageAssets::from_index(index).unwrap();
        assert_eq!(assets.glue, "vestibule-frontend-a1b2.js");
        assert_eq!(assets.wasm, "vestibule-frontend-a1b2_bg.wasm");
        assert_eq!(assets.css, "style-c3d4.css");
        let module = assets.module();
        assert!(module.contains(r#"import(base + "vestibule-frontend-a1b2.js")"#));
        assert!(module.contains("import.meta.url"));
        assert_eq!(PageAssets::from_index("<html></html>"), None);
    }
}
