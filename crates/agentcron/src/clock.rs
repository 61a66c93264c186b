//! Time as the engine sees it. Production uses [`SystemClock`]; tests drive a
//! [`ManualClock`] by hand, so no test sleeps and hopes.

use std::future::Future;

use jiff::{SignedDuration, Timestamp};
use tokio::sync::watch;

/// Where the engine reads the time and waits for a moment.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Timestamp;

    /// Completes at (or soon after) `at`.
    fn sleep_until(&self, at: Timestamp) -> impl Future<Output = ()> + Send;
}

/// The system's wall clock; waits with tokio timers.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    async fn sleep_until(&self, at: Timestamp) {
        let wait = at.duration_since(Timestamp::now());
        if wait.is_positive() {
            tokio::time::sleep(wait.unsigned_abs()).await;
        }
    }
}

/// A clock that moves only when told: [`ManualClock::advance`] or
/// [`ManualClock::set`] wake every sleeper whose moment has come.
#[derive(Debug)]
pub struct ManualClock {
    now: watch::Sender<Timestamp>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock {
            now: watch::Sender::new(start),
        }
    }

    /// Moves the clock to `t` (never backwards).
    pub fn set(&self, t: Timestamp) {
        self.now.send_if_modified(|now| {
            let later = t > *now;
            if later {
                *now = t;
            }
            later
        });
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: SignedDuration) {
        let now = *self.now.borrow();
        self.set(now + d);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.now.borrow()
    }

    async fn sleep_until(&self, at: Timestamp) {
        let mut rx = self.now.subscribe();
        // The sender lives as long as `self`, so `changed` only ends when time moves.
        while *rx.borrow_and_update() < at {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }
}

impl<C: Clock> Clock for std::sync::Arc<C> {
    fn now(&self) -> Timestamp {
        (**self).now()
    }

    fn sleep_until(&self, at: Timestamp) -> impl Future<Output = ()> + Send {
        (**self).sleep_until(at)
    }
}
