//! Naming the outbox table safely.
//!
//! Table names come from configuration and end up inside SQL text (identifiers cannot be bound
//! as parameters), so they are parsed into schema and table parts and always emitted quoted.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A possibly schema-qualified table name, e.g. `outbox` or `billing.outbox`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TableName {
    pub schema: Option<String>,
    pub table: String,
}

impl TableName {
    /// Parses `table` or `schema.table`; each part may be double-quoted (`"My Schema"."t"`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let parts = split_parts(s)?;
        match parts.as_slice() {
            [t] => Ok(TableName {
                schema: None,
                table: t.clone(),
            }),
            [s, t] => Ok(TableName {
                schema: Some(s.clone()),
                table: t.clone(),
            }),
            _ => Err(format!(
                "{s:?} is not a table name; use `table` or `schema.table`"
            )),
        }
    }

    /// The quoted SQL form, `"schema"."table"`.
    pub fn quoted(&self) -> String {
        match &self.schema {
            Some(s) => format!("{}.{}", quote(s), quote(&self.table)),
            None => quote(&self.table),
        }
    }

    /// A sibling object's name in the same schema: `<table><suffix>`, quoted.
    pub fn sibling(&self, suffix: &str) -> TableName {
        TableName {
            schema: self.schema.clone(),
            table: truncate(&format!("{}{suffix}", self.table)),
        }
    }

    /// A Postgres identifier (≤ 63 bytes) derived from the full name, for channels and triggers.
    pub fn ident(&self, suffix: &str) -> String {
        let base = match &self.schema {
            Some(s) => format!("{s}_{}", self.table),
            None => self.table.clone(),
        };
        let clean: String = base
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        truncate(&format!("{clean}{suffix}"))
    }
}

fn truncate(s: &str) -> String {
    if s.len() <= 63 {
        return s.to_owned();
    }
    let hash = crate::hash::fnv1a32(s.as_bytes());
    let mut cut = 54;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}_{hash:08x}", &s[..cut])
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

fn split_parts(s: &str) -> Result<Vec<String>, String> {
    let mut parts = Vec::new();
    let mut chars = s.trim().chars().peekable();
    loop {
        let mut part = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        part.push('"');
                    }
                    Some('"') => break,
                    Some(c) => part.push(c),
                    None => return Err(format!("{s:?} has an unterminated quote")),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                if !(c.is_alphanumeric() || c == '_' || c == '$') {
                    return Err(format!(
                        "{s:?} has {c:?} outside quotes; quote the part, e.g. \"\\\"my-table\\\"\""
                    ));
                }
                part.push(c.to_ascii_lowercase());
                chars.next();
            }
        }
        if part.is_empty() {
            return Err(format!("{s:?} has an empty name part"));
        }
        parts.push(part);
        match chars.next() {
            None => return Ok(parts),
            Some('.') => continue,
            Some(c) => return Err(format!("{s:?}: unexpected {c:?} after a name part")),
        }
    }
}

impl TryFrom<String> for TableName {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        TableName::parse(&s)
    }
}

impl From<TableName> for String {
    fn from(t: TableName) -> String {
        t.to_string()
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.quoted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_quotes() {
        assert_eq!(TableName::parse("outbox").unwrap().quoted(), "\"outbox\"");
        assert_eq!(
            TableName::parse("Billing.Outbox").unwrap().quoted(),
            "\"billing\".\"outbox\""
        );
        assert_eq!(
            TableName::parse("\"My \"\"S\".\"t-1\"").unwrap().quoted(),
            "\"My \"\"S\".\"t-1\""
        );
    }

    #[test]
    fn rejects_injection_and_garbage() {
        assert!(TableName::parse("outbox; drop table x").is_err());
        assert!(TableName::parse("a.b.c").is_err());
        assert!(TableName::parse("").is_err());
        assert!(TableName::parse("\"open").is_err());
    }

    #[test]
    fn derived_identifiers_fit_postgres() {
        let long = TableName::parse(&format!("s.{}", "x".repeat(80))).unwrap();
        assert!(long.ident("_harvest").len() <= 63);
        assert!(long.sibling("_quarantine").table.len() <= 63);
    }
}
