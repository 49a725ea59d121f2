//! Ctrl-C, SIGTERM and SIGHUP as a counter the capture loop can wait on: the first one
//! ends the capture window early, a second one asks for a fast stop (abort, with clean-up),
//! and the third exits at once with 130, whatever devprof is waiting on. A closed terminal
//! (SIGHUP) is an interrupt like the others, so its capture still restores sysctls and
//! removes its sidecar and workdir; what devprof prints from then on goes nowhere.

use std::sync::atomic::{AtomicU32, Ordering};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// Every SIGINT, SIGTERM and SIGHUP delivered to the process, counted in the signal
/// handler.
static DELIVERED: AtomicU32 = AtomicU32::new(0);

/// The interrupt that ends devprof at once, without waiting for clean-up.
pub const EXIT_NOW_AT: u32 = 3;
/// The exit status of an interrupted run (128 + SIGINT).
pub const INTERRUPTED_EXIT: i32 = crate::error::exit::INTERRUPTED;

/// What the user must do by hand should devprof exit at once now (e.g. restore sysctls).
static EXIT_NOTE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Sets (or clears) what the third interrupt prints before exiting.
pub fn set_exit_note(note: Option<String>) {
    if let Ok(mut n) = EXIT_NOTE.lock() {
        *n = note;
    }
}

/// Which of standard output (bit 0) and error (bit 1) were a terminal at `install`: a
/// terminal that hung up no longer answers `isatty`.
static ON_TERMINAL: AtomicU32 = AtomicU32::new(0);

/// After SIGHUP: standard output and error that were a terminal (now closed) point at
/// /dev/null, so that what the clean-up prints cannot fail (`eprintln!` panics on a write
/// error, which would skip the clean-up). Output to a file or pipe stays where it is.
/// Called in the signal handler: only async-signal-safe calls.
fn leave_closed_terminal() {
    let on_terminal = ON_TERMINAL.load(Ordering::SeqCst);
    if on_terminal == 0 {
        return;
    }
    // SAFETY: open, dup2 and close on file descriptors this process owns.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        if null < 0 {
            return;
        }
        for (bit, fd) in [(1, libc::STDOUT_FILENO), (2, libc::STDERR_FILENO)] {
            if on_terminal & bit != 0 {
                libc::dup2(null, fd);
            }
        }
        libc::close(null);
    }
}

/// A clone counts on its own: what it hands out is still pending for the original.
#[derive(Clone)]
pub struct Interrupts {
    rx: watch::Receiver<u32>,
    seen: u32,
}

impl Interrupts {
    /// Takes over SIGINT, SIGTERM and SIGHUP for the rest of the process's life. `say`
    /// prints what the third interrupt says before it exits (the terminal's one writer,
    /// `ui::term::eprint_line`, which this layer does not reach).
    pub fn install(say: fn(&str)) -> std::io::Result<Self> {
        let (tx, rx) = watch::channel(0u32);
        // SAFETY: isatty only asks about descriptors this process owns.
        let on_terminal = unsafe {
            u32::from(libc::isatty(libc::STDOUT_FILENO) == 1)
                | (u32::from(libc::isatty(libc::STDERR_FILENO) == 1) << 1)
        };
        ON_TERMINAL.store(on_terminal, Ordering::SeqCst);
        // tokio's streams coalesce signals that arrive before their task runs, so three
        // quick Ctrl-Cs could count as one; the handler itself counts every delivery and
        // the streams only wake the task that publishes the count.
        for signal_number in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: the action only increments an atomic, which is async-signal-safe.
            unsafe {
                signal_hook_registry::register(signal_number, || {
                    DELIVERED.fetch_add(1, Ordering::SeqCst);
                })
            }?;
        }
        // SAFETY: open, dup2 and close are async-signal-safe, and so is the atomic.
        unsafe {
            signal_hook_registry::register(libc::SIGHUP, || {
                leave_closed_terminal();
                DELIVERED.fetch_add(1, Ordering::SeqCst);
            })
        }?;
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut hup = signal(SignalKind::hangup())?;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                    _ = hup.recv() => {}
                }
                let delivered = DELIVERED.load(Ordering::SeqCst).max(*tx.borrow() + 1);
                tx.send_modify(|n| *n = delivered);
                if delivered >= EXIT_NOW_AT {
                    // The clean-up the second one started may itself be what hangs.
                    say(
                        "devprof: third interrupt: exiting now; a recorder or sidecar may be left behind \
                         (`devprof clean --containers` removes sidecars whose creator is gone)"
                    );
                    if let Some(note) = EXIT_NOTE.lock().ok().and_then(|n| n.clone()) {
                        say(&format!("devprof: {note}"));
                    }
                    crate::docker::ssh::remove_now();
                    std::process::exit(INTERRUPTED_EXIT);
                }
            }
        });
        Ok(Interrupts { rx, seen: 0 })
    }

    /// Another view of the same signals, for a capture running beside others: each gets
    /// every Ctrl-C from now on.
    pub fn subscribe(&self) -> Self {
        Interrupts {
            rx: self.rx.clone(),
            seen: self.seen,
        }
    }

    /// How many interrupts arrived since `install`, whoever handed them out.
    pub fn received(&self) -> u32 {
        *self.rx.borrow()
    }

    /// Whether an interrupt arrived that was not yet handed out by `next`.
    pub fn pending(&self) -> bool {
        *self.rx.borrow() > self.seen
    }

    /// Waits for the next interrupt.
    pub async fn next(&mut self) {
        loop {
            let now = *self.rx.borrow_and_update();
            if now > self.seen {
                self.seen += 1;
                return;
            }
            if self.rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}
