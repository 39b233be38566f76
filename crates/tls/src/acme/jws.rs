//! An ACME account's key and the signed requests made with it (RFC 8555
//! §6.2): an ECDSA P-256 key kept as PKCS#8 PEM, its JWK and thumbprint
//! (RFC 7638), and flattened JWS bodies signed with ES256.

use super::json::quote;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

/// Base64 with the URL alphabet and no padding (RFC 7515 §2).
pub fn b64url(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, data);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// An account key.
pub struct AccountKey {
    pair: EcdsaKeyPair,
    pkcs8: Vec<u8>,
    rng: SystemRandom,
}

impl AccountKey {
    /// A new key.
    pub fn generate() -> Result<AccountKey, String> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| "cannot make an account key".to_string())?;
        AccountKey::from_pkcs8(pkcs8.as_ref())
    }

    pub fn from_pkcs8(der: &[u8]) -> Result<AccountKey, String> {
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
            .map_err(|e| format!("not an ECDSA P-256 PKCS#8 key ({e})"))?;
        Ok(AccountKey {
            pair,
            pkcs8: der.to_vec(),
            rng,
        })
    }

    pub fn pkcs8(&self) -> &[u8] {
        &self.pkcs8
    }

    /// The public key as a JWK, its members in the order RFC 7638 hashes.
    pub fn jwk(&self) -> String {
        // An uncompressed point: 0x04, x, y.
        let point = self.pair.public_key().as_ref();
        format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            b64url(&point[1..33]),
            b64url(&point[33..65])
        )
    }

    /// The JWK thumbprint, which key authorizations end with.
    pub fn thumbprint(&self) -> String {
        b64url(&sha256(self.jwk().as_bytes()))
    }

    /// A JWS body for `url`: `payload` (None: a POST-as-GET, an empty
    /// payload), signed, naming the account by `kid` once it has one
    /// and by its key before.
    pub fn sign(
        &self,
        url: &str,
        nonce: &str,
        kid: Option<&str>,
        payload: Option<&str>,
    ) -> Result<String, String> {
        let who = match kid {
            Some(k) => format!(r#""kid":{}"#, quote(k)),
            None => format!(r#""jwk":{}"#, self.jwk()),
        };
        let protected = b64url(
            format!(
                r#"{{"alg":"ES256",{who},"nonce":{},"url":{}}}"#,
                quote(nonce),
                quote(url)
            )
            .as_bytes(),
        );
        let payload = payload.map(|p| b64url(p.as_bytes())).unwrap_or_default();
        let signed = self
            .pair
            .sign(&self.rng, format!("{protected}.{payload}").as_bytes())
            .map_err(|_| "signing failed".to_string())?;
        Ok(format!(
            r#"{{"protected":"{protected}","payload":"{payload}","signature":"{}"}}"#,
            b64url(signed.as_ref())
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::json;
    use super::*;

    #[test]
    fn base64url_without_padding() {
        assert_eq!(b64url(b""), "");
        assert_eq!(b64url(b"f"), "Zg");
        assert_eq!(b64url(b"fo"), "Zm8");
        assert_eq!(b64url(b"foo"), "Zm9v");
        assert_eq!(b64url(b"foob"), "Zm9vYg");
        assert_eq!(b64url(&[0xfb, 0xff, 0xfe]), "-__-");
    }

    #[test]
    fn signed_bodies_verify_with_the_jwk() {
        let key = AccountKey::generate().unwrap();
        let again = AccountKey::from_pkcs8(key.pkcs8()).unwrap();
        assert_eq!(key.jwk(), again.jwk());
        assert_eq!(key.thumbprint().len(), 43);

        let body = key
            .sign("https://ca/new-acct", "n0nce", None, Some(r#"{"a":1}"#))
            .unwrap();
        let v = json::parse(&body).unwrap();
        let (protected, payload, sig) = (
            v.str_of("protected").unwrap(),
            v.str_of("payload").unwrap(),
            v.str_of("signature").unwrap(),
        );
        let header = json::parse(&String::from_utf8(unb64url(protected)).unwrap()).unwrap();
        assert_eq!(header.str_of("alg"), Some("ES256"));
        assert_eq!(header.str_of("nonce"), Some("n0nce"));
        assert_eq!(header.str_of("url"), Some("https://ca/new-acct"));
        let jwk = header.get("jwk").unwrap();
        assert!(header.get("kid").is_none());
        let point = [
            &[4u8][..],
            &unb64url(jwk.str_of("x").unwrap()),
            &unb64url(jwk.str_of("y").unwrap()),
        ]
        .concat();
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::ECDSA_P256_SHA256_FIXED,
            point,
        );
        public
            .verify(format!("{protected}.{payload}").as_bytes(), &unb64url(sig))
            .unwrap();
        assert_eq!(unb64url(payload), br#"{"a":1}"#);

        // With a kid and no payload: a POST-as-GET.
        let body = key
            .sign("https://ca/o/1", "n", Some("https://ca/acct/7"), None)
            .unwrap();
        let v = json::parse(&body).unwrap();
        assert_eq!(v.str_of("payload"), Some(""));
        let header =
            json::parse(&String::from_utf8(unb64url(v.str_of("protected").unwrap())).unwrap())
                .unwrap();
        assert_eq!(header.str_of("kid"), Some("https://ca/acct/7"));
    }

    fn unb64url(s: &str) -> Vec<u8> {
        let val = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            _ => 63,
        };
        let mut bits = 0u32;
        let mut n = 0;
        let mut out = Vec::new();
        for c in s.bytes() {
            bits = (bits << 6) | u32::from(val(c));
            n += 6;
            if n >= 8 {
                n -= 8;
                out.push((bits >> n) as u8);
            }
        }
        out
    }
}
