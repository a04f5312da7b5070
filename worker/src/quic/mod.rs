//! QUIC endpoint driven from a glommio executor (quinn-proto + quinn-udp).
