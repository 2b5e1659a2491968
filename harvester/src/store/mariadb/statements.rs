//! The SQL run against one configured table.
//!
//! SQL lives in `.sql` files beside this module with `{{placeholders}}` for identifiers, filled
//! once, backtick-quoted, from the configured [`TableName`]; values are always bound. MySQL has
//! no array parameters, so statements over a list (ids, leader ids, keys, records) are rendered
//! for the list's length with one `?` per element. To keep the number of distinct statements
//! (each prepared and cached per connection) small, a list is cut into chunks of at most
//! [`MAX_LIST`] and an `IN (...)` list is padded to a power of two by repeating its last element
//! (a duplicate in `IN` changes nothing), so a table has a handful of shapes of each statement,
//! not one per batch size.

use crate::outbox::TableName;

/// The most elements one statement's list takes (below MariaDB's
/// `in_predicate_conversion_threshold`, so an `IN` list stays a list of primary-key lookups).
pub const MAX_LIST: usize = 512;

/// The SQL statements for one configured table.
#[derive(Debug, Clone)]
pub struct Statements {
    /// The mark's pick over the whole table (`?` the leader, `?` the limit).
    pub pick: String,
    /// The pick of a scope of every bucket: the whole table with the layout guard (`?` the
    /// leader, `?` the bucket count, `?` the limit).
    pub pick_all_buckets: String,
    /// The pick within a bucket scope (`?` the leader, `?` the scope's buckets as a string of
    /// `0`/`1` by bucket number, `?` the bucket count, `?` the count again for the layout guard,
    /// `?` the limit).
    pub pick_scoped: String,
    /// Records the bucket layout unless one is (`?` B, `?` who).
    pub layout_record: String,
    /// The recorded bucket layout (no row: none).
    pub layout_read: String,
    /// The quarantine's copy of a locked row (`?` the reason, `?` the id).
    pub quarantine_copy: String,
    /// The quarantine's delete of the copied row (`?` the id).
    pub quarantine_delete: String,
    pub backlog: String,
    mark: String,
    marked: String,
    purge: String,
    reset: String,
    quarantine_lock: String,
    buckets_of: String,
    stash: String,
    stash_row: String,
}

/// A table name as MySQL quotes it: `` `schema`.`table` ``.
pub fn quoted(table: &TableName) -> String {
    let quote = |ident: &str| format!("`{}`", ident.replace('`', "``"));
    match &table.schema {
        Some(s) => format!("{}.{}", quote(s), quote(&table.table)),
        None => quote(&table.table),
    }
}

/// Identifier placeholders for one table.
pub(crate) fn placeholders(
    table: &TableName,
    quarantine: &TableName,
) -> Vec<(&'static str, String)> {
    vec![
        ("{{outbox}}", quoted(table)),
        ("{{quarantine}}", quoted(quarantine)),
        ("{{layout}}", quoted(&table.sibling("_layout"))),
    ]
}

pub(crate) fn render(template: &str, values: &[(&str, String)]) -> String {
    values
        .iter()
        .fold(template.to_owned(), |sql, (k, v)| sql.replace(k, v))
}

/// A fragment's code without its comment lines, on one line (to be embedded in a statement).
fn fragment(sql: &str) -> String {
    sql.lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `n` placeholders, comma-separated.
fn params(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// How many elements a list of `n` is bound as: `n` rounded up to a power of two, at most
/// [`MAX_LIST`] (callers chunk longer lists first).
pub fn padded(n: usize) -> usize {
    n.max(1).next_power_of_two().min(MAX_LIST)
}

/// The sizes a list of `n` elements is cut into when it cannot be padded (records to insert,
/// keys whose order matters): chunks of [`MAX_LIST`], then the powers of two of the remainder,
/// largest first, so their sum is `n` and there are at most ten shapes.
pub fn chunk_sizes(n: usize) -> Vec<usize> {
    let mut sizes = vec![MAX_LIST; n / MAX_LIST];
    let rest = n % MAX_LIST;
    let mut bit = MAX_LIST;
    while bit > 0 {
        if rest & bit != 0 {
            sizes.push(bit);
        }
        bit >>= 1;
    }
    sizes
}

/// `ids` cut into lists of at most [`MAX_LIST`], each padded to its bound length by repeating
/// its last id.
pub fn id_lists(ids: &[i64]) -> Vec<Vec<i64>> {
    ids.chunks(MAX_LIST)
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
        let bucket = |key: &str| {
            render(
                &fragment(include_str!("sql/bucket.sql")),
                &[("{{key}}", key.to_owned()), ("{{count}}", "?".to_owned())],
            )
        };
        let pick = include_str!("sql/pick.sql");
        // The layout guard is an uncorrelated subquery, evaluated once per pick: a count other
        // than the recorded one (or none recorded) picks nothing.
        let guard = " AND ? = (SELECT buckets FROM {{layout}})";
        // The scope's buckets are one string parameter, a `1` at (bucket + 1) for each bucket
        // in the scope, so the statement is the same whatever the scope.
        let scope = format!(
            " AND SUBSTRING(?, {} + 1, 1) = '1'{guard}",
            bucket("kafka_key")
        );
        Statements {
            pick: render(&pick.replace("{{scope}}", ""), &p),
            pick_all_buckets: render(&pick.replace("{{scope}}", guard), &p),
            pick_scoped: render(&pick.replace("{{scope}}", &scope), &p),
            layout_record: render(include_str!("sql/layout_record.sql"), &p),
            layout_read: render(include_str!("sql/layout_read.sql"), &p),
            quarantine_copy: render(include_str!("sql/quarantine_copy.sql"), &p),
            quarantine_delete: render(include_str!("sql/quarantine_delete.sql"), &p),
            backlog: render(include_str!("sql/backlog.sql"), &p),
            mark: render(include_str!("sql/mark.sql"), &p),
            marked: render(include_str!("sql/marked.sql"), &p),
            purge: render(include_str!("sql/purge.sql"), &p),
            reset: render(include_str!("sql/reset.sql"), &p),
            quarantine_lock: render(include_str!("sql/quarantine_lock.sql"), &p),
            buckets_of: include_str!("sql/buckets_of.sql").replace("{{bucket}}", &bucket("k")),
            stash: render(include_str!("sql/stash.sql"), &p),
            stash_row: fragment(include_str!("sql/stash_row.sql")),
        }
    }

    /// The mark's UPDATE of `ids` picked ids (`?` the leader, the ids, `?` the leader again).
    pub fn mark(&self, ids: usize) -> String {
        self.mark.replace("{{ids}}", &params(ids))
    }

    /// The mark's read-back (`?` the leader, then `ids` ids).
    pub fn marked(&self, ids: usize) -> String {
        self.marked.replace("{{ids}}", &params(ids))
    }

    /// The purge of `ids` ids.
    pub fn purge(&self, ids: usize) -> String {
        self.purge.replace("{{ids}}", &params(ids))
    }

    /// The reset of `ids` ids conditioned on `leaders` leader ids (ids first).
    pub fn reset(&self, ids: usize, leaders: usize) -> String {
        self.reset
            .replace("{{ids}}", &params(ids))
            .replace("{{leaders}}", &params(leaders))
    }

    /// The quarantine's lock of a row (`?` the id, then `leaders` leader ids).
    pub fn quarantine_lock(&self, leaders: usize) -> String {
        self.quarantine_lock
            .replace("{{leaders}}", &params(leaders))
    }

    /// The buckets of `keys` keys, in order (`?` the bucket count, then the keys).
    pub fn buckets_of(&self, keys: usize) -> String {
        let rows: Vec<String> = (0..keys)
            .map(|i| {
                if i == 0 {
                    "SELECT ? AS k, 0 AS i".to_owned()
                } else {
                    format!("SELECT ?, {i}")
                }
            })
            .collect();
        self.buckets_of
            .replace("{{keys}}", &rows.join(" UNION ALL "))
    }

    /// The insert of `records` records (seven parameters each, in stash_row.sql's order).
    pub fn stash(&self, records: usize) -> String {
        self.stash.replace(
            "{{rows}}",
            &vec![self.stash_row.as_str(); records].join(", "),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statements() -> Statements {
        let table = TableName::parse("shop.outbox").unwrap();
        Statements::new(&table, &table.sibling("_quarantine"))
    }

    #[test]
    fn identifiers_are_backtick_quoted() {
        let t = TableName::parse("\"we`ird\".\"t\"").unwrap();
        assert_eq!(quoted(&t), "`we``ird`.`t`");
        let s = statements();
        assert!(s.pick.contains("FROM `shop`.`outbox`"), "{}", s.pick);
        assert!(s
            .quarantine_copy
            .contains("INTO `shop`.`outbox_quarantine`"));
        assert!(s.layout_read.contains("FROM `shop`.`outbox_layout`"));
        assert!(!s.pick.contains("{{"), "{}", s.pick);
    }

    #[test]
    fn scoped_picks_carry_the_bucket_and_the_layout_guard_in_parameter_order() {
        let s = statements();
        let code = |sql: &str| fragment(sql);
        assert!(!s.pick.contains("CRC32") && !s.pick.contains("_layout"));
        let all = code(&s.pick_all_buckets);
        assert!(all.contains("AND ? = (SELECT buckets FROM `shop`.`outbox_layout`)"));
        assert!(!all.contains("CRC32"));
        let scoped = code(&s.pick_scoped);
        assert!(scoped.contains(
            "AND SUBSTRING(?, (CRC32(COALESCE(kafka_key, _binary'')) % ?) + 1, 1) = '1' AND ? = (SELECT buckets"
        ), "{scoped}");
        // leader, buckets, count, count, limit
        assert_eq!(scoped.matches('?').count(), 5);
        assert_eq!(code(&s.pick).matches('?').count(), 2);
        assert_eq!(all.matches('?').count(), 3);
    }

    #[test]
    fn lists_render_one_placeholder_per_element() {
        let s = statements();
        let purge = fragment(&s.purge(4));
        assert!(
            purge.ends_with("WHERE o.id IN (?, ?, ?, ?) AND o.leader_id <=> o.leader_id"),
            "{purge}"
        );
        let reset = fragment(&s.reset(4, 2));
        assert!(
            reset.ends_with("WHERE id IN (?, ?, ?, ?) AND leader_id IN (?, ?)"),
            "{reset}"
        );
        // By primary key, never a scan that waits for writers' uncommitted inserts.
        for by_id in [purge, reset, fragment(&s.mark(3))] {
            assert!(by_id.contains("FORCE INDEX (PRIMARY)"), "{by_id}");
        }
        assert_eq!(fragment(&s.mark(3)).matches('?').count(), 5);
        assert_eq!(fragment(&s.marked(3)).matches('?').count(), 4);
        assert_eq!(fragment(&s.quarantine_lock(2)).matches('?').count(), 3);
        let stash = fragment(&s.stash(2));
        assert!(
            stash.ends_with(
                "VALUES (?, ?, ?, ?, ?, ?, FROM_UNIXTIME(? / 1000)), (?, ?, ?, ?, ?, ?, FROM_UNIXTIME(? / 1000))"
            ),
            "{stash}"
        );
        let buckets = fragment(&s.buckets_of(3));
        assert!(
            buckets.ends_with(
                "FROM (SELECT ? AS k, 0 AS i UNION ALL SELECT ?, 1 UNION ALL SELECT ?, 2) AS held ORDER BY i"
            ),
            "{buckets}"
        );
        assert_eq!(buckets.matches('?').count(), 4);
    }

    #[test]
    fn lists_take_few_shapes() {
        assert_eq!(padded(0), 1);
        assert_eq!(padded(1), 1);
        assert_eq!(padded(3), 4);
        assert_eq!(padded(512), 512);
        assert_eq!(padded(513), MAX_LIST);
        assert_eq!(chunk_sizes(0), Vec::<usize>::new());
        assert_eq!(chunk_sizes(37), vec![32, 4, 1]);
        assert_eq!(chunk_sizes(1100), vec![512, 512, 64, 8, 4]);
        for n in 0..2000 {
            let sizes = chunk_sizes(n);
            assert_eq!(sizes.iter().sum::<usize>(), n);
            assert!(sizes.iter().all(|s| s.is_power_of_two() && *s <= MAX_LIST));
        }
    }

    #[test]
    fn id_lists_are_padded_with_the_last_id_and_cut_at_the_maximum() {
        assert_eq!(id_lists(&[]), Vec::<Vec<i64>>::new());
        assert_eq!(id_lists(&[5, 6, 9]), vec![vec![5, 6, 9, 9]]);
        let many: Vec<i64> = (0..700).collect();
        let lists = id_lists(&many);
        assert_eq!(lists.len(), 2);
        assert_eq!(lists[0].len(), MAX_LIST);
        assert_eq!(lists[1].len(), 256);
        assert_eq!(lists[1][187], 699);
        assert_eq!(lists[1][255], 699);
    }
}
