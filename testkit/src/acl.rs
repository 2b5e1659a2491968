//! Kafka ACLs for a test's principal, granted and removed with Kafka's own `AclCommand`
//! through the broker's plaintext listener, whose anonymous principal is a super user. Kafka's
//! tool rather than our own admin calls: the least-privilege test then grants exactly what the
//! README tells an operator to run, in the same syntax.
//!
//! The commands run in one JVM per test process (`scripts/services/kafka.sh acl-shell`, started on first
//! use), one at a time: a JVM per command took about 2 s of CPU, and a test changes ACLs
//! dozens of times.

use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, PoisonError};

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

/// The principal's ACLs, one `<resource pattern> <operation>` line each, as Kafka lists them.
pub fn held(bootstrap: &str, principal: &str) -> Result<Vec<String>, TestkitError> {
    let listed = run(&[
        "--bootstrap-server",
        bootstrap,
        "--list",
        "--principal",
        principal,
    ])?;
    let mut held = Vec::new();
    let mut resource = "";
    for line in listed.lines() {
        if let Some(r) = line.strip_prefix("Current ACLs for resource `") {
            resource = r.trim_end_matches("`:");
        } else if line.contains(&format!("principal={principal},")) {
            held.push(format!("{resource} {}", line.trim()));
        }
    }
    Ok(held)
}

/// Removes every ACL on each resource `principal` has one on: a test of least privilege
/// starts from a principal allowed nothing. For test principals only (the resources' ACLs of
/// other principals go too).
pub fn clear(bootstrap: &str, principal: &str) -> Result<(), TestkitError> {
    for line in held(bootstrap, principal)? {
        let Some(pattern) = line
            .strip_prefix("ResourcePattern(")
            .and_then(|l| l.split_once(')'))
            .map(|(p, _)| p)
        else {
            continue;
        };
        let field = |name: &str| {
            pattern
                .split(", ")
                .find_map(|f| f.strip_prefix(&format!("{name}=")))
                .unwrap_or_default()
                .to_owned()
        };
        let mut args = vec![
            "--bootstrap-server".to_owned(),
            bootstrap.to_owned(),
            "--remove".to_owned(),
            "--force".to_owned(),
            "--resource-pattern-type".to_owned(),
            field("patternType").to_lowercase(),
        ];
        let name = field("name");
        match field("resourceType").as_str() {
            "TOPIC" => args.extend(["--topic".to_owned(), name]),
            "GROUP" => args.extend(["--group".to_owned(), name]),
            "TRANSACTIONAL_ID" => args.extend(["--transactional-id".to_owned(), name]),
            "CLUSTER" => args.push("--cluster".to_owned()),
            other => {
                return Err(TestkitError::Broker(format!(
                    "AclCommand listed a resource type this helper does not know: {other}"
                )))
            }
        }
        run(&args.iter().map(String::as_str).collect::<Vec<_>>())?;
    }
    Ok(())
}

fn acl_command(
    bootstrap: &str,
    principal: &str,
    verb: &str,
    acl: &Acl,
) -> Result<(), TestkitError> {
    let mut args: Vec<String> = [
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
    run(&args.iter().map(String::as_str).collect::<Vec<_>>())?;
    Ok(())
}

/// Runs `AclCommand args` in the process's shell; its standard output.
fn run(args: &[&str]) -> Result<String, TestkitError> {
    if args.iter().any(|a| a.contains(['\t', '\n'])) {
        return Err(TestkitError::Broker(format!(
            "an AclCommand argument holds a tab or a newline: {args:?}"
        )));
    }
    let mut shell = SHELL.lock().unwrap_or_else(PoisonError::into_inner);
    if shell.is_none() {
        *shell = Some(Shell::start()?);
    }
    let reply = shell.as_mut().map(|s| s.call(args)).expect("started");
    let (status, printed) = reply.inspect_err(|_| *shell = None)?;
    if status != 0 {
        return Err(TestkitError::Broker(format!(
            "AclCommand {} (exit {status}): {printed}",
            args.join(" ")
        )));
    }
    Ok(printed)
}

/// The JVM running `AclCommand` once per request line (`scripts/services/kafka/AclShell.java`). It ends
/// when its standard input closes: with this process at the latest.
static SHELL: Mutex<Option<Shell>> = Mutex::new(None);

struct Shell {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Shell {
    fn start() -> Result<Shell, TestkitError> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/services/kafka.sh");
        let mut child = Command::new(script)
            .arg("acl-shell")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(TestkitError::Broker("the ACL shell has no pipes".into()));
        };
        Ok(Shell {
            stdin,
            stdout: BufReader::new(stdout),
        })
    }

    /// One command: its exit status and what it printed.
    fn call(&mut self, args: &[&str]) -> Result<(i32, String), TestkitError> {
        writeln!(self.stdin, "{}", args.join("\t"))?;
        self.stdin.flush()?;
        let mut header = String::new();
        self.stdout.read_line(&mut header)?;
        let parsed = header
            .trim()
            .split_once(' ')
            .and_then(|(s, n)| Some((s.parse::<i32>().ok()?, n.parse::<usize>().ok()?)));
        let Some((status, len)) = parsed else {
            return Err(TestkitError::Broker(format!(
                "the ACL shell answered {header:?} (scripts/services/kafka.sh acl-shell)"
            )));
        };
        let mut printed = vec![0; len];
        self.stdout.read_exact(&mut printed)?;
        Ok((status, String::from_utf8_lossy(&printed).into_owned()))
    }
}
