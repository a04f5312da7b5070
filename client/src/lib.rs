//! cv client SDK
