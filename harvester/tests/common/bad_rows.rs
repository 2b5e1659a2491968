//! Rows an application can write but Kafka cannot take, per backend, written with raw SQL
//! beside the `Stasher` (which never writes them): each must end in the quarantine with a
//! reason naming the row and the problem, while the rows around it are published in order.
//!
//! A keyless row is poison only because `outbox.require_key` defaults to true (with it off, a
//! NULL key is a valid record, published without a key); the suites keep the default. A value
//! larger than the producer's `message.max.bytes` is written with the `Stasher` (it is a valid
//! row) and quarantined when its delivery fails permanently.

use harvester::outbox::TableName;
use tiberius::Query;

use super::backend::{Backend, Db};
use super::World;

/// A malformed row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bad {
    /// Header arrays of different lengths: two names, one value.
    HeaderLengths,
    /// A NULL key (poison under the default `outbox.require_key`).
    NullKey,
    /// An empty topic.
    EmptyTopic,
    /// MariaDB, SQL Server: `header_keys` is JSON but not an array of strings.
    HeaderKeysNotStrings,
    /// MariaDB, SQL Server: `header_values` is JSON but not an array of strings.
    HeaderValuesNotStrings,
    /// MariaDB, SQL Server: a header value that is not base64.
    HeaderValueNotBase64,
    /// SQL Server: `header_keys` is not JSON at all (its `NVARCHAR(MAX)` holds any text).
    HeaderKeysNotJson,
}

impl Bad {
    /// The malformed rows `backend`'s table can hold. Postgres's typed arrays (`TEXT[]`,
    /// `BYTEA[]`) cannot hold the JSON or base64 faults; MariaDB's JSON columns cannot hold text
    /// that is not JSON at all (their `CHECK (json_valid(...))` refuses it: see
    /// [`World::insert_header_text`]); SQL Server's `NVARCHAR(MAX)` header columns hold anything.
    pub fn on(backend: Backend) -> Vec<Bad> {
        let mut all = vec![Bad::HeaderLengths, Bad::NullKey, Bad::EmptyTopic];
        if matches!(backend, Backend::MariaDb | Backend::Mssql) {
            all.extend([
                Bad::HeaderKeysNotStrings,
                Bad::HeaderValuesNotStrings,
                Bad::HeaderValueNotBase64,
            ]);
        }
        if backend == Backend::Mssql {
            all.push(Bad::HeaderKeysNotJson);
        }
        all
    }

    /// What the quarantine reason must say.
    pub fn reason(self) -> &'static str {
        match self {
            Bad::HeaderLengths => "header arrays differ",
            Bad::NullKey => "key is NULL",
            Bad::EmptyTopic => "empty topic",
            Bad::HeaderKeysNotStrings => "header_keys is not a JSON array of strings",
            Bad::HeaderValuesNotStrings => "header_values is not a JSON array of strings",
            Bad::HeaderValueNotBase64 => "header value 0 is not base64",
            Bad::HeaderKeysNotJson => "header_keys is not a JSON array of strings",
        }
    }

    /// The two JSON header columns' text for a backend that keeps headers as JSON (MariaDB,
    /// SQL Server).
    fn header_text(self) -> (&'static str, &'static str) {
        match self {
            Bad::HeaderLengths => (r#"["a","b"]"#, r#"["AQ=="]"#),
            Bad::NullKey | Bad::EmptyTopic => ("[]", "[]"),
            Bad::HeaderKeysNotStrings => (r#"{"a":1}"#, "[]"),
            Bad::HeaderValuesNotStrings => (r#"["a"]"#, "[1]"),
            Bad::HeaderValueNotBase64 => (r#"["a"]"#, r#"["@@@@"]"#),
            Bad::HeaderKeysNotJson => ("not json", "[]"),
        }
    }
}

impl World {
    /// Inserts one `bad` row into the world's outbox, committed; its id.
    pub async fn insert_bad(&self, bad: Bad) -> i64 {
        self.db.insert_bad(&self.table(), &self.topic, bad).await
    }

    /// MariaDB: tries to write header columns of raw text (`names`, `values`); the row's id, or
    /// the database's refusal.
    pub async fn insert_header_text(&self, names: &str, values: &str) -> Result<i64, sqlx::Error> {
        let key = Some(b"bad-text".to_vec());
        let table = self.table();
        self.db
            .insert_mariadb_row(&table, &self.topic, key, names, values)
            .await
    }
}

impl Db {
    /// Inserts one `bad` row into `table` (topic `topic`, unless the row's fault is its
    /// topic), committed; its id.
    pub async fn insert_bad(&self, table: &TableName, topic: &str, bad: Bad) -> i64 {
        let topic = if bad == Bad::EmptyTopic { "" } else { topic };
        let key = format!("bad-{bad:?}").into_bytes();
        let key = (bad != Bad::NullKey).then_some(key);
        let quoted = self.quoted(table);
        match self {
            Db::Postgres(db) | Db::PgSnapshot(db) => {
                let (names, values): (Vec<&str>, Vec<Vec<u8>>) = match bad {
                    Bad::HeaderLengths => (vec!["a", "b"], vec![vec![1]]),
                    Bad::NullKey | Bad::EmptyTopic => (Vec::new(), Vec::new()),
                    other => panic!("a Postgres outbox cannot hold {other:?}"),
                };
                sqlx::query_scalar(&format!(
                    "INSERT INTO {quoted} (topic, kafka_key, kafka_value, header_keys, header_values) \
                     VALUES ($1, $2, 'v', $3, $4) RETURNING id"
                ))
                .bind(topic)
                .bind(key)
                .bind(names)
                .bind(values)
                .fetch_one(&db.pool)
                .await
                .unwrap()
            }
            Db::MariaDb(_) => {
                let (names, values) = bad.header_text();
                self.insert_mariadb_row(table, topic, key, names, values)
                    .await
                    .unwrap()
            }
            Db::Mssql(db) => {
                let (names, values) = bad.header_text();
                let mut query = Query::new(format!(
                    "INSERT INTO {quoted} (topic, kafka_key, kafka_value, header_keys, header_values) \
                     OUTPUT inserted.id VALUES (@P1, @P2, 0x76, @P3, @P4)"
                ));
                query.bind(topic.to_owned());
                query.bind(key);
                query.bind(names);
                query.bind(values);
                db.query(query).await[0].get::<i64, _>(0).unwrap()
            }
        }
    }

    async fn insert_mariadb_row(
        &self,
        table: &TableName,
        topic: &str,
        key: Option<Vec<u8>>,
        names: &str,
        values: &str,
    ) -> Result<i64, sqlx::Error> {
        let Db::MariaDb(db) = self else {
            panic!("JSON header columns are MariaDB's")
        };
        let done = sqlx::query(&format!(
            "INSERT INTO {} (topic, kafka_key, kafka_value, header_keys, header_values) \
             VALUES (?, ?, 'v', ?, ?)",
            self.quoted(table)
        ))
        .bind(topic)
        .bind(key)
        .bind(names)
        .bind(values)
        .execute(&db.pool)
        .await?;
        Ok(done.last_insert_id() as i64)
    }
}
