//! Configuration: an invalid one is refused at start with a one-line reason.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_configuration_is_refused_with_a_one_line_reason() {
    let output = std::process::Command::new(vestibule_tests::vestibule_binary())
        .args(["--rooms", "Bad_Room"])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--rooms"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// The log tells an operator what runs and what changed: the mode at start, whether the data
/// dir was new or recovered, and a settings change as `field old → new` (not a Rust struct).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_names_the_mode_the_data_dir_and_each_change_old_to_new() {
    use vestibule_tests::TestApp;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_string_lossy().to_string();
    let args = ["--data-dir", data.as_str(), "--admission-rate", "50"];
    let app = TestApp::spawn_logging(None, &args, "info").await;
    app.patch_room(
        "main",
        serde_json::json!({"admissionRatePerSec": 20, "paused": true}),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let log = app.log();
    assert!(
        log.contains("mode: waiting room and API, embedded store in"),
        "{log}"
    );
    assert!(log.contains("embedded store in a new data dir"), "{log}");
    assert!(
        log.contains("room settings changed: admissionRatePerSec 50.0 → 20.0, paused false → true"),
        "{log}"
    );
    assert!(!log.contains("SettingsPatch {"), "{log}");
    drop(app);

    let again = TestApp::spawn_logging(None, &args, "info").await;
    let log = again.log();
    assert!(
        log.contains("embedded store recovered from its data dir"),
        "{log}"
    );
    assert!(!log.contains("new data dir"), "{log}");
}
