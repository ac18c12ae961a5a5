//! Links in the docs that cannot rot: every relative link and `#anchor` of
//! the repository's Markdown (README.md, docs/, the crates' and bench/'s
//! READMEs) must reach a file of the repository and, for an anchor, a
//! heading of the Markdown page it names.
//!
//! Anchors follow the rule mdBook 0.5 documents for heading ids (lower
//! case; letters, digits, `_` and `-` kept, each space a `-`, the rest
//! dropped; a repeated id gets `-1`, `-2`, ...), which gives
//! GitHub's for every heading these pages have (GitHub also keeps
//! combining marks, which no heading here uses), so a link that passes
//! works on both. An `id="..."` or `name="..."` in inline HTML is an
//! anchor too.
//!
//! Two rules for the book (docs/, built by mdBook from docs/SUMMARY.md):
//! a page under docs/ links only to files under docs/ (the built book has
//! nothing else; name other files of the repository in a code span), and
//! every page under docs/ is listed in docs/SUMMARY.md (mdBook leaves out
//! the others without a word).
//!
//! Links with a scheme (`https:`, `mailto:`) are not followed: CI has no
//! network.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use regex::Regex;

fn root() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    p.canonicalize().unwrap_or(p)
}

/// What a page offers (anchors) and what it asks for (links).
#[derive(Debug, Default)]
struct Page {
    anchors: BTreeSet<String>,
    links: Vec<Link>,
}

#[derive(Debug)]
struct Link {
    /// 1-based line of the link's start.
    line: usize,
    dest: String,
}

/// The Markdown extensions both GitHub and mdBook render. Heading
/// attributes (`{#id}`) are left out on purpose: GitHub prints them.
fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
}

/// A heading's id from its text, by the rule above.
fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c)
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// `id`, or the first of `id-1`, `id-2`, ... not used yet.
fn unique(id: String, used: &mut HashSet<String>) -> String {
    if used.insert(id.clone()) {
        return id;
    }
    (1..)
        .map(|k| format!("{id}-{k}"))
        .find(|c| used.insert(c.clone()))
        .expect("an unused suffix exists")
}

fn scan(text: &str) -> Page {
    let html_id = Regex::new(r#"\b(?:id|name)\s*=\s*"([^"]+)""#).unwrap();
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let line_of = |offset: usize| line_starts.partition_point(|&s| s <= offset);
    let mut page = Page::default();
    let mut used = HashSet::new();
    let mut heading: Option<String> = None;
    for (event, range) in Parser::new_ext(text, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                let text = heading.take().unwrap_or_default();
                page.anchors.insert(unique(slug(&text), &mut used));
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some(h) = heading.as_mut() {
                    h.push(' ');
                }
            }
            Event::Start(Tag::Link { dest_url, .. }) | Event::Start(Tag::Image { dest_url, .. }) => {
                page.links.push(Link {
                    line: line_of(range.start),
                    dest: dest_url.to_string(),
                });
            }
            Event::Html(h) | Event::InlineHtml(h) => {
                for c in html_id.captures_iter(&h) {
                    page.anchors.insert(c[1].to_string());
                }
            }
            _ => {}
        }
    }
    page
}

/// `https:`, `mailto:` and the like: a scheme of letters, digits, `+-.`.
fn has_scheme(dest: &str) -> bool {
    dest.split_once(':').is_some_and(|(s, _)| {
        !s.is_empty()
            && s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = || std::str::from_utf8(b.get(i + 1..i + 3)?).ok();
        match (b[i], hex().and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `a/b/../c` as `a/c`, without touching the file system; `None` when it
/// climbs above its start.
fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// Why the link `dest` on page `from` (relative to the repository) goes
/// nowhere, or `None` when it reaches its target.
fn broken(repo: &Path, from: &Path, dest: &str, pages: &BTreeMap<PathBuf, Page>) -> Option<String> {
    if has_scheme(dest) {
        return None;
    }
    let (path, anchor) = dest.split_once('#').unwrap_or((dest, ""));
    let path = percent_decode(path);
    if path.starts_with('/') {
        return Some(format!(
            "`{dest}` is absolute: GitHub and mdBook resolve it from different roots; make it relative to {}",
            from.display()
        ));
    }
    let target = if path.is_empty() {
        from.to_path_buf()
    } else {
        let joined = from.parent().unwrap_or(Path::new("")).join(&path);
        let Some(t) = normalize(&joined) else {
            return Some(format!("`{dest}` leaves the repository"));
        };
        t
    };
    if !repo.join(&target).exists() {
        return Some(format!("`{dest}`: no file {}", target.display()));
    }
    if from.starts_with("docs") && !target.starts_with("docs") {
        return Some(format!(
            "`{dest}` leaves docs/, which the built book does not hold: name {} in a code span instead",
            target.display()
        ));
    }
    if anchor.is_empty() {
        return None;
    }
    let Some(page) = pages.get(&target) else {
        return Some(format!(
            "`{dest}`: an anchor into {}, which is not a Markdown page of the repository, cannot be checked",
            target.display()
        ));
    };
    let anchor = percent_decode(anchor);
    if page.anchors.contains(&anchor) {
        return None;
    }
    let word = anchor.split('-').find(|w| w.len() > 2).unwrap_or(&anchor);
    let near: Vec<&str> = page
        .anchors
        .iter()
        .filter(|a| a.contains(word))
        .take(4)
        .map(String::as_str)
        .collect();
    Some(format!(
        "`{dest}`: {} has no heading with the id `{anchor}`{}",
        target.display(),
        if near.is_empty() {
            String::new()
        } else {
            format!(" (near: {})", near.join(", "))
        }
    ))
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

/// Every Markdown page a reader of the repository meets, relative to it.
fn pages(repo: &Path) -> BTreeMap<PathBuf, Page> {
    let mut files = vec![repo.join("README.md")];
    for dir in ["docs", "crates", "bench"] {
        markdown_files(&repo.join(dir), &mut files);
    }
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            (f.strip_prefix(repo).unwrap().to_path_buf(), scan(&text))
        })
        .collect()
}

/// Every broken link of the repository at `repo`, as `file:line: why`,
/// and how many links were checked.
fn problems(repo: &Path) -> (Vec<String>, usize) {
    let pages = pages(repo);
    let mut problems = Vec::new();
    let mut checked = 0;
    for (from, page) in &pages {
        for link in &page.links {
            checked += 1;
            if let Some(why) = broken(repo, from, &link.dest, &pages) {
                problems.push(format!("{}:{}: {why}", from.display(), link.line));
            }
        }
    }
    (problems, checked)
}

/// Pages under docs/ that docs/SUMMARY.md does not list.
fn unlisted(repo: &Path) -> Vec<String> {
    let pages = pages(repo);
    let summary = Path::new("docs/SUMMARY.md");
    let listed: BTreeSet<PathBuf> = pages
        .get(summary)
        .map(|p| p.links.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|l| !has_scheme(&l.dest))
        .filter_map(|l| normalize(&Path::new("docs").join(l.dest.split('#').next()?)))
        .collect();
    pages
        .keys()
        .filter(|p| p.starts_with("docs") && p.as_path() != summary && !listed.contains(*p))
        .map(|p| p.display().to_string())
        .collect()
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let repo = root();
    assert!(
        repo.join("docs/SUMMARY.md").is_file(),
        "no docs/SUMMARY.md: the book has no table of contents"
    );
    let (problems, checked) = problems(&repo);
    println!("{checked} links checked");
    assert!(
        problems.is_empty(),
        "{} broken link(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_page_under_docs_is_in_the_book() {
    let missing = unlisted(&root());
    assert!(
        missing.is_empty(),
        "pages under docs/ that docs/SUMMARY.md does not list (mdBook leaves them out of the book): {}",
        missing.join(", ")
    );
}
#[test]
fn ids_are_mdbooks() {
    // Punctuation, symbols, non-ASCII letters, and headings of these docs.
    assert_eq!(
        slug("`--stall`: CPU stalls on purpose"),
        "--stall-cpu-stalls-on-purpose"
    );
    assert_eq!(slug("Token 🪙 rotation \u{1f552}"), "token--rotation-");
    assert_eq!(slug("_-_802_1Qbv"), "_-_802_1qbv");
    assert_eq!(slug("Zeitgesteuerte Übertragung"), "zeitgesteuerte-übertragung");
    assert_eq!(slug("時間 TF"), "時間-tf");
    assert_eq!(
        slug("RETHER stations (kind = \"rether\", [rether])"),
        "rether-stations-kind--rether-rether"
    );
    assert_eq!(slug("§2.1–2.2.1 Hybrid operation"), "21221-hybrid-operation");
    let mut used = HashSet::new();
    let ids: Vec<String> = ["Live", "Live", "Live"]
        .iter()
        .map(|h| unique(slug(h), &mut used))
        .collect();
    assert_eq!(ids, ["live", "live-1", "live-2"]);
}

#[test]
fn a_broken_link_is_found_and_a_good_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    std::fs::create_dir_all(repo.join("docs/sub")).unwrap();
    std::fs::create_dir_all(repo.join("crates/x")).unwrap();
    let write = |p: &str, t: &str| std::fs::write(repo.join(p), t).unwrap();
    write("Cargo.toml", "");
    write(
        "README.md",
        "# Top\n\n[book](docs/a.md#a-code-heading) [gone](docs/a.md#gone) \
         [file](Cargo.toml) [web](https://example.org/#x)\n",
    );
    write("docs/SUMMARY.md", "# Summary\n\n- [A](a.md)\n");
    write(
        "docs/a.md",
        "# A\n\n## A `code` heading\n\n<a id=\"manual\"></a>\n\n\
         [ok](#a-code-heading) [m](#manual) [bad](#nope)\n\n\
         [out](../Cargo.toml) [up](../../x.md) [abs](/docs/a.md) [b](sub/b.md)\n\n\
         ```text\n[in code](#in-code)\n```\n",
    );
    write("docs/sub/b.md", "# B\n\n[back](../a.md#a) [no](../nope.md)\n");
    let (mut found, checked) = problems(repo);
    found.sort();
    assert_eq!(checked, 14, "{found:#?}");
    let want = [
        "README.md:3: `docs/a.md#gone`: docs/a.md has no heading with the id `gone`",
        "docs/a.md:7: `#nope`: docs/a.md has no heading with the id `nope`",
        "docs/a.md:9: `../../x.md` leaves the repository",
        "docs/a.md:9: `../Cargo.toml` leaves docs/",
        "docs/a.md:9: `/docs/a.md` is absolute",
        "docs/sub/b.md:3: `../nope.md`: no file docs/nope.md",
    ];
    assert_eq!(found.len(), want.len(), "{found:#?}");
    for (f, w) in found.iter().zip(want) {
        assert!(f.starts_with(w), "{f}\n  does not start with\n{w}");
    }
    assert_eq!(unlisted(repo), ["docs/sub/b.md"]);
}
