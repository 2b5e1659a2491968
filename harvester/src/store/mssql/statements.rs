//! The SQL run against one configured table.
//!
//! SQL lives in `.sql` files beside this module with `{{placeholders}}` for identifiers, filled
//! once from the configured [`TableName`]: `{{outbox}}` bracket-quoted (`[schema].[table]`), and
//! `{{outbox_name}}` the same name as an `N'...'` literal, for `OBJECT_ID`. Values are always
//! bound, as tiberius's numbered parameters `@P1`, `@P2`, ... (`bind.rs` lays them out).
//!
//! SQL Server has no array parameters and takes at most 2100 parameters a statement, so a list
//! (ids, leader ids, keys, records) is bound one parameter per element, cut into chunks of at
//! most [`MAX_LIST`] and, for an `IN (...)` list, padded to a power of two by repeating its last
//! element (a duplicate in `IN` changes nothing). A table then has a handful of shapes of each
//! statement, each compiled once and cached by the server, not one per batch size. The mark
//! needs no list: its pick goes to a table variable in the same batch (`sql/mark.sql`).

use crate::outbox::TableName;

/// The most elements an `IN` list or a list of keys takes: with [`MAX_LEADERS`] leader ids
/// beside it, a statement stays under SQL Server's 2100 parameters.
pub const MAX_LIST: usize = 1024;

/// The most leader ids a purge, reset or quarantine is conditioned on (a term's generations: a
/// handful in practice).
pub const MAX_LEADERS: usize = 1024;

/// The most records one insert takes: seven parameters each, under 2100 parameters.
pub const MAX_RECORDS: usize = 256;

/// Parameters per record of the stash (`sql/stash_row.sql`).
pub const STASH_PARAMS: usize = 7;

// Every shape stays under SQL Server's 2100 parameters: the longest id list with the most
// leader ids, the most keys with the bucket count, the most records.
const _: () = assert!(MAX_LIST + MAX_LEADERS <= tiberius::Query::MAX_PARAMETERS);
const _: () = assert!(MAX_LIST < tiberius::Query::MAX_PARAMETERS);
const _: () = assert!(MAX_RECORDS * STASH_PARAMS <= tiberius::Query::MAX_PARAMETERS);

/// The SQL statements for one configured table.
#[derive(Debug, Clone)]
pub struct Statements {
    /// The mark of the whole table (`@P1` the leader, `@P2` the limit).
    pub mark: String,
    /// The mark of a scope of every bucket: the whole table with the layout guard (`@P1` the
    /// leader, `@P2` the limit, `@P3` the bucket count).
    pub mark_all_buckets: String,
    /// The mark within a bucket scope (`@P1` the leader, `@P2` the limit, `@P3` the scope's
    /// buckets as a string of `0`/`1` by bucket number, `@P4` the bucket count, which the layout
    /// guard checks too).
    pub mark_scoped: String,
    /// Records the bucket layout unless one is (`@P1` B, `@P2` who).
    pub layout_record: String,
    /// The recorded bucket layout (no row: none).
    pub layout_read: String,
    pub backlog: String,
    purge: String,
    reset: String,
    quarantine: String,
    buckets_of: String,
    stash: String,
    stash_row: String,
}

/// An identifier as SQL Server quotes it: `[name]`, a `]` inside doubled.
fn bracket(ident: &str) -> String {
    format!("[{}]", ident.replace(']', "]]"))
}

/// A table name as SQL Server quotes it: `[schema].[table]`.
pub fn quoted(table: &TableName) -> String {
    match &table.schema {
        Some(s) => format!("{}.{}", bracket(s), bracket(&table.table)),
        None => bracket(&table.table),
    }
}

/// Text as an `N'...'` literal, a `'` inside doubled.
pub fn literal(text: &str) -> String {
    format!("N'{}'", text.replace('\'', "''"))
}

/// Identifier placeholders for one table: each object quoted, and its name as a literal.
pub(crate) fn placeholders(
    table: &TableName,
    quarantine: &TableName,
) -> Vec<(&'static str, String)> {
    let layout = table.sibling("_layout");
    let ledger = table.sibling("_migrations");
    vec![
        ("{{outbox}}", quoted(table)),
        ("{{outbox_name}}", literal(&quoted(table))),
        ("{{quarantine}}", quoted(quarantine)),
        ("{{quarantine_name}}", literal(&quoted(quarantine))),
        ("{{layout}}", quoted(&layout)),
        ("{{layout_name}}", literal(&quoted(&layout))),
        ("{{ledger}}", quoted(&ledger)),
        ("{{ledger_name}}", literal(&quoted(&ledger))),
    ]
}

pub(crate) fn render(template: &str, values: &[(&str, String)]) -> String {
    values
        .iter()
        .fold(template.to_owned(), |sql, (k, v)| sql.replace(k, v))
}

/// A fragment's code without its comment lines, on one line (to be embedded in a statement).
pub(crate) fn fragment(sql: &str) -> String {
    sql.lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `count` parameters numbered from `first`: `@P3, @P4`.
pub fn params(first: usize, count: usize) -> String {
    tiberius::Query::placeholders(first, count)
}

/// How many elements a list of `n` is bound as: `n` rounded up to a power of two, at most
/// [`MAX_LIST`] (callers chunk longer lists first).
pub fn padded(n: usize) -> usize {
    n.max(1).next_power_of_two().min(MAX_LIST)
}

/// The sizes a list of `n` elements is cut into when it cannot be padded (records to insert,
/// keys whose order matters): chunks of `max` (a power of two), then the powers of two of the
/// remainder, largest first, so their sum is `n` and there are few shapes.
pub fn chunk_sizes(n: usize, max: usize) -> Vec<usize> {
    let mut sizes = vec![max; n / max];
    let rest = n % max;
    let mut bit = max;
    while bit > 0 {
        if rest & bit != 0 {
            sizes.push(bit);
        }
        bit >>= 1;
    }
    sizes
}

/// `ids` sorted, deduplicated and cut into lists of at most [`MAX_LIST`], each padded to its
/// bound length by repeating its last id.
pub fn id_lists(ids: &[i64]) -> Vec<Vec<i64>> {
    let mut sorted = ids.to_vec();
    // Ascending, as marks lock them: two harvesters' statements never wait on each other in a
    // circle.
    sorted.sort_unstable();
    sorted.dedup();
    sorted
        .chunks(MAX_LIST)
        .map(|chunk| {
            let mut list = chunk.to_vec();
            let last = *chunk.last().unwrap_or(&0);
            list.resize(padded(chunk.len()), last);
            list
        })
        .collect()
}

impl Statements {
    pub fn new(table: &TableName, quarantine: &TableName) -> Self {
        let p = placeholders(table, quarantine);
        let bucket = |key: &str, count: &str| {
            render(
                &fragment(include_str!("sql/bucket.sql")),
                &[("{{key}}", key.to_owned()), ("{{count}}", count.to_owned())],
            )
        };
        let mark = include_str!("sql/mark.sql");
        // The layout guard is an uncorrelated subquery, evaluated once per pick: a count other
        // than the recorded one (or none recorded) picks nothing.
        let guard = |count: &str| format!(" AND {count} = (SELECT buckets FROM {{{{layout}}}})");
        // The scope's buckets are one string parameter, a `1` at (bucket + 1) for each bucket
        // in the scope, so the statement is the same whatever the scope.
        let scope = format!(
            " AND SUBSTRING(@P3, {} + 1, 1) = '1'{}",
            bucket("kafka_key", "@P4"),
            guard("@P4")
        );
        Statements {
            mark: render(&mark.replace("{{scope}}", ""), &p),
            mark_all_buckets: render(&mark.replace("{{scope}}", &guard("@P3")), &p),
            mark_scoped: render(&mark.replace("{{scope}}", &scope), &p),
            layout_record: render(include_str!("sql/layout_record.sql"), &p),
            layout_read: render(include_str!("sql/layout_read.sql"), &p),
            backlog: render(include_str!("sql/backlog.sql"), &p),
            purge: render(include_str!("sql/purge.sql"), &p),
            reset: render(include_str!("sql/reset.sql"), &p),
            quarantine: render(include_str!("sql/quarantine.sql"), &p),
            buckets_of: include_str!("sql/buckets_of.sql")
                .replace("{{bucket}}", &bucket("held.k", "@P1")),
            stash: render(include_str!("sql/stash.sql"), &p),
            stash_row: fragment(include_str!("sql/stash_row.sql")),
        }
    }

    /// The purge of `ids` ids (`@P1`...).
    pub fn purge(&self, ids: usize) -> String {
        self.purge.replace("{{ids}}", &params(1, ids))
    }

    /// The reset of `ids` ids (`@P1`...) conditioned on `leaders` leader ids (after the ids).
    pub fn reset(&self, ids: usize, leaders: usize) -> String {
        self.reset
            .replace("{{ids}}", &params(1, ids))
            .replace("{{leaders}}", &params(ids + 1, leaders))
    }

    /// The quarantine of a row (`@P1` the reason, `@P2` the id, then `leaders` leader ids).
    pub fn quarantine(&self, leaders: usize) -> String {
        self.quarantine.replace("{{leaders}}", &params(3, leaders))
    }

    /// The buckets of `keys` keys, in order (`@P1` the bucket count, then the keys).
    pub fn buckets_of(&self, keys: usize) -> String {
        let rows: Vec<String> = (0..keys).map(|i| format!("(@P{}, {i})", i + 2)).collect();
        self.buckets_of.replace("{{keys}}", &rows.join(", "))
    }

    /// The insert of `records` records (`STASH_PARAMS` parameters each, in
    /// `sql/stash_row.sql`'s order).
    pub fn stash(&self, records: usize) -> String {
        let rows: Vec<String> = (0..records)
            .map(|i| {
                self.stash_row
                    .replace("{{seq}}", &i.to_string())
                    .replace("{{params}}", &params(i * STASH_PARAMS + 1, STASH_PARAMS))
            })
            .collect();
        self.stash.replace("{{rows}}", &rows.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statements() -> Statements {
        let table = TableName::parse("shop.outbox").unwrap();
        Statements::new(&table, &table.sibling("_quarantine"))
    }

    /// The distinct parameters a statement names, e.g. `{1, 2, 3}`.
    fn named(sql: &str) -> std::collections::BTreeSet<usize> {
        let code = fragment(sql);
        code.match_indices("@P")
            .filter_map(|(i, _)| {
                let digits: String = code[i + 2..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits.parse().ok()
            })
            .collect()
    }

    fn one_to(n: usize) -> std::collections::BTreeSet<usize> {
        (1..=n).collect()
    }

    #[test]
    fn identifiers_are_bracket_quoted_and_named_as_literals() {
        let t = TableName::parse("\"we]ird\".\"it's\"").unwrap();
        assert_eq!(quoted(&t), "[we]]ird].[it's]");
        assert_eq!(literal(&quoted(&t)), "N'[we]]ird].[it''s]'");
        let s = statements();
        assert!(s.mark.contains("FROM [shop].[outbox]"), "{}", s.mark);
        assert!(s
            .quarantine(1)
            .contains("INTO [shop].[outbox_quarantine] (outbox_id, reason"));
        assert!(s.layout_read.contains("FROM [shop].[outbox_layout]"));
        assert!(s.layout_record.contains("INTO [shop].[outbox_layout]"));
        assert!(s.backlog.contains("FROM [shop].[outbox]"));
        for sql in [
            &s.mark,
            &s.mark_scoped,
            &s.layout_record,
            &s.backlog,
            &s.stash(2),
        ] {
            assert!(!sql.contains("{{"), "{sql}");
        }
    }

    #[test]
    fn the_mark_picks_from_row_versions_and_escrows_by_primary_key() {
        let s = statements();
        let mark = fragment(&s.mark);
        // The pick: a plain read (no locking hint, no READPAST), in id order, into a table
        // variable.
        assert!(mark.contains(
            "INSERT INTO @picked (id) SELECT TOP (@P2) id FROM [shop].[outbox] WHERE (leader_id IS NULL OR leader_id <> @P1) ORDER BY id;"
        ), "{mark}");
        assert!(
            !mark.contains("READPAST") && !mark.contains("NOLOCK"),
            "{mark}"
        );
        // The escrow: sought by key, re-checked, returned.
        assert!(
            mark.contains("UPDATE o SET leader_id = @P1 OUTPUT inserted.id"),
            "{mark}"
        );
        assert!(mark.contains(
            "FROM [shop].[outbox] AS o WITH (FORCESEEK, ROWLOCK) INNER JOIN @picked AS p ON p.id = o.id WHERE o.leader_id IS NULL OR o.leader_id <> @P1;"
        ), "{mark}");
        assert!(mark.contains("AS kafka_timestamp_ms") && mark.contains("AS create_time_us"));
        assert_eq!(named(&s.mark), one_to(2));
        assert!(!mark.contains("HASHBYTES") && !mark.contains("_layout"));
    }

    #[test]
    fn scoped_marks_carry_the_bucket_and_the_layout_guard_in_parameter_order() {
        let s = statements();
        let all = fragment(&s.mark_all_buckets);
        assert!(all.contains(
            "WHERE (leader_id IS NULL OR leader_id <> @P1) AND @P3 = (SELECT buckets FROM [shop].[outbox_layout]) ORDER BY id;"
        ), "{all}");
        assert!(!all.contains("HASHBYTES"));
        assert_eq!(named(&s.mark_all_buckets), one_to(3));
        let scoped = fragment(&s.mark_scoped);
        assert!(scoped.contains(
            "AND SUBSTRING(@P3, (CAST(0x00000000 + SUBSTRING(HASHBYTES('SHA2_256', COALESCE(kafka_key, 0x)), 1, 4) AS BIGINT) % @P4) + 1, 1) = '1' AND @P4 = (SELECT buckets FROM [shop].[outbox_layout]) ORDER BY id;"
        ), "{scoped}");
        // leader, limit, buckets, count
        assert_eq!(named(&s.mark_scoped), one_to(4));
        // buckets_of computes the same expression over its keys.
        let of = fragment(&s.buckets_of(3));
        assert_eq!(
            of,
            "SELECT (CAST(0x00000000 + SUBSTRING(HASHBYTES('SHA2_256', COALESCE(held.k, 0x)), 1, 4) AS BIGINT) % @P1) AS bucket FROM (VALUES (@P2, 0), (@P3, 1), (@P4, 2)) AS held (k, i) ORDER BY i"
        );
        assert_eq!(named(&s.buckets_of(MAX_LIST)), one_to(MAX_LIST + 1));
    }

    #[test]
    fn resets_and_quarantines_are_conditioned_on_the_leaders_and_every_statement_seeks() {
        let s = statements();
        let purge = fragment(&s.purge(4));
        assert_eq!(
            purge,
            "DELETE o FROM [shop].[outbox] AS o WITH (FORCESEEK, ROWLOCK) WHERE o.id IN (@P1, @P2, @P3, @P4)"
        );
        let reset = fragment(&s.reset(2, 1));
        assert_eq!(
            reset,
            "UPDATE o SET leader_id = NULL FROM [shop].[outbox] AS o WITH (FORCESEEK, ROWLOCK) WHERE o.id IN (@P1, @P2) AND o.leader_id IN (@P3)"
        );
        let q = fragment(&s.quarantine(2));
        assert!(
            q.starts_with("DELETE o OUTPUT deleted.id, @P1, deleted.create_time"),
            "{q}"
        );
        assert!(q.ends_with(
            "FROM [shop].[outbox] AS o WITH (FORCESEEK, ROWLOCK) WHERE o.id = @P2 AND o.leader_id IN (@P3, @P4)"
        ), "{q}");
        // Every shape stays under SQL Server's 2100 parameters.
        assert_eq!(named(&s.purge(MAX_LIST)), one_to(MAX_LIST));
        assert_eq!(
            named(&s.reset(MAX_LIST, MAX_LEADERS)),
            one_to(MAX_LIST + MAX_LEADERS)
        );
        assert_eq!(named(&s.quarantine(MAX_LEADERS)), one_to(MAX_LEADERS + 2));
    }

    #[test]
    fn the_stash_numbers_its_rows_and_their_parameters() {
        let s = statements();
        let stash = fragment(&s.stash(2));
        assert!(
            stash.contains("OUTPUT inserted.id SELECT r.topic"),
            "{stash}"
        );
        assert!(
            stash.contains(
                "FROM (VALUES (0, @P1, @P2, @P3, @P4, @P5, @P6, @P7), (1, @P8, @P9, @P10, @P11, @P12, @P13, @P14)) AS r"
            ),
            "{stash}"
        );
        assert!(stash.ends_with("ORDER BY r.seq"), "{stash}");
        assert_eq!(
            named(&s.stash(MAX_RECORDS)),
            one_to(MAX_RECORDS * STASH_PARAMS)
        );
        assert_eq!(named(&s.layout_record), one_to(2));
        assert!(s.layout_record.contains("WITH (UPDLOCK, HOLDLOCK)"));
    }

    #[test]
    fn lists_take_few_shapes() {
        assert_eq!(padded(0), 1);
        assert_eq!(padded(3), 4);
        assert_eq!(padded(MAX_LIST), MAX_LIST);
        assert_eq!(padded(MAX_LIST + 1), MAX_LIST);
        assert_eq!(chunk_sizes(0, 256), Vec::<usize>::new());
        assert_eq!(chunk_sizes(37, 256), vec![32, 4, 1]);
        assert_eq!(chunk_sizes(600, 256), vec![256, 256, 64, 16, 8]);
        for n in 0..1500 {
            let sizes = chunk_sizes(n, MAX_LIST);
            assert_eq!(sizes.iter().sum::<usize>(), n);
            assert!(sizes.iter().all(|s| s.is_power_of_two() && *s <= MAX_LIST));
        }
    }

    #[test]
    fn id_lists_are_sorted_deduplicated_padded_and_cut_at_the_maximum() {
        assert_eq!(id_lists(&[]), Vec::<Vec<i64>>::new());
        assert_eq!(id_lists(&[9, 5, 6, 5]), vec![vec![5, 6, 9, 9]]);
        let many: Vec<i64> = (0..1300).rev().collect();
        let lists = id_lists(&many);
        assert_eq!(lists.len(), 2);
        assert_eq!(lists[0].len(), MAX_LIST);
        assert_eq!(lists[0][0], 0);
        assert_eq!(lists[1].len(), 512);
        assert_eq!(lists[1][275], 1299);
        assert_eq!(lists[1][511], 1299);
    }
}
