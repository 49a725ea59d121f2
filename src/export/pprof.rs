//! pprof's profile.proto (github.com/google/pprof/proto/profile.proto), encoded by hand:
//! the handful of messages a profile needs do not warrant a code generator. Every folded
//! stack is one sample (leaf location first) labelled with its thread; every distinct frame
//! is one function and one location in one mapping (the profiled program), since folded
//! stacks keep names, not addresses.

use super::Source;
use crate::profile::function_frames;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::collections::HashMap;
use std::io::Write;

/// Protobuf wire format: varint fields (0) and length-delimited ones (2).
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn key(&mut self, field: u32, wire: u8) {
        varint(&mut self.0, (u64::from(field) << 3) | u64::from(wire));
    }

    /// A varint field; zero is the default and is left out, as protobuf does.
    fn uint(&mut self, field: u32, value: u64) -> &mut Self {
        if value != 0 {
            self.key(field, 0);
            varint(&mut self.0, value);
        }
        self
    }

    fn int(&mut self, field: u32, value: i64) -> &mut Self {
        self.uint(field, value as u64)
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) -> &mut Self {
        self.key(field, 2);
        varint(&mut self.0, bytes.len() as u64);
        self.0.extend_from_slice(bytes);
        self
    }

    fn message(&mut self, field: u32, inner: &Message) -> &mut Self {
        self.bytes(field, &inner.0)
    }

    /// A packed repeated varint field.
    fn packed(&mut self, field: u32, values: impl Iterator<Item = u64>) -> &mut Self {
        let mut body = Vec::new();
        for v in values {
            varint(&mut body, v);
        }
        if !body.is_empty() {
            self.bytes(field, &body);
        }
        self
    }
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The string table: index 0 is "".
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        Strings {
            table: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
        }
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(i) = self.index.get(s) {
            return *i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

fn value_type(strings: &mut Strings, kind: &str, unit: &str) -> Message {
    let mut m = Message::default();
    m.int(1, strings.id(kind)).int(2, strings.id(unit));
    m
}

/// The profile, uncompressed.
pub fn pprof_proto(source: &Source<'_>) -> Vec<u8> {
    let mut strings = Strings::new();
    let mut profile = Message::default();
    let sample_type = value_type(&mut strings, source.unit.kind, source.unit.unit);
    profile.message(1, &sample_type);

    let thread_key = strings.id("thread");
    let mut functions: HashMap<&str, u64> = HashMap::new();
    let mut order: Vec<&str> = Vec::new();
    for (stack, count) in &source.folded.stacks {
        let mut locations: Vec<u64> = Vec::new();
        for frame in function_frames(stack).rev() {
            let next = functions.len() as u64 + 1;
            let id = *functions.entry(frame).or_insert_with(|| {
                order.push(frame);
                next
            });
            locations.push(id);
        }
        let mut label = Message::default();
        let root = stack.split(';').next().unwrap_or("");
        label.int(1, thread_key).int(2, strings.id(root));
        let mut sample = Message::default();
        sample
            .packed(1, locations.into_iter())
            .packed(2, std::iter::once(*count))
            .message(3, &label);
        profile.message(2, &sample);
    }

    let mut mapping = Message::default();
    mapping
        .uint(1, 1)
        .int(5, strings.id(&source.program))
        .uint(7, 1);
    profile.message(3, &mapping);
    for i in 0..order.len() {
        let id = i as u64 + 1;
        let mut line = Message::default();
        line.uint(1, id);
        let mut location = Message::default();
        location.uint(1, id).uint(2, 1).message(4, &line);
        profile.message(4, &location);
    }
    for (i, name) in order.iter().enumerate() {
        let name_id = strings.id(name);
        let mut function = Message::default();
        function
            .uint(1, i as u64 + 1)
            .int(2, name_id)
            .int(3, name_id);
        profile.message(5, &function);
    }
    // A sampled capture's period is time between samples; otherwise one unit per count.
    let (period_type, period) = match source.period_ns {
        Some(ns) => (value_type(&mut strings, "cpu", "nanoseconds"), ns),
        None => (
            value_type(&mut strings, source.unit.kind, source.unit.unit),
            1,
        ),
    };
    for s in &strings.table {
        profile.bytes(6, s.as_bytes());
    }
    profile
        .int(9, source.start_unix_ns)
        .int(10, source.duration_ns)
        .message(11, &period_type)
        .int(12, period);
    profile.0
}

/// The profile gzipped, as `go tool pprof` and profile services expect it.
pub fn pprof_gz(source: &Source<'_>) -> std::io::Result<Vec<u8>> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&pprof_proto(source))?;
    gz.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_follow_the_wire_format() {
        let mut m = Message::default();
        m.uint(1, 150)
            .bytes(2, b"ab")
            .packed(3, [1u64, 300].into_iter())
            .uint(4, 0);
        assert_eq!(
            m.0,
            vec![0x08, 0x96, 0x01, 0x12, 2, b'a', b'b', 0x1a, 3, 1, 0xac, 0x02]
        );
    }
}
