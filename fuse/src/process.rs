//! Which process a request comes from. FUSE gives the calling thread's id;
//! a descriptor is shared by the threads of one process, and also by a
//! forked child until it closes its copy (at exec, for close-on-exec files).

/// Whether threads `a` and `b` belong to the same process.
pub(crate) fn same_process(a: u32, b: u32) -> bool {
    a == b || matches!((tgid(a), tgid(b)), (Some(x), Some(y)) if x == y)
}

/// The process (thread group) of thread `tid`, from /proc.
fn tgid(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_of_one_process_match_and_others_do_not() {
        let me = std::process::id();
        let other_thread = std::thread::spawn(|| std::fs::read_link("/proc/thread-self").ok()).join().unwrap();
        let tid: u32 = other_thread
            .and_then(|p| p.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse().ok()))
            .expect("thread id");
        // The thread has exited: fall back to equality, which fails.
        assert!(!same_process(me, tid) || tgid(tid) == Some(me));
        assert!(same_process(me, me));
        // pid 1 is another process.
        assert!(!same_process(me, 1));
    }
}
