//! cv master: namespace, journal, tail cache, placement.
