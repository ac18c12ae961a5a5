//! Splitting a scenario's `[[flow]]` tables from the rest of the file, so
//! a file of many flows is parsed one flow at a time: a TOML document
//! tree costs kilobytes per flow (keys, values, formatting, spans), and
//! holding every flow's at once made a 100 000-flow file take 400 MB to
//! check. The rest of the file keeps its offsets (the flows' bytes become
//! spaces), so every span stays a place in the file as written.

use std::ops::Range;

/// Multi-line string state of the scanner.
#[derive(Clone, Copy, PartialEq, Eq)]
enum In {
    Code,
    Basic,
    Literal,
}

/// The key of a `[[...]]` header line, if `line` is one.
fn array_header(line: &str) -> Option<&str> {
    let t = line.trim_start().strip_prefix("[[")?;
    let end = t.find("]]")?;
    Some(t[..end].trim())
}

/// Where `pat` first occurs in `b` at or after `from`.
fn find(b: &[u8], from: usize, pat: &[u8]) -> Option<usize> {
    b.get(from..)?.windows(pat.len()).position(|w| w == pat)
}

/// Scan one line for the multi-line strings it opens or closes. Works on
/// bytes throughout: every delimiter is ASCII, and stepping a byte at a
/// time through a multi-byte character must not slice the `str` inside it
/// (a fuzzed file with `§` outside a comment panicked here).
fn scan(line: &str, mut state: In) -> In {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match state {
            In::Basic => match find(b, i, b"\"\"\"") {
                Some(k) if k > 0 && b[i + k - 1] == b'\\' && !b[i..i + k].ends_with(b"\\\\") => i += k + 1,
                Some(k) => {
                    state = In::Code;
                    i += k + 3;
                }
                None => return state,
            },
            In::Literal => match find(b, i, b"'''") {
                Some(k) => {
                    state = In::Code;
                    i += k + 3;
                }
                None => return state,
            },
            In::Code => {
                let rest = &b[i..];
                if rest.starts_with(b"#") {
                    return state;
                } else if rest.starts_with(b"\"\"\"") {
                    state = In::Basic;
                    i += 3;
                } else if rest.starts_with(b"'''") {
                    state = In::Literal;
                    i += 3;
                } else if b[i] == b'"' {
                    // A one-line basic string, with escapes.
                    i += 1;
                    while i < b.len() && b[i] != b'"' {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                    i += 1;
                } else if b[i] == b'\'' {
                    i += 1 + find(b, i + 1, b"'").unwrap_or(b.len());
                    i += 1;
                } else {
                    i += 1;
                }
            }
        }
    }
    state
}

/// The byte ranges of the top-level `[[flow]]` tables of `text`: each from
/// its header to the next header (or the end).
pub(super) fn flow_tables(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut state = In::Code;
    let mut open: Option<usize> = None;
    let mut at = 0usize;
    for line in text.split_inclusive('\n') {
        if state == In::Code && line.trim_start().starts_with('[') {
            if let Some(s) = open.take() {
                out.push(s..at);
            }
            if array_header(line) == Some("flow") {
                open = Some(at);
            }
        }
        state = scan(line, state);
        at += line.len();
    }
    if let Some(s) = open {
        out.push(s..text.len());
    }
    out
}

/// `text` with the `tables` blanked (spaces, newlines kept).
pub(super) fn blank(text: &str, tables: &[Range<usize>]) -> String {
    let mut b = text.as_bytes().to_vec();
    for r in tables {
        for c in &mut b[r.clone()] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    }
    // Only ASCII bytes were written over whole tables, which start and end
    // at line boundaries: still UTF-8.
    String::from_utf8(b).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_tables_are_found_outside_strings() {
        let t = "[scenario]\ndescription = \"\"\"\n[[flow]]\n\"\"\"\n[[flow]]\nname = \"a\" # [[flow]]\n[[ flow ]]\nname = 'b'\n[[link]]\na = \"x\"\n[[flow]]\nname = \"c\"";
        let r = flow_tables(t);
        assert_eq!(r.len(), 3);
        assert!(t[r[0].clone()].starts_with("[[flow]]\nname = \"a\""));
        assert!(t[r[1].clone()].starts_with("[[ flow ]]\nname = 'b'"));
        assert!(t[r[1].clone()].ends_with("'b'\n"));
        assert_eq!(&t[r[2].clone()], "[[flow]]\nname = \"c\"");
        let b = blank(t, &r);
        assert_eq!(b.len(), t.len());
        assert!(b.contains("[[link]]") && !b.contains("name = \"c\""));
    }
}
