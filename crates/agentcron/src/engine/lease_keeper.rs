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
        let held: Vec<_> = match ctx.executing.lock() {
            Ok(m) => m.iter().map(|(id, e)| (*id, e.fence)).collect(),
            Err(_) => continue,
        };
        if held.is_empty() {
            continue;
        }
        let until = ctx.after(ctx.config.lease);
        match ctx
            .store
            .extend_leases(&ctx.config.node, &held, until)
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
}
