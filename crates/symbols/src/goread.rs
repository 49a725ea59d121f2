//! What Go's runtime tables share, below the readers of each (`gopclntab`, `gosource`,
//! `gomoduledata`): the layout generation, the error, and bounds-checked reads in the
//! table's byte order and pointer size. Pure: works on bytes.

use std::fmt;

/// Longest function name taken (generic instantiations can be long, not this long).
const MAX_NAME: usize = 4096;

/// The layout generation of a pclntab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Layout {
    Go12,
    Go116,
    Go118,
    Go120,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PclnError(pub String);

impl fmt::Display for PclnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gopclntab: {}", self.0)
    }
}

impl std::error::Error for PclnError {}

fn err<T>(what: impl Into<String>) -> Result<T, PclnError> {
    Err(PclnError(what.into()))
}

/// Bounds-checked reads in the table's byte order and pointer size.
pub(super) struct Reader<'a> {
    pub(super) data: &'a [u8],
    pub(super) big: bool,
    pub(super) ptr: usize,
}

impl Reader<'_> {
    pub(super) fn bytes(&self, at: u64, n: usize) -> Result<&[u8], PclnError> {
        let start = usize::try_from(at).map_err(|_| PclnError("offset too large".into()))?;
        start
            .checked_add(n)
            .and_then(|end| self.data.get(start..end))
            .ok_or_else(|| PclnError(format!("read of {n} bytes at {at:#x} past the end")))
    }
    pub(super) fn u32(&self, at: u64) -> Result<u32, PclnError> {
        let b: [u8; 4] = self.bytes(at, 4)?.try_into().expect("4 bytes");
        Ok(if self.big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }
    pub(super) fn u64(&self, at: u64) -> Result<u64, PclnError> {
        let b: [u8; 8] = self.bytes(at, 8)?.try_into().expect("8 bytes");
        Ok(if self.big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        })
    }
    /// A pointer-sized word.
    pub(super) fn word(&self, at: u64) -> Result<u64, PclnError> {
        if self.ptr == 8 {
            self.u64(at)
        } else {
            self.u32(at).map(u64::from)
        }
    }
    /// The header's `index`th word after its first 8 bytes.
    pub(super) fn header_word(&self, index: u64) -> Result<u64, PclnError> {
        self.word(8 + index * self.ptr as u64)
    }
    /// A header word that is an offset into the table: past the table's end it is
    /// corrupt, and refusing it here keeps every later `offset + small` from overflowing.
    pub(super) fn table_offset(&self, index: u64) -> Result<u64, PclnError> {
        let offset = self.header_word(index)?;
        if offset > self.data.len() as u64 {
            return err(format!("header offset {offset:#x} past the table's end"));
        }
        Ok(offset)
    }
    pub(super) fn cstr(&self, at: u64) -> Result<String, PclnError> {
        let start = usize::try_from(at).map_err(|_| PclnError("offset too large".into()))?;
        let rest = self
            .data
            .get(start..)
            .ok_or_else(|| PclnError(format!("name at {at:#x} past the end")))?;
        let rest = &rest[..rest.len().min(MAX_NAME)];
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| PclnError(format!("name at {at:#x} not terminated")))?;
        Ok(String::from_utf8_lossy(&rest[..len]).into_owned())
    }
}
