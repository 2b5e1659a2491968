//! Where a snapshot reader is, apart from its statements: the full read's cursor or the current
//! window's ids, and the rows sent back. The reader runs the statements this asks for and hands
//! each page back; everything here is pure, so the per-page work can be measured without a
//! database (the `hotpaths` crate, through the `internals` feature).
//!
//! Every change is made only once the page it follows from was read: a failed statement leaves
//! the position as it was, and the same read can be asked for again.

use std::collections::{BTreeSet, VecDeque};

use crate::outbox::Decoded;

/// A snapshot as Postgres prints it (`xmin:xmax:xip,...`) and its in-progress list as an
/// `xid8[]` literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snap {
    pub text: String,
    pub xip: String,
}

/// Where the reader is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// The term's full read: every row visible in `snap` (taken by the first page), by id.
    Full { snap: Option<Snap>, after: i64 },
    /// Everything visible in `from` is read. Once the window after it is opened (its first page
    /// asked for), `to` is its end and `ids` its rows not returned yet, ascending.
    Window {
        from: Snap,
        to: Option<Snap>,
        ids: VecDeque<i64>,
    },
}

/// What the next page needs from the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// The full read's next page: rows visible in `snap` (None: take it first) above `after`.
    Full { snap: Option<Snap>, after: i64 },
    /// A new window after `from`: take its end, find its ids, then [`Position::opened`].
    Open { from: Snap },
    /// The open window's next page: these ids (none when the window is empty).
    Page(Vec<i64>),
}

/// One term's position (see the module docs); a new generation starts with a new one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    phase: Phase,
    /// Rows sent back by [`Position::reread`], returned first by the next read.
    again: BTreeSet<i64>,
}

impl Default for Position {
    fn default() -> Self {
        Position {
            phase: Phase::Full {
                snap: None,
                after: 0,
            },
            again: BTreeSet::new(),
        }
    }
}

impl Position {
    /// Whether the term's full read is over.
    pub fn caught_up(&self) -> bool {
        matches!(self.phase, Phase::Window { .. })
    }

    /// Rows sent back: the next read returns them (those still in the table) first.
    pub fn reread(&mut self, ids: impl IntoIterator<Item = i64>) {
        self.again.extend(ids);
    }

    /// The rows sent back that a read of `limit` rows returns first: the lowest, never more than
    /// asked for (each row holds a permit).
    pub fn again(&self, limit: usize) -> Vec<i64> {
        self.again.iter().copied().take(limit).collect()
    }

    /// Whether a read that returns `again` (from [`Position::again`]) may go on to a new page:
    /// only once every row sent back is in it, so nothing newer overtakes them.
    pub fn pages_after(&self, again: &[i64]) -> bool {
        again.len() == self.again.len()
    }

    /// The rows sent back were read again.
    pub fn returned(&mut self, again: &[i64]) {
        for id in again {
            self.again.remove(id);
        }
    }

    /// What the next page of at most `limit` rows needs.
    pub fn next(&self, limit: usize) -> Next {
        match &self.phase {
            Phase::Full { snap, after } => Next::Full {
                snap: snap.clone(),
                after: *after,
            },
            Phase::Window { from, to: None, .. } => Next::Open { from: from.clone() },
            Phase::Window { .. } => Next::Page(self.page(limit)),
        }
    }

    /// The open window's next page of at most `limit` ids (none outside a window).
    pub fn page(&self, limit: usize) -> Vec<i64> {
        match &self.phase {
            Phase::Window { ids, .. } => ids.iter().take(limit).copied().collect(),
            Phase::Full { .. } => Vec::new(),
        }
    }

    /// A full read's page of at most `limit` rows visible in `snap` was read: a full page may
    /// have more after it, a short one ends the full read.
    pub fn full_page(&mut self, snap: Snap, page: &[Decoded], limit: usize) {
        self.phase = match page.last() {
            Some(last) if page.len() >= limit => Phase::Full {
                snap: Some(snap),
                after: decoded_id(last),
            },
            _ => Phase::Window {
                from: snap,
                to: None,
                ids: VecDeque::new(),
            },
        };
    }

    /// The window was opened: `end` is the snapshot it ends at, `ids` its rows, ascending.
    pub fn opened(&mut self, end: Snap, ids: VecDeque<i64>) {
        if let Phase::Window {
            to, ids: pending, ..
        } = &mut self.phase
        {
            *to = Some(end);
            *pending = ids;
        }
    }

    /// The window's page of `n` ids (from [`Next::Page`]) was read; after its last one, the next
    /// page opens a new window.
    pub fn page_read(&mut self, n: usize) {
        if let Phase::Window { from, to, ids } = &mut self.phase {
            ids.drain(..n.min(ids.len()));
            if ids.is_empty() {
                if let Some(end) = to.take() {
                    *from = end;
                }
            }
        }
    }
}

/// A read's rows as returned: by id, each once (a row sent back may be on the page too).
pub fn by_id(rows: &mut Vec<Decoded>) {
    rows.sort_by_key(decoded_id);
    rows.dedup_by_key(|d| decoded_id(d));
}

fn decoded_id(d: &Decoded) -> i64 {
    match d {
        Ok(r) => r.id,
        Err(p) => p.id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbox::Poison;

    fn snap(n: u32) -> Snap {
        Snap {
            text: format!("{n}:{n}:"),
            xip: "{}".into(),
        }
    }

    fn rows(ids: &[i64]) -> Vec<Decoded> {
        ids.iter()
            .map(|&id| {
                Err(Poison {
                    id,
                    reason: String::new(),
                })
            })
            .collect()
    }

    #[test]
    fn the_full_read_pages_on_until_a_short_page_then_windows_follow_each_other() {
        let mut p = Position::default();
        assert_eq!(
            p.next(2),
            Next::Full {
                snap: None,
                after: 0
            }
        );
        p.full_page(snap(1), &rows(&[3, 4]), 2);
        assert_eq!(
            p.next(2),
            Next::Full {
                snap: Some(snap(1)),
                after: 4
            }
        );
        assert!(!p.caught_up());
        p.full_page(snap(1), &rows(&[9]), 2);
        assert!(p.caught_up());
        assert_eq!(p.next(2), Next::Open { from: snap(1) });
        p.opened(snap(2), VecDeque::from([10, 11, 12]));
        assert_eq!(p.next(2), Next::Page(vec![10, 11]));
        assert_eq!(p.next(2), Next::Page(vec![10, 11]), "unread: asked again");
        p.page_read(2);
        assert_eq!(p.next(2), Next::Page(vec![12]));
        p.page_read(1);
        assert_eq!(p.next(2), Next::Open { from: snap(2) });
        p.opened(snap(3), VecDeque::new());
        assert_eq!(p.page(2), Vec::<i64>::new());
        p.page_read(0);
        assert_eq!(
            p.next(2),
            Next::Open { from: snap(3) },
            "an empty window ends"
        );
    }

    #[test]
    fn rows_sent_back_come_first_lowest_first_and_hold_new_pages_back_until_all_are_read() {
        let mut p = Position::default();
        p.reread([9, 3, 5]);
        let again = p.again(2);
        assert_eq!(again, vec![3, 5]);
        assert!(!p.pages_after(&again), "9 is still to come");
        p.returned(&again);
        let again = p.again(2);
        assert_eq!(again, vec![9]);
        assert!(p.pages_after(&again));
        p.returned(&again);
        assert!(p.again(2).is_empty());
    }

    #[test]
    fn a_read_returns_its_rows_by_id_each_once() {
        let mut out = rows(&[7, 2, 7, 5]);
        by_id(&mut out);
        let ids: Vec<i64> = out.iter().map(decoded_id).collect();
        assert_eq!(ids, vec![2, 5, 7]);
    }
}
