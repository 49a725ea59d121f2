//! pprof's profile.proto read by hand (the decoding twin of `export::pprof`): the messages
//! Go's runtime writes for `/debug/pprof/profile` and `/debug/pprof/heap`, turned into
//! folded stacks. Only the fields a flamegraph needs are read; every length and index is
//! checked, so a truncated or hostile profile is an error, never a panic.

use super::folded::Folded;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::Read;
use std::sync::Arc;

/// A decoded profile: value types, samples as location ids (leaf first), and names.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Profile {
    /// (type, unit) of each value in a sample, e.g. ("inuse_space", "bytes").
    pub sample_types: Vec<(String, String)>,
    pub samples: Vec<Sample>,
    /// Location id -> function names, innermost (inlined callee) first. Shared with the
    /// string table, not copied per reference: a profile may name one long string from
    /// millions of places.
    pub locations: HashMap<u64, Vec<Arc<str>>>,
    pub duration_nanos: i64,
    /// The sampling period and its type ("cpu" "nanoseconds": 10 ms at Go's 100 Hz).
    pub period: i64,
    pub period_type: Option<(String, String)>,
    /// The type name the profile wants shown first (`default_sample_type`), when set.
    pub default_sample_type: Option<String>,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Sample {
    /// Leaf first.
    pub location_ids: Vec<u64>,
    pub values: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PprofError(pub String);

impl fmt::Display for PprofError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a valid pprof profile: {}", self.0)
    }
}

impl std::error::Error for PprofError {}

fn bad<T>(what: impl Into<String>) -> Result<T, PprofError> {
    Err(PprofError(what.into()))
}

/// Profiles larger than this once unzipped are refused (Go's are a few MB at most).
const MAX_UNZIPPED: u64 = 64 << 20;

/// Entries of each kind a profile may hold. Go's name a few tens of thousands of
/// functions and locations at most; a 2-byte empty entry is tens of bytes decoded, so the
/// unzipped size alone does not bound them.
const MAX_STRINGS: usize = 1 << 19;
const MAX_FUNCTIONS: usize = 1 << 19;
const MAX_LOCATIONS: usize = 1 << 19;
const MAX_SAMPLES: usize = 1 << 20;
const MAX_SAMPLE_TYPES: usize = 64;

/// Memory the decoded profile may take: its strings (and the copies of the few it names
/// by value), each sample's ids and values, each location's functions, and every entry's
/// own size.
const MAX_DECODED_BYTES: usize = 256 << 20;

/// The folded text a profile may unfold into (each distinct stack's frames joined). A few
/// kilobytes of profile can name one long function from every frame of every sample; Go's
/// real profiles fold into a few MB.
pub const MAX_FOLDED_BYTES: usize = 256 << 20;

/// Decodes a profile as served (gzip-compressed) or already unzipped.
pub fn decode(bytes: &[u8]) -> Result<Profile, PprofError> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .take(MAX_UNZIPPED + 1)
            .read_to_end(&mut raw)
            .map_err(|e| PprofError(format!("gzip: {e}")))?;
        if raw.len() as u64 > MAX_UNZIPPED {
            return bad(format!("larger than {} MiB unzipped", MAX_UNZIPPED >> 20));
        }
        decode_raw(&raw)
    } else {
        decode_raw(bytes)
    }
}

/// One field of a message: its number and value.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8]) -> Self {
        Reader { data, at: 0 }
    }

    fn varint(&mut self) -> Result<u64, PprofError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.data.get(self.at) else {
                return bad("truncated varint");
            };
            self.at += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        bad("varint longer than 10 bytes")
    }

    fn next(&mut self) -> Result<Option<(u64, Field<'a>)>, PprofError> {
        if self.at >= self.data.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = key >> 3;
        let field = match key & 7 {
            0 => Field::Varint(self.varint()?),
            1 => Field::Bytes(self.take(8)?),
            2 => {
                let len =
                    usize::try_from(self.varint()?).map_err(|_| PprofError("length".into()))?;
                Field::Bytes(self.take(len)?)
            }
            5 => Field::Bytes(self.take(4)?),
            wire => return bad(format!("field {number}: unsupported wire type {wire}")),
        };
        Ok(Some((number, field)))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], PprofError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| PprofError("field runs past the end of its message".into()))?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }
}

/// What the decoded profile may still take of `MAX_DECODED_BYTES`, spent as it is built.
struct Budget {
    left: usize,
}

impl Budget {
    fn spend(&mut self, bytes: usize) -> Result<(), PprofError> {
        match self.left.checked_sub(bytes) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => bad(format!(
                "it decodes into more than {} MiB",
                MAX_DECODED_BYTES >> 20
            )),
        }
    }
}

/// Refuses a `len + 1`-th entry of a kind bounded to `max`.
fn room(len: usize, max: usize, what: &str) -> Result<(), PprofError> {
    if len >= max {
        return bad(format!("more than {max} {what}"));
    }
    Ok(())
}

/// A repeated varint field, packed (one length-delimited run) or not (one per field); each
/// value is paid for as it is kept (a 1-byte varint is 8 bytes held).
fn push_varints(
    out: &mut Vec<u64>,
    field: Field<'_>,
    budget: &mut Budget,
) -> Result<(), PprofError> {
    let mut push = |v: u64| {
        budget.spend(size_of::<u64>())?;
        out.push(v);
        Ok(())
    };
    match field {
        Field::Varint(v) => push(v)?,
        Field::Bytes(packed) => {
            let mut r = Reader::new(packed);
            while r.at < packed.len() {
                push(r.varint()?)?;
            }
        }
    }
    Ok(())
}

fn varint_of(field: Field<'_>, what: &str) -> Result<u64, PprofError> {
    match field {
        Field::Varint(v) => Ok(v),
        Field::Bytes(_) => bad(format!("{what} is not a varint")),
    }
}

fn bytes_of<'a>(field: Field<'a>, what: &str) -> Result<&'a [u8], PprofError> {
    match field {
        Field::Bytes(b) => Ok(b),
        Field::Varint(_) => bad(format!("{what} is not length-delimited")),
    }
}

/// ValueType: (type, unit) as string-table indexes.
fn value_type(data: &[u8]) -> Result<(u64, u64), PprofError> {
    let (mut kind, mut unit) = (0, 0);
    let mut r = Reader::new(data);
    while let Some((n, f)) = r.next()? {
        match n {
            1 => kind = varint_of(f, "ValueType.type")?,
            2 => unit = varint_of(f, "ValueType.unit")?,
            _ => {}
        }
    }
    Ok((kind, unit))
}

/// Decodes an unzipped profile.proto. Every kind of entry is bounded in count, and all of
/// them together in the memory they take (`MAX_DECODED_BYTES`): a hostile profile is an
/// error before it is an allocation.
pub fn decode_raw(data: &[u8]) -> Result<Profile, PprofError> {
    let mut strings: Vec<Arc<str>> = Vec::new();
    let mut types: Vec<(u64, u64)> = Vec::new();
    let mut samples = Vec::new();
    // Location id -> function ids, innermost first.
    let mut locations: Vec<(u64, Vec<u64>)> = Vec::new();
    let mut functions: HashMap<u64, u64> = HashMap::new();
    let mut period_type = None;
    let mut default_type = 0;
    let mut profile = Profile::default();
    let mut budget = Budget {
        left: MAX_DECODED_BYTES,
    };
    // A map's entry, beside its key and value.
    const ENTRY: usize = 16;
    let mut r = Reader::new(data);
    while let Some((n, f)) = r.next()? {
        match n {
            1 => {
                room(types.len(), MAX_SAMPLE_TYPES, "sample types")?;
                types.push(value_type(bytes_of(f, "sample_type")?)?);
            }
            2 => {
                room(samples.len(), MAX_SAMPLES, "samples")?;
                budget.spend(size_of::<Sample>())?;
                samples.push(sample(bytes_of(f, "sample")?, &mut budget)?);
            }
            4 => {
                room(locations.len(), MAX_LOCATIONS, "locations")?;
                // Held twice: here, then as the profile's map of names.
                budget.spend(
                    size_of::<(u64, Vec<u64>)>() + size_of::<(u64, Vec<Arc<str>>)>() + ENTRY,
                )?;
                locations.push(location(bytes_of(f, "location")?, &mut budget)?);
            }
            5 => {
                room(functions.len(), MAX_FUNCTIONS, "functions")?;
                budget.spend(size_of::<(u64, u64)>() + ENTRY)?;
                let (id, name) = function(bytes_of(f, "function")?)?;
                functions.insert(id, name);
            }
            6 => {
                room(strings.len(), MAX_STRINGS, "strings")?;
                let text = String::from_utf8_lossy(bytes_of(f, "string_table")?);
                // The Arc's counts beside the text.
                budget.spend(size_of::<Arc<str>>() + 2 * size_of::<usize>() + text.len())?;
                strings.push(Arc::from(text));
            }
            10 => profile.duration_nanos = varint_of(f, "duration_nanos")? as i64,
            11 => period_type = Some(value_type(bytes_of(f, "period_type")?)?),
            12 => profile.period = varint_of(f, "period")? as i64,
            14 => default_type = varint_of(f, "default_sample_type")?,
            _ => {}
        }
    }
    if strings.first().is_some_and(|s| !s.is_empty()) {
        return bad("string_table[0] is not empty");
    }
    let shared = |i: u64| -> Result<Arc<str>, PprofError> {
        usize::try_from(i)
            .ok()
            .and_then(|i| strings.get(i))
            .cloned()
            .ok_or_else(|| PprofError(format!("string index {i} out of range")))
    };
    // The few strings named by value are copies: paid for, as a thousand sample types
    // naming one long string would hold it a thousand times.
    let mut string = |i: u64| {
        let s = shared(i)?;
        budget.spend(s.len())?;
        Ok::<_, PprofError>(s.to_string())
    };
    profile.sample_types = types
        .iter()
        .map(|&(t, u)| Ok((string(t)?, string(u)?)))
        .collect::<Result<_, PprofError>>()?;
    profile.period_type = period_type
        .map(|(t, u)| Ok::<_, PprofError>((string(t)?, string(u)?)))
        .transpose()?;
    profile.default_sample_type = (default_type != 0)
        .then(|| string(default_type))
        .transpose()?;
    for (id, function_ids) in locations {
        let names = function_ids
            .iter()
            .map(|fid| match functions.get(fid) {
                Some(&name) => shared(name),
                None => bad(format!("location {id}: unknown function {fid}")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        profile.locations.insert(id, names);
    }
    for s in &samples {
        if s.values.len() != profile.sample_types.len() {
            return bad(format!(
                "a sample has {} values for {} sample types",
                s.values.len(),
                profile.sample_types.len()
            ));
        }
    }
    profile.samples = samples;
    Ok(profile)
}

fn sample(data: &[u8], budget: &mut Budget) -> Result<Sample, PprofError> {
    let mut location_ids = Vec::new();
    let mut values = Vec::new();
    let mut r = Reader::new(data);
    while let Some((n, f)) = r.next()? {
        match n {
            1 => push_varints(&mut location_ids, f, budget)?,
            2 => push_varints(&mut values, f, budget)?,
            _ => {}
        }
    }
    Ok(Sample {
        location_ids,
        values: values.into_iter().map(|v| v as i64).collect(),
    })
}

fn location(data: &[u8], budget: &mut Budget) -> Result<(u64, Vec<u64>), PprofError> {
    let mut id = 0;
    let mut lines = Vec::new();
    let mut r = Reader::new(data);
    while let Some((n, f)) = r.next()? {
        match n {
            1 => id = varint_of(f, "Location.id")?,
            4 => {
                let mut lr = Reader::new(bytes_of(f, "Location.line")?);
                while let Some((ln, lf)) = lr.next()? {
                    if ln == 1 {
                        // Its id here, then its name in the profile.
                        budget.spend(size_of::<u64>() + size_of::<Arc<str>>())?;
                        lines.push(varint_of(lf, "Line.function_id")?);
                    }
                }
            }
            _ => {}
        }
    }
    Ok((id, lines))
}

fn function(data: &[u8]) -> Result<(u64, u64), PprofError> {
    let (mut id, mut name) = (0, 0);
    let mut r = Reader::new(data);
    while let Some((n, f)) = r.next()? {
        match n {
            1 => id = varint_of(f, "Function.id")?,
            2 => name = varint_of(f, "Function.name")?,
            _ => {}
        }
    }
    Ok((id, name))
}

impl Profile {
    /// The index of the sample value named `kind` (`samples`, `inuse_space`, ...).
    pub fn value_index(&self, kind: &str) -> Option<usize> {
        self.sample_types.iter().position(|(t, _)| t == kind)
    }

    /// The sum of value `index` over the samples with a positive value.
    pub fn total(&self, index: usize) -> u64 {
        self.samples
            .iter()
            .filter_map(|s| s.values.get(index).copied())
            .filter(|&v| v > 0)
            .fold(0u64, |sum, v| sum.saturating_add(v as u64))
    }

    /// Folded stacks of value `index` under the root frame `root` (the program's name);
    /// a location without a function becomes `[unknown]`. Samples whose value is 0 or
    /// negative are left out. A profile whose stacks would unfold past
    /// [`MAX_FOLDED_BYTES`] is an error, checked before each stack is joined.
    pub fn fold(&self, index: usize, root: &str) -> Result<Folded, PprofError> {
        let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
        let mut folded_bytes = 0usize;
        for s in &self.samples {
            let value = s.values.get(index).copied().unwrap_or(0);
            if value <= 0 {
                continue;
            }
            let mut frames: Vec<&str> = vec![root];
            for id in s.location_ids.iter().rev() {
                match self.locations.get(id).filter(|names| !names.is_empty()) {
                    Some(names) => frames.extend(names.iter().rev().map(|n| &**n)),
                    None => frames.push("[unknown]"),
                }
            }
            let too_long = || {
                bad(format!(
                    "its stacks unfold into more than {} MiB of text",
                    MAX_FOLDED_BYTES >> 20
                ))
            };
            // Measured before joining: one stack alone may be longer than the budget.
            let length = frames.iter().map(|f| f.len() + 1).sum::<usize>();
            if length > MAX_FOLDED_BYTES {
                return too_long();
            }
            let stack = frames.join(";");
            match stacks.get_mut(&stack) {
                Some(total) => *total = total.saturating_add(value as u64),
                None => {
                    folded_bytes += length;
                    if folded_bytes > MAX_FOLDED_BYTES {
                        return too_long();
                    }
                    stacks.insert(stack, value as u64);
                }
            }
        }
        Ok(Folded::from_pairs(stacks.into_iter()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> Vec<u8> {
        let path = format!("{}/../../tests/data/go/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn stacks(folded: &Folded) -> BTreeMap<String, u64> {
        folded.stacks.iter().cloned().collect()
    }

    /// A real heap profile served by demo-go's net/http/pprof; the expected stacks are
    /// `go tool pprof -raw` of the same file, folded (tests/data/go/*.folded).
    #[test]
    fn a_go_heap_profile_folds_as_go_tool_pprof_reads_it() {
        let profile = decode(&data("demo-go-heap.pb.gz")).unwrap();
        let types: Vec<&str> = profile
            .sample_types
            .iter()
            .map(|(t, _)| t.as_str())
            .collect();
        assert_eq!(
            types,
            [
                "alloc_objects",
                "alloc_space",
                "inuse_objects",
                "inuse_space"
            ]
        );
        assert_eq!(profile.period, 524288);
        assert_eq!(
            profile.period_type,
            Some(("space".to_string(), "bytes".to_string()))
        );
        for kind in ["inuse_space", "alloc_space"] {
            let expected = Folded::from_folded_text(
                &String::from_utf8(data(&format!("demo-go-heap.{kind}.folded"))).unwrap(),
            );
            let folded = profile
                .fold(profile.value_index(kind).unwrap(), "demo-go")
                .unwrap();
            assert_eq!(stacks(&folded), stacks(&expected), "{kind}");
        }
        let inuse = profile
            .fold(profile.value_index("inuse_space").unwrap(), "demo-go")
            .unwrap();
        assert_eq!(inuse.top_self(1)[0].0, "main.allocBlocks");
    }

    #[test]
    fn every_cut_of_a_real_profile_is_an_error_or_a_profile_never_a_panic() {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&data("demo-go-heap.pb.gz")[..])
            .read_to_end(&mut raw)
            .unwrap();
        for end in 0..raw.len() {
            let _ = decode_raw(&raw[..end]);
        }
        // Flipped bytes too.
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 0xa5;
            let _ = decode_raw(&bad);
        }
    }

    #[test]
    fn hostile_bytes_are_errors_not_panics() {
        for bytes in [
            &[0x0a][..],
            &[
                0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ],
            &[0x12, 0x05, 0x0a],
            &[0x0f],
            &[0x1f, 0x8b, 0x08, 0x00],
            &[0x32, 0x01, b'x'],
        ] {
            assert!(decode(bytes).is_err(), "{bytes:?}");
        }
        assert_eq!(decode(&[]).unwrap(), Profile::default());
    }

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn field(number: u64, body: &[u8], out: &mut Vec<u8>) {
        varint(number << 3 | 2, out);
        varint(body.len() as u64, out);
        out.extend_from_slice(body);
    }

    fn number(number: u64, value: u64, out: &mut Vec<u8>) {
        varint(number << 3, out);
        varint(value, out);
    }

    /// A profile whose one function has a `name_len`-byte name, named by `locations`
    /// locations, and one sample of value 1 through `depth` of them.
    fn one_long_name(name_len: usize, locations: u64, depth: usize) -> Vec<u8> {
        let mut p = Vec::new();
        for text in ["", "samples", "count"] {
            field(6, text.as_bytes(), &mut p);
        }
        field(6, &vec![b'f'; name_len], &mut p);
        let mut value_type = Vec::new();
        number(1, 1, &mut value_type);
        number(2, 2, &mut value_type);
        field(1, &value_type, &mut p);
        let mut function = Vec::new();
        number(1, 1, &mut function);
        number(2, 3, &mut function);
        field(5, &function, &mut p);
        for id in 1..=locations {
            let mut line = Vec::new();
            number(1, 1, &mut line);
            let mut location = Vec::new();
            number(1, id, &mut location);
            field(4, &line, &mut location);
            field(4, &location, &mut p);
        }
        let mut ids = Vec::new();
        for i in 0..depth {
            varint(1 + (i as u64 % locations), &mut ids);
        }
        let mut sample = Vec::new();
        field(1, &ids, &mut sample);
        number(2, 1, &mut sample);
        field(2, &sample, &mut p);
        p
    }

    #[test]
    fn pprof_names_are_shared_per_reference_not_copied() {
        let profile = decode_raw(&one_long_name(1 << 20, 1000, 1)).unwrap();
        let first = &profile.locations[&1][0];
        assert_eq!(first.len(), 1 << 20);
        for names in profile.locations.values() {
            assert!(Arc::ptr_eq(first, &names[0]), "one copy of the name");
        }
    }

    fn gzip(raw: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(raw).unwrap();
        gz.finish().unwrap()
    }

    #[test]
    fn a_pprof_of_a_million_empty_strings_is_refused_not_inflated() {
        // 2 bytes each on the wire, tens of bytes each decoded: 512 MiB of them unzipped
        // (from under a MiB of gzip) once asked for 10 GB.
        let raw = [0x32, 0x00].repeat(1_000_000);
        let err = decode(&gzip(&raw)).unwrap_err();
        assert!(
            err.to_string().contains("more than 524288 strings"),
            "{err}"
        );
    }

    #[test]
    fn a_pprof_of_two_million_empty_samples_is_refused_not_inflated() {
        let raw = [0x12, 0x00].repeat(2_000_000);
        let err = decode(&gzip(&raw)).unwrap_err();
        assert!(
            err.to_string().contains("more than 1048576 samples"),
            "{err}"
        );
    }

    #[test]
    fn a_pprof_of_a_million_locations_or_functions_is_refused_not_inflated() {
        let err = decode_raw(&[0x22, 0x00].repeat(1_000_000)).unwrap_err();
        assert!(
            err.to_string().contains("more than 524288 locations"),
            "{err}"
        );
        // Functions are kept by id: a million distinct ones.
        let mut raw = Vec::new();
        for id in 1..=1_000_000 {
            let mut function = Vec::new();
            number(1, id, &mut function);
            field(5, &function, &mut raw);
        }
        let err = decode_raw(&raw).unwrap_err();
        assert!(
            err.to_string().contains("more than 524288 functions"),
            "{err}"
        );
    }

    #[test]
    fn a_pprof_sample_of_40_mib_of_location_ids_is_refused_past_the_decoded_budget() {
        // One packed run of 1-byte ids: 40 MiB on the wire, 320 MiB as u64s.
        let ids = vec![1u8; 40 << 20];
        let mut sample = Vec::new();
        field(1, &ids, &mut sample);
        let mut raw = Vec::new();
        field(2, &sample, &mut raw);
        let err = decode_raw(&raw).unwrap_err();
        assert!(err.to_string().contains("more than 256 MiB"), "{err}");
    }

    #[test]
    fn a_pprof_of_many_sample_types_naming_one_long_string_is_refused() {
        let mut raw = Vec::new();
        field(6, b"", &mut raw);
        field(6, &vec![b'x'; 8 << 20], &mut raw);
        let mut value_type = Vec::new();
        number(1, 1, &mut value_type);
        number(2, 1, &mut value_type);
        for _ in 0..MAX_SAMPLE_TYPES {
            field(1, &value_type, &mut raw);
        }
        // 64 types, each a copy of 8 MiB twice: 1 GiB from 8 MiB.
        let err = decode_raw(&raw).unwrap_err();
        assert!(err.to_string().contains("more than 256 MiB"), "{err}");
        field(1, &value_type, &mut raw);
        let err = decode_raw(&raw).unwrap_err();
        assert!(
            err.to_string().contains("more than 64 sample types"),
            "{err}"
        );
    }

    #[test]
    fn pprof_values_summing_past_u64_saturate_not_overflow() {
        let mut p = Vec::new();
        for text in ["", "samples", "count", "f"] {
            field(6, text.as_bytes(), &mut p);
        }
        let mut value_type = Vec::new();
        number(1, 1, &mut value_type);
        number(2, 2, &mut value_type);
        field(1, &value_type, &mut p);
        for _ in 0..3 {
            let mut sample = Vec::new();
            number(1, 7, &mut sample);
            number(2, i64::MAX as u64, &mut sample);
            field(2, &sample, &mut p);
        }
        let profile = decode_raw(&p).unwrap();
        assert_eq!(profile.total(0), u64::MAX);
        let folded = profile.fold(0, "prog").unwrap();
        assert_eq!(
            folded.stacks,
            vec![("prog;[unknown]".to_string(), u64::MAX)]
        );
    }

    #[test]
    fn a_pprof_stack_unfolding_past_its_budget_is_refused_before_it_is_joined() {
        // 300 frames of a 1 MiB name: 300 MiB of text from a 1 MiB profile.
        let profile = decode_raw(&one_long_name(1 << 20, 3, 300)).unwrap();
        let err = profile.fold(0, "prog").unwrap_err();
        assert!(err.to_string().contains("256 MiB"), "{err}");
        // The same stack at a depth that fits folds, and its value is the sample's.
        let fits = decode_raw(&one_long_name(1 << 20, 3, 10)).unwrap();
        assert_eq!(fits.fold(0, "prog").unwrap().total(), 1);
        assert_eq!(fits.total(0), 1);
    }
}
