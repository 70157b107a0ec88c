//! The contract, kept: the OpenAPI document says exactly what the server does.
//!
//! Schemathesis (an independent OpenAPI fuzzer, from PyPI) generates requests from
//! `/api/v1/openapi.json` alone and checks every answer against the document: status codes,
//! content types, headers and schemas are declared, no 5xx, valid input is accepted and invalid
//! input refused, and the links join → poll → leave hold (stateful phase). A second-language
//! client (`examples/python_client.py`, httpx + httpx-sse) then runs the whole flow from the
//! document.

use std::process::Command;
use vestibule_shared::paths;

use serde_json::json;
use vestibule_tests::{python_tool, workspace_root, Backend, TestApp, ADMIN_TOKEN};

/// Test cases the fuzzer must generate per store (each is at least one request).
const MIN_CASES: u64 = 1000;

/// The number after "Test cases:" in Schemathesis's summary ("1408 generated, …").
fn generated_cases(summary: &str) -> u64 {
    summary
        .split("Test cases:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

async fn the_document_survives_schemathesis(backend: Backend) {
    // Short token TTL: tickets admitted during the run end quickly.
    let app = TestApp::spawn(backend, &["--token-ttl-secs", "1"]).await;
    let config = workspace_root().join("tests/schemathesis.toml");
    let schemathesis = python_tool("schemathesis");
    let document = app.url(paths::OPENAPI);
    let base = app.base.clone();
    // Schemathesis keeps a cache in its working folder: not in the checkout.
    let scratch = tempfile::tempdir().unwrap();
    let scratch_path = scratch.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(schemathesis)
            .current_dir(scratch_path)
            .arg("--config-file")
            .arg(config)
            .args(["run", &document, "--url", &base])
            .args(["-H", &format!("Authorization: Bearer {ADMIN_TOKEN}")])
            // Every check, but `use_after_free`: a ticket that left stays readable (status
            // LEFT) for an hour by design, so the page can say so.
            .args(["--checks", "all", "--exclude-checks", "use_after_free"])
            // The event streams stay open (a ticket's while it waits, the admin figures
            // always): a request/response fuzzer cannot judge them; the Python client below
            // reads a ticket's as a client would, `api/admin_events.rs` the admin one with curl.
            .args(["--exclude-operation-id", "events"])
            .args(["--exclude-operation-id", "admin_events"])
            .args(["--max-examples", "100", "--request-timeout", "5"])
            .args(["--seed", "20261130", "--no-color"])
            .env("NO_COLOR", "1")
            .output()
            .expect("schemathesis runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout.rsplit("SUMMARY").next().unwrap_or_default();
    println!("{summary}");
    assert!(
        output.status.success(),
        "schemathesis found failures:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let cases = generated_cases(summary);
    assert!(cases >= MIN_CASES, "only {cases} test cases generated");
    assert!(!app.log().contains("panicked"), "{}", app.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_failure_on_the_embedded_store() {
    the_document_survives_schemathesis(Backend::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_failure_on_redis() {
    the_document_survives_schemathesis(Backend::Redis).await;
}

/// Runs the Python example client against `app` and returns its last line (a JSON summary).
async fn python_client(app: &TestApp, args: &[&str]) -> serde_json::Value {
    let script = workspace_root().join("examples/python_client.py");
    let python = python_tool("python");
    let mut command = Command::new(python);
    command
        .arg(script)
        .args(["--base", &app.base, "--room", "main"])
        .args(args);
    let output = tokio::task::spawn_blocking(move || command.output().expect("python runs"))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "the Python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{stdout}");
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("summary line")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_client_built_from_the_document_polls_streams_and_is_admitted() {
    let app = TestApp::spawn(Backend::Memory, &["--admission-rate", "1"]).await;
    app.patch_room("main", json!({"paused": true})).await;
    for _ in 0..3 {
        app.join("main", None).await;
    }
    let resume = {
        let client = app.client.clone();
        let url = app.url(&paths::admin_room("main"));
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(3)).await;
            client
                .patch(url)
                .bearer_auth(ADMIN_TOKEN)
                .json(&json!({"paused": false}))
                .send()
                .await
        })
    };
    let summary = python_client(&app, &["--polls", "2"]).await;
    resume.await.unwrap().unwrap();
    assert_eq!(summary["final"], "TOKEN_ISSUED", "{summary}");
    assert_eq!(summary["polls"], 2);
    assert!(summary["events"].as_u64().unwrap() >= 1, "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_client_built_from_the_document_can_leave_the_line() {
    let app = TestApp::spawn(Backend::Redis, &[]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let summary = python_client(&app, &["--polls", "1", "--leave"]).await;
    assert_eq!(summary["final"], "LEFT", "{summary}");
    assert_eq!(app.get_json(&paths::room("main")).await.1["waiting"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_a_route_does_not_take_gets_405_even_behind_the_token_layer() {
    let app = TestApp::spawn(Backend::Memory, &[]).await;
    for (method, path) in [
        (reqwest::Method::GET, &paths::orders("main")),
        (reqwest::Method::DELETE, &paths::orders("main")),
        (reqwest::Method::PUT, &paths::tickets("main")),
        (reqwest::Method::POST, &paths::room("main")),
    ] {
        let answer = app
            .client
            .request(method.clone(), app.url(path))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 405, "{method} {path}");
        let body: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(body["error"], "method_not_allowed", "{method} {path}");
    }
}
