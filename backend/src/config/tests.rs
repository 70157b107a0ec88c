//! Unit tests of the configuration: defaults, validation, secrets kept out of `Debug`.

use super::*;

fn parse(args: &[&str]) -> Config {
    let mut all = vec!["vestibule"];
    all.extend_from_slice(args);
    Config::try_parse_from(all).expect("parses")
}

#[test]
fn defaults_are_valid_and_match_the_design() {
    let config = parse(&[]);
    config.validate().unwrap();
    assert_eq!(config.rooms, ["main"]);
    assert_eq!(config.admission_rate, 175.0);
    assert_eq!(config.tick_ms, 100);
    assert_eq!(config.token_ttl_secs, 300);
    assert_eq!(config.poll_tiers.after_ms(10), 3000);
    assert_eq!(config.poll_tiers.after_ms(11), 10_000);
    assert_eq!(config.poll_tiers.after_ms(100), 10_000);
    assert_eq!(config.poll_tiers.after_ms(101), 30_000);
    assert_eq!(config.data_dir, DataDir(Some("vestibule-data".into())));
    assert_eq!(parse(&["--data-dir", "none"]).data_dir, DataDir(None));
    assert!(Config::try_parse_from(["vestibule", "--data-fsync", "sometimes"]).is_err());
}

#[test]
fn invalid_settings_are_rejected_with_the_flag_named() {
    for (args, flag) in [
        (vec!["--rooms", "Main"], "--rooms"),
        (vec!["--rooms", "a,a"], "--rooms"),
        (vec!["--tick-ms", "0"], "--tick-ms"),
        (vec!["--admin-token", "short"], "--admin-token"),
        (vec!["--cors-origins", "shop.example"], "--cors-origins"),
        (vec!["--lease-ms", "100"], "--lease-ms"),
        (vec!["--trusted-proxy-hops", "0"], "--trusted-proxy-hops"),
        (vec!["--write-timeout-secs", "0"], "--write-timeout-secs"),
        (vec!["--data-dir", ""], "--data-dir"),
        (vec!["--data-dir", "Cargo.toml"], "--data-dir"),
    ] {
        let reason = parse(&args).validate().unwrap_err();
        assert!(reason.contains(flag), "{args:?} gave {reason}");
    }
}

#[test]
fn room_settings_out_of_their_bounds_are_refused_by_clap() {
    for (args, flag) in [
        (["--token-ttl-secs", "0"], "--token-ttl-secs"),
        (["--token-ttl-secs", "86401"], "--token-ttl-secs"),
        (["--max-active-users", "0"], "--max-active-users"),
        (["--max-active-users", "10000001"], "--max-active-users"),
        (["--admission-rate", "-5"], "--admission-rate"),
        (["--admission-rate", "100000.5"], "--admission-rate"),
        (["--admission-rate", "NaN"], "--admission-rate"),
    ] {
        let error = Config::try_parse_from(["vestibule", args[0], args[1]])
            .unwrap_err()
            .to_string();
        assert!(error.contains(flag), "{args:?} gave {error}");
    }
    let edges = parse(&[
        "--token-ttl-secs",
        "86400",
        "--max-active-users",
        "10000000",
    ]);
    edges.validate().unwrap();
    assert_eq!(edges.max_active_users, Some(10_000_000));
}

#[test]
fn room_settings_are_checked_again_by_validate_with_their_unit() {
    let mut config = parse(&[]);
    config.token_ttl_secs = 0;
    assert_eq!(
        config.validate().unwrap_err(),
        "--token-ttl-secs must be 1–86400 s, got 0"
    );
    config.token_ttl_secs = 300;
    config.max_active_users = Some(0);
    assert!(config
        .validate()
        .unwrap_err()
        .contains("--max-active-users must be 1–10000000"));
    config.max_active_users = None;
    config.serving_threads = 257;
    assert_eq!(
        config.validate().unwrap_err(),
        "--serving-threads must be 0–256 (0: one per CPU core), got 257"
    );
    config.serving_threads = 0;
    assert!(config.serving_threads() >= 1, "0 means one thread per core");
    config.serving_threads = 3;
    assert_eq!(config.serving_threads(), 3);
    config.admission_rate = f64::NAN;
    assert!(config
        .validate()
        .unwrap_err()
        .contains("--admission-rate must be 0–100000 shoppers/s"));
}

#[test]
fn an_outage_policy_for_a_room_not_configured_is_refused() {
    let reason = parse(&["--outage-policy", "reject,ghost=pass"])
        .validate()
        .unwrap_err();
    assert!(reason.contains("--outage-policy"), "{reason}");
}

#[test]
fn debug_output_of_a_config_shows_no_secret() {
    let config = parse(&[
        "--admin-token",
        "admin-token-0123456789",
        "--user-assertion-secret",
        "assertion-secret-0123456789",
        "--redis-url",
        "redis://app:redis-password-42@redis:6379/0",
    ]);
    config.validate().unwrap();
    let shown = format!("{config:?}");
    for secret in [
        "admin-token-0123456789",
        "assertion-secret-0123456789",
        "redis-password-42",
        "redis:6379",
    ] {
        assert!(!shown.contains(secret), "{secret} printed in {shown}");
    }
    assert_eq!(shown.matches("[REDACTED]").count(), 3, "{shown}");
    assert_eq!(
        config.redis_url_for_logs().as_deref(),
        Some("redis://app:***@redis:6379/0")
    );
}

#[test]
fn redis_passwords_never_reach_the_logs() {
    assert_eq!(
        redact_url_password("redis://app:s3cret@redis:6379/0"),
        "redis://app:***@redis:6379/0"
    );
    assert_eq!(
        redact_url_password("redis://redis:6379"),
        "redis://redis:6379"
    );
    assert_eq!(
        redact_url_password("redis+unix:///run/redis.sock?db=1&pass=s3cret"),
        "redis+unix:///run/redis.sock?db=1&pass=***"
    );
    assert_eq!(
        redact_url_password("rediss://:s3cret@redis:6380?password=s3cret"),
        "rediss://:***@redis:6380?password=***"
    );
}

#[test]
fn a_redis_url_and_a_cluster_exclude_each_other() {
    let config = parse(&[
        "--redis-url",
        "redis://127.0.0.1:6379",
        "--redis-cluster",
        "redis://127.0.0.1:7000",
    ]);
    let reason = config.validate().unwrap_err();
    assert!(
        reason.contains("--redis-url") && reason.contains("--redis-cluster"),
        "{reason}"
    );
    let config = parse(&["--redis-cluster", "redis+unix:///tmp/redis.sock"]);
    let reason = config.validate().unwrap_err();
    assert!(reason.contains("redis://"), "{reason}");
    let config = parse(&["--redis-cluster", " , "]);
    assert!(config.validate().unwrap_err().contains("at least one"));
    let config = parse(&[
        "--redis-cluster",
        "redis://:pw-123@10.0.0.1:7000, redis://10.0.0.2:7000",
    ]);
    config.validate().unwrap();
    assert_eq!(
        config.redis_target(),
        Some(RedisTarget::Cluster(vec![
            "redis://:pw-123@10.0.0.1:7000",
            "redis://10.0.0.2:7000"
        ]))
    );
    assert_eq!(
        config.redis_url_for_logs().as_deref(),
        Some("redis://:***@10.0.0.1:7000,redis://10.0.0.2:7000")
    );
    assert!(!format!("{config:?}").contains("pw-123"));
}

#[test]
fn the_scheduler_nice_value_is_minus_10_by_default_takes_negatives_and_is_bounded() {
    assert_eq!(parse(&[]).scheduler_nice, -10);
    let config = parse(&["--scheduler-nice", "-20"]);
    assert_eq!(config.scheduler_nice, -20);
    config.validate().unwrap();
    let mut config = parse(&["--scheduler-nice", "0"]);
    assert_eq!(config.scheduler_nice, 0);
    config.scheduler_nice = 20;
    assert_eq!(
        config.validate().unwrap_err(),
        "--scheduler-nice must be -20–19, got 20"
    );
}
