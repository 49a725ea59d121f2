//! A container's log stream, followed: the engine's `logs` endpoint with `follow` and
//! `timestamps` on, stdout and stderr, from a given second. Each line arrives with the
//! instant the engine stamped on it (RFC 3339 with nanoseconds, the engine host's clock),
//! cut to a bounded length; what the line says is left to the caller. A log driver the API
//! cannot read (`none`, some remote drivers without dual logging) ends the stream with the
//! engine's words, never with a panic or a hang.

use super::Docker;
use bollard::container::LogOutput;
use bollard::query_parameters::LogsOptionsBuilder;
use futures_util::StreamExt;
use tokio::sync::mpsc;

/// Longest line kept; the rest is dropped and the line marked as cut.
pub const MAX_LINE: usize = 4096;
/// Lines in flight between the stream and the reader.
const CHANNEL_LINES: usize = 1024;

/// One log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// When the engine stamped it, ns since the Unix epoch.
    pub time_ns: i64,
    /// The line without its timestamp and newline, at most `MAX_LINE` bytes.
    pub text: Vec<u8>,
    /// Longer than `MAX_LINE`.
    pub cut: bool,
}

/// What the stream hands over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEvent {
    Line(LogLine),
    /// The stream ended: None when the engine closed it, else why it failed.
    End(Option<String>),
}

impl Docker {
    /// Follows `container`'s logs from `since_unix_s` (whole seconds; the engine's filter
    /// is by second) in a task of its own; lines arrive on the returned channel until the
    /// receiver is dropped, the container's stream ends or the engine refuses. Dropping the
    /// receiver ends the task at its next line.
    pub fn follow_logs(&self, container: &str, since_unix_s: i64) -> mpsc::Receiver<LogEvent> {
        self.logs(container, since_unix_s, None)
    }

    /// The lines logged from `since_unix_s` to `until_unix_s` (whole seconds), read once:
    /// the stream ends (`LogEvent::End(None)`) when it has given what the engine's log held
    /// when asked, so a caller knows it has every line stamped before then.
    pub fn logs_until(
        &self,
        container: &str,
        since_unix_s: i64,
        until_unix_s: i64,
    ) -> mpsc::Receiver<LogEvent> {
        self.logs(container, since_unix_s, Some(until_unix_s))
    }

    /// Follows the logs (`until` None) or reads them up to `until` once.
    fn logs(
        &self,
        container: &str,
        since_unix_s: i64,
        until: Option<i64>,
    ) -> mpsc::Receiver<LogEvent> {
        let (tx, rx) = mpsc::channel(CHANNEL_LINES);
        let seconds = |s: i64| i32::try_from(s.max(0)).unwrap_or(i32::MAX);
        let mut options = LogsOptionsBuilder::default()
            .follow(until.is_none())
            .stdout(true)
            .stderr(true)
            .timestamps(true)
            .since(seconds(since_unix_s))
            .tail("all");
        if let Some(until) = until {
            options = options.until(seconds(until));
        }
        let options = options.build();
        let client = self.client.clone();
        let container = container.to_string();
        tokio::spawn(async move {
            let mut stream = client.logs(&container, Some(options));
            let mut out = Assembler::default();
            let mut err = Assembler::default();
            while let Some(item) = stream.next().await {
                let (assembler, bytes) = match item {
                    Ok(LogOutput::StdErr { message }) => (&mut err, message),
                    Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                        (&mut out, message)
                    }
                    Ok(LogOutput::StdIn { .. }) => continue,
                    Err(e) => {
                        let _ = tx.send(LogEvent::End(Some(e.to_string()))).await;
                        return;
                    }
                };
                for line in assembler.push(&bytes) {
                    if tx.send(LogEvent::Line(line)).await.is_err() {
                        return;
                    }
                }
            }
            for line in out.finish().into_iter().chain(err.finish()) {
                let _ = tx.send(LogEvent::Line(line)).await;
            }
            let _ = tx.send(LogEvent::End(None)).await;
        });
        rx
    }
}

/// Splits a stream's chunks into timestamped lines. A line may span chunks (a TTY's raw
/// stream, a split frame); what is held back is bounded by `MAX_LINE`.
#[derive(Debug, Default)]
pub struct Assembler {
    pending: Vec<u8>,
    /// The pending line already lost bytes past the bound.
    cut: bool,
}

/// Room for the timestamp and its space before the bounded text.
const STAMP_ROOM: usize = 40;

impl Assembler {
    pub fn push(&mut self, chunk: &[u8]) -> Vec<LogLine> {
        let mut lines = Vec::new();
        let mut rest = chunk;
        while let Some(at) = memchr::memchr(b'\n', rest) {
            self.take(&rest[..at]);
            if let Some(line) = self.complete() {
                lines.push(line);
            }
            rest = &rest[at + 1..];
        }
        self.take(rest);
        lines
    }

    /// The last line when the stream ends without a newline.
    pub fn finish(&mut self) -> Option<LogLine> {
        self.complete()
    }

    fn take(&mut self, bytes: &[u8]) {
        let room = (MAX_LINE + STAMP_ROOM).saturating_sub(self.pending.len());
        if bytes.len() > room {
            self.cut = true;
        }
        self.pending
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn complete(&mut self) -> Option<LogLine> {
        let raw = std::mem::take(&mut self.pending);
        let cut = std::mem::take(&mut self.cut);
        if raw.is_empty() {
            return None;
        }
        let (time_ns, text) = split_timestamp(&raw)?;
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        Some(LogLine {
            time_ns,
            cut: cut || text.len() > MAX_LINE,
            text: text[..text.len().min(MAX_LINE)].to_vec(),
        })
    }
}

/// `2024-06-10T12:34:56.123456789Z rest` -> (ns since the epoch, `rest`). None when the line
/// does not start with the engine's timestamp.
pub fn split_timestamp(line: &[u8]) -> Option<(i64, &[u8])> {
    let space = memchr::memchr(b' ', &line[..line.len().min(STAMP_ROOM)])?;
    let stamp = std::str::from_utf8(&line[..space]).ok()?;
    let at = chrono::DateTime::parse_from_rfc3339(stamp).ok()?;
    Some((at.timestamp_nanos_opt()?, &line[space + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_read_with_their_nanoseconds() {
        let (t, rest) = split_timestamp(b"2024-06-10T12:34:56.123456789Z hello world").unwrap();
        assert_eq!(t, 1_718_022_896_123_456_789);
        assert_eq!(rest, b"hello world");
        // RFC3339Nano drops trailing zeros.
        assert_eq!(
            split_timestamp(b"2024-06-10T12:34:56.1Z x").unwrap().0,
            1_718_022_896_100_000_000
        );
        assert!(split_timestamp(b"no timestamp here").is_none());
        assert!(split_timestamp(b"").is_none());
    }

    #[test]
    fn lines_spanning_chunks_are_joined_and_long_ones_cut() {
        let mut a = Assembler::default();
        assert!(a.push(b"2024-06-10T12:34:56.5Z first ha").is_empty());
        let lines = a.push(b"lf\n2024-06-10T12:34:57Z second\r\n2024-06-10T12:34:58Z thi");
        let texts: Vec<&[u8]> = lines.iter().map(|l| l.text.as_slice()).collect();
        assert_eq!(texts, vec![&b"first half"[..], &b"second"[..]]);
        assert_eq!(a.finish().unwrap().text, b"thi");
        let mut long = b"2024-06-10T12:34:56Z ".to_vec();
        long.extend(vec![b'x'; MAX_LINE * 3]);
        long.push(b'\n');
        let lines = a.push(&long);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].cut && lines[0].text.len() == MAX_LINE);
        // A piece without a timestamp (a line split by the engine) is not a line.
        assert!(a.push(b"continuation without stamp\n").is_empty());
    }
}
