//! A gate counts the tasks spawned through it, so shutdown can wait for them all.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::task::{Poll, Waker};

use super::{Task, spawn_local};

/// `spawn` on a gate that is closing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("gate closed")]
pub struct GateClosed;

#[derive(Debug, Default)]
struct Inner {
    running: Cell<usize>,
    closing: Cell<bool>,
    closer: RefCell<Option<Waker>>,
}

/// Tasks spawned through the gate; cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct Gate(Rc<Inner>);

/// Held by each gated task; its drop (the task ending or being dropped) counts it out.
struct Pass(Rc<Inner>);

impl Drop for Pass {
    fn drop(&mut self) {
        let left = self.0.running.get() - 1;
        self.0.running.set(left);
        if left == 0 {
            let closer = self.0.closer.borrow_mut().take();
            if let Some(w) = closer {
                w.wake();
            }
        }
    }
}

impl Gate {
    pub fn new() -> Gate {
        Gate::default()
    }

    /// Spawns `fut` on the current runtime, unless the gate is closing.
    pub fn spawn<F>(&self, fut: F) -> Result<Task<F::Output>, GateClosed>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        if self.0.closing.get() {
            return Err(GateClosed);
        }
        self.0.running.set(self.0.running.get() + 1);
        let pass = Pass(self.0.clone());
        Ok(spawn_local(async move {
            let _pass = pass;
            fut.await
        }))
    }

    /// Refuses new tasks and waits until every task spawned through the gate has ended.
    pub async fn close(&self) {
        self.0.closing.set(true);
        std::future::poll_fn(|cx| {
            if self.0.running.get() == 0 {
                return Poll::Ready(());
            }
            *self.0.closer.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Runtime, RuntimeConfig, sleep};
    use std::time::Duration;

    #[test]
    fn close_waits_for_running_tasks_and_refuses_new_ones() {
        Runtime::new(RuntimeConfig::default()).unwrap().block_on(async {
            let gate = Gate::new();
            let done = Rc::new(Cell::new(0));
            for i in 0..3 {
                let d = done.clone();
                gate.spawn(async move {
                    sleep(Duration::from_millis(5 * i)).await;
                    d.set(d.get() + 1);
                })
                .unwrap()
                .detach();
            }
            gate.close().await;
            assert_eq!(done.get(), 3);
            assert!(gate.spawn(async {}).is_err());
        });
    }
}
