//! Leadership that can no longer be vouched for ends by itself: the elector's server goes away.

use std::time::Instant;

use super::rig::Rig;
use super::watch::Watch;
use crate::electors::PROMPT;

/// A lone leader whose server stops (a server of the rig's own; NELI: its own cluster of the
/// embedded broker, every broker down) stops leading within the succession, the time after
/// which a successor could lead, and is told `Fenced`; once the server is back it leads again,
/// in a new term.
pub async fn a_lost_server_fences_the_leader_and_leadership_returns(rig: Rig) {
    let mut rig = rig.with_own_server();
    let elector = rig.contender("solo").await;
    let watch = Watch::on(&elector);
    testkit::wait_for("a first term", rig.acquire_bound(), || async {
        !watch.terms().is_empty() && elector.is_leader()
    })
    .await
    .unwrap();
    let first = watch.terms()[0];

    rig.own_server().stop();
    let stopped = Instant::now();
    testkit::wait_until(
        "the leader stops leading",
        stopped + rig.acquire_bound(),
        || async { !elector.is_leader() },
    )
    .await
    .unwrap();
    testkit::wait_for("a Fenced event", PROMPT, || async { watch.fences() >= 1 })
        .await
        .unwrap();

    rig.own_server().start();
    testkit::wait_for("leading again", rig.return_bound(), || async {
        elector.is_leader() && watch.terms().len() >= 2
    })
    .await
    .unwrap();
    let terms = watch.terms();
    assert!(
        !terms[1..].contains(&first),
        "a new term after the outage: {terms:?}"
    );
    elector.close();
    tokio::time::timeout(rig.close_bound(), elector.closed())
        .await
        .expect("closed in time")
        .expect("an orderly close is Ok");
}
