//! Whether a text is one JSON value (RFC 8259), for `varnish -clijson`:
//! a checker of its own, so the daemon's JSON is judged by other code.

/// Whether `text` is exactly one JSON value, with white space around.
pub fn is_json(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    value(b, &mut i, 0) && {
        skip_ws(b, &mut i);
        i == b.len()
    }
}

fn skip_ws(b: &[u8], i: &mut usize) {
    while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\n' | b'\r') {
        *i += 1;
    }
}

fn value(b: &[u8], i: &mut usize, depth: u32) -> bool {
    skip_ws(b, i);
    if depth > 128 {
        return false;
    }
    match b.get(*i) {
        Some(b'{') => {
            *i += 1;
            skip_ws(b, i);
            if b.get(*i) == Some(&b'}') {
                *i += 1;
                return true;
            }
            loop {
                skip_ws(b, i);
                if !string(b, i) {
                    return false;
                }
                skip_ws(b, i);
                if b.get(*i) != Some(&b':') {
                    return false;
                }
                *i += 1;
                if !value(b, i, depth + 1) {
                    return false;
                }
                skip_ws(b, i);
                match b.get(*i) {
                    Some(b',') => *i += 1,
                    Some(b'}') => {
                        *i += 1;
                        return true;
                    }
                    _ => return false,
                }
            }
        }
        Some(b'[') => {
            *i += 1;
            skip_ws(b, i);
            if b.get(*i) == Some(&b']') {
                *i += 1;
                return true;
            }
            loop {
                if !value(b, i, depth + 1) {
                    return false;
                }
                skip_ws(b, i);
                match b.get(*i) {
                    Some(b',') => *i += 1,
                    Some(b']') => {
                        *i += 1;
                        return true;
                    }
                    _ => return false,
                }
            }
        }
        Some(b'"') => string(b, i),
        Some(b't') => word(b, i, b"true"),
        Some(b'f') => word(b, i, b"false"),
        Some(b'n') => word(b, i, b"null"),
        Some(b'-' | b'0'..=b'9') => number(b, i),
        _ => false,
    }
}

fn word(b: &[u8], i: &mut usize, w: &[u8]) -> bool {
    let ok = b[*i..].starts_with(w);
    *i += w.len();
    ok
}

fn string(b: &[u8], i: &mut usize) -> bool {
    if b.get(*i) != Some(&b'"') {
        return false;
    }
    *i += 1;
    while let Some(&c) = b.get(*i) {
        *i += 1;
        match c {
            b'"' => return true,
            b'\\' => match b.get(*i) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => *i += 1,
                Some(b'u')
                    if b.get(*i + 1..*i + 5)
                        .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) =>
                {
                    *i += 5
                }
                _ => return false,
            },
            c if c < 0x20 => return false,
            _ => {}
        }
    }
    false
}

fn number(b: &[u8], i: &mut usize) -> bool {
    let start = *i;
    if b.get(*i) == Some(&b'-') {
        *i += 1;
    }
    let digits = |i: &mut usize| {
        let s = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > s
    };
    if b.get(*i) == Some(&b'0') {
        *i += 1;
    } else if !digits(i) {
        return false;
    }
    if b.get(*i) == Some(&b'.') {
        *i += 1;
        if !digits(i) {
            return false;
        }
    }
    if matches!(b.get(*i), Some(b'e' | b'E')) {
        *i += 1;
        if matches!(b.get(*i), Some(b'+' | b'-')) {
            *i += 1;
        }
        if !digits(i) {
            return false;
        }
    }
    *i > start
}

#[cfg(test)]
mod tests {
    use super::is_json;

    #[test]
    fn json_values_and_not() {
        for ok in [
            "[ 2, [\"cli\", \"x\"], 1.5e3, {\"a\": null, \"b\": [true, false]} ]",
            "0",
            "\"\\u00e9\"",
        ] {
            assert!(is_json(ok), "{ok}");
        }
        for bad in [
            "",
            "[1,]",
            "{\"a\" 1}",
            "01",
            "[1] [2]",
            "\"a\nb\"",
            "{'a': 1}",
            "tru",
        ] {
            assert!(!is_json(bad), "{bad}");
        }
    }
}
