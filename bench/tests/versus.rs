//! `bench versus` end to end at a small scale: goharvest v0.3.1's own reaper (built from the Go
//! module proxy by `scripts/services/goharvest.sh`) and ours, each on the same goharvest YAML, table and
//! rows, on the private Kafka 3.9.1 the command starts and the test services' Postgres. Both
//! relays must drain every row and the verifying consumer must find every record once in
//! per-key order; the report must carry the side-by-side figures. The failover workload is left
//! to the bench itself: at this size ours empties the table before a kill could land.

use std::path::PathBuf;

use bench::versus::{build_goharvest, run, Binaries, Relay, VersusOptions};

fn reaper() -> PathBuf {
    // target/<profile>/deps/versus-<hash> -> target/<profile>/reaper (built by the workspace).
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("reaper")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_relays_drain_the_same_rows_verified() {
    testkit::init_tracing();
    let out = std::env::temp_dir().join(testkit::names::unique("versus"));
    let options = VersusOptions {
        database_url: testkit::pg::database_url(),
        binaries: Binaries {
            goharvest: build_goharvest().expect("build goharvest's reaper (Go is installed)"),
            ours: reaper(),
            ours_settings: Vec::new(),
        },
        only: vec!["drain".into(), "hot-key".into()],
        // 4,000 rows over 1,000 keys, and 60 of one key.
        scale: 0.02,
        out: out.clone(),
        command: "tests/versus.rs".into(),
    };
    let (report, correct) = run(&options).await.expect("bench versus runs");
    let text = std::fs::read_to_string(&report).unwrap();
    println!("{text}");
    assert!(correct, "every case must finish correct:\n{text}");
    let lines: Vec<serde_json::Value> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect::<Vec<_>>()
        })
        .filter(|v: &serde_json::Value| v.get("relay").is_some())
        .collect();
    assert_eq!(lines.len(), 4, "two workloads, two relays each");
    for relay in [Relay::Goharvest, Relay::Ours] {
        let name = relay.name();
        for l in lines.iter().filter(|l| l["relay"] == name) {
            let o = &l["outcome"];
            assert_eq!(o["delivered"], o["rows"], "{name}: {o}");
            assert!(o["rate"].as_f64().unwrap() > 0.0, "{name}: {o}");
            assert!(o["relay_cpu_s"].as_f64().unwrap() > 0.0, "{name}: {o}");
        }
    }
    assert!(text.contains("| drain | ours |"), "{text}");
    assert!(
        text.contains("ours at least 20x goharvest's rate"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
