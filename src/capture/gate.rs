//! One start for several captures: every capture of a session prepares on its own
//! (container, process, engine, sidecar, work directory), then waits here; the gate opens
//! when every party has arrived or dropped out, so all recorders start together.
//!
//! A capture receives its ticket through a task-local scope rather than a parameter: the
//! recipes stay exactly the ones the single-target commands run, and a recipe run outside
//! a session finds no ticket and starts at once.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::watch;

/// A gate for a fixed number of parties.
#[derive(Clone)]
pub struct StartGate {
    inner: Arc<Inner>,
}

struct Inner {
    /// Parties that have neither arrived nor dropped out.
    pending: Mutex<usize>,
    opened: watch::Sender<Option<Instant>>,
}

impl StartGate {
    pub fn new(parties: usize) -> Self {
        let (opened, _) = watch::channel(if parties == 0 {
            Some(Instant::now())
        } else {
            None
        });
        StartGate {
            inner: Arc::new(Inner {
                pending: Mutex::new(parties),
                opened,
            }),
        }
    }

    /// One party's ticket. Dropped without `arrive` (its preparation failed), the party
    /// drops out and the others do not wait for it.
    pub fn ticket(&self) -> Ticket {
        Ticket {
            gate: self.clone(),
            used: false,
            clock_offset_ns: 0,
        }
    }

    /// When the gate opened, once it has.
    pub fn opened_at(&self) -> Option<Instant> {
        *self.inner.opened.borrow()
    }

    /// Waits until the gate opens; returns when it did.
    pub async fn opened(&self) -> Instant {
        let mut rx = self.inner.opened.subscribe();
        let at = rx.wait_for(Option::is_some).await.map(|v| *v);
        match at {
            Ok(Some(at)) => at,
            // The sender lives as long as the gate: not reached.
            _ => Instant::now(),
        }
    }

    fn leave(&self) {
        let mut pending = self.inner.pending.lock().expect("gate lock");
        *pending = pending.saturating_sub(1);
        if *pending == 0 {
            self.inner.opened.send_if_modified(|at| {
                if at.is_none() {
                    *at = Some(Instant::now());
                    true
                } else {
                    false
                }
            });
        }
    }
}

pub struct Ticket {
    gate: StartGate,
    used: bool,
    /// The party's endpoint clock minus this host's, in ns, as measured before the window.
    clock_offset_ns: i64,
}

impl Ticket {
    /// The party's container reads a clock `offset_ns` ahead of this host's (behind when
    /// negative): the instants it is told to act at are put on its clock.
    pub fn on_clock(mut self, offset_ns: i64) -> Ticket {
        self.clock_offset_ns = offset_ns;
        self
    }

    /// Arrives (this party is ready) and waits for the others.
    pub async fn arrive(mut self) -> Instant {
        self.used = true;
        self.gate.leave();
        self.gate.opened().await
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.used {
            self.gate.leave();
        }
    }
}

/// The session this process runs, once it has a name (its manifest's file name).
static SESSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();

pub fn set_session_name(name: &str) {
    let _ = SESSION.set(name.to_string());
}

/// Written into each capture's manifest, so a capture names its session.
pub fn session_name() -> Option<String> {
    SESSION.get().cloned()
}

tokio::task_local! {
    static TICKET: RefCell<Option<Ticket>>;
}

/// Runs `fut` (a capture recipe) with `ticket`: its recorder starts when the gate opens.
/// When the recipe ends without reaching its window, the ticket drops out.
pub async fn with_ticket<F: std::future::Future>(ticket: Ticket, fut: F) -> F::Output {
    TICKET.scope(RefCell::new(Some(ticket)), fut).await
}

/// Whether this capture runs in a session (holds a ticket it has not used yet).
pub fn in_session() -> bool {
    TICKET.try_with(|t| t.borrow().is_some()).unwrap_or(false)
}

/// Resolves when this capture's session gate opens (None outside a session). It holds the
/// gate, not the ticket: a recorder's own task waits on it, so that every recorder is
/// released as the gate opens, whatever order the captures' futures are polled in.
pub fn opening() -> Option<impl std::future::Future<Output = Instant> + Send + 'static> {
    let gate = TICKET
        .try_with(|t| t.borrow().as_ref().map(|ticket| ticket.gate.clone()))
        .ok()
        .flatten()?;
    Some(async move { gate.opened().await })
}

/// How far this capture's endpoint clock runs ahead of this host's (behind when
/// negative), as measured before the window; zero outside a session or where it was not
/// measured. A container told to act at a host instant by its own clock would act that
/// far off, so the instants it is sent are shifted by this. Read while the capture still
/// holds its ticket (before `wait_for_start`).
pub fn endpoint_clock_offset() -> chrono::TimeDelta {
    let offset = TICKET
        .try_with(|t| {
            t.borrow()
                .as_ref()
                .map_or(0, |ticket| ticket.clock_offset_ns)
        })
        .unwrap_or(0);
    chrono::TimeDelta::nanoseconds(offset)
}

/// Called by a recipe right before its window opens: waits for the session's other
/// captures when it runs in one and returns when the gate opened (the session's windows
/// end together, that long after it), else returns None at once.
pub async fn wait_for_start() -> Option<Instant> {
    let ticket = TICKET.try_with(|t| t.borrow_mut().take()).ok().flatten();
    match ticket {
        Some(ticket) => Some(ticket.arrive().await),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn opens_when_every_party_arrived_or_dropped_out() {
        let gate = StartGate::new(3);
        let a = gate.ticket();
        let b = gate.ticket();
        let c = gate.ticket();
        let waiting = tokio::spawn(with_ticket(a, async {
            wait_for_start().await;
            Instant::now()
        }));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(gate.opened_at().is_none(), "one of three arrived");
        drop(b);
        assert!(gate.opened_at().is_none(), "c has not arrived");
        let c_at = c.arrive().await;
        let a_at = waiting.await.unwrap();
        assert!(a_at >= c_at);
        assert_eq!(gate.opened_at(), Some(c_at));
    }

    #[tokio::test]
    async fn a_recipe_outside_a_session_starts_at_once() {
        tokio::time::timeout(Duration::from_secs(1), wait_for_start())
            .await
            .expect("no ticket: no wait");
    }

    #[tokio::test]
    async fn a_recipe_that_fails_before_its_window_releases_the_others() {
        let gate = StartGate::new(2);
        let failing = with_ticket(gate.ticket(), async { Err::<(), &str>("stopped") });
        assert!(failing.await.is_err());
        tokio::time::timeout(Duration::from_secs(1), gate.ticket().arrive())
            .await
            .expect("the failed party dropped out");
    }
}
