//! Glob patterns for the `glob` and `grep` tools: `*` (within a path segment), `?` (one
//! character but `/`), `**` (any number of whole segments), everything else literal. A pattern
//! without `/` matches a file name at any depth (`*.rs` finds `src/lib.rs`), as shells users
//! expect from "find by name".

/// A compiled pattern.
#[derive(Clone, Debug)]
pub(crate) struct Glob {
    segments: Vec<String>,
    anywhere: bool,
}

impl Glob {
    /// Compiles `pattern` (a leading `./` or `/` is ignored).
    pub(crate) fn new(pattern: &str) -> Glob {
        let p = pattern
            .trim()
            .trim_start_matches("./")
            .trim_start_matches('/');
        Glob {
            anywhere: !p.contains('/'),
            segments: p.split('/').map(str::to_owned).collect(),
        }
    }

    /// Whether the `/`-separated relative path matches.
    pub(crate) fn matches(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').collect();
        if self.anywhere {
            return parts
                .last()
                .is_some_and(|name| segment_matches(&self.segments[0], name));
        }
        let pats: Vec<&str> = self.segments.iter().map(String::as_str).collect();
        match_segments(&pats, &parts)
    }
}

fn match_segments(pats: &[&str], parts: &[&str]) -> bool {
    match pats.split_first() {
        None => parts.is_empty(),
        Some((&"**", rest)) => (0..=parts.len()).any(|i| match_segments(rest, &parts[i..])),
        Some((p, rest)) => match parts.split_first() {
            Some((part, tail)) => segment_matches(p, part) && match_segments(rest, tail),
            None => false,
        },
    }
}

fn segment_matches(pat: &str, text: &str) -> bool {
    let p: Vec<char> = pat.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative wildcard matching with backtracking to the last `*`.
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some('?') => {
                pi += 1;
                ti += 1;
            }
            Some(c) if *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::Glob;

    #[test]
    fn patterns_match_as_documented() {
        let cases = [
            ("*.rs", "src/lib.rs", true),
            ("*.rs", "lib.rs", true),
            ("*.rs", "lib.rsx", false),
            ("src/*.rs", "src/lib.rs", true),
            ("src/*.rs", "src/a/lib.rs", false),
            ("src/**/*.rs", "src/a/b/lib.rs", true),
            ("src/**/*.rs", "src/lib.rs", true),
            ("**/x?.txt", "a/xy.txt", true),
            ("a/b", "a/b", true),
            ("a/b", "a/c", false),
        ];
        for (pattern, path, expected) in cases {
            assert_eq!(
                Glob::new(pattern).matches(path),
                expected,
                "{pattern} vs {path}"
            );
        }
    }
}
