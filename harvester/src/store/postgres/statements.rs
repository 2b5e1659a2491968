//! The SQL run against one configured table, rendered once.
//!
//! SQL lives in `.sql` files beside this module with `{{placeholders}}` for identifiers, which
//! are filled once, quoted, from the configured [`TableName`]: statements are prepared with
//! bound values only, never string-built per call.

use crate::outbox::{Shape, TableName};
use crate::store::BucketScope;

/// The SQL statements for one configured table, rendered once.
#[derive(Debug, Clone)]
pub struct Statements {
    pub mark: String,
    /// The mark within a bucket scope (`$4` the buckets, `$5` their count, which must be the
    /// recorded layout's).
    pub mark_scoped: String,
    /// The mark of a scope of every bucket: the whole table, with the layout guard only (`$4`
    /// the bucket count).
    pub mark_all_buckets: String,
    /// Records the bucket layout unless one is (`$1` B, `$2` who).
    pub layout_record: String,
    /// The recorded bucket layout (no row: none).
    pub layout_read: String,
    /// The bucket of a key (`$1` the key, `$2` the bucket count), for tools and tests.
    pub bucket_of: String,
    /// The buckets of many keys, in order (`$1` the keys, an array, `$2` the bucket count).
    pub buckets_of: String,
    pub purge: String,
    pub reset: String,
    pub quarantine: String,
    pub backlog: String,
    pub stash: String,
    /// The probe before a mark (`$1` sequence, `$2` table; see `cursor.rs`).
    pub probe: String,
    /// The table's id sequence and its cache (`$1` table).
    pub sequence: String,
    /// LISTEN channel woken by the insert trigger (native shape only).
    pub channel: Option<String>,
}

/// Identifier placeholders for one table.
pub(crate) fn placeholders(
    table: &TableName,
    quarantine: &TableName,
) -> Vec<(&'static str, String)> {
    vec![
        ("{{outbox}}", table.quoted()),
        ("{{quarantine}}", quarantine.quoted()),
        ("{{layout}}", table.sibling("_layout").quoted()),
        ("{{channel}}", table.ident("_harvest")),
        ("{{xid_index}}", format!("\"{}\"", table.ident("_xid_idx"))),
        ("{{notify_fn}}", table.sibling("_notify").quoted()),
        (
            "{{notify_trigger}}",
            format!("\"{}\"", table.ident("_notify_trg")),
        ),
    ]
}

pub(crate) fn render(template: &str, values: &[(&str, String)]) -> String {
    values
        .iter()
        .fold(template.to_owned(), |sql, (k, v)| sql.replace(k, v))
}

/// The bucket of a row as SQL: `key` the key column or parameter, `count` the bucket count
/// (`bucket_native.sql` / `bucket_goharvest.sql`, comments dropped).
fn bucket_expression(shape: Shape, key: &str, count: &str) -> String {
    let bucket = match shape {
        Shape::Native => include_str!("sql/bucket_native.sql"),
        Shape::Goharvest => include_str!("sql/bucket_goharvest.sql"),
    };
    let code: Vec<&str> = bucket
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect();
    render(
        code.join(" ").trim(),
        &[("{{key}}", key.to_owned()), ("{{count}}", count.to_owned())],
    )
}

/// A statement's bucket scope: ` AND <the row's bucket> = ANY($<buckets>) AND $<count> = <the
/// count recorded in the layout table>`, parameters numbered by the caller. The layout guard is
/// an uncorrelated subquery: evaluated once per statement, and a count other than the recorded
/// one (or none recorded) selects nothing. `{{layout}}` is left for [`render`].
pub(crate) fn scope_clause(shape: Shape, buckets: usize, count: usize) -> String {
    format!(
        " AND ({}) = ANY(${buckets}::BIGINT[]) AND ${count}::BIGINT = (SELECT buckets FROM {{{{layout}}}})",
        bucket_expression(shape, "kafka_key", &format!("${count}::BIGINT"))
    )
}

/// A Postgres statement with its arguments bound so far.
pub(crate) type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// Binds the parameters of [`scope_clause`], in its order: the scope's buckets, then the count.
pub(crate) fn bind_scope<'q>(query: PgQuery<'q>, scope: &BucketScope) -> PgQuery<'q> {
    query
        .bind(
            scope
                .buckets
                .iter()
                .map(|&b| i64::from(b))
                .collect::<Vec<_>>(),
        )
        .bind(i64::from(scope.count))
}

impl Statements {
    pub fn new(table: &TableName, quarantine: &TableName, shape: Shape) -> Self {
        let p = placeholders(table, quarantine);
        let (mark, stash) = match shape {
            Shape::Native => (
                include_str!("sql/mark_native.sql"),
                include_str!("sql/stash_native.sql"),
            ),
            Shape::Goharvest => (
                include_str!("sql/mark_goharvest.sql"),
                include_str!("sql/stash_goharvest.sql"),
            ),
        };
        let expression = |key: &str, count: &str| bucket_expression(shape, key, count);
        let scope = scope_clause(shape, 4, 5);
        let guard = " AND $4::BIGINT = (SELECT buckets FROM {{layout}})";
        Statements {
            mark: render(&mark.replace("{{scope}}", ""), &p),
            mark_all_buckets: render(&mark.replace("{{scope}}", guard), &p),
            mark_scoped: render(&mark.replace("{{scope}}", &scope), &p),
            bucket_of: format!("SELECT ({})::INT", expression("$1", "$2::BIGINT")),
            buckets_of: format!(
                "SELECT ({})::INT FROM unnest($1) WITH ORDINALITY AS t(k, i) ORDER BY i",
                expression("k", "$2::BIGINT")
            ),
            layout_record: render(include_str!("sql/layout_record.sql"), &p),
            layout_read: render(include_str!("sql/layout_read.sql"), &p),
            purge: render(include_str!("sql/purge.sql"), &p),
            reset: render(include_str!("sql/reset.sql"), &p),
            quarantine: render(include_str!("sql/quarantine.sql"), &p),
            backlog: render(include_str!("sql/backlog.sql"), &p),
            stash: render(stash, &p),
            probe: include_str!("sql/probe.sql").to_owned(),
            sequence: include_str!("sql/sequence.sql").to_owned(),
            channel: (shape == Shape::Native).then(|| table.ident("_harvest")),
        }
    }
}
