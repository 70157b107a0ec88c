//! The page's files on the wire: brotli or gzip as the browser asks, within the WASM budget, and
//! only hashed names cached for long.

use super::*;

/// The page's WASM budget on the wire: gzip -9, as `scripts/build-page.sh` writes it
/// and the server sends it to a browser without brotli. BENCHMARKS.md has what each part costs.
const PAGE_WASM_GZIP_BUDGET: u64 = 120_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_files_go_out_compressed_and_only_hashed_names_are_cached_for_long() {
    let dist = dist_dir();
    let dist_arg = dist.to_string_lossy().to_string();
    let app = TestApp::spawn(Backend::Memory, &["--static-dir", &dist_arg]).await;
    let name_of = |extension: &str| {
        std::fs::read_dir(&dist)
            .unwrap()
            .filter_map(Result::ok)
            .map(|entry| entry.file_name().to_string_lossy().to_string())
            .find(|name| name.ends_with(extension))
            .unwrap_or_else(|| panic!("no *{extension} in dist/"))
    };
    let wasm = name_of(".wasm");
    let wasm_gzip = std::fs::metadata(dist.join(format!("{wasm}.gz")))
        .unwrap()
        .len();
    println!("{wasm}: {wasm_gzip} B gzip (budget {PAGE_WASM_GZIP_BUDGET} B)");
    assert!(
        wasm_gzip <= PAGE_WASM_GZIP_BUDGET,
        "the page's WASM is {wasm_gzip} B gzip, over its budget of {PAGE_WASM_GZIP_BUDGET} B \
         (BENCHMARKS.md: measure what each part costs before cutting)"
    );
    for (name, content_type) in [(wasm, "application/wasm"), (name_of(".js"), "javascript")] {
        let raw = std::fs::metadata(dist.join(&name)).unwrap().len();
        for (accept, encoding, copy) in [
            ("br", Some("br"), format!("{name}.br")),
            ("gzip", Some("gzip"), format!("{name}.gz")),
            ("gzip, deflate, br", Some("br"), format!("{name}.br")),
            ("identity", None, name.clone()),
        ] {
            let response = app
                .client
                .get(app.url(&format!("/{name}")))
                .header("accept-encoding", accept)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200, "{name} {accept}");
            let headers = response.headers().clone();
            assert_eq!(
                headers.get("content-encoding").map(|v| v.to_str().unwrap()),
                encoding,
                "{name} with Accept-Encoding: {accept}"
            );
            assert!(
                headers["content-type"]
                    .to_str()
                    .unwrap()
                    .contains(content_type),
                "{name}: {:?}",
                headers["content-type"]
            );
            assert_eq!(
                headers["cache-control"], "public, max-age=31536000, immutable",
                "{name}"
            );
            assert_eq!(headers["vary"], "accept-encoding", "{name}");
            let body = response.bytes().await.unwrap();
            let expected = std::fs::metadata(dist.join(&copy)).unwrap().len();
            assert_eq!(body.len() as u64, expected, "{name} {accept}");
            if encoding.is_some() {
                assert!(
                    (body.len() as u64) < raw * 6 / 10,
                    "{name}: {accept} {} of {raw} bytes",
                    body.len()
                );
            }
            println!("{name} ({accept}): {} bytes of {raw}", body.len());
        }
    }
    // The page itself (also for client-side routes) may be kept but is always revalidated.
    for path in ["/", "/checkout", "/index.html", "/some/client/route"] {
        let response = app
            .client
            .get(app.url(path))
            .header("accept-encoding", "br")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.headers()["cache-control"], "no-cache", "{path}");
        assert_eq!(response.headers()["content-encoding"], "br", "{path}");
    }
}
