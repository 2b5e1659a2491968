//! Which processes on this machine serve a bootstrap list: a real broker's CPU is measured only
//! when it runs here (`scripts/services.sh` or a private cluster), found by the TCP port it
//! listens on (`/proc/net/tcp{,6}` gives the listening socket's inode, `/proc/<pid>/fd` the
//! process holding it), not by a pid file a remote or hand-started broker would not have.

use std::collections::BTreeSet;

/// The ports of a `host:port,host:port` list whose host is this machine.
fn local_ports(bootstrap: &str) -> BTreeSet<u16> {
    bootstrap
        .split(',')
        .filter_map(|b| {
            let (host, port) = b.trim().rsplit_once(':')?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            matches!(host, "127.0.0.1" | "localhost" | "::1" | "0.0.0.0" | "")
                .then(|| port.parse().ok())
                .flatten()
        })
        .collect()
}

/// Inodes of the sockets listening on `ports`, from a `/proc/net/tcp` table's text.
fn listening_inodes(table: &str, ports: &BTreeSet<u16>) -> BTreeSet<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let port = u16::from_str_radix(f.get(1)?.rsplit_once(':')?.1, 16).ok()?;
            // State 0A is LISTEN.
            (f.get(3) == Some(&"0A") && ports.contains(&port))
                .then(|| f.get(9)?.parse().ok())
                .flatten()
        })
        .collect()
}

/// The processes listening on the local ports of `bootstrap` (empty for a remote cluster).
pub fn broker_pids(bootstrap: &str) -> Vec<u32> {
    let ports = local_ports(bootstrap);
    if ports.is_empty() {
        return Vec::new();
    }
    let mut inodes = BTreeSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(table) {
            inodes.extend(listening_inodes(&text, &ports));
        }
    }
    if inodes.is_empty() {
        return Vec::new();
    }
    let mut pids = BTreeSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|l| {
                l.to_str()
                    .and_then(|s| s.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok())
                    .is_some_and(|inode: u64| inodes.contains(&inode))
            })
        });
        if holds {
            pids.insert(pid);
        }
    }
    pids.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_hosts_count() {
        let ports = local_ports("127.0.0.1:19092, kafka.example:9092,localhost:19093,[::1]:7");
        assert_eq!(ports.into_iter().collect::<Vec<_>>(), vec![7, 19092, 19093]);
    }

    #[test]
    fn a_listening_socket_is_found_by_its_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:4A94 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1828368 1 0 100 0 0 10 0\n\
   1: 0100007F:4A94 0100007F:D439 01 00000000:00000000 00:00000000 00000000     0        0 1761966 1 0 100 0 0 10 0\n";
        let ports = BTreeSet::from([0x4A94]);
        assert_eq!(listening_inodes(table, &ports), BTreeSet::from([1_828_368]));
    }

    #[test]
    fn this_process_is_found_listening() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let pids = broker_pids(&format!("127.0.0.1:{port}"));
        assert_eq!(pids, vec![std::process::id()]);
        assert!(broker_pids("kafka.example:9092").is_empty());
    }
}
