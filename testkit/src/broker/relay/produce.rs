//! The broker's answer to one Produce request: every partition's error code, read from the
//! response as Kafka's protocol lays it out for the request's version (flexible from 9, topic
//! ids instead of names from 13).

/// Error codes a fenced or stale producer's Produce is refused with.
const FENCING: &[i16] = &[
    47, // INVALID_PRODUCER_EPOCH
    48, // INVALID_TXN_STATE
    90, // PRODUCER_FENCED
];

/// One answered Produce request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceAnswer {
    /// The first topic the request wrote to.
    pub topic: String,
    /// Each partition's error code, in the response's order (0: written).
    pub errors: Vec<i16>,
    /// The response could not be read to its end (the codes found before are kept).
    pub unreadable: bool,
}

impl ProduceAnswer {
    /// Whether the broker wrote every partition of it.
    pub fn written(&self) -> bool {
        !self.unreadable && !self.errors.is_empty() && self.errors.iter().all(|e| *e == 0)
    }

    /// Whether the broker refused every partition of it as a stale producer's.
    pub fn fenced(&self) -> bool {
        !self.errors.is_empty() && self.errors.iter().all(|e| FENCING.contains(e))
    }

    /// Reads `body` (a response after its length: correlation id first) to a Produce request of
    /// `version`.
    pub fn parse(body: &[u8], version: i16, topic: String) -> ProduceAnswer {
        let mut errors = Vec::new();
        let unreadable = read(&mut Cursor { b: body, at: 0 }, version, &mut errors).is_none();
        ProduceAnswer {
            topic,
            errors,
            unreadable,
        }
    }
}

/// The first topic a Produce request `frame` (its length first) writes to, read as the
/// protocol lays out `version`'s request (header v2, flexible, from 9; names until 12).
pub(super) fn topic(frame: &[u8], version: i16) -> Option<String> {
    let flexible = version >= 9;
    let c = &mut Cursor { b: frame, at: 12 };
    c.string(false)?; // client id: never compact
    if flexible {
        c.tags()?;
    }
    if version >= 3 {
        c.string(flexible)?; // transactional id
    }
    c.i16()?; // acks
    c.i32()?; // timeout
    if c.len(flexible)? == 0 || version >= 13 {
        return None;
    }
    let n = if flexible {
        usize::try_from(c.uvarint()?.checked_sub(1)?).ok()?
    } else {
        usize::try_from(c.i16()?).ok()?
    };
    Some(String::from_utf8_lossy(c.take(n)?).into_owned())
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|s| i16::from_be_bytes([s[0], s[1]]))
    }
    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|s| i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn uvarint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    /// An array's length: compact (length + 1) when flexible.
    fn len(&mut self, flexible: bool) -> Option<usize> {
        if flexible {
            usize::try_from(self.uvarint()?.checked_sub(1)?).ok()
        } else {
            usize::try_from(self.i32()?).ok()
        }
    }
    /// Skips a (nullable) string.
    fn string(&mut self, flexible: bool) -> Option<()> {
        let n = if flexible {
            self.uvarint()?.checked_sub(1)
        } else {
            u64::try_from(self.i16()?).ok()
        };
        if let Some(n) = n {
            self.take(usize::try_from(n).ok()?)?;
        }
        Some(())
    }
    /// Skips tagged fields.
    fn tags(&mut self) -> Option<()> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).ok()?;
            self.take(size)?;
        }
        Some(())
    }
}

fn read(c: &mut Cursor<'_>, version: i16, errors: &mut Vec<i16>) -> Option<()> {
    let flexible = version >= 9;
    c.i32()?; // correlation id
    if flexible {
        c.tags()?;
    }
    for _ in 0..c.len(flexible)? {
        if version >= 13 {
            c.take(16)?; // topic id
        } else {
            c.string(flexible)?;
        }
        for _ in 0..c.len(flexible)? {
            c.i32()?; // partition
            errors.push(c.i16()?);
            c.take(8)?; // base offset
            if version >= 2 {
                c.take(8)?; // log append time
            }
            if version >= 5 {
                c.take(8)?; // log start offset
            }
            if version >= 8 {
                for _ in 0..c.len(flexible)? {
                    c.i32()?; // batch index
                    c.string(flexible)?;
                    if flexible {
                        c.tags()?;
                    }
                }
                c.string(flexible)?; // error message
            }
            if flexible {
                c.tags()?;
            }
        }
        if flexible {
            c.tags()?;
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v9 (flexible) response: one topic "t", partitions 0 and 1 with `codes`.
    fn v9(codes: [i16; 2]) -> Vec<u8> {
        let mut b = 7i32.to_be_bytes().to_vec();
        b.push(0); // header tags
        b.push(2); // one topic
        b.extend([2, b't']); // compact "t"
        b.push(3); // two partitions
        for (p, code) in codes.iter().enumerate() {
            b.extend(i32::try_from(p).unwrap().to_be_bytes());
            b.extend(code.to_be_bytes());
            b.extend([0u8; 24]); // base offset, append time, log start
            b.push(1); // no record errors
            b.push(0); // null error message
            b.push(0); // tags
        }
        b.push(0); // topic tags
        b.extend([0u8; 4]); // throttle time
        b.push(0); // tags
        b
    }

    #[test]
    fn reads_every_partition_of_a_flexible_response() {
        let a = ProduceAnswer::parse(&v9([0, 0]), 9, String::new());
        assert_eq!(a.errors, vec![0, 0]);
        assert!(a.written() && !a.fenced());
        let a = ProduceAnswer::parse(&v9([90, 47]), 9, String::new());
        assert!(a.fenced() && !a.written());
    }

    #[test]
    fn reads_a_v7_response() {
        let mut b = 7i32.to_be_bytes().to_vec();
        b.extend(1i32.to_be_bytes());
        b.extend(1i16.to_be_bytes());
        b.push(b't');
        b.extend(1i32.to_be_bytes());
        b.extend(3i32.to_be_bytes());
        b.extend(47i16.to_be_bytes());
        b.extend([0u8; 24]);
        let a = ProduceAnswer::parse(&b, 7, String::new());
        assert_eq!(a.errors, vec![47]);
        assert!(a.fenced());
    }

    #[test]
    fn reads_the_topic_of_a_flexible_request() {
        let mut f = vec![0u8; 4];
        f.extend(0i16.to_be_bytes());
        f.extend(9i16.to_be_bytes());
        f.extend(5i32.to_be_bytes());
        f.extend(7i16.to_be_bytes());
        f.extend(b"rdkafka");
        f.push(0); // header tags
        f.extend([4, b't', b'x', b'n']); // compact transactional id
        f.extend((-1i16).to_be_bytes());
        f.extend(30_000i32.to_be_bytes());
        f.push(2); // one topic
        f.extend([4, b'o', b'u', b't']);
        assert_eq!(topic(&f, 9).as_deref(), Some("out"));
        assert_eq!(topic(&f[..20], 9), None);
    }

    #[test]
    fn a_cut_response_is_unreadable_not_written() {
        let b = v9([0, 0]);
        let a = ProduceAnswer::parse(&b[..20], 9, String::new());
        assert!(a.unreadable && !a.written());
    }
}
