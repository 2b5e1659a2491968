//! The outbox store port's contract (`harvester/src/store/mod.rs`, "What the pipeline relies
//! on"), written once and run on every implementation that keeps MP/R's promises: one test per
//! clause and implementation, named `store::contract::<implementation>::<clause>`.
//!
//! A clause is an `async fn(Rig)` of one of this folder's modules; a new clause is one more
//! name in the list at the end of this file, a new implementation one more line in
//! `on_every_store!` (and a variant of `rig::Impl`). What only one backend does (MariaDB's lock
//! behaviour, SQL Server's row versions, Postgres's mark floor) stays in that backend's module
//! beside this one; snapshot mode keeps the promises its own way (`store::snapshot`).

mod hands_back;
mod lifecycle;
mod marks;
mod poison;
mod probes;
mod rig;
mod scopes;

use harvester::outbox::{Decoded, StashRecord};

use hands_back::*;
use lifecycle::*;
use marks::*;
use poison::*;
use probes::*;
use rig::{Impl, Rig};
use scopes::*;

/// `n` records over `keys` keys (`key-<i mod keys>`), values their index.
fn records(n: usize, keys: usize) -> Vec<StashRecord> {
    (0..n)
        .map(|i| StashRecord::new("t", format!("key-{}", i % keys), format!("{i}")))
        .collect()
}

/// The ids of marked rows, poison included, in the order returned.
fn ids(marked: &[Decoded]) -> Vec<i64> {
    marked
        .iter()
        .map(|d| match d {
            Ok(r) => r.id,
            Err(p) => p.id,
        })
        .collect()
}

/// Runs `clause` on a fresh store of `imp` (skipped, as testkit says, where its server is not
/// configured).
async fn run<F, Fut>(imp: Impl, name: &str, clause: F)
where
    F: FnOnce(Rig) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    testkit::init_tracing();
    if let Some(rig) = Rig::new(imp, &format!("sc_{name}")).await {
        clause(rig).await
    }
}

/// One test per clause for one implementation.
macro_rules! on_store {
    ($module:ident, $imp:ident, $($clause:ident),+) => {
        mod $module {
            $(
                #[tokio::test]
                async fn $clause() {
                    super::run(super::Impl::$imp, stringify!($module), super::$clause).await
                }
            )+
        }
    };
}

/// [`on_store!`] for SQL Server: compiled with the feature `mssql`, ignored unless `MSSQL_URL`
/// was set at build time (`harvester/build.rs`).
macro_rules! on_mssql_store {
    ($($clause:ident),+) => {
        #[cfg(feature = "mssql")]
        mod mssql {
            $(
                #[tokio::test]
                #[cfg_attr(
                    not(mssql_url),
                    ignore = "needs a SQL Server: build and run the tests with MSSQL_URL set"
                )]
                async fn $clause() {
                    super::run(super::Impl::Mssql, "mssql", super::$clause).await
                }
            )+
        }
    };
}

/// The clauses of `every` on every implementation, and those of `transactional` (which need a
/// writer's open transaction) on every one that has transactions: all but the memory store.
macro_rules! on_every_store {
    (every: [$($clause:ident),+ $(,)?], transactional: [$($tx:ident),+ $(,)?] $(,)?) => {
        on_store!(postgres, Postgres, $($clause,)+ $($tx),+);
        on_store!(goharvest, Goharvest, $($clause,)+ $($tx),+);
        on_store!(mariadb, MariaDb, $($clause,)+ $($tx),+);
        on_store!(memory, Memory, $($clause),+);
        on_mssql_store!($($clause,)+ $($tx),+);
    };
}

on_every_store!(
    every: [
        marks_take_the_head_in_id_order,
        a_newer_generation_re_marks_what_an_older_one_holds,
        a_marked_row_comes_back_as_it_was_written,
        malformed_rows_come_back_as_poison,
        a_stale_leader_resets_and_quarantines_nothing,
        reset_rows_are_marked_again_by_any_generation,
        purge_deletes_whoever_marks_the_rows,
        quarantine_moves_the_row_with_its_reason,
        long_id_lists_keep_every_promise,
        backlog_ping_describe_and_pool,
        the_layout_guards_scoped_marks_and_the_first_count_stands,
        scoped_marks_split_the_rows_by_key_and_buckets_of_agrees,
        migrations_are_safe_at_once_idempotent_and_keep_rows,
        wakeups_follow_commits_or_the_idle_bound,
    ],
    transactional: [a_late_commit_is_marked_once_committed_and_never_waited_for],
);
