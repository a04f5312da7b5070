//! QUIC and mutual-TLS configuration shared by client, master and worker
