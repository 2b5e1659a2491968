//! One contender's life: the events taken once, leadership with its term, an orderly close
//! with the revocation first, then the stream's end.

use harvester::election::{ElectionEvent, ElectorState};

use super::rig::Rig;
use crate::electors::{acquired, next_event, PROMPT};

/// A lone contender acquires a term (within the succession), leads in it while live, and on
/// `close` stops leading at once, is revoked with a barrier, closes `Ok`, and its stream ends;
/// `close` again changes nothing.
pub async fn a_lone_contender_leads_until_it_closes(rig: Rig) {
    let elector = rig.contender("solo").await;
    let mut events = elector.take_events().expect("the events");
    assert!(elector.take_events().is_none(), "a single consumer");
    assert_eq!(elector.state(), ElectorState::Live);
    let term = acquired(&mut events, rig.acquire_bound()).await;
    assert!(elector.is_leader());
    assert_eq!(elector.term(), Some(term));

    elector.close();
    assert!(!elector.is_leader(), "closing ends leadership at once");
    assert_ne!(elector.state(), ElectorState::Live);
    match next_event(&mut events, PROMPT).await {
        ElectionEvent::Revoked { term: t, ack } => {
            assert_eq!(t, Some(term));
            ack.ack();
        }
        other => panic!("expected revoked, got {other:?}"),
    }
    tokio::time::timeout(rig.close_bound(), elector.closed())
        .await
        .expect("closed in time")
        .expect("an orderly close is Ok");
    assert_eq!(elector.state(), ElectorState::Closed);
    let end = tokio::time::timeout(PROMPT, events.recv()).await;
    assert!(
        end.expect("the stream ends").is_none(),
        "no event after closing"
    );
    elector.close();
    assert_eq!(elector.state(), ElectorState::Closed);
    assert!(!elector.is_leader() && elector.term().is_none());
}
