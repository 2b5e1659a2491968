//! Candidacy znodes: their names and their order.
//!
//! Each candidacy's name carries a random id before the sequence number the server appends
//! (`c_<uuid>_0000000042`). A create whose reply was lost to a connection loss may still have
//! happened; the id lets the candidate find its own znode among the children instead of
//! creating a second one that would sit ahead of it forever (the "protected" create of
//! Curator's recipes). Order is by the sequence number alone, never by the whole name.

use uuid::Uuid;

/// One candidacy: the prefix it is created with, and the znode once known.
#[derive(Debug, Clone)]
pub(crate) struct Candidacy {
    /// The election node.
    parent: String,
    /// `c_<uuid>_`: the name before the server's sequence number.
    stem: String,
}

/// Where a candidacy stands among the children of the election node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Its znode (`own`, a full path) has the lowest sequence number: it leads.
    First { own: String },
    /// The znode just ahead of it, to watch (no herd: each watches only its predecessor).
    Behind { own: String, predecessor: String },
    /// Its znode is not among the children.
    Missing,
}

/// The sequence number of a child named by a sequential create, if it is one.
fn sequence(child: &str) -> Option<i64> {
    let digits = child.rsplit('_').next()?;
    if digits.len() < 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

impl Candidacy {
    /// A new candidacy under `parent`, with a fresh id.
    pub fn new(parent: &str) -> Candidacy {
        Candidacy {
            parent: parent.to_owned(),
            stem: format!("c_{}_", Uuid::new_v4().simple()),
        }
    }

    /// The path to create with `EphemeralSequential`.
    pub fn prefix(&self) -> String {
        format!("{}/{}", self.parent, self.stem)
    }

    /// The full path of a child of the election node.
    pub fn path_of(&self, child: &str) -> String {
        format!("{}/{child}", self.parent)
    }

    /// This candidacy's znode among `children`, if the server created it.
    pub fn find(&self, children: &[String]) -> Option<String> {
        children
            .iter()
            .find(|c| c.starts_with(&self.stem) && sequence(c).is_some())
            .map(|c| self.path_of(c))
    }

    /// Where this candidacy stands among `children` (names, as listed). Children without a
    /// sequence number (not candidacies) are ignored; the order is by sequence number alone.
    pub fn standing(&self, children: &[String]) -> Standing {
        let Some((own_seq, own_name)) = children
            .iter()
            .filter(|c| c.starts_with(&self.stem))
            .find_map(|c| sequence(c).map(|s| (s, c.as_str())))
        else {
            return Standing::Missing;
        };
        let own = self.path_of(own_name);
        let predecessor = children
            .iter()
            .filter_map(|c| sequence(c).map(|s| (s, c.as_str())))
            .filter(|&(s, c)| (s, c) < (own_seq, own_name))
            .max();
        match predecessor {
            None => Standing::First { own },
            Some((_, name)) => Standing::Behind {
                own,
                predecessor: self.path_of(name),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn orders_by_sequence_and_watches_only_the_predecessor() {
        let c = Candidacy::new("/e");
        assert!(c.prefix().starts_with("/e/c_"));
        let own = format!("{}0000000007", c.prefix());
        let own_name = own.rsplit('/').next().unwrap().to_owned();
        let own = own.clone();
        // Another id sorting after ours by name but before it by sequence.
        let children = names(&[
            "c_ffff_0000000009",
            "c_zzzz_0000000005",
            &own_name,
            "c_0000_0000000002",
            "not-a-candidate",
        ]);
        assert_eq!(
            c.standing(&children),
            Standing::Behind {
                own: own.clone(),
                predecessor: "/e/c_zzzz_0000000005".into()
            }
        );
        let alone = names(&[&own_name, "c_ffff_0000000009", "lock"]);
        assert_eq!(c.standing(&alone), Standing::First { own });
        assert_eq!(
            c.standing(&names(&["c_ffff_0000000009"])),
            Standing::Missing
        );
    }

    #[test]
    fn finds_its_own_znode_after_a_lost_reply() {
        let c = Candidacy::new("/e");
        let own_name = format!("{}0000000003", c.prefix().rsplit('/').next().unwrap());
        let children = names(&["c_other_0000000001", &own_name]);
        assert_eq!(c.find(&children), Some(format!("/e/{own_name}")));
        assert_eq!(c.find(&names(&["c_other_0000000001"])), None);
        assert_eq!(Candidacy::new("/e").find(&children), None);
    }

    #[test]
    fn large_sequence_numbers_order_numerically() {
        assert_eq!(sequence("c_x_0000000010"), Some(10));
        assert_eq!(sequence("c_x_2147483648000"), Some(2147483648000));
        assert_eq!(sequence("c_x_12"), None);
        assert_eq!(sequence("latch"), None);
    }
}
