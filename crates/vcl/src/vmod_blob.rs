//! vmod blob, as bundled with Varnish 7: BLOBs decoded from and encoded to
//! text (`IDENTITY`, `BASE64`, `BASE64URL`, `BASE64URLNOPAD`, `BASE64CF`,
//! `HEX`, `URL`), `transcode` between two encodings, and `same`, `equal`,
//! `length`, `sub`. Text that does not decode fails the VCL, as in
//! Varnish.

use crate::types::scope::ALL;
use crate::types::{Type, Value};
use crate::vmod::{dflt, enm, req, Ctx, Dflt, FuncSpec, Param, Vmod};
use bytes::Bytes;

type R = Result<Value, crate::failure::VclFailure>;

const CODINGS: &[&str] = &[
    "IDENTITY",
    "BASE64",
    "BASE64URL",
    "BASE64URLNOPAD",
    "BASE64CF",
    "HEX",
    "URL",
];
const CASES: &[&str] = &["LOWER", "UPPER", "DEFAULT"];

/// A base64 alphabet and its padding (None: no padding).
fn alphabet(coding: &str) -> (&'static [u8; 64], Option<u8>) {
    use crate::base64::{CF, STD, URL};
    match coding {
        "BASE64URL" => (URL, Some(b'=')),
        "BASE64URLNOPAD" => (URL, None),
        "BASE64CF" => (CF, Some(b'_')),
        _ => (STD, Some(b'=')),
    }
}

fn b64_encode(data: &[u8], coding: &str) -> Vec<u8> {
    let (abc, pad) = alphabet(coding);
    crate::base64::encode(data, abc, pad)
}

fn b64_decode(text: &[u8], coding: &str) -> Option<Vec<u8>> {
    let (abc, pad) = alphabet(coding);
    crate::base64::decode(text, abc, pad)
}

fn hex_decode(text: &[u8]) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    // An odd count reads as if a leading 0 were there, as in Varnish.
    let mut out = Vec::with_capacity(text.len().div_ceil(2));
    let (head, rest) = text.split_at(text.len() % 2);
    if let Some(&c) = head.first() {
        out.push(digit(c)?);
    }
    for pair in rest.chunks(2) {
        out.push(digit(pair[0])? << 4 | digit(pair[1])?);
    }
    Some(out)
}

fn url_decode(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'%' {
            out.push(hex_decode(text.get(i + 1..i + 3)?).filter(|v| v.len() == 1)?[0]);
            i += 3;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    Some(out)
}

fn decode_text(coding: &str, text: &[u8]) -> Option<Vec<u8>> {
    match coding {
        "IDENTITY" => Some(text.to_vec()),
        "HEX" => hex_decode(text),
        "URL" => url_decode(text),
        other => b64_decode(text, other),
    }
}

fn encode_blob(coding: &str, upper: bool, data: &[u8]) -> Vec<u8> {
    let hex = |b: u8| {
        let s = if upper {
            b"0123456789ABCDEF"
        } else {
            b"0123456789abcdef"
        };
        [s[usize::from(b >> 4)], s[usize::from(b & 15)]]
    };
    match coding {
        "IDENTITY" => data.to_vec(),
        "HEX" => data.iter().flat_map(|&b| hex(b)).collect(),
        "URL" => data
            .iter()
            .flat_map(|&b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => vec![b],
                _ => {
                    let [h, l] = hex(b);
                    vec![b'%', h, l]
                }
            })
            .collect(),
        other => b64_encode(data, other),
    }
}

fn enum_of(v: &Value) -> &'static str {
    match v {
        Value::Enum(e) => e,
        _ => "IDENTITY",
    }
}

/// The text decoded, at most `length` bytes of it read (0: all); text
/// that does not decode fails the VCL.
fn decode_arg(coding: &str, length: i64, text: &[u8]) -> Result<Vec<u8>, String> {
    let text = match usize::try_from(length) {
        Ok(n) if n > 0 => &text[..n.min(text.len())],
        _ => text,
    };
    decode_text(coding, text).ok_or_else(|| {
        let shown = String::from_utf8_lossy(&text[..text.len().min(20)]).into_owned();
        format!("vmod blob error: cannot decode, illegal encoding beginning with \"{shown}\"")
    })
}

fn decode(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let text = a[2].as_bytes();
    let blob = decode_arg(enum_of(&a[0]), a[1].as_i64(), text)?;
    Ok(Value::Blob(Bytes::from(blob)))
}

fn encode(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let coding = enum_of(&a[0]);
    // Hex comes out lower case unless UPPER is asked for.
    let upper = enum_of(&a[1]) == "UPPER";
    let out = encode_blob(coding, upper, a[2].as_bytes());
    Ok(Value::Str(Bytes::from(out)))
}

fn transcode(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let blob = decode_arg(enum_of(&a[0]), a[3].as_i64(), a[4].as_bytes())?;
    let upper = enum_of(&a[2]) == "UPPER";
    Ok(Value::Str(Bytes::from(encode_blob(
        enum_of(&a[1]),
        upper,
        &blob,
    ))))
}

fn same(_: &mut Ctx<'_>, a: &[Value]) -> R {
    // The same BLOB: here, equal bytes of equal length held at one place.
    let same = match (&a[0], &a[1]) {
        (Value::Blob(x), Value::Blob(y)) => x.as_ptr() == y.as_ptr() && x.len() == y.len(),
        _ => false,
    };
    Ok(Value::Bool(same))
}

fn equal(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Bool(a[0].as_bytes() == a[1].as_bytes()))
}

fn length(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Int(a[0].as_bytes().len() as i64))
}

fn sub(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let Value::Blob(b) = &a[0] else {
        return Ok(Value::Unset);
    };
    let (len, off) = (a[1].as_f64() as usize, a[2].as_f64() as usize);
    match off.checked_add(len).filter(|end| *end <= b.len()) {
        Some(end) => Ok(Value::Blob(b.slice(off..end))),
        None => Err(format!(
            "vmod blob error: size {len} from offset {off} requires more bytes than blob length {}",
            b.len()
        )
        .into()),
    }
}

const fn f(
    name: &'static str,
    params: &'static [Param],
    ret: Type,
    call: crate::vmod::FuncCall,
) -> FuncSpec {
    crate::vmod::func("blob", name, params, ret, ALL, call)
}

static FUNCTIONS: &[FuncSpec] = &[
    f(
        "decode",
        &[
            enm("decoding", CODINGS, Dflt::Enum("IDENTITY")),
            dflt("length", Type::Int, Dflt::Int(0)),
            req("encoded", Type::String),
        ],
        Type::Blob,
        decode,
    ),
    f(
        "encode",
        &[
            enm("encoding", CODINGS, Dflt::Enum("IDENTITY")),
            enm("case", CASES, Dflt::Enum("DEFAULT")),
            req("blob", Type::Blob),
        ],
        Type::String,
        encode,
    ),
    f(
        "transcode",
        &[
            enm("decoding", CODINGS, Dflt::Enum("IDENTITY")),
            enm("encoding", CODINGS, Dflt::Enum("IDENTITY")),
            enm("case", CASES, Dflt::Enum("DEFAULT")),
            dflt("length", Type::Int, Dflt::Int(0)),
            req("encoded", Type::String),
        ],
        Type::String,
        transcode,
    ),
    f(
        "same",
        &[req("blob1", Type::Blob), req("blob2", Type::Blob)],
        Type::Bool,
        same,
    ),
    f(
        "equal",
        &[req("blob1", Type::Blob), req("blob2", Type::Blob)],
        Type::Bool,
        equal,
    ),
    f("length", &[req("blob", Type::Blob)], Type::Int, length),
    f(
        "sub",
        &[
            req("blob", Type::Blob),
            req("length", Type::Bytes),
            dflt("offset", Type::Bytes, Dflt::Int(0)),
        ],
        Type::Blob,
        sub,
    ),
];

pub const VMOD: Vmod = Vmod {
    name: "blob",
    functions: FUNCTIONS,
    classes: &[],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codings_round_trip() {
        let data = b"\x00\xffhello, world?";
        for coding in CODINGS {
            let text = encode_blob(coding, false, data);
            assert_eq!(
                decode_text(coding, &text).as_deref(),
                Some(&data[..]),
                "{coding}"
            );
        }
        assert_eq!(b64_encode(b"ab", "BASE64"), b"YWI=");
        assert_eq!(b64_encode(b"ab", "BASE64URLNOPAD"), b"YWI");
        assert_eq!(b64_encode(b"\xfb\xff", "BASE64CF"), b"-~8_");
        assert_eq!(hex_decode(b"abc"), Some(vec![0x0a, 0xbc]));
        assert_eq!(encode_blob("HEX", true, b"\xab"), b"AB");
        assert_eq!(encode_blob("URL", false, b"a b/"), b"a%20b%2f");
        assert_eq!(decode_text("BASE64", b"Y$I="), None);
        assert_eq!(decode_text("URL", b"%4"), None);
    }
}
