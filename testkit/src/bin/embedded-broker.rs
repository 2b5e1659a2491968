//! Hosts librdkafka's mock cluster in its own process; see `testkit::broker::host`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    about = "Embedded Kafka-protocol broker (librdkafka mock cluster) for tests and benchmarks"
)]
struct Args {
    /// Number of brokers in the mock cluster.
    #[arg(long, default_value_t = 1)]
    brokers: i32,
    /// Directory for broker.json (default: <state dir>/broker).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Initial rebalance delay of new consumer groups, e.g. "100ms".
    #[arg(long, default_value = "100ms", value_parser = humantime::parse_duration)]
    initial_rebalance_delay: Duration,
}

fn main() {
    testkit::init_tracing();
    let args = Args::parse();
    let options = testkit::broker::host::HostOptions {
        brokers: args.brokers,
        state_dir: args
            .state_dir
            .unwrap_or_else(|| testkit::state_dir().join("broker")),
        initial_rebalance_delay: args.initial_rebalance_delay,
    };
    if let Err(e) = testkit::broker::host::run(&options) {
        eprintln!("embedded-broker: {e}");
        std::process::exit(1);
    }
}
