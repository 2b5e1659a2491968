//! Why deliveries fail, when librdkafka does not say.
//!
//! A broker refuses a write to a partition with fewer replicas in sync than the topic's
//! `min.insync.replicas` (NOT_ENOUGH_REPLICAS, with `acks=all`), and librdkafka retries it until
//! `delivery.timeout.ms`: what the harvester is told then is only "message timed out", and
//! librdkafka's own log names the broker's error at debug only. So when a shard warns that
//! deliveries fail, it also reads the failing topic's metadata and says which partitions have
//! no leader or fewer replicas in sync than assigned: the cause an operator must fix on the
//! cluster, which no retry of the harvester's can.

/// One partition of a topic as the cluster's metadata reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionHealth {
    pub partition: i32,
    /// The leader's broker id, `None` when it has none.
    pub leader: Option<i32>,
    pub replicas: usize,
    pub in_sync: usize,
}

impl PartitionHealth {
    /// Without a leader, or with fewer replicas in sync than assigned.
    pub fn is_short(&self) -> bool {
        self.leader.is_none() || self.in_sync < self.replicas
    }
}

/// What is wrong with `topic`'s partitions, if anything: the partitions without a leader and
/// those short of in-sync replicas, each listed (at most [`LISTED`] of each kind).
pub fn shortfall(topic: &str, partitions: &[PartitionHealth]) -> Option<String> {
    let leaderless: Vec<String> = partitions
        .iter()
        .filter(|p| p.leader.is_none())
        .map(|p| p.partition.to_string())
        .collect();
    let short: Vec<String> = partitions
        .iter()
        .filter(|p| p.leader.is_some() && p.in_sync < p.replicas)
        .map(|p| format!("{} ({} of {})", p.partition, p.in_sync, p.replicas))
        .collect();
    let mut said = Vec::new();
    if !leaderless.is_empty() {
        said.push(format!(
            "{} of {} partitions without a leader: {}",
            leaderless.len(),
            partitions.len(),
            listed(&leaderless)
        ));
    }
    if !short.is_empty() {
        said.push(format!(
            "{} of {} partitions with fewer replicas in sync than assigned: {}; with acks=all \
             the brokers refuse writes (NOT_ENOUGH_REPLICAS) to those whose in-sync count is \
             below the topic's min.insync.replicas, until the missing replicas are back",
            short.len(),
            partitions.len(),
            listed(&short)
        ));
    }
    (!said.is_empty()).then(|| format!("topic {topic}: {}", said.join("; ")))
}

/// The most partitions named of each kind.
pub const LISTED: usize = 8;

fn listed(items: &[String]) -> String {
    let mut s = items
        .iter()
        .take(LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > LISTED {
        s.push_str(&format!(", and {} more", items.len() - LISTED));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(partition: i32, leader: Option<i32>, in_sync: usize) -> PartitionHealth {
        PartitionHealth {
            partition,
            leader,
            replicas: 3,
            in_sync,
        }
    }

    #[test]
    fn names_leaderless_and_short_partitions_and_nothing_when_whole() {
        assert_eq!(shortfall("t", &[p(0, Some(1), 3), p(1, Some(2), 3)]), None);
        let said = shortfall("t", &[p(0, Some(1), 2), p(1, None, 1), p(2, Some(3), 3)]).unwrap();
        assert!(
            said.starts_with("topic t: 1 of 3 partitions without a leader: 1; "),
            "{said}"
        );
        assert!(
            said.contains(
                "1 of 3 partitions with fewer replicas in sync than assigned: 0 (2 of 3)"
            ),
            "{said}"
        );
        assert!(said.contains("NOT_ENOUGH_REPLICAS"), "{said}");
    }

    #[test]
    fn lists_a_few_and_counts_the_rest() {
        let many: Vec<_> = (0..11).map(|i| p(i, Some(1), 2)).collect();
        let said = shortfall("t", &many).unwrap();
        assert!(said.contains("0 (2 of 3), 1 (2 of 3)"), "{said}");
        assert!(said.contains("7 (2 of 3), and 3 more"), "{said}");
    }
}
