//! Opening a ZooKeeper session and making sure the election node is there, both bounded.
//!
//! The client library's own connect waits up to a session timeout per attempt and cycles the
//! servers forever; here every attempt fails fast once each server was tried, and attempts are
//! repeated only until `connect_timeout`, so a wrong address is reported within that bound (a
//! server still starting gets the whole bound to answer) rather than hanging start-up.

use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError};

use super::config::Resolved;
use crate::error::{ConfigProblem, Error};
use crate::Result;

/// Errors that retrying cannot fix.
fn is_permanent(e: &ZkError) -> bool {
    matches!(
        e,
        ZkError::AuthFailed | ZkError::BadArguments(_) | ZkError::NoAuth | ZkError::InvalidAcl
    )
}

/// Opens a session, retrying until `connect_timeout`. The error is the last cause
/// ([`ZkError::Timeout`] when no attempt got an answer in time).
pub(crate) async fn connect(settings: &Resolved) -> std::result::Result<Client, ZkError> {
    let deadline = Instant::now() + settings.connect_timeout;
    let mut last = ZkError::Timeout;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(last);
        }
        let mut connector = Client::connector()
            .with_session_timeout(settings.session_timeout)
            .with_fail_eagerly();
        if let Some(digest) = &settings.digest {
            connector = connector.with_auth("digest", &digest.0);
        }
        let attempt = connector.connect(&settings.servers);
        match tokio::time::timeout(remaining, attempt).await {
            Ok(Ok(client)) => return Ok(client),
            Ok(Err(e)) if is_permanent(&e) => return Err(e),
            Ok(Err(e)) => last = e,
            Err(_) => return Err(last),
        }
        let pause =
            Duration::from_millis(200).min(deadline.saturating_duration_since(Instant::now()));
        tokio::time::sleep(pause).await;
    }
}

/// [`connect`] for start-up: failing to reach the servers is a configuration error naming
/// `{field}.servers`.
pub(crate) async fn connect_at_start(settings: &Resolved, field: &str) -> Result<Client> {
    connect(settings).await.map_err(|cause| {
        Error::InvalidConfig(vec![ConfigProblem::new(
            format!("{field}.servers"),
            format!(
                "cannot open a zookeeper session with {} within {:?} ({cause}); check the addresses and that the servers run",
                settings.servers, settings.connect_timeout
            ),
        )])
    })
}

/// The ACL of the nodes this member creates: its digest user's alone when it has one (so a
/// client without the password cannot touch the election), else open.
pub(crate) fn acls(settings: &Resolved) -> Acls<'static> {
    if settings.digest.is_some() {
        Acls::creator_all()
    } else {
        Acls::anyone_all()
    }
}

/// Creates the election node and its parents (`create_path`), or checks that it exists, then
/// that this session may use it: a node whose ACL refuses the session (another digest user, a
/// wrong password, no `auth`) names `{field}.auth.password` (or `{field}.auth`).
pub(crate) async fn ensure_path(client: &Client, settings: &Resolved, field: &str) -> Result<()> {
    create_or_check(client, settings, field).await?;
    let path = &settings.path;
    let listed = tokio::time::timeout(settings.connect_timeout, client.list_children(path))
        .await
        .map_err(|_| Error::Timeout {
            what: format!("zookeeper to list {path}"),
            after: settings.connect_timeout,
        })?;
    match listed {
        Ok(_) => Ok(()),
        Err(ZkError::NoAuth) => Err(refused(
            settings,
            field,
            &format!("the ACL of the election node {path} refuses this session"),
        )),
        Err(e) => Err(Error::coordination(
            "zookeeper",
            format!("list the candidates under {path}"),
        )(e)),
    }
}

/// A node's ACL refused this session (NoAuth): the fix is in `{field}.auth.password` when the
/// member has a digest user, else in `{field}.auth`.
fn refused(settings: &Resolved, field: &str, what: &str) -> Error {
    let (name, fix) = match settings.digest {
        Some(_) => ("auth.password", "check the digest user and password"),
        None => ("auth", "set auth to the digest user that created it"),
    };
    Error::InvalidConfig(vec![ConfigProblem::new(
        format!("{field}.{name}"),
        format!("{what} (NoAuth); {fix}"),
    )])
}

async fn create_or_check(client: &Client, settings: &Resolved, field: &str) -> Result<()> {
    let path = &settings.path;
    let bound = settings.connect_timeout;
    let timed_out = |what: &str| Error::Timeout {
        what: format!("zookeeper to {what} {path}"),
        after: bound,
    };
    if settings.create_path {
        let options = CreateMode::Persistent.with_acls(acls(settings));
        return match tokio::time::timeout(bound, client.mkdir(path, &options))
            .await
            .map_err(|_| timed_out("create"))?
        {
            Ok(()) => Ok(()),
            Err(ZkError::NoAuth) => Err(refused(
                settings,
                field,
                &format!("the ACL of a parent of {path} refuses creating it"),
            )),
            Err(e) => Err(Error::coordination(
                "zookeeper",
                format!("create the election node {path}"),
            )(e)),
        };
    }
    let stat = tokio::time::timeout(bound, client.check_stat(path))
        .await
        .map_err(|_| timed_out("look up"))?
        .map_err(Error::coordination(
            "zookeeper",
            format!("look up the election node {path}"),
        ))?;
    match stat {
        Some(_) => Ok(()),
        None => Err(Error::InvalidConfig(vec![ConfigProblem::new(
            format!("{field}.path"),
            format!(
                "the election node {path} does not exist on {}; create it (zkCli.sh create {path}) or set create_path = true",
                settings.servers
            ),
        )])),
    }
}
