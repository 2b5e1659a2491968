//! The files under `examples/` (the repository's) are configurations the reaper accepts as
//! they are: users copy them, and the README's quick start runs the minimal one.
//!
//! Each goes through `reaper check-config` with the secrets it names provided (temporary files
//! and environment variables, the paths it names redirected with `--set` to files the test
//! wrote) and must pass without any secret value in the output; without those secrets the
//! secured one must fail naming each setting, so the provision is what made it pass. A file
//! added to the folder without an entry here fails [`every_example_is_checked`]. The minimal
//! example then harvests for real against the running services: the reaper started with it
//! (its group, table and HTTP port made the test's own through `HARVESTER__*` variables)
//! publishes a written row and purges it, within bounds derived from the example's own
//! timeouts plus the stated load margin.

use std::path::{Path, PathBuf};
use std::process::Command;

use harvester::Config;
use testkit::process::{Observed, Signal};
use testkit::wait_for;

use crate::common::reaper::{reaper_bin, stop_bound, Reaper};
use crate::common::World;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// A file the example names that the test provides.
enum Provided {
    /// A Kafka property whose value is a file path: what the file holds.
    Kafka(&'static str, Holds),
    /// A parameter of `database.url` naming a PEM file.
    UrlParam(&'static str),
}

#[derive(Clone, Copy)]
enum Holds {
    Secret,
    Pem,
}

/// An example and what `check-config` needs to pass on it.
struct Example {
    file: &'static str,
    /// Environment variables it reads secrets from (the test sets each to a secret of its own).
    env: &'static [&'static str],
    files: &'static [Provided],
}

/// Every file of `examples/` but its README.
const EXAMPLES: [Example; 5] = [
    Example {
        file: "minimal-postgres-neli.toml",
        env: &[],
        files: &[],
    },
    Example {
        file: "secured-sasl-ssl-postgres-tls.toml",
        env: &["HARVESTER_DB_PASSWORD"],
        files: &[
            Provided::Kafka("sasl.password_file", Holds::Secret),
            Provided::Kafka("ssl.ca.location", Holds::Pem),
            Provided::UrlParam("sslrootcert"),
        ],
    },
    Example {
        file: "scale-out-rink.toml",
        env: &["HARVESTER_DB_PASSWORD"],
        files: &[],
    },
    Example {
        file: "mariadb.toml",
        env: &["HARVESTER_DB_PASSWORD"],
        files: &[],
    },
    Example {
        file: "goharvest.yaml",
        env: &[],
        files: &[],
    },
];

/// A folder of the test's own files, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let dir = std::env::temp_dir().join(testkit::names::unique("examples"));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a `check-config` run is given: environment, `--set` overrides, and the secret values
/// that must not be printed.
#[derive(Default)]
struct Provision {
    env: Vec<(String, String)>,
    sets: Vec<String>,
    secrets: Vec<String>,
}

/// Provides what `example` names: a secret for each variable, a file for each path (a secret,
/// or a throwaway CA's certificate), and `--set` pointing the example's paths at those files.
fn provide(example: &Example, config: &Config, scratch: &Scratch) -> Provision {
    let mut p = Provision::default();
    for var in example.env {
        let secret = testkit::names::unique("env-secret");
        p.env.push(((*var).to_owned(), secret.clone()));
        p.secrets.push(secret);
    }
    let ca = testkit::tls::Authority::new("examples-ca").unwrap();
    for (i, provided) in example.files.iter().enumerate() {
        match provided {
            Provided::Kafka(key, holds) => {
                let named = config
                    .kafka
                    .get(key)
                    .unwrap_or_else(|| panic!("{} names no kafka.\"{key}\"", example.file));
                assert!(
                    named.starts_with('/'),
                    "{key}: an absolute path, not {named}"
                );
                let text = match holds {
                    Holds::Secret => {
                        let secret = testkit::names::unique("file-secret");
                        p.secrets.push(secret.clone());
                        secret + "\n"
                    }
                    Holds::Pem => ca.cert_pem().to_owned(),
                };
                let path = scratch.write(&format!("kafka-{i}"), &text);
                p.sets.push(format!("kafka.\"{key}\"={path}"));
            }
            Provided::UrlParam(param) => {
                let url = &config.database.url;
                let named = url::Url::parse(url)
                    .unwrap()
                    .query_pairs()
                    .find(|(k, _)| k == param)
                    .unwrap_or_else(|| panic!("{} has no {param} in its url", example.file))
                    .1
                    .into_owned();
                let path = scratch.write(&format!("url-{i}.pem"), ca.cert_pem());
                p.sets
                    .push(format!("database.url={}", url.replace(&named, &path)));
            }
        }
    }
    p
}

/// `reaper check-config --config <example>` with `provision`: (exit code, stdout and stderr).
fn check_config(file: &Path, provision: &Provision) -> (i32, String) {
    let mut cmd = Command::new(reaper_bin());
    cmd.arg("check-config").arg("--config").arg(file);
    for set in &provision.sets {
        cmd.arg("--set").arg(set);
    }
    for (var, value) in &provision.env {
        cmd.env(var, value);
    }
    let out = cmd.output().expect("the reaper runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn every_example_passes_check_config_without_showing_a_secret() {
    for example in &EXAMPLES {
        let file = examples().join(example.file);
        let config = Config::from_file(&file)
            .unwrap_or_else(|e| panic!("{} does not read: {e}", example.file));
        let scratch = Scratch::new();
        let provision = provide(example, &config, &scratch);
        let (code, out) = check_config(&file, &provision);
        assert_eq!(code, 0, "{}: check-config failed:\n{out}", example.file);
        let printed: Config = toml::from_str(&out).unwrap_or_else(|e| {
            panic!(
                "{}: the printed config does not read back: {e}\n{out}",
                example.file
            )
        });
        assert_eq!(
            printed.leader.kind(),
            config.leader.kind(),
            "{}",
            example.file
        );
        for secret in &provision.secrets {
            assert!(
                !out.contains(secret.as_str()),
                "{}: check-config printed a secret:\n{out}",
                example.file
            );
        }
    }
}

#[test]
fn the_secured_example_needs_every_secret_it_names() {
    let example = &EXAMPLES[1];
    let file = examples().join(example.file);
    let (code, out) = check_config(&file, &Provision::default());
    assert_eq!(code, 2, "without its secrets it is refused:\n{out}");
    let mut named: Vec<String> = example
        .env
        .iter()
        .map(|var| format!("database.password: cannot read the environment variable \"{var}\""))
        .collect();
    for provided in example.files {
        named.push(match provided {
            Provided::Kafka(key, _) => format!("kafka.\"{key}\""),
            Provided::UrlParam(param) => format!("database.url: its {param}"),
        });
    }
    for problem in named {
        assert!(out.contains(&problem), "no problem {problem:?} in:\n{out}");
    }
}

#[test]
fn every_example_is_checked() {
    let mut on_disk: Vec<String> = std::fs::read_dir(examples())
        .expect("examples/ is readable")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "README.md")
        .collect();
    on_disk.sort();
    let mut checked: Vec<String> = EXAMPLES.iter().map(|e| e.file.to_owned()).collect();
    checked.sort();
    assert_eq!(
        on_disk, checked,
        "every file under examples/ needs an entry in EXAMPLES (tests/it/meta/examples.rs)"
    );
    let readme = std::fs::read_to_string(examples().join("README.md")).unwrap();
    for file in &checked {
        assert!(
            readme.contains(&format!("]({file})")),
            "examples/README.md does not list {file}"
        );
    }
}

/// Starts the reaper on the minimal example, made the test's own by environment overrides
/// (`HARVESTER__*`): the world's group and table, a free HTTP port, and the world's database and
/// brokers where `scripts/services.sh` found them elsewhere than the example says.
async fn start_minimal(world: &World, example: &Config) -> Reaper {
    let mut cmd = Command::new(reaper_bin());
    cmd.args([
        "--config",
        examples().join(EXAMPLES[0].file).to_str().unwrap(),
    ])
    .arg("--events-json")
    .env("RUST_LOG", "warn")
    .env("HARVESTER__LEADER__GROUP_ID", &world.group)
    .env("HARVESTER__OUTBOX__TABLE", world.table().to_string())
    .env("HARVESTER__HTTP__LISTEN", "127.0.0.1:0");
    let bootstrap = world.broker.bootstrap();
    if example.kafka.get("bootstrap.servers") != Some(bootstrap) {
        println!("the services' brokers are {bootstrap}, not the example's: overridden");
        cmd.env("HARVESTER__KAFKA__BOOTSTRAP_SERVERS", bootstrap);
    }
    if example.database.url != world.db.url() {
        println!("the services' database is elsewhere than the example's: overridden");
        cmd.env("HARVESTER__DATABASE__URL", world.db.url());
    }
    Reaper::serving(Observed::spawn("minimal-example", cmd).unwrap()).await
}

#[tokio::test]
async fn the_minimal_example_harvests_against_the_services() {
    let example = Config::from_file(&examples().join(EXAMPLES[0].file)).unwrap();
    let world = World::new("exmin", 1).await;
    let mut reaper = start_minimal(&world, &example).await;
    // Leading: its connection check, the group forming (NELI's coordinator may wait a
    // session), then at most a succession; the example's own timeouts plus the load margin.
    let lead = testkit::within(example.limits.connect_timeout + example.leader.succession() * 2);
    wait_for("the example's reaper leads", lead, || async {
        reaper.is_leader().await
    })
    .await
    .unwrap();
    // It migrated the table on start (`database.migrate`): the writer's rows go in.
    world.write(3, 2, 2).await;
    // Publishing what is there: its producers connect within limits.connect_timeout and a
    // commit's NOTIFY (at worst idle_poll_interval) starts a mark.
    let stall = testkit::within(example.limits.connect_timeout + example.limits.idle_poll_interval);
    let report = world.verify(stall).await;
    report.assert_correct();
    assert_eq!(report.delivered, 6);
    world.drained_while_progressing(stall).await;
    reaper.proc.signal(Signal::Term).unwrap();
    let exit = reaper
        .proc
        .wait_exit(testkit::within(stop_bound(&example)))
        .expect("it exits");
    assert!(exit.success(), "a graceful stop exits 0: {exit}");
}
