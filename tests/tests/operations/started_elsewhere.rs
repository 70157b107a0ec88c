//! Started from another folder: the server says where it looked for the page.

use reqwest::StatusCode;
use vestibule_tests::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn started_outside_the_checkout_it_says_where_it_looked_for_the_page() {
    let elsewhere = tempfile::tempdir().unwrap();
    let app = TestApp::spawn_in(elsewhere.path(), None, &[]).await;
    let expected = elsewhere.path().canonicalize().unwrap().join("dist");
    let log = app.log();
    assert!(
        log.contains("the waiting-room page is not served")
            && (log.contains(&expected.display().to_string())
                || log.contains(&elsewhere.path().join("dist").display().to_string())),
        "{log}"
    );
    assert!(log.contains("--static-dir"), "{log}");
    // The API works regardless.
    assert_eq!(app.join("main", None).await.0, StatusCode::CREATED);
}
