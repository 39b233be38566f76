//! Challenge-response authentication: the server sends 32 random letters,
//! the client proves it can read the secret file by answering with
//! SHA-256 over challenge, newline, the file's bytes, challenge, newline.

use sha2::{Digest, Sha256};
use std::io::Read;

/// Bytes from the kernel's random source.
pub fn random_bytes(n: usize) -> std::io::Result<Vec<u8>> {
    let mut out = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut out)?;
    Ok(out)
}

/// A fresh challenge: 32 lower-case letters.
pub fn new_challenge() -> std::io::Result<String> {
    Ok(random_bytes(32)?
        .into_iter()
        .map(|b| char::from(b'a' + b % 26))
        .collect())
}

/// The answer to `challenge` for a secret file holding `secret`, as
/// lower-case hexadecimal.
pub fn auth_response(challenge: &str, secret: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(challenge.as_bytes());
    h.update(b"\n");
    h.update(secret);
    h.update(challenge.as_bytes());
    h.update(b"\n");
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_is_sha256_of_the_documented_sequence() {
        assert_eq!(
            auth_response("abcdefghijklmnopqrstuvwxyzabcdef", b"foo\n"),
            "8c1298f8c58b985441d667c9cce5c7202f3220048e287682c7cd81bf6af3fb40"
        );
        assert_eq!(
            auth_response("", b""),
            "75a11da44c802486bc6f65640aa48a730f0f684c5c07a42ba3cd1735eb3fb070"
        );
    }

    #[test]
    fn challenges_are_letters_and_differ() {
        let a = new_challenge().unwrap();
        let b = new_challenge().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_lowercase()));
        assert_ne!(a, b);
    }
}
