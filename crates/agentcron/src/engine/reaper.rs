//! The reaper: requeues runs whose lease expired — their node died — as a
//! `recovery` attempt (same run id, higher fence), or fails them when their
//! attempts are spent. Sleeps until the earliest lease expiry it knows of
//! (every half lease while this node holds leases of its own, which the lease
//! keeper renews); `max_sleep` bounds it where other nodes claim too.

use std::sync::Arc;

use super::Ctx;
use crate::clock::Clock;
use crate::store::{ReapParams, Store};

pub(super) async fn run<S: Store, C: Clock>(ctx: Arc<Ctx<S, C>>) {
    let every = ctx.config.lease / 2;
    loop {
        super::lease_keeper::renew(&ctx).await;
        match ctx
            .store
            .reap_expired(ReapParams {
                // Expiry is judged by the database's clock.
                now: ctx.db_now(),
                limit: 1000,
            })
            .await
        {
            Ok(reaped) if !reaped.is_empty() => {
                tracing::info!(runs = reaped.len(), "recovered runs whose node stopped");
                ctx.dispatch_wakeup.notify_one();
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "reaping expired leases failed; will retry"),
        }
        // Sleep until the earliest lease runs out (bounded by `max_sleep`), or
        // half a lease while this node holds leases it must renew first.
        let next = match ctx.store.next_lease_expiry().await {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(error = %e, "reading lease expiries failed; will retry");
                None
            }
        };
        let holding = ctx.executing.lock().is_ok_and(|m| !m.is_empty());
        let at = match (next, holding) {
            (_, true) => Some(ctx.after(every)),
            // Just after it expires: the reaper's test is `expires < now`.
            // (The expiry is in database time; this node sleeps by its own.)
            (Some(expiry), false) => {
                let skew = ctx.skew_ms.load(std::sync::atomic::Ordering::Relaxed);
                expiry
                    .saturating_add(jiff::SignedDuration::from_millis(skew.saturating_add(1)))
                    .ok()
            }
            (None, false) => None,
        };
        if !ctx.sleep(at, &ctx.reap_wakeup).await {
            return;
        }
    }
}
