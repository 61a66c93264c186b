//! The pruner: keeps history bounded. At start, and `prune_every` after
//! history grew, it deletes finished runs beyond each task's newest
//! `keep_runs`, and finished runs older than `keep_for`, in batches; queued,
//! running and retrying runs are never touched. An idle node never prunes,
//! so it makes no queries.

use std::sync::Arc;

use super::Ctx;
use crate::clock::Clock;
use crate::store::{PruneParams, Store};

/// Runs deleted per statement, so that one pass never holds the writer long.
const BATCH: u32 = 10_000;

pub(super) async fn run<S: Store, C: Clock>(ctx: Arc<Ctx<S, C>>) {
    let mut first = true;
    loop {
        if !first {
            tokio::select! {
                _ = ctx.shutdown.cancelled() => return,
                _ = ctx.prune_wakeup.notified() => {}
            }
        }
        if !first {
            // Let history grow for a while before the next pass.
            let at = ctx.after(ctx.config.prune_every);
            tokio::select! {
                _ = ctx.shutdown.cancelled() => return,
                _ = ctx.clock.sleep_until(at) => {}
            }
        }
        first = false;
        let older_than = ctx.clock.now() - super::signed(ctx.config.keep_for);
        let mut total = 0;
        loop {
            let params = PruneParams {
                keep_runs: ctx.config.keep_runs,
                older_than,
                limit: BATCH,
            };
            match ctx.store.prune(params).await {
                Ok(n) => {
                    total += n;
                    if n < u64::from(BATCH) {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "pruning history failed; will retry next pass");
                    break;
                }
            }
        }
        if total > 0 {
            tracing::info!(runs = total, "pruned history");
        }
    }
}
