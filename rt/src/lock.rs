//! An async mutex for one thread; the guard may be held across awaits.

use std::cell::{Cell, RefCell, RefMut};
use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::task::{Poll, Waker};

/// A value behind an async lock. Not `Send`: it serves the tasks of one runtime.
#[derive(Debug)]
pub struct Mutex<T> {
    value: RefCell<T>,
    locked: Cell<bool>,
    waiters: RefCell<VecDeque<Waker>>,
}

/// Exclusive access until dropped.
#[derive(Debug)]
pub struct MutexGuard<'a, T> {
    lock: &'a Mutex<T>,
    value: Option<RefMut<'a, T>>,
}

impl<T> Mutex<T> {
    pub fn new(value: T) -> Mutex<T> {
        Mutex { value: RefCell::new(value), locked: Cell::new(false), waiters: RefCell::new(VecDeque::new()) }
    }

    pub async fn lock(&self) -> MutexGuard<'_, T> {
        std::future::poll_fn(|cx| {
            if !self.locked.get() {
                self.locked.set(true);
                return Poll::Ready(());
            }
            let mut w = self.waiters.borrow_mut();
            if !w.iter().any(|x| x.will_wake(cx.waker())) {
                w.push_back(cx.waker().clone());
            }
            Poll::Pending
        })
        .await;
        // The flag makes this the only borrower.
        MutexGuard { lock: self, value: Some(self.value.borrow_mut()) }
    }

    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value.as_deref().expect("guard holds the value")
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value.as_deref_mut().expect("guard holds the value")
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.value = None;
        self.lock.locked.set(false);
        // Wake every waiter to try again (a woken one may have gone away meanwhile; waking
        // only the first could leave the rest asleep on a free lock). Waiters are few: the
        // index log's writers.
        let waiters = std::mem::take(&mut *self.lock.waiters.borrow_mut());
        waiters.into_iter().for_each(Waker::wake);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Runtime, RuntimeConfig, sleep, spawn_local};
    use std::rc::Rc;
    use std::time::Duration;

    #[test]
    fn holders_take_turns_across_awaits() {
        Runtime::new(RuntimeConfig::default()).unwrap().block_on(async {
            let m = Rc::new(Mutex::new(Vec::new()));
            let tasks: Vec<_> = (0..4)
                .map(|i| {
                    let m = m.clone();
                    spawn_local(async move {
                        let mut g = m.lock().await;
                        g.push(i);
                        sleep(Duration::from_millis(2)).await;
                        g.push(i);
                    })
                })
                .collect();
            for t in tasks {
                t.await;
            }
            let v = m.lock().await.clone();
            assert_eq!(v.len(), 8);
            assert!(v.chunks(2).all(|p| p[0] == p[1]), "{v:?}");
        });
    }
}
