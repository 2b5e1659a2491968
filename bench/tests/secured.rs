//! `listener = "sasl_ssl"` end to end: the `bench` and `reaper` binaries of this build run a
//! short drain and a short stream with every Kafka client (the harvesters', the verifier's) on
//! the SASL_SSL listener of the broker `scripts/services.sh up` started, against its Postgres.
//! Each run must verify and the report must say which listener it used; and the SASL password
//! must be nowhere the bench writes: no file of the run's output directory, not its stdout,
//! not its stderr (where the reapers' stderr goes too). Where there is no secured listener, a
//! secured scenario is refused before anything runs, naming the scenario and the field.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use testkit::secured::{SecuredKafka, ADMIN};

/// `REAPER_BIN` if set (a target directory shared by several checkouts holds whichever
/// `reaper` was built last), else the workspace's, next to this test.
fn reaper() -> PathBuf {
    if let Some(path) = std::env::var_os("REAPER_BIN") {
        return path.into();
    }
    // target/<profile>/deps/secured-<hash> -> target/<profile>/reaper (built by the workspace).
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("reaper")
}

/// A drain verified while it runs (a real cluster keeps the whole topic) and an open-loop
/// stream, both small: what is checked is the way in, not the figures.
const SCENARIOS: &str = r#"
[scenario.tiny-drain-sasl-ssl]
kind = "drain"
description = "A small drain on the SASL_SSL listener."
partitions = 2
backlog = { rows = 2000, keys = 50, value_bytes = 100 }
no_progress_timeout = "20s"
listener = "sasl_ssl"

[scenario.tiny-steady-sasl-ssl]
kind = "steady"
description = "A short stream on the SASL_SSL listener."
partitions = 2
duration = "2s"
no_progress_timeout = "20s"
writers = { writers = 1, rows_per_tx = 1, keys = { kind = "uniform", n = 50 }, mode = { kind = "open", rate = 200.0 } }
listener = "sasl_ssl"
"#;

fn bench(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bench"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run the bench binary")
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_secured_run_verifies_and_writes_the_password_nowhere() {
    let secured = SecuredKafka::discover().expect("the secured listeners of scripts/services.sh");
    let password = secured.password(ADMIN).unwrap();
    // Long enough that finding it means it leaked, not that it happens to be a common word.
    assert!(
        password.len() >= 8,
        "the admin password is too short to search for"
    );
    let dir = std::env::temp_dir().join(testkit::names::unique("bench-secured"));
    let out = dir.join("results");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("secured.toml");
    std::fs::write(&file, SCENARIOS).unwrap();
    let reaper = reaper();
    let run = bench(
        &[
            "run",
            "--file",
            file.to_str().unwrap(),
            "--scenario",
            "tiny-drain-sasl-ssl",
            "--scenario",
            "tiny-steady-sasl-ssl",
            "--brokers",
            &secured.plaintext,
            "--no-ceilings",
            // What is checked is the way in and where the password goes, not the figures: no
            // warm-up (tests/warm_kafka.rs checks it), which would take two minutes here.
            "--cold",
            "--autovacuum",
            "as-found",
            "--out",
            out.to_str().unwrap(),
            "--reaper",
            reaper.to_str().unwrap(),
        ],
        // The reapers at info: what they print at start is searched too.
        &[("BENCH_REAPER_LOG", "info")],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "the secured runs did not pass ({}):\n{stdout}\n{stderr}",
        run.status
    );
    for name in ["tiny-drain-sasl-ssl", "tiny-steady-sasl-ssl"] {
        assert!(
            stdout.contains(&format!("- {name}: listener sasl_ssl (SASL_SSL")),
            "the report names {name}'s listener:\n{stdout}"
        );
    }
    let written = files(&out);
    let jsonl = written
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .expect("the run's JSON lines");
    let lines = std::fs::read_to_string(jsonl).unwrap();
    let listeners: Vec<String> = lines
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("listener")?.as_str().map(str::to_owned))
        .collect();
    assert_eq!(listeners, ["sasl_ssl", "sasl_ssl"], "{lines}");
    assert!(
        written.len() >= 4,
        "JSON lines, Markdown and plots: {written:?}"
    );
    let mut searched = vec![
        ("stdout".to_owned(), stdout.into_owned()),
        ("stderr".to_owned(), stderr.into_owned()),
    ];
    for path in &written {
        let bytes = std::fs::read(path).unwrap();
        searched.push((
            path.display().to_string(),
            String::from_utf8_lossy(&bytes).into_owned(),
        ));
    }
    for (what, text) in &searched {
        assert!(!text.contains(&password), "the SASL password is in {what}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_secured_scenario_is_refused_where_there_is_no_secured_listener() {
    let out = std::env::temp_dir().join(testkit::names::unique("bench-refused"));
    let out = out.to_str().unwrap();
    let refused = |run: Output, why: &str| {
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("invalid scenario drain-sasl-ssl: listener = \"sasl_ssl\"")
                && stderr.contains(why),
            "{stderr}"
        );
    };
    let run = [
        "run",
        "--scenario",
        "drain-sasl-ssl",
        "--no-ceilings",
        "--out",
        out,
    ];
    // The embedded broker has none.
    let embedded = [&run[..], &["--embedded"]].concat();
    refused(bench(&embedded, &[]), "embedded broker");
    // A real cluster whose secured listener was not exported (nor is in a state directory).
    let secured = SecuredKafka::discover().expect("the secured listeners of scripts/services.sh");
    let empty = std::env::temp_dir().join(testkit::names::unique("no-state"));
    std::fs::create_dir_all(&empty).unwrap();
    let unexported = [&run[..], &["--brokers", secured.plaintext.as_str()]].concat();
    refused(
        bench(
            &unexported,
            &[
                ("KAFKA_SASL_SSL_BROKERS", ""),
                ("HARVEST_STATE_DIR", empty.to_str().unwrap()),
            ],
        ),
        "is unset: the secured Kafka listeners are started by `scripts/services.sh up`",
    );
    let _ = std::fs::remove_dir(empty);
}
