//! Figures in the docs that cannot go stale: every figure block of
//! `docs/**/*.md` is re-run here and must match what the command prints
//! now.
//!
//! ````markdown
//! <!-- figure: qosnet reproduce tdp --duration 10s | keep: ^f1234|^Table -->
//! ```text
//! (the command's stdout, the lines kept)
//! ```
//! <!-- /figure -->
//! ````
//!
//! The command is split on whitespace (quotes group, no shell); its
//! leading `qosnet` is the binary under test, run from the repository's
//! root. `| keep: REGEX` keeps only the stdout lines that match. Only
//! simulations belong here: they are deterministic for a seed, so a
//! mismatch means the code moved a figure the docs quote.
//!
//! After a deliberate change, rewrite the blocks:
//! `QOSNET_BLESS=1 cargo test --release -p qosnet-cli --test doc_figures`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use regex::Regex;

/// One figure block: where it is, what it runs, what it shows.
#[derive(Debug, Clone, PartialEq)]
struct Block {
    file: PathBuf,
    /// 1-based line of the `<!-- figure: ... -->` marker.
    line: usize,
    command: String,
    keep: Option<String>,
    /// The lines between the fences.
    shown: Vec<String>,
    /// 0-based line indices of the opening and closing fences.
    fences: (usize, usize),
}

const OPEN: &str = "<!-- figure:";
const CLOSE: &str = "<!-- /figure -->";

/// The figure blocks of one Markdown text; a malformed block is an error
/// naming its line.
fn parse(file: &Path, text: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim();
        if !l.starts_with(OPEN) {
            i += 1;
            continue;
        }
        let at = |k: usize, what: &str| format!("{}:{}: {what}", file.display(), k + 1);
        let spec = l[OPEN.len()..]
            .strip_suffix("-->")
            .ok_or_else(|| at(i, "a figure marker ends with `-->` on its own line"))?
            .trim();
        let (command, keep) = match spec.split_once("| keep:") {
            Some((c, k)) => (c.trim(), Some(k.trim().to_string())),
            None => (spec, None),
        };
        if !command.starts_with("qosnet ") {
            return Err(at(i, "a figure's command starts with `qosnet `"));
        }
        let open = i + 1;
        if !lines.get(open).is_some_and(|f| f.trim_start().starts_with("```")) {
            return Err(at(
                open,
                "a figure marker is followed by a fenced block (```text)",
            ));
        }
        let close = (open + 1..lines.len())
            .find(|&k| lines[k].trim() == "```")
            .ok_or_else(|| at(open, "the figure's fenced block is not closed"))?;
        let end = (close + 1..lines.len()).find(|&k| !lines[k].trim().is_empty());
        if end.map(|k| lines[k].trim()) != Some(CLOSE) {
            return Err(at(
                close,
                "a figure's fenced block is followed by `<!-- /figure -->`",
            ));
        }
        out.push(Block {
            file: file.to_path_buf(),
            line: i + 1,
            command: command.to_string(),
            keep,
            shown: lines[open + 1..close].iter().map(|s| s.to_string()).collect(),
            fences: (open, close),
        });
        i = close + 1;
    }
    Ok(out)
}

/// Whitespace-separated words; single or double quotes group.
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    let mut any = false;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The lines of `stdout` the block keeps.
fn kept(stdout: &str, keep: Option<&str>) -> Result<Vec<String>, String> {
    let re = keep
        .map(Regex::new)
        .transpose()
        .map_err(|e| format!("keep: {e}"))?;
    Ok(stdout
        .lines()
        .filter(|l| re.as_ref().is_none_or(|r| r.is_match(l)))
        .map(|l| l.trim_end().to_string())
        .collect())
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            markdown_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "md") {
            out.push(p);
        }
    }
}

/// Run one figure's command: its stdout, or why it failed.
fn run(command: &str) -> Result<String, String> {
    let w = words(command);
    let out = Command::new(env!("CARGO_BIN_EXE_qosnet"))
        .args(&w[1..])
        .current_dir(root())
        .env("NO_COLOR", "1")
        .output()
        .map_err(|e| format!("{command}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{command}` exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every command once, two at a time (the machines that run this have two
/// cores or more).
fn run_all(commands: Vec<String>) -> BTreeMap<String, Result<String, String>> {
    let queue = std::sync::Mutex::new(commands);
    let done = std::sync::Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let Some(c) = queue.lock().unwrap().pop() else {
                    break;
                };
                let r = run(&c);
                done.lock().unwrap().insert(c, r);
            });
        }
    });
    done.into_inner().unwrap()
}

/// The first lines where `a` and `b` differ, as a short diff.
fn diff(a: &[String], b: &[String]) -> String {
    let mut s = String::new();
    for k in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(k), b.get(k));
        if x != y {
            s += &format!(
                "  line {}:\n    docs: {}\n    now:  {}\n",
                k + 1,
                x.map_or("(none)", String::as_str),
                y.map_or("(none)", String::as_str)
            );
            if s.lines().count() > 15 {
                s += "  ...\n";
                break;
            }
        }
    }
    s
}

#[test]
fn every_figure_in_the_docs_is_what_its_command_prints() {
    let mut files = Vec::new();
    markdown_files(&root().join("docs"), &mut files);
    let mut blocks = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        blocks.extend(parse(f, &text).unwrap_or_else(|e| panic!("{e}")));
    }
    assert!(
        !blocks.is_empty(),
        "no figure blocks under docs/: the check checks nothing"
    );
    let mut commands: Vec<String> = blocks.iter().map(|b| b.command.clone()).collect();
    commands.sort();
    commands.dedup();
    let results = run_all(commands);
    let bless = std::env::var_os("QOSNET_BLESS").is_some();
    let mut failures = Vec::new();
    let mut rewrites: BTreeMap<PathBuf, Vec<(Block, Vec<String>)>> = BTreeMap::new();
    for b in &blocks {
        let place = format!(
            "{}:{}",
            b.file.strip_prefix(root()).unwrap_or(&b.file).display(),
            b.line
        );
        let now = match &results[&b.command] {
            Ok(out) => kept(out, b.keep.as_deref()),
            Err(e) => Err(e.clone()),
        };
        match now {
            Err(e) => failures.push(format!("{place}: {e}")),
            Ok(now) if now.is_empty() => failures.push(format!("{place}: `{}` keeps no line", b.command)),
            Ok(now) if now != b.shown => {
                if bless {
                    rewrites.entry(b.file.clone()).or_default().push((b.clone(), now));
                } else {
                    failures.push(format!(
                        "{place}: `{}` prints something else now:\n{}",
                        b.command,
                        diff(&b.shown, &now)
                    ));
                }
            }
            Ok(_) => {}
        }
    }
    for (file, mut edits) in rewrites {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        // From the last block up, so earlier fences keep their indices.
        edits.sort_by_key(|(b, _)| std::cmp::Reverse(b.fences.0));
        for (b, now) in edits {
            lines.splice(b.fences.0 + 1..b.fences.1, now);
        }
        std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        eprintln!("rewrote the figures of {}", file.display());
    }
    assert!(
        failures.is_empty(),
        "{} figure(s) in the docs differ from what their commands print now \
         (after a deliberate change: QOSNET_BLESS=1 cargo test --release -p qosnet-cli --test doc_figures):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn blocks_parse_with_their_places_and_malformed_ones_are_named() {
    let f = Path::new("d.md");
    let text = "intro\n<!-- figure: qosnet sim x.toml --seed 2 | keep: ^f1 -->\n```text\nf1 3\n```\n\n<!-- /figure -->\n";
    let b = parse(f, text).unwrap();
    assert_eq!(b.len(), 1);
    assert_eq!((b[0].line, b[0].fences), (2, (2, 4)));
    assert_eq!(b[0].command, "qosnet sim x.toml --seed 2");
    assert_eq!(b[0].keep.as_deref(), Some("^f1"));
    assert_eq!(b[0].shown, ["f1 3"]);
    for (bad, msg) in [
        ("<!-- figure: qosnet sim\n", "ends with `-->`"),
        (
            "<!-- figure: ls -->\n```\n```\n<!-- /figure -->\n",
            "starts with `qosnet `",
        ),
        (
            "<!-- figure: qosnet sim -->\ntext\n",
            "followed by a fenced block",
        ),
        ("<!-- figure: qosnet sim -->\n```text\nx\n", "not closed"),
        (
            "<!-- figure: qosnet sim -->\n```text\nx\n```\nmore\n",
            "<!-- /figure -->",
        ),
    ] {
        let e = parse(f, bad).unwrap_err();
        assert!(e.starts_with("d.md:") && e.contains(msg), "{bad:?}: {e}");
    }
}

#[test]
fn commands_split_like_a_shell_without_one_and_keep_filters_lines() {
    assert_eq!(
        words("qosnet sim a.toml --set 'flow.*.start=1 us' --x \"\""),
        ["qosnet", "sim", "a.toml", "--set", "flow.*.start=1 us", "--x", ""]
    );
    assert_eq!(kept("a 1\nb 2  \na 3\n", Some("^a")).unwrap(), ["a 1", "a 3"]);
    assert_eq!(kept("a\nb\n", None).unwrap(), ["a", "b"]);
    assert!(kept("a", Some("(")).is_err());
    let d = diff(&["x".into(), "y".into()], &["x".into(), "z".into(), "w".into()]);
    assert!(
        d.contains("line 2") && d.contains("line 3") && !d.contains("line 1"),
        "{d}"
    );
}
