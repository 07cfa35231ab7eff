//! Why the server could not start or stopped badly: [`ServeError`].

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why the server could not start or stopped badly.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Listening beyond loopback without a token.
    #[error("refusing to listen on {addr}: it is not a loopback address and no token is configured (anyone who can reach it could read and write the index); give --token-file, or listen on 127.0.0.1")]
    Exposed {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The token file is missing or unusable.
    #[error("token file {}: {why}", path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The limits asked for do not fit the process' (descriptors).
    #[error("{0}")]
    Limits(String),
    /// The index would not open or close (its message once, not again as its cause).
    #[error(transparent)]
    Index(#[from] simdex_fingerprint::Error),
    /// The address could not be bound, or the runtime not started.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The failure.
        source: std::io::Error,
    },
}
