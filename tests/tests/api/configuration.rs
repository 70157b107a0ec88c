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
