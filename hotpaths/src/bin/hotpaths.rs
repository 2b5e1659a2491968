//! `hotpaths WORKLOAD N`: runs one hot-path workload N times (for callgrind; see
//! `scripts/gate.sh`); `hotpaths --list` names the workloads. Prints the workload's checksum so the work cannot be optimised away.

fn main() {
    if std::env::args().nth(1).as_deref() == Some("--list") {
        println!("{}", hotpaths::WORKLOADS.join(" "));
        return;
    }
    let mut args = std::env::args().skip(1);
    let (Some(name), Some(n)) = (args.next(), args.next().and_then(|n| n.parse().ok())) else {
        eprintln!(
            "usage: hotpaths WORKLOAD N   (workloads: {})",
            hotpaths::WORKLOADS.join(", ")
        );
        std::process::exit(2);
    };
    match hotpaths::run(&name, n) {
        Some(sum) => println!("{name} {n} {sum}"),
        None => {
            eprintln!(
                "unknown workload {name}; known: {}",
                hotpaths::WORKLOADS.join(", ")
            );
            std::process::exit(2);
        }
    }
}
