//! Who may connect (the anchor is Redis' protected mode): the server listens on loopback
//! unless a bearer token is configured, and every request but `/health` must carry the
//! token, compared in constant time.

use std::net::SocketAddr;
use std::path::Path;

use crate::error::ServeError;

/// Tokens shorter than this are refused: a token is a secret, not a password to remember.
pub const MIN_TOKEN_LEN: usize = 16;

/// Refuses to listen on `addr` when it is reachable from other machines and no token is
/// configured.
pub fn check_bind(addr: &SocketAddr, token: Option<&str>) -> Result<(), ServeError> {
    if addr.ip().is_loopback() || token.is_some() {
        Ok(())
    } else {
        Err(ServeError::Exposed { addr: *addr })
    }
}

/// The token in `path`: its contents without surrounding whitespace, at least
/// [`MIN_TOKEN_LEN`] bytes.
pub fn read_token(path: &Path) -> Result<String, ServeError> {
    let text = std::fs::read_to_string(path).map_err(|source| ServeError::TokenFile { path: path.to_path_buf(), why: source.to_string() })?;
    let token = text.trim();
    if token.len() < MIN_TOKEN_LEN || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ServeError::TokenFile { path: path.to_path_buf(), why: format!("a token is one line of at least {MIN_TOKEN_LEN} printable characters without spaces") });
    }
    Ok(token.to_owned())
}

/// True when the `Authorization` header `header` carries `token` (`Bearer TOKEN`); the
/// comparison takes the same time wherever the first difference is.
pub fn authorized(header: Option<&[u8]>, token: &str) -> bool {
    let Some(given) = header.and_then(|h| h.strip_prefix(b"Bearer ")) else { return false };
    constant_time_eq(given, token.as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    // the length is not secret (it is fixed by the operator's choice of token generator)
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_needs_no_token_anything_else_does() {
        let token = Some("0123456789abcdef");
        for (addr, no_token_ok) in [("127.0.0.1:1", true), ("[::1]:1", true), ("0.0.0.0:1", false), ("10.1.2.3:1", false), ("[::]:1", false)] {
            let addr: SocketAddr = addr.parse().unwrap();
            assert_eq!(check_bind(&addr, None).is_ok(), no_token_ok, "{addr}");
            assert!(check_bind(&addr, token).is_ok(), "{addr}");
        }
    }

    #[test]
    fn only_the_exact_bearer_token_is_let_in() {
        let t = "0123456789abcdef";
        assert!(authorized(Some(b"Bearer 0123456789abcdef"), t));
        for bad in [&b"Bearer 0123456789abcdeg"[..], b"Bearer 0123456789abcde", b"bearer 0123456789abcdef", b"0123456789abcdef", b"Bearer ", b""] {
            assert!(!authorized(Some(bad), t), "{}", String::from_utf8_lossy(bad));
        }
        assert!(!authorized(None, t));
    }

    #[test]
    fn token_files_must_hold_a_real_token() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good");
        std::fs::write(&good, "s3cr3t-t0ken-0123456789\n").unwrap();
        assert_eq!(read_token(&good).unwrap(), "s3cr3t-t0ken-0123456789");
        let short = dir.path().join("short");
        std::fs::write(&short, "abc\n").unwrap();
        assert!(read_token(&short).unwrap_err().to_string().contains("at least 16"));
        assert!(read_token(&dir.path().join("missing")).unwrap_err().to_string().contains("missing"));
    }
}
