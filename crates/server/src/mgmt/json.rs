//! The `-j` output of management commands: an array opening with the
//! format version, the command's arguments and the time, then the data.

/// A JSON string literal.
pub(crate) fn string(s: &str) -> String {
    lacquer_core::json::quote(s)
}

/// `[ version, [args…], time,` — the caller appends its data and `\n]\n`.
pub(crate) fn head(version: u32, args: &[String]) -> String {
    let args: Vec<String> = args.iter().map(|a| string(a)).collect();
    format!(
        "[ {version}, [{}], {:.3},",
        args.join(", "),
        lacquer_core::time::now()
    )
}

/// A whole `-j` reply whose data is a list of items, one after another.
pub(crate) fn items(version: u32, args: &[String], items: &[String]) -> String {
    format!("{}\n{}\n]\n", head(version, args), items.join(",\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(string("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
        assert!(head(2, &["status".into(), "-j".into()]).starts_with("[ 2, [\"status\", \"-j\"], "));
        let list = items(1, &["x".into()], &["1".into(), "2".into()]);
        assert!(
            list.starts_with("[ 1, [\"x\"], ") && list.ends_with(",\n1,\n2\n]\n"),
            "{list}"
        );
    }
}
