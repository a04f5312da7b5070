//! Requests on one open file run in the order the kernel sent them. Each
//! request is answered from its own task, so without this a FLUSH sent
//! right behind the last WRITE (the kernel does not always wait for the
//! WRITE's reply first) could complete the file before the bytes arrive.

use tokio::sync::watch;

/// The queue of one open file: tickets are taken in arrival order on the
/// kernel's request thread and served in the same order.
#[derive(Debug)]
pub(crate) struct Order {
    next: std::sync::atomic::AtomicU64,
    serving: watch::Sender<u64>,
}

/// A place in the queue; dropping it lets the next request run.
#[derive(Debug)]
pub(crate) struct Turn {
    me: u64,
    serving: watch::Sender<u64>,
}

impl Order {
    pub(crate) fn new() -> Self {
        Order { next: std::sync::atomic::AtomicU64::new(0), serving: watch::Sender::new(0) }
    }

    /// Takes the next ticket; call on the request thread, in arrival order.
    pub(crate) fn ticket(&self) -> Turn {
        let me = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Turn { me, serving: self.serving.clone() }
    }
}

impl Turn {
    /// Waits until every earlier ticket is done.
    pub(crate) async fn wait(&self) {
        let mut rx = self.serving.subscribe();
        // The sender lives in `self`, so the channel cannot close here.
        let _ = rx.wait_for(|s| *s >= self.me).await;
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let me = self.me;
        self.serving.send_modify(|s| *s = (*s).max(me + 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn later_tickets_wait_for_earlier_ones() {
        let order = Order::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        let tickets: Vec<Turn> = (0..5).map(|_| order.ticket()).collect();
        let mut tasks = Vec::new();
        // Spawned in reverse: without the queue they would run 4, 3, 2, 1, 0.
        for (i, t) in tickets.into_iter().enumerate().rev() {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                t.wait().await;
                tokio::task::yield_now().await;
                log.lock().unwrap().push(i);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*log.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }
}
