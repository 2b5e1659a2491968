//! Kafka ACLs for a test's principal, granted and removed with Kafka's own `AclCommand`
//! (`scripts/kafka.sh tool`) through the broker's plaintext listener, whose anonymous principal
//! is a super user. Kafka's tool rather than our own admin calls: the least-privilege test
//! then grants exactly what the README tells an operator to run, in the same syntax.
//!
//! Each call starts a JVM (about 2 s): a test grants only what it needs, once per resource.

use std::fmt;
use std::path::Path;
use std::process::Command;

use crate::TestkitError;

/// What an ACL is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    Topic(String),
    Group(String),
    TransactionalId(String),
    Cluster,
}

/// One allowed operation on one resource (a literal name, or every name with a prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    /// Kafka's name of the operation: `Read`, `Write`, `Create`, `Describe`, `IdempotentWrite`.
    pub operation: &'static str,
    pub resource: Resource,
    /// `--resource-pattern-type prefixed`: the name is a prefix.
    pub prefixed: bool,
}

impl Acl {
    pub fn topic(operation: &'static str, name: &str) -> Acl {
        Acl::on(operation, Resource::Topic(name.to_owned()))
    }

    pub fn group(operation: &'static str, name: &str) -> Acl {
        Acl::on(operation, Resource::Group(name.to_owned()))
    }

    /// On every transactional id that starts with `prefix`.
    pub fn transactional_ids(operation: &'static str, prefix: &str) -> Acl {
        Acl {
            prefixed: true,
            ..Acl::on(operation, Resource::TransactionalId(prefix.to_owned()))
        }
    }

    pub fn on(operation: &'static str, resource: Resource) -> Acl {
        Acl {
            operation,
            resource,
            prefixed: false,
        }
    }

    /// The resource's `AclCommand` arguments (`--topic orders`), as an operator types them.
    pub fn resource_args(&self) -> Vec<String> {
        let mut args = match &self.resource {
            Resource::Topic(n) => vec!["--topic".to_owned(), n.clone()],
            Resource::Group(n) => vec!["--group".to_owned(), n.clone()],
            Resource::TransactionalId(n) => vec!["--transactional-id".to_owned(), n.clone()],
            Resource::Cluster => vec!["--cluster".to_owned()],
        };
        if self.prefixed {
            args.extend(["--resource-pattern-type".to_owned(), "prefixed".to_owned()]);
        }
        args
    }
}

impl fmt::Display for Acl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "--operation {} {}",
            self.operation,
            self.resource_args().join(" ")
        )
    }
}

/// Allows `principal` (`User:harvester`) each of `acls`.
pub fn grant(bootstrap: &str, principal: &str, acls: &[Acl]) -> Result<(), TestkitError> {
    for acl in acls {
        acl_command(bootstrap, principal, "--add", acl)?;
    }
    Ok(())
}

/// Removes each of `acls` from `principal` (an absent one is no error).
pub fn revoke(bootstrap: &str, principal: &str, acls: &[Acl]) -> Result<(), TestkitError> {
    for acl in acls {
        acl_command(bootstrap, principal, "--remove", acl)?;
    }
    Ok(())
}

fn acl_command(bootstrap: &str, principal: &str, verb: &str, acl: &Acl) -> Result<(), TestkitError> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/kafka.sh");
    let mut args: Vec<String> = [
        "tool",
        "AclCommand",
        "--bootstrap-server",
        bootstrap,
        verb,
        "--allow-principal",
        principal,
        "--operation",
        acl.operation,
    ]
    .map(str::to_owned)
    .into();
    args.extend(acl.resource_args());
    if verb == "--remove" {
        args.push("--force".to_owned());
    }
    let out = Command::new(script).args(&args).output()?;
    if !out.status.success() {
        return Err(TestkitError::Broker(format!(
            "AclCommand {verb} {acl} for {principal}: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}
