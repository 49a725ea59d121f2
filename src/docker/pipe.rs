//! A bounded bridge from async byte streams (Docker exec output, archive downloads) to the
//! blocking `Read` that inferno and tar consume. The channel is small, so a fast producer
//! waits for the consumer instead of piling gigabytes up in memory.

use bytes::Bytes;
use std::io::{self, Read};
use tokio::sync::mpsc;

/// Chunks in flight between the async side and the reader; with Docker's ~32 KiB frames
/// this bounds the bridge to a few MiB.
pub const CHANNEL_CHUNKS: usize = 64;

pub fn channel() -> (mpsc::Sender<Bytes>, ChannelReader) {
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    (
        tx,
        ChannelReader {
            rx,
            current: Bytes::new(),
        },
    )
}

/// Reads the chunks sent on the channel in order; end of stream when every sender is gone.
pub struct ChannelReader {
    rx: mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.current = chunk,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        let _ = self.current.split_to(n);
        Ok(n)
    }
}

/// Copies everything read through it into a second writer (`--keep-script`).
pub struct TeeReader<R, W> {
    inner: R,
    copy: W,
}

impl<R: Read, W: io::Write> TeeReader<R, W> {
    pub fn new(inner: R, copy: W) -> Self {
        TeeReader { inner, copy }
    }
}

impl<R: Read, W: io::Write> Read for TeeReader<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.copy.write_all(&buf[..n])?;
        if n == 0 {
            self.copy.flush()?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_all_chunks_in_order_then_ends() {
        let (tx, mut reader) = channel();
        let producer = std::thread::spawn(move || {
            for part in ["ab", "", "cde", "f"] {
                tx.blocking_send(Bytes::from(part)).unwrap();
            }
        });
        let mut out = String::new();
        reader.read_to_string(&mut out).unwrap();
        producer.join().unwrap();
        assert_eq!(out, "abcdef");
    }
}
