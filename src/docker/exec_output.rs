//! Reading an exec's output stream as it comes: up to a ready line its command prints
//! once it waits (a recorder's, a standby's), and its standard error, bounded.

use futures_util::StreamExt;

/// Standard error kept from one exec; enough for perf's diagnostics.
const STDERR_LIMIT: usize = 256 * 1024;

/// Appends `message` to `stderr` up to `STDERR_LIMIT`.
pub(super) fn keep_stderr(stderr: &mut Vec<u8>, message: &[u8]) {
    let room = STDERR_LIMIT.saturating_sub(stderr.len());
    stderr.extend_from_slice(&message[..message.len().min(room)]);
}

/// What follows the first whole line equal to `line` in `text`, once that line is there.
fn after_line<'a>(text: &'a [u8], line: &str) -> Option<&'a [u8]> {
    let mut rest = text;
    while let Some(end) = rest.iter().position(|&b| b == b'\n') {
        if &rest[..end] == line.as_bytes() {
            return Some(&rest[end + 1..]);
        }
        rest = &rest[end + 1..];
    }
    None
}

/// The most standard output a command may print before its ready line: a recorder's
/// script prints a line or two there.
const BEFORE_READY_LIMIT: usize = 1 << 20;

/// An attached exec's output stream, as the engine's start gives it.
pub(super) type OutputStream = std::pin::Pin<
    Box<
        dyn futures_util::Stream<
                Item = std::result::Result<bollard::container::LogOutput, bollard::errors::Error>,
            > + Send,
    >,
>;

/// What a started exec printed up to its ready line (`read_until_ready`).
pub(super) struct UntilReady {
    /// Whether the ready line came: else the exec ended, its stream failed (`failed`), or
    /// it printed more than `BEFORE_READY_LIMIT` first.
    pub ready: bool,
    /// Standard output before the ready line (all of it, where none came).
    pub before: Vec<u8>,
    /// Standard output after the ready line, in the frame that held it.
    pub after: Vec<u8>,
    /// Standard error so far (bounded).
    pub stderr: Vec<u8>,
    pub failed: Option<bollard::errors::Error>,
}

/// Reads `output` until a whole line equal to `ready_line`.
pub(super) async fn read_until_ready(output: &mut OutputStream, ready_line: &str) -> UntilReady {
    let mut until = UntilReady {
        ready: false,
        before: Vec::new(),
        after: Vec::new(),
        stderr: Vec::new(),
        failed: None,
    };
    while let Some(frame) = output.next().await {
        match frame {
            Err(e) => {
                until.failed = Some(e);
                break;
            }
            Ok(bollard::container::LogOutput::StdOut { message }) => {
                until.before.extend_from_slice(&message);
                if let Some(rest) = after_line(&until.before, ready_line) {
                    until.after = rest.to_vec();
                    let cut = until.before.len() - rest.len() - ready_line.len() - 1;
                    until.before.truncate(cut);
                    until.ready = true;
                    break;
                }
                if until.before.len() > BEFORE_READY_LIMIT {
                    break;
                }
            }
            Ok(bollard::container::LogOutput::StdErr { message }) => {
                keep_stderr(&mut until.stderr, &message);
            }
            Ok(_) => {}
        }
    }
    until
}

#[cfg(test)]
mod tests {
    use super::after_line;

    #[test]
    fn the_ready_line_is_found_whole_and_what_follows_it_is_kept() {
        assert_eq!(after_line(b"ready\n", "ready"), Some(&b""[..]));
        assert_eq!(
            after_line(b"x\nready\nSTART\n", "ready"),
            Some(&b"START\n"[..])
        );
        assert_eq!(after_line(b"read", "ready"), None, "not a whole line yet");
        assert_eq!(after_line(b"ready-not\n", "ready"), None);
        assert_eq!(after_line(b"not-ready\n", "ready"), None);
    }
}
