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

async fn write<S: Store, C: Clock>(ctx: &Ctx<S, C>, batch: &mut Vec<Pending>) {
    if batch.is_empty() {
        return;
    }
    {
        let (finishes, replies): (Vec<_>, Vec<_>) = batch.drain(..).unzip();
        match ctx.store.finish_attempts(finishes.clone()).await {
            Ok(applied) => {
                ctx.prune_wakeup.notify_one();
                for ((finish, reply), ok) in finishes.iter().zip(replies).zip(applied) {
                    if !ok {
                        tracing::warn!(run = %finish.id, "outcome discarded: the run was reclaimed (stale fence)");
                    }
                    let _ = reply.send(ok);
                }
            }
            Err(e) => {
                // The runs stay `running` until their lease expires, then the reaper
                // recovers them: at-least-once, never lost.
                tracing::error!(error = %e, runs = finishes.len(), "could not record outcomes; the runs will be recovered");
                for reply in replies {
                    let _ = reply.send(false);
                }
            }
        }
    }
}
