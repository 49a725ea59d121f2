//! Ctrl-C and SIGTERM as a counter the capture loop can wait on: the first one ends the
//! capture window early, a second one aborts.

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

pub struct Interrupts {
    rx: watch::Receiver<u32>,
    seen: u32,
}

impl Interrupts {
    /// Takes over SIGINT and SIGTERM for the rest of the process's life.
    pub fn install() -> std::io::Result<Self> {
        let (tx, rx) = watch::channel(0u32);
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
                tx.send_modify(|n| *n += 1);
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
