//! Statements with their parameters laid out: each call's SQL (from `statements.rs`) and its
//! values in `@P1, @P2, ...` order, as plain data that the tests can read, turned into a
//! tiberius [`Query`] only when run.
//!
//! Leader ids are bound as `UNIQUEIDENTIFIER` parameters from the [`Uuid`] itself: tiberius
//! writes a GUID's first three groups little-endian on the wire, as SQL Server stores them, and
//! reads them back the same way, so a leader id round-trips unchanged and
//! `CONVERT(CHAR(36), leader_id)` prints it as logged (see [`guid_bytes`]).

use std::borrow::Cow;

use tiberius::Query;
use uuid::Uuid;

use super::statements::{padded, Statements, MAX_LEADERS, STASH_PARAMS};
use crate::error::Error;
use crate::store::BucketScope;
use crate::Result;

/// One bound value.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg<'a> {
    /// `bigint`.
    I64(i64),
    /// `bigint`, maybe NULL.
    OptI64(Option<i64>),
    /// `int`, maybe NULL.
    OptI32(Option<i32>),
    /// `uniqueidentifier`.
    Guid(Uuid),
    /// `varbinary`, maybe NULL.
    Bytes(Option<&'a [u8]>),
    /// `nvarchar`.
    Text(Cow<'a, str>),
}

/// A statement and its values, in parameter order.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound<'a> {
    pub sql: Cow<'a, str>,
    pub args: Vec<Arg<'a>>,
}

impl<'a> Bound<'a> {
    /// The tiberius query: the SQL with every value bound in order.
    pub fn query(self) -> Query<'a> {
        let mut query = Query::new(self.sql);
        for arg in self.args {
            match arg {
                Arg::I64(v) => query.bind(v),
                Arg::OptI64(v) => query.bind(v),
                Arg::OptI32(v) => query.bind(v),
                Arg::Guid(v) => query.bind(v),
                Arg::Bytes(v) => query.bind(v),
                Arg::Text(v) => query.bind(v),
            }
        }
        query
    }
}

/// The 16 bytes SQL Server stores for `uuid` as a `UNIQUEIDENTIFIER` (what
/// `CAST(leader_id AS BINARY(16))` shows): the first three groups byte-swapped, the last eight
/// bytes as they are. The store never binds these (tiberius converts a [`Uuid`] itself); they are
/// for operators and tests that compare a column's bytes with a logged leader id.
pub fn guid_bytes(uuid: Uuid) -> [u8; 16] {
    let mut b = *uuid.as_bytes();
    b[0..4].reverse();
    b[4..6].reverse();
    b[6..8].reverse();
    b
}

/// The scope's buckets as the scoped mark binds them: `1` at each bucket's position, else `0`.
pub fn bucket_mask(scope: &BucketScope) -> String {
    let mut mask = vec![b'0'; usize::from(scope.count)];
    for &b in &scope.buckets {
        mask[usize::from(b)] = b'1';
    }
    String::from_utf8(mask).unwrap_or_default()
}

/// `leaders`, padded to a power of two by repeating the last (callers pass at least one).
pub fn leader_list(leaders: &[Uuid]) -> Result<Vec<Uuid>> {
    if leaders.len() > MAX_LEADERS {
        return Err(Error::TooManyLeaderIds {
            store: "sql server",
            count: leaders.len(),
            max: MAX_LEADERS,
        });
    }
    let mut list = leaders.to_vec();
    if let Some(&last) = leaders.last() {
        list.resize(padded(leaders.len()), last);
    }
    Ok(list)
}

/// A mark of `limit` rows for `leader` within `scope` (None: the whole table).
pub fn mark<'a>(
    statements: &'a Statements,
    leader: Uuid,
    limit: usize,
    scope: Option<&BucketScope>,
) -> Bound<'a> {
    let limit = Arg::I64(i64::try_from(limit).unwrap_or(i64::MAX));
    let (sql, args) = match scope {
        None => (&statements.mark, vec![Arg::Guid(leader), limit]),
        Some(s) if s.is_all() => (
            &statements.mark_all_buckets,
            vec![Arg::Guid(leader), limit, Arg::I64(i64::from(s.count))],
        ),
        Some(s) => (
            &statements.mark_scoped,
            vec![
                Arg::Guid(leader),
                limit,
                Arg::Text(bucket_mask(s).into()),
                Arg::I64(i64::from(s.count)),
            ],
        ),
    };
    Bound {
        sql: Cow::Borrowed(sql),
        args,
    }
}

/// A purge (`reset` false: by id alone, `leaders` unused) or reset of one id list, conditioned
/// on padded `leaders`.
pub fn on_ids<'a>(
    statements: &Statements,
    reset: bool,
    ids: &[i64],
    leaders: &[Uuid],
) -> Bound<'a> {
    let (sql, leaders) = if reset {
        (statements.reset(ids.len(), leaders.len()), leaders)
    } else {
        (statements.purge(ids.len()), &[][..])
    };
    let args = ids
        .iter()
        .map(|id| Arg::I64(*id))
        .chain(leaders.iter().map(|l| Arg::Guid(*l)))
        .collect();
    Bound {
        sql: Cow::Owned(sql),
        args,
    }
}

/// The quarantine of row `id` with `reason`, conditioned on padded `leaders`.
pub fn quarantine<'a>(
    statements: &Statements,
    id: i64,
    leaders: &[Uuid],
    reason: &'a str,
) -> Bound<'a> {
    let mut args = vec![Arg::Text(Cow::Borrowed(reason)), Arg::I64(id)];
    args.extend(leaders.iter().map(|l| Arg::Guid(*l)));
    Bound {
        sql: Cow::Owned(statements.quarantine(leaders.len())),
        args,
    }
}

/// The buckets of one chunk of `keys` in a table of `count` buckets.
pub fn buckets_of<'a>(
    statements: &Statements,
    keys: &'a [Option<Vec<u8>>],
    count: u16,
) -> Bound<'a> {
    let mut args = vec![Arg::I64(i64::from(count))];
    args.extend(keys.iter().map(|k| Arg::Bytes(k.as_deref())));
    Bound {
        sql: Cow::Owned(statements.buckets_of(keys.len())),
        args,
    }
}

/// Recording the layout `count`, by `by` (cut to the column's 255 characters).
pub fn layout_record<'a>(statements: &'a Statements, count: u16, by: &'a str) -> Bound<'a> {
    let by: String = by.chars().take(255).collect();
    Bound {
        sql: Cow::Borrowed(&statements.layout_record),
        args: vec![Arg::I64(i64::from(count)), Arg::Text(by.into())],
    }
}

/// One record's values for the stash, in `sql/stash_row.sql`'s order: topic, key, value, header
/// names, header values, partition, timestamp (ms).
pub fn stash_row<'a>(
    topic: &'a str,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: (String, String),
    partition: Option<i32>,
    timestamp_ms: Option<i64>,
) -> [Arg<'a>; STASH_PARAMS] {
    [
        Arg::Text(Cow::Borrowed(topic)),
        Arg::Bytes(key),
        Arg::Bytes(value),
        Arg::Text(Cow::Owned(headers.0)),
        Arg::Text(Cow::Owned(headers.1)),
        Arg::OptI32(partition),
        Arg::OptI64(timestamp_ms),
    ]
}

/// How many parameters `sql` names outside its comments, checking that they are `@P1` to `@Pn`
/// with none left out (for the tests: `n` must be the number of values bound).
#[cfg(test)]
pub(crate) fn placeholders(sql: &str) -> usize {
    let code = super::statements::fragment(sql);
    let named: std::collections::BTreeSet<usize> = code
        .match_indices("@P")
        .filter_map(|(i, _)| {
            let digits: String = code[i + 2..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .collect();
    assert_eq!(
        named.iter().copied().collect::<Vec<_>>(),
        (1..=named.len()).collect::<Vec<_>>(),
        "parameters numbered from @P1 without gaps: {code}"
    );
    named.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbox::TableName;
    use tiberius::{ColumnData, FromSql, IntoSql};

    fn statements() -> Statements {
        let table = TableName::parse("outbox").unwrap();
        Statements::new(&table, &table.sibling("_quarantine"))
    }

    #[test]
    fn uuids_round_trip_as_uniqueidentifiers() {
        let u = Uuid::parse_str("00112233-4455-6677-8899-aabbccddeeff").unwrap();
        // SQL Server's storage order: Data1, Data2 and Data3 little-endian.
        assert_eq!(
            guid_bytes(u),
            [
                0x33, 0x22, 0x11, 0x00, 0x55, 0x44, 0x77, 0x66, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd,
                0xee, 0xff
            ]
        );
        assert_eq!(
            Uuid::from_bytes(guid_bytes(Uuid::from_bytes(guid_bytes(u)))),
            u,
            "the swap is its own inverse"
        );
        // tiberius binds and reads the Uuid itself (it does the swap on the wire), so the value
        // bound is the value read back.
        for u in [u, Uuid::new_v4(), Uuid::nil(), Uuid::max()] {
            let data = u.into_sql();
            assert_eq!(data, ColumnData::Guid(Some(u)));
            assert_eq!(Uuid::from_sql(&data).unwrap(), Some(u));
        }
    }

    #[test]
    fn marks_bind_leader_limit_and_scope_in_order() {
        let s = statements();
        let leader = Uuid::new_v4();
        let whole = mark(&s, leader, 100, None);
        assert_eq!(whole.args, vec![Arg::Guid(leader), Arg::I64(100)]);
        assert_eq!(placeholders(&whole.sql), whole.args.len());
        let all = mark(&s, leader, 5, Some(&BucketScope::new(4, 0..4)));
        assert_eq!(all.sql, s.mark_all_buckets);
        assert_eq!(all.args, vec![Arg::Guid(leader), Arg::I64(5), Arg::I64(4)]);
        assert_eq!(placeholders(&all.sql), all.args.len());
        let some = mark(&s, leader, 5, Some(&BucketScope::new(8, [1, 6])));
        assert_eq!(some.sql, s.mark_scoped);
        assert_eq!(
            some.args,
            vec![
                Arg::Guid(leader),
                Arg::I64(5),
                Arg::Text("01000010".into()),
                Arg::I64(8)
            ]
        );
        assert_eq!(placeholders(&some.sql), some.args.len());
        assert_eq!(some.clone().query().param_count(), 4);
        assert_eq!(
            mark(&s, leader, usize::MAX, None).args[1],
            Arg::I64(i64::MAX)
        );
    }

    #[test]
    fn masks_have_a_one_at_each_bucket_of_the_scope() {
        assert_eq!(bucket_mask(&BucketScope::new(8, [0, 3, 7])), "10010001");
        assert_eq!(bucket_mask(&BucketScope::new(4, [])), "0000");
        assert_eq!(bucket_mask(&BucketScope::new(3, [0, 1, 2, 9])), "111");
    }

    #[test]
    fn id_statements_bind_ids_then_leaders() {
        let s = statements();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let leaders = leader_list(&[a, b, b]).unwrap();
        assert_eq!(leaders, vec![a, b, b, b], "padded to a power of two");
        let purge = on_ids(&s, false, &[3, 4], &leaders);
        assert!(purge.sql.contains("DELETE o FROM"));
        assert_eq!(purge.args, vec![Arg::I64(3), Arg::I64(4)], "by id alone");
        assert_eq!(placeholders(&purge.sql), purge.args.len());
        let reset = on_ids(&s, true, &[3, 4], &leaders);
        assert!(reset.sql.contains("SET leader_id = NULL"));
        assert_eq!(
            reset.args,
            vec![
                Arg::I64(3),
                Arg::I64(4),
                Arg::Guid(a),
                Arg::Guid(b),
                Arg::Guid(b),
                Arg::Guid(b)
            ]
        );
        assert_eq!(placeholders(&reset.sql), reset.args.len());
        let reset = on_ids(&s, true, &[3], &leaders[..1]);
        assert_eq!(reset.args, vec![Arg::I64(3), Arg::Guid(a)]);
        assert_eq!(reset.query().param_count(), 2);
        assert!(leader_list(&vec![a; MAX_LEADERS + 1]).is_err());
        assert!(leader_list(&[]).unwrap().is_empty());
    }

    #[test]
    fn quarantines_bind_reason_id_then_leaders() {
        let s = statements();
        let a = Uuid::new_v4();
        let q = quarantine(&s, 42, &[a, a], "too large");
        assert_eq!(
            q.args,
            vec![
                Arg::Text("too large".into()),
                Arg::I64(42),
                Arg::Guid(a),
                Arg::Guid(a)
            ]
        );
        assert_eq!(placeholders(&q.sql), 4, "@P1, @P2 and two leaders");
    }

    #[test]
    fn keys_bind_after_the_count_nulls_included() {
        let s = statements();
        let keys = vec![Some(b"k1".to_vec()), None, Some(Vec::new())];
        let b = buckets_of(&s, &keys, 16);
        assert_eq!(
            b.args,
            vec![
                Arg::I64(16),
                Arg::Bytes(Some(b"k1")),
                Arg::Bytes(None),
                Arg::Bytes(Some(b""))
            ]
        );
        assert_eq!(placeholders(&b.sql), 4);
        let long = "x".repeat(300);
        let l = layout_record(&s, 8, &long);
        assert_eq!(l.args[0], Arg::I64(8));
        assert_eq!(l.args[1], Arg::Text("x".repeat(255).into()));
    }
}
