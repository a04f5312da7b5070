//! Which CPUs this process may run on, for one pinned shard per core.
//!
//! Read from `/proc/self/status` (`Cpus_allowed_list`), which honours `taskset`, cgroups
//! cpusets and container limits, without a libc call; falls back to `0..available_parallelism`.

/// The CPUs this process may use, ascending; never empty.
pub fn allowed_cpus() -> Vec<usize> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:").map(str::trim).map(String::from)))
        .and_then(|list| parse_cpu_list(&list))
        .unwrap_or_else(|| {
            let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
            (0..n).collect()
        })
}

/// Parses a kernel CPU list such as `0-3,8,10-11`; `None` if malformed or empty.
pub fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 65_536 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    (!cpus.is_empty()).then_some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse() {
        assert_eq!(parse_cpu_list("0-3,8,10-11"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert!(!allowed_cpus().is_empty());
    }
}
