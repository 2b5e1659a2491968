//! The outbox as the pipeline sees it, whatever store holds it: the record published, the row
//! that can never be ([`Poison`]), what a service stashes, the table's name and its layout.
//!
//! Nothing here talks to a database: each store (`crate::store::*`) maps its rows onto these
//! types, so the pipeline and every store agree on what a record is and what makes a row poison.

mod record;
mod stash;
mod table;

use serde::{Deserialize, Serialize};

pub use record::{zip_headers, Decoded, OutboxRecord, Poison};
pub use stash::StashRecord;
pub use table::TableName;

/// Which table layout is harvested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// This project's table: bytes key/value, header arrays, optional partition and timestamp.
    #[default]
    Native,
    /// goharvest's table, harvested unchanged: text key/value, `kafka_header_keys`/`values`.
    Goharvest,
}
