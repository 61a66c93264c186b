//! The lease keeper: renews the leases of attempts executing on this node
//! every third of the lease; an attempt whose lease was lost (the run was
//! reclaimed elsewhere) is cancelled here, and its late writes are fenced off.

use std::sync::Arc;

use super::Ctx;
use crate::clock::Clock;
use crate::store::Store;

pub(super) async fn run<S: Store, C: Clock>(ctx: Arc<Ctx<S, C>>) {
    let every = ctx.config.lease / 3;
    loop {
        let at = ctx.after(every);
        tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            _ = ctx.clock.sleep_until(at) => {}
        }
        ctx.check_clock().await;
        renew(&ctx).await;
    }
}

/// Renews every lease this node holds; cancels the attempts whose lease is gone.
/// The reaper calls this too before it reaps, so that a node waking from a
/// stall renews its own live attempts before it could mistake them for dead.
pub(super) async fn renew<S: Store, C: Clock>(ctx: &Ctx<S, C>) {
    let held: Vec<_> = match ctx.executing.lock() {
        Ok(m) => m.iter().map(|(id, e)| (*id, e.fence)).collect(),
        Err(_) => return,
    };
    if held.is_empty() {
        return;
    }
    // Leases are in database time.
    let now = ctx.db_now();
    let until = now
        .saturating_add(super::signed(ctx.config.lease))
        .unwrap_or(jiff::Timestamp::MAX);
    match ctx
        .store
        .extend_leases(&ctx.config.node, &held, now, until)
        .await
    {
        Ok(lost) => {
            if let Ok(m) = ctx.executing.lock() {
                for id in lost {
                    if let Some(e) = m.get(&id) {
                        tracing::warn!(run = %id, "lease lost; cancelling the local attempt");
                        e.cancel.cancel();
                    }
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "renewing leases failed; will retry"),
    }
}
