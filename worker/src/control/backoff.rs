//! Reconnect delays: doubling from a floor to a ceiling, reset after a success.

use std::time::Duration;

/// Exponential backoff without jitter (one worker retries one master; no herd to spread).
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    floor: Duration,
    ceiling: Duration,
    next: Duration,
}

impl Backoff {
    pub(crate) fn new(floor: Duration, ceiling: Duration) -> Self {
        Self { floor, ceiling, next: floor }
    }

    /// The delay before the next attempt.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.ceiling);
        d
    }

    /// After a success: start from the floor again.
    pub(crate) fn reset(&mut self) {
        self.next = self.floor;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_ceiling_and_resets() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(100), ms(500));
        let got: Vec<Duration> = (0..5).map(|_| b.next_delay()).collect();
        assert_eq!(got, vec![ms(100), ms(200), ms(400), ms(500), ms(500)]);
        b.reset();
        assert_eq!(b.next_delay(), ms(100));
    }
}
