//! `lacquer test`: the behaviour suite in `tests/vtc/` passes, and the
//! runner itself reports passes, failures, timeouts and skips as it
//! should (fixtures in `tests/vtc-runner/`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .arg("test")
        .args(args)
        .output()
        .expect("lacquer test runs")
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vtc-runner")
        .join(name)
        .display()
        .to_string()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_behaviour_suite_passes() {
    suite_passes("tests/vtc", 8);
}

#[test]
fn the_hostile_input_suite_passes() {
    suite_passes("tests/hostile", 10);
}

/// Runs every `.vtc` file of a folder under `lacquer test`.
fn suite_passes(folder: &str, at_least: usize) {
    let mut files: Vec<String> = std::fs::read_dir(root().join(folder))
        .expect("the suite's folder exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "vtc"))
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    assert!(
        files.len() >= at_least,
        "the suite has its tests: {files:?}"
    );
    let mut args = vec!["-j", "2", "-k"];
    args.extend(files.iter().map(String::as_str));
    let out = run(&args);
    let t = text(&out);
    let passed = out.status.success() && t.contains(&format!("{} passed, 0 failed", files.len()));
    assert!(passed, "{}", failures_first(&t));
}

/// The run's output with what failed first: each failure's lines
/// (`----`), any panic a daemon printed, and the tests' verdicts, then
/// the whole log, so that a shortened report still says why.
fn failures_first(t: &str) -> String {
    let summary: Vec<&str> = t
        .lines()
        .filter(|l| {
            l.starts_with("----")
                || l.contains(" FAILED")
                || l.contains(" failed")
                || l.contains("Panic in thread")
                || l.contains("panicked at")
        })
        .collect();
    format!(
        "what failed:\n{}\n\nthe whole run:\n{t}",
        summary.join("\n")
    )
}

#[test]
fn client_server_commands_work() {
    let out = run(&["-D", "greeting=hi there", &fixture("wire.vtc")]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("wire.vtc passed"), "{t}");
    assert!(t.ends_with("1 passed, 0 failed\n"), "{t}");
}

#[test]
fn a_wrong_expect_fails_naming_both_values() {
    let out = run(&[&fixture("expect_fails.vtc")]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains("---- c1    EXPECT resp.status (404) == \"200\" failed"),
        "{t}"
    );
    assert!(t.contains("expect_fails.vtc FAILED"), "{t}");
    assert!(t.contains("0 passed, 1 failed"), "{t}");
}

#[test]
fn a_hung_test_is_killed_at_the_timeout() {
    let started = std::time::Instant::now();
    let out = run(&["-t", "1", &fixture("hangs.vtc")]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("timed out after 1 s"), "{t}");
    assert!(t.contains("hangs.vtc FAILED"), "{t}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{t}"
    );
}

#[test]
fn a_missing_macro_fails_and_a_missing_feature_skips() {
    let out = run(&[
        "-k",
        &fixture("missing_macro.vtc"),
        &fixture("unknown_feature.vtc"),
    ]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("Macro ${nosuch_sock} not found"), "{t}");
    assert!(t.contains("unknown_feature.vtc skipped"), "{t}");
    assert!(t.contains("0 passed, 1 failed, 1 skipped"), "{t}");
}

#[test]
fn without_k_the_first_failure_stops_the_run() {
    let out = run(&[&fixture("expect_fails.vtc"), &fixture("wire.vtc")]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(!t.contains("wire.vtc"), "{t}");
}

#[test]
fn repeats_loops_raw_bytes_dispatch_socket_barriers_and_varnish_options_work() {
    let out = run(&["-t", "20", &fixture("more.vtc")]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("more.vtc passed"), "{t}");
}
