//! The README and the pages under `docs/` are how newcomers find their way in: every repository
//! path they name in backticks (a file or folder under one of the project's top-level folders)
//! must exist, and every relative Markdown link must lead to an existing file (and, for a link
//! to a Markdown page with `#anchor`, to one of its headings), so a file moved, deleted or
//! retitled by an unrelated change fails here instead of leaving the documentation pointing at
//! nothing (the embedding example was once deleted that way and nothing noticed).

use std::path::{Path, PathBuf};

/// The top-level folders whose paths the documentation names; anything else in backticks
/// (commands, settings, module paths, URLs) is not a path of this repository.
const ROOTS: [&str; 11] = [
    "harvester/",
    "bench/",
    "testkit/",
    "hotpaths/",
    "scripts/",
    ".ci/",
    "dashboards/",
    "workloads/",
    "results/",
    "docs/",
    "examples/",
];

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the harvester crate sits in the repository")
        .to_path_buf()
}

/// README.md, every Markdown page under `docs/` and the folder guides that docs/ points to
/// (`scripts/`, `examples/`, `dashboards/`), as paths relative to the repository.
fn documentation(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            return;
        };
        let mut entries: Vec<_> = entries.map(|e| e.expect("docs/ is readable")).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let relative = dir.join(entry.file_name());
            if entry.file_type().expect("docs/ is readable").is_dir() {
                walk(root, &relative, out);
            } else if relative.extension().is_some_and(|e| e == "md") {
                out.push(relative);
            }
        }
    }
    let mut pages = vec![PathBuf::from("README.md")];
    walk(root, Path::new("docs"), &mut pages);
    pages.extend(FOLDER_GUIDES.iter().map(PathBuf::from));
    pages
}

/// The READMEs of folders whose files the docs name one by one.
const FOLDER_GUIDES: [&str; 3] = [
    "scripts/README.md",
    "examples/README.md",
    "dashboards/README.md",
];

fn read(root: &Path, page: &Path) -> String {
    std::fs::read_to_string(root.join(page))
        .unwrap_or_else(|e| panic!("{} is not readable: {e}", page.display()))
}

/// The backticked spans of `text` that are repository paths: one of [`ROOTS`], then only the
/// characters a path here uses.
fn named_paths(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| ROOTS.iter().any(|r| span.starts_with(r)))
        .filter(|span| {
            span.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
        })
        .collect()
}

/// `text` without fenced code blocks and without inline code spans (which may run on over a
/// line break, but not past a paragraph): what Markdown renders as prose, where links are. Each
/// line is kept (emptied inside a fence) so that line numbers still match.
fn prose(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut in_code = false;
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                in_code = false;
                return String::new();
            }
            if fenced || line.trim().is_empty() {
                in_code = false;
                return String::new();
            }
            let mut kept = String::new();
            for c in line.chars() {
                if c == '`' {
                    in_code = !in_code;
                } else if !in_code {
                    kept.push(c);
                }
            }
            kept
        })
        .collect()
}

/// The relative link targets of `text` (`[label](target)`), each with its 1-based line:
/// without web, mail and other schemes' links, and without a link's `"title"`.
fn relative_links(text: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    for (n, line) in prose(text).iter().enumerate() {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            rest = &rest[end..];
            let target = target.trim_start_matches('<').trim_end_matches('>');
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            links.push((n + 1, target.to_owned()));
        }
    }
    links
}

/// GitHub's anchor for a heading's text: lower case, every character that is neither
/// alphanumeric, `-`, `_` nor a space dropped, spaces turned into hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown page's headings, with GitHub's `-1`, `-2`, ... for repeated ones.
fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if fenced || hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..].replace(['`', '*'], ""));
        let repeats = seen.iter().filter(|s| **s == base).count();
        seen.push(base.clone());
        out.push(if repeats == 0 {
            base
        } else {
            format!("{base}-{repeats}")
        });
    }
    out
}

/// Why `target`, a link of the page `page`, leads nowhere, or None when it leads to a file (and
/// to a heading of it, for a Markdown page's `#anchor`; a bare `#anchor` is the page's own).
fn broken(root: &Path, page: &Path, target: &str) -> Option<String> {
    let (file, anchor) = match target.split_once('#') {
        Some((file, anchor)) => (file, Some(anchor)),
        None => (target, None),
    };
    let path = if file.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().unwrap_or(Path::new("")).join(file)
    };
    let on_disk = root.join(&path);
    if !on_disk.exists() {
        return Some(format!("{} does not exist", path.display()));
    }
    match anchor {
        Some(anchor) if path.extension().is_some_and(|e| e == "md") => {
            let text = std::fs::read_to_string(&on_disk).ok()?;
            (!anchors(&text).iter().any(|a| a == anchor))
                .then(|| format!("{} has no heading #{anchor}", path.display()))
        }
        _ => None,
    }
}

#[test]
fn every_path_the_documentation_names_exists() {
    let root = repository();
    let mut named = 0;
    let mut missing = Vec::new();
    for page in documentation(&root) {
        let text = read(&root, &page);
        let paths = named_paths(&text);
        if page == Path::new("README.md") {
            assert!(
                paths.len() >= 20,
                "the README names only {} repository paths: did the parser stop finding them?",
                paths.len()
            );
        }
        named += paths.len();
        missing.extend(
            paths
                .into_iter()
                .filter(|p| !root.join(p).exists())
                .map(|p| format!("{}: {p}", page.display())),
        );
    }
    assert!(
        named >= 100,
        "README.md and docs/ name only {named} repository paths: did the parser stop finding them?"
    );
    assert!(
        missing.is_empty(),
        "the documentation names paths that do not exist: {missing:#?}"
    );
}

#[test]
fn every_relative_link_of_the_documentation_leads_somewhere() {
    let root = repository();
    let pages = documentation(&root);
    assert!(
        pages.len() >= 5,
        "only {} documentation pages found: is docs/ missing?",
        pages.len()
    );
    let mut links = 0;
    let mut dead = Vec::new();
    for page in &pages {
        for (line, target) in relative_links(&read(&root, page)) {
            links += 1;
            if let Some(why) = broken(&root, page, &target) {
                dead.push(format!("{}:{line}: ({target}): {why}", page.display()));
            }
        }
    }
    assert!(
        links >= 50,
        "README.md and docs/ hold only {links} relative links: did the parser stop finding them?"
    );
    assert!(dead.is_empty(), "links that lead nowhere: {dead:#?}");
}

#[test]
fn the_parser_finds_paths_and_only_paths() {
    let text =
        "see `harvester/examples/embedded_service.rs`, run `scripts/test.sh --no-fail-fast` \
                or `cargo test`, set `limits.max_in_flight_records`, read `results/`, \
                `docs/guarantees.md` and `examples/minimal-postgres-neli.toml`";
    assert_eq!(
        named_paths(text),
        [
            "harvester/examples/embedded_service.rs",
            "results/",
            "docs/guarantees.md",
            "examples/minimal-postgres-neli.toml"
        ]
    );
}

#[test]
fn the_link_parser_finds_relative_links_outside_code() {
    let text = "See [a](docs/a.md), [b](docs/b.md#some-part \"title\") and [web](https://x.org).\n\
                ```sh\n[not](a/link.md)\n```\n\
                `[nor](this.md)` but [c](#own-heading) and [d](<results/x/>) `a code span\n\
                [going](on.md)` [e](e.md)";
    assert_eq!(
        relative_links(text),
        [
            (1, "docs/a.md".to_owned()),
            (1, "docs/b.md#some-part".to_owned()),
            (5, "#own-heading".to_owned()),
            (5, "results/x/".to_owned()),
            (6, "e.md".to_owned()),
        ]
    );
}

#[test]
fn anchors_are_github_slugs() {
    let text = "# Title\n## Scale-out: several harvesters share one outbox by bucket\n\
                ```sh\n# a comment, not a heading\n```\n\
                ### MariaDB / MySQL outboxes\n## The `reaper` sidecar\n## Notes\n## Notes\n#nope";
    assert_eq!(
        anchors(text),
        [
            "title",
            "scale-out-several-harvesters-share-one-outbox-by-bucket",
            "mariadb--mysql-outboxes",
            "the-reaper-sidecar",
            "notes",
            "notes-1",
        ]
    );
}
