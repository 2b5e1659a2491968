//! A test that cannot run here says so, and is never counted as passed.
//!
//! libtest has no "skipped" outcome: a test that returns early because a server or credential is
//! absent is reported `ok` like one that checked everything. So every early return goes through
//! [`skip`], which
//! - fails the test where the server must be there: `HARVEST_REQUIRE_SERVICES=1` (set by
//!   `scripts/test.sh` after it provisioned every service; CI runs that) or `CI=true`, so a
//!   TLS, ACL, secrets or Kafka test cannot go quiet in CI;
//! - otherwise prints why and records the test's name in `HARVEST_TEST_SKIPS_DIR` (one file per
//!   test), which `scripts/test/test-summary.sh` counts apart from the passed.
//!
//! Suites for a server this machine cannot run at all (SQL Server) are `#[ignore]`d at compile
//! time instead, and reported as ignored.

use std::path::{Path, PathBuf};

/// Whether every service must be there (see the module's doc).
pub fn services_required() -> bool {
    let set = |name: &str, values: &[&str]| {
        std::env::var(name).is_ok_and(|v| values.contains(&v.trim().to_ascii_lowercase().as_str()))
    };
    set("HARVEST_REQUIRE_SERVICES", &["1", "true", "yes"]) || set("CI", &["1", "true"])
}

/// Ends the calling test as skipped because of `why` (a server or credential absent), or fails
/// it where services are required. Call it, then return.
pub fn skip(why: &str) {
    skip_as(why, services_required(), skips_dir().as_deref());
}

/// [`skip`] with its environment given: `required` fails the test, else the skip is recorded in
/// `dir` under the test's (thread's) name.
fn skip_as(why: &str, required: bool, dir: Option<&Path>) {
    let test = std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_owned();
    assert!(
        !required,
        "{test} would skip ({why}), but services are required here \
         (HARVEST_REQUIRE_SERVICES or CI is set): start them with scripts/services.sh up"
    );
    println!("skipped: {why}");
    if let Some(dir) = dir {
        let file = dir.join(test.replace(['/', ':'], "_"));
        let _ = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(file, format!("{test}: {why}\n")));
    }
}

fn skips_dir() -> Option<PathBuf> {
    std::env::var_os("HARVEST_TEST_SKIPS_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_recorded_under_the_tests_name() {
        let dir = std::env::temp_dir().join(format!("skips-{}", std::process::id()));
        skip_as("no server", false, Some(&dir));
        let name = std::thread::current()
            .name()
            .unwrap()
            .replace(['/', ':'], "_");
        let recorded = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(recorded.ends_with(": no server\n"), "{recorded}");
        assert!(
            recorded.contains("a_skip_is_recorded_under_the_tests_name"),
            "{recorded}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    #[should_panic(expected = "would skip (no server), but services are required here")]
    fn a_skip_fails_where_services_are_required() {
        skip_as("no server", true, None);
    }
}
