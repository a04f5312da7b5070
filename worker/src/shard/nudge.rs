//! Interrupts shard threads with a signal, so a lost io_uring wake-up cannot keep one
//! asleep: a starting shard when it is slow to answer, a running one every period.
//!
//! Why: glommio executors starting in one process sometimes sleep for good in
//! `io_uring_enter` with the completion they wait for already posted (every completion
//! consumed, io-wq idle; a glommio timer does not wake them, an eventfd write did not always
//! either). Interrupting the syscall does: it is restarted (the handler is installed with
//! `SA_RESTART`), and the restarted wait sees the completion. `tests/startup_stall.rs`
//! reproduces the stall within ~100 rounds without this; it was also seen while a shard
//! closed its store. The root cause is not found.
//!
//! The signal is SIGURG: ignored by default, so no other part of the process relies on it
//! (Go's runtime uses it for the same purpose); the handler does nothing.
#![allow(unsafe_code)]

use std::os::unix::thread::JoinHandleExt;
use std::sync::Once;
use std::thread::JoinHandle;

static INSTALL: Once = Once::new();

extern "C" fn on_nudge(_: libc::c_int) {}

/// Installs the do-nothing SIGURG handler once, unless the process has one already.
fn install() {
    INSTALL.call_once(|| {
        // SAFETY: `sigaction` with a null new action only reads the current one into `old`,
        // a zeroed `sigaction` we own.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        let read = unsafe { libc::sigaction(libc::SIGURG, std::ptr::null(), &mut old) };
        if read != 0 || (old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN) {
            return; // someone else's handler interrupts syscalls just as well
        }
        // SAFETY: a zeroed `sigaction` is valid; we set an async-signal-safe handler (it does
        // nothing) and an empty mask, as `sigaction(2)` requires.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_nudge as *const () as libc::sighandler_t;
            act.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            if libc::sigaction(libc::SIGURG, &act, std::ptr::null_mut()) != 0 {
                tracing::warn!("could not install the SIGURG handler that wakes stalled shards");
            }
        }
    });
}

/// Sends SIGURG to `thread`. It must not have been joined (its `pthread_t` stays valid until
/// then, even after it ends; `pthread_kill` then fails harmlessly).
pub(crate) fn nudge<T>(thread: &JoinHandle<T>) {
    install();
    // SAFETY: the handle is not joined (we borrow it), so the pthread_t is valid.
    unsafe {
        libc::pthread_kill(thread.as_pthread_t(), libc::SIGURG);
    }
}

/// Nudges a set of threads every `every` until dropped. Drop it only once every target has
/// finished and before any is joined: a joined thread's `pthread_t` may be reused.
#[derive(Debug)]
pub(crate) struct Nudger {
    stop: Option<flume::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Nudger {
    pub(crate) fn start<T>(targets: &[&JoinHandle<T>], every: std::time::Duration) -> Nudger {
        install();
        let targets: Vec<libc::pthread_t> = targets.iter().map(|t| t.as_pthread_t()).collect();
        let (stop, stopped) = flume::bounded::<()>(0);
        let thread = std::thread::Builder::new()
            .name("cv-shard-nudge".into())
            .spawn(move || {
                while let Err(flume::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    for &t in &targets {
                        // SAFETY: the owner drops this nudger (joining this thread) before it
                        // joins any target, so every pthread_t here is still valid.
                        unsafe {
                            libc::pthread_kill(t, libc::SIGURG);
                        }
                    }
                }
            })
            .map_err(|e| tracing::warn!(error = %e, "no thread to nudge stalled shards"))
            .ok();
        Nudger { stop: Some(stop), thread }
    }
}

impl Drop for Nudger {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
