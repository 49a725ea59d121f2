//! One start for several captures: every capture of a session prepares on its own
//! (container, process, engine, sidecar, work directory), then waits here; the gate opens
//! when every party has arrived or dropped out, so all recorders start together.
//!
//! A capture receives its ticket in its context (`Seat`): the recipes stay exactly the ones
//! the single-target commands run, and a recipe run outside a session has no seat and
//! starts at once.

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

/// A capture's place in a session: its ticket at the gate until its window opens, and the
/// session's name for its manifest. Carried in the capture's context (`CaptureCtx`), so a
/// recipe run outside a session has none and starts at once.
pub struct Seat {
    /// The session's manifest name, written into each capture's manifest.
    pub session: String,
    ticket: Option<Ticket>,
}

impl Seat {
    pub fn new(session: String, ticket: Ticket) -> Self {
        Seat {
            session,
            ticket: Some(ticket),
        }
    }

    /// Whether the capture still waits for the gate (holds a ticket it has not used).
    pub fn waiting(&self) -> bool {
        self.ticket.is_some()
    }

    /// Resolves when the session's gate opens (None once the ticket is used). It holds the
    /// gate, not the ticket: a recorder's own task waits on it, so that every recorder is
    /// released as the gate opens, whatever order the captures' futures are polled in.
    pub fn opening(&self) -> Option<impl std::future::Future<Output = Instant> + Send + 'static> {
        let gate = self.ticket.as_ref()?.gate.clone();
        Some(async move { gate.opened().await })
    }

    /// How far this capture's endpoint clock runs ahead of this host's (behind when
    /// negative), as measured before the window; zero where it was not measured. A
    /// container told to act at a host instant by its own clock would act that far off, so
    /// the instants it is sent are shifted by this. Read before `wait_for_start`.
    pub fn endpoint_clock_offset(&self) -> chrono::TimeDelta {
        let offset = self.ticket.as_ref().map_or(0, |t| t.clock_offset_ns);
        chrono::TimeDelta::nanoseconds(offset)
    }

    /// Arrives at the gate with the ticket, once, and returns when the gate opened (the
    /// session's windows end together, that long after it); None once the ticket is used.
    pub async fn wait_for_start(&mut self) -> Option<Instant> {
        Some(self.ticket.take()?.arrive().await)
    }
}

/// What a recipe calls right before its window opens: waits for the session's other
/// captures when it has a seat and returns when the gate opened, else returns None at
/// once.
pub async fn wait_for_start(seat: Option<&mut Seat>) -> Option<Instant> {
    seat?.wait_for_start().await
}

/// Whether a capture with `seat` still waits for a session's gate.
pub fn in_session(seat: Option<&Seat>) -> bool {
    seat.is_some_and(Seat::waiting)
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
        let mut seat = Seat::new("s".into(), a);
        let waiting = tokio::spawn(async move {
            seat.wait_for_start().await;
            Instant::now()
        });
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
        let started = tokio::time::timeout(Duration::from_secs(1), wait_for_start(None))
            .await
            .expect("no seat: no wait");
        assert!(started.is_none());
    }

    #[tokio::test]
    async fn a_recipe_that_fails_before_its_window_releases_the_others() {
        let gate = StartGate::new(2);
        let seat = Seat::new("s".into(), gate.ticket());
        let failing = async move {
            let _seat = seat;
            Err::<(), &str>("stopped")
        };
        assert!(failing.await.is_err());
        tokio::time::timeout(Duration::from_secs(1), gate.ticket().arrive())
            .await
            .expect("the failed party dropped out");
    }
}
