//! The mark, without `UPDATE … RETURNING` or array parameters: one transaction at READ
//! COMMITTED that picks the head ids with a plain read (`pick.sql`), escrows them with an
//! UPDATE that locks each and re-checks it (`mark.sql`), reads back what it escrowed
//! (`marked.sql`) and commits.
//!
//! Why READ COMMITTED: it takes no gap or next-key locks, so a mark never blocks a writer's
//! insert (at REPEATABLE READ, the UPDATE's lookup of a picked id that a purge removed meanwhile
//! locks the gap around it, up to the end of the table where every new row goes, until the mark
//! commits), and each statement reads the rows committed when it starts, so the pick sees the
//! whole committed head, late commits included, without waiting for any writer.
//!
//! Exactness: the rows read back are the ones the UPDATE changed (it holds their locks to the
//! commit, and no other mark of this leader runs: marks of a store are serialised), and the
//! count is checked against the UPDATE's; on a mismatch the transaction is rolled back and the
//! mark fails, having applied nothing. A failed commit is the pipeline's unknown outcome.

use sqlx::mysql::MySqlRow;
use sqlx::{Connection, MySqlPool};
use uuid::Uuid;

use super::statements::{id_lists, Statements};
use crate::error::Error;
use crate::store::BucketScope;
use crate::Result;

/// The scope's buckets as the pick binds them: `1` at each bucket's position, else `0`.
pub(super) fn bucket_mask(scope: &BucketScope) -> String {
    let mut mask = vec![b'0'; usize::from(scope.count)];
    for &b in &scope.buckets {
        mask[usize::from(b)] = b'1';
    }
    String::from_utf8(mask).unwrap_or_default()
}

/// Marks up to `limit` rows for `leader` within `scope` (None: the whole table); returns the
/// marked rows in id order.
pub(super) async fn mark(
    pool: &MySqlPool,
    statements: &Statements,
    leader: Uuid,
    limit: usize,
    scope: Option<&BucketScope>,
) -> Result<Vec<MySqlRow>> {
    let mut conn = pool
        .acquire()
        .await
        .map_err(Error::db("acquire a connection to mark"))?;
    // SET TRANSACTION applies to the next transaction only. The pool's connections run at READ
    // COMMITTED anyway; this keeps a mark at it on a pool made elsewhere too, in the same round
    // trip as the BEGIN.
    let mut tx = conn
        .begin_with("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION")
        .await
        .map_err(Error::db("begin the mark transaction"))?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let pick = match scope {
        None => sqlx::query_scalar(&statements.pick).bind(leader),
        Some(s) if s.is_all() => sqlx::query_scalar(&statements.pick_all_buckets)
            .bind(leader)
            .bind(i64::from(s.count)),
        Some(s) => sqlx::query_scalar(&statements.pick_scoped)
            .bind(leader)
            .bind(bucket_mask(s))
            .bind(i64::from(s.count))
            .bind(i64::from(s.count)),
    };
    let ids: Vec<i64> = pick
        .bind(limit)
        .fetch_all(&mut *tx)
        .await
        .map_err(Error::db("pick the rows to mark"))?;
    let mut marked = 0u64;
    let mut rows = Vec::with_capacity(ids.len());
    for list in id_lists(&ids) {
        let update = statements.mark(list.len());
        let mut query = sqlx::query(&update).bind(leader);
        for id in &list {
            query = query.bind(id);
        }
        marked += query
            .bind(leader)
            .execute(&mut *tx)
            .await
            .map_err(Error::db("mark the picked rows"))?
            .rows_affected();
        let read = statements.marked(list.len());
        let mut query = sqlx::query(&read).bind(leader);
        for id in &list {
            query = query.bind(id);
        }
        rows.extend(
            query
                .fetch_all(&mut *tx)
                .await
                .map_err(Error::db("read back the marked rows"))?,
        );
    }
    if rows.len() as u64 != marked {
        tx.rollback()
            .await
            .map_err(Error::db("roll back an inexact mark"))?;
        return Err(Error::StoreAnswer {
            what: format!(
                "a mark changed {marked} rows but read back {}: rolled back",
                rows.len()
            ),
        });
    }
    tx.commit().await.map_err(Error::db("commit the mark"))?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_have_a_one_at_each_bucket_of_the_scope() {
        assert_eq!(bucket_mask(&BucketScope::new(8, [0, 3, 7])), "10010001");
        assert_eq!(bucket_mask(&BucketScope::new(4, [])), "0000");
        assert_eq!(bucket_mask(&BucketScope::new(3, [0, 1, 2, 9])), "111");
    }
}
