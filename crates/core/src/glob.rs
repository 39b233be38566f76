//! Shell-style name patterns (`*` any run, `?` any one character), as the
//! CLI's backend and VCL patterns and counter names use them.

/// Whether `pattern` matches all of `text`.
pub fn matches(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn stars_and_question_marks() {
        assert!(matches("*", "anything"));
        assert!(matches("def*", "default"));
        assert!(matches("d?f*t", "default"));
        assert!(matches("*a*b", "xxaxxb"));
        assert!(!matches("def*", "xdefault"));
        assert!(!matches("a", "ab"));
        assert!(matches("", ""));
        assert!(matches("MAIN.cache_*", "MAIN.cache_hit"));
        assert!(!matches("MAIN.cache_*", "MAIN.client_req"));
    }
}
