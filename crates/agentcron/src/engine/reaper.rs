//! The reaper: requeues runs whose lease expired — their node died — as a
//! `recovery` attempt (same run id, higher fence), or fails them when their
//! attempts are spent. Runs every half lease.

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
                now: ctx.clock.now(),
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
        let at = ctx.after(every);
        tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            _ = ctx.clock.sleep_until(at) => {}
        }
    }
}
