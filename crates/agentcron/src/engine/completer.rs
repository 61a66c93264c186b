//! The completer: records attempt outcomes in batches. Attempts hand their
//! outcome over and wait for the answer; whatever has queued up while the
//! previous batch was being written goes into the next transaction, so a
//! burst of 5,000 finishing runs costs a handful of commits, not 5,000.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::Ctx;
use crate::clock::Clock;
use crate::store::{FinishAttempt, Store};

/// Most outcomes written in one transaction.
const BATCH: usize = 1000;

/// An outcome waiting to be recorded, and who waits for the answer.
pub(super) type Pending = (FinishAttempt, oneshot::Sender<bool>);

pub(super) async fn run<S: Store, C: Clock>(
    ctx: Arc<Ctx<S, C>>,
    mut rx: mpsc::UnboundedReceiver<Pending>,
) {
    let mut batch: Vec<Pending> = Vec::with_capacity(BATCH);
    loop {
        tokio::select! {
            biased;
            n = rx.recv_many(&mut batch, BATCH) => if n == 0 { return },
            // Stopped only once no attempt is left: record what is queued, then end.
            _ = ctx.completer_stop.cancelled() => {
                while let Ok(p) = rx.try_recv() {
                    batch.push(p);
                }
                write(&ctx, &mut batch).await;
                return;
            }
        }
        write(&ctx, &mut batch).await;
    }
}

/// Writes the batch. While the database cannot be written (an outage), the
/// outcomes stay here and are tried again every second until they are
/// written (later outcomes queue behind them): an attempt that ran is
/// recorded once the database is back, not run again. (If its lease ran out
/// and another node reclaimed the run first, the fence discards the late
/// write and the run is recovered: at-least-once, never lost.) On shutdown
/// the retries stop once the engine's grace is over.
async fn write<S: Store, C: Clock>(ctx: &Ctx<S, C>, batch: &mut Vec<Pending>) {
    let mut failures = 0u32;
    while !batch.is_empty() {
        let finishes: Vec<FinishAttempt> = batch.iter().map(|(f, _)| f.clone()).collect();
        match ctx.store.finish_attempts(finishes).await {
            Ok(applied) => {
                if failures > 0 {
                    tracing::info!(
                        runs = batch.len(),
                        "outcomes recorded after the database came back"
                    );
                }
                ctx.prune_wakeup.notify_one();
                for ((finish, reply), ok) in batch.drain(..).zip(applied) {
                    if !ok {
                        tracing::warn!(run = %finish.id, "outcome discarded: the run was reclaimed (stale fence)");
                    }
                    let _ = reply.send(ok);
                }
                return;
            }
            Err(e) => {
                failures += 1;
                if failures == 1 {
                    tracing::error!(error = %e, runs = batch.len(), "could not record outcomes; keeping them and retrying every second");
                }
                if ctx.shutdown.is_cancelled() && failures > 3 {
                    tracing::error!(
                        runs = batch.len(),
                        "stopping with outcomes unrecorded; their runs will be recovered"
                    );
                    for (_, reply) in batch.drain(..) {
                        let _ = reply.send(false);
                    }
                    return;
                }
                let at = ctx.after(std::time::Duration::from_secs(1));
                ctx.clock.sleep_until(at).await;
            }
        }
    }
}
