//! git: reading, writing the repository, talking to remotes, and the
//! options that make it run programs.

use super::args::Opts;
use super::net::{download, network};
use super::{Cx, Effect, WriteKind};
use crate::paths::Target;
use crate::shell::Arg;
use crate::types::{Category, Risk};

pub(super) fn git(args: &[Arg], cx: &mut Cx<'_>) -> Effect {
    let mut i = 0;
    let mut repo: Option<Target> = None;
    while i < args.len() {
        let a = &args[i];
        let t = a.text.as_str();
        if !a.literal {
            return Effect::evasive("git with computed options");
        }
        if !t.starts_with('-') {
            break;
        }
        if t == "-c"
            || t.starts_with("--config-env")
            || t.starts_with("--exec-path")
            || t.starts_with("--upload-pack")
            || t.starts_with("--receive-pack")
            || (t.starts_with("-c") && t.len() > 2)
        {
            return Effect::unknown("git -c / --exec-path sets configuration that can run programs (core.pager, core.sshCommand, aliases, hooks)");
        }
        if t == "-C" {
            if let Some(d) = args.get(i + 1) {
                repo = Some(cx.target(d));
                if let Target::Path(p) = cx.target(d) {
                    cx.cwd = Some(p);
                } else {
                    cx.cwd = None;
                }
            }
            i += 2;
            continue;
        }
        if t == "--git-dir" || t == "--work-tree" || t == "--namespace" || t == "--super-prefix" {
            i += 2;
            repo = Some(Target::Unresolved);
            continue;
        }
        if t.starts_with("--git-dir=") || t.starts_with("--work-tree=") {
            repo = Some(Target::Unresolved);
        }
        i += 1;
    }
    let repo = repo
        .map(|r| match r {
            Target::Path(p) => Target::Beneath(p),
            o => o,
        })
        .unwrap_or_else(|| cx.cwd_target());
    let sub = args.get(i).and_then(Arg::plain).unwrap_or("help");
    let rest = &args[(i + 1).min(args.len())..];
    let has = |f: &str| {
        rest.iter()
            .any(|a| a.text == f || a.text.starts_with(&format!("{f}=")))
    };
    let write = |why: &str| {
        let mut e = Effect::new(Category::Write, Risk::Low, format!("git {sub} {why}"));
        e.writes.push((repo.clone(), WriteKind::Tree));
        e
    };
    for a in rest {
        if a.literal
            && (a.text.starts_with("--upload-pack")
                || a.text.starts_with("--receive-pack")
                || a.text.starts_with("--exec=")
                || a.text.starts_with("--ext-diff")
                || a.text.starts_with("--textconv")
                || a.text.starts_with("--open-files-in-pager")
                || a.text == "-O")
        {
            return Effect::unknown(format!("git {sub} {} runs a program", a.text));
        }
    }
    match sub {
        "status" | "log" | "diff" | "show" | "rev-parse" | "ls-files" | "blame" | "describe"
        | "shortlog" | "grep" | "cat-file" | "ls-tree" | "rev-list" | "for-each-ref"
        | "show-ref" | "name-rev" | "whatchanged" | "check-ignore" | "count-objects"
        | "version" | "help" | "var" | "merge-base" | "cherry" | "show-branch" | "range-diff"
        | "check-attr" | "check-ref-format" | "verify-commit" | "verify-tag" | "fsck"
        | "annotate" | "difftool_" => {
            let mut e = Effect::ro(format!("git {sub} reads the repository"));
            e.reads.push(repo.clone());
            // `git log/diff --output=FILE` writes FILE.
            for (i, a) in rest.iter().enumerate() {
                let file = if let Some(f) = a.text.strip_prefix("--output=") {
                    Some(Arg {
                        text: f.to_string(),
                        ..a.clone()
                    })
                } else if a.text == "--output" {
                    rest.get(i + 1).cloned()
                } else {
                    None
                };
                if let Some(f) = file {
                    let mut w = Effect::new(
                        Category::Write,
                        Risk::Low,
                        format!("git {sub} --output writes a file"),
                    );
                    w.writes.push((cx.target(&f), WriteKind::File));
                    e.merge(w);
                }
            }
            e
        }
        "branch" | "tag" => {
            if rest.iter().any(|a| {
                matches!(
                    a.text.as_str(),
                    "-d" | "-D"
                        | "--delete"
                        | "-m"
                        | "-M"
                        | "-c"
                        | "-C"
                        | "-a"
                        | "-s"
                        | "-f"
                        | "--force"
                        | "-u"
                        | "--set-upstream-to"
                        | "--unset-upstream"
                        | "--edit-description"
                )
            }) || rest.iter().any(|a| !a.text.starts_with('-'))
                && !rest.iter().any(|a| {
                    matches!(
                        a.text.as_str(),
                        "-l" | "--list"
                            | "--contains"
                            | "--merged"
                            | "--no-merged"
                            | "--points-at"
                            | "-v"
                            | "-vv"
                            | "-a"
                            | "-r"
                    )
                })
            {
                write("changes refs")
            } else {
                Effect::ro(format!("git {sub} lists"))
            }
        }
        "remote" => {
            let s2 = rest
                .iter()
                .find(|a| !a.text.starts_with('-'))
                .map(|a| a.text.as_str())
                .unwrap_or("");
            match s2 {
                "" | "show" | "get-url" => Effect::ro("git remote lists"),
                "update" | "prune" => {
                    let mut e = download("git remote update fetches".into());
                    e.writes.push((repo.clone(), WriteKind::Tree));
                    e
                }
                _ => write("changes remotes"),
            }
        }
        "config" => {
            if rest.iter().any(|a| {
                matches!(
                    a.text.as_str(),
                    "--get"
                        | "--get-all"
                        | "--get-regexp"
                        | "-l"
                        | "--list"
                        | "--show-origin"
                        | "--show-scope"
                        | "get"
                        | "list"
                        | "--name-only"
                )
            }) {
                Effect::ro("git config reads")
            } else {
                Effect::unknown("git config sets configuration that can run programs later")
            }
        }
        "stash" => {
            let s2 = rest.first().map(|a| a.text.as_str()).unwrap_or("push");
            if matches!(s2, "list" | "show") {
                Effect::ro("git stash list")
            } else {
                write("changes the stash and the working tree")
            }
        }
        "worktree" => {
            let s2 = rest.first().map(|a| a.text.as_str()).unwrap_or("list");
            if s2 == "list" {
                Effect::ro("git worktree list")
            } else {
                Effect::new(Category::Write, Risk::Medium, format!("git worktree {s2}"))
                    .wide_write_if(true)
            }
        }
        "reflog" => {
            if rest
                .first()
                .is_none_or(|a| a.text == "show" || a.text.starts_with('-'))
            {
                Effect::ro("git reflog")
            } else {
                write("changes the reflog")
            }
        }
        "notes" => {
            if rest
                .first()
                .is_none_or(|a| a.text == "list" || a.text == "show")
            {
                Effect::ro("git notes")
            } else {
                write("changes notes")
            }
        }
        "add" | "commit" | "checkout" | "switch" | "restore" | "merge" | "rebase"
        | "cherry-pick" | "revert" | "mv" | "init" | "apply" | "am" | "gc" | "prune" | "repack"
        | "bisect" | "update-index" | "update-ref" | "symbolic-ref" | "read-tree"
        | "write-tree" | "commit-tree" | "hash-object" | "sparse-checkout" | "maintenance"
        | "pack-refs" | "mktag" | "mktree" | "format-patch" | "bundle" | "replace" | "rerere"
        | "lfs" => {
            if sub == "rebase"
                && rest.iter().any(|a| {
                    a.text.starts_with("-x")
                        || a.text.starts_with("--exec")
                        || a.text == "-i"
                        || a.text == "--interactive"
                })
            {
                return Effect::unknown("git rebase --exec / -i runs commands");
            }
            if sub == "bisect" && rest.first().is_some_and(|a| a.text == "run") {
                return Effect::unknown("git bisect run runs commands");
            }
            if sub == "init" {
                let mut e =
                    Effect::new(Category::Write, Risk::Low, "git init creates a repository");
                let target = rest
                    .iter()
                    .find(|a| !a.text.starts_with('-'))
                    .map(|a| cx.target(a))
                    .unwrap_or_else(|| repo.clone());
                e.writes.push((
                    match target {
                        Target::Path(p) => Target::Beneath(p),
                        o => o,
                    },
                    WriteKind::Tree,
                ));
                return e;
            }
            write("changes the repository")
        }
        "reset" => {
            let mut e = write("moves HEAD");
            if has("--hard") || has("--merge") || has("--keep") {
                e.raise(Risk::Medium);
                e.reason = "git reset --hard discards changes".into();
            }
            e
        }
        "rm" | "clean" => {
            if sub == "clean" && (has("-n") || has("--dry-run")) {
                return Effect::ro("git clean -n");
            }
            let mut e = Effect::new(
                Category::Delete,
                Risk::High,
                format!("git {sub} deletes files"),
            );
            e.deletes.push(repo.clone());
            e.recursive = sub == "clean" || has("-r");
            e
        }
        "fetch" | "pull" | "clone" | "submodule" => {
            let mut e = download(format!("git {sub} fetches from a remote"));
            if sub == "clone" {
                let ops: Vec<&Arg> = rest.iter().filter(|a| !a.text.starts_with('-')).collect();
                let target = match ops.get(1) {
                    Some(d) => cx.target(d),
                    None => cx.cwd_target(),
                };
                e.writes.push((
                    match target {
                        Target::Path(p) => Target::Beneath(p),
                        o => o,
                    },
                    WriteKind::Tree,
                ));
                if rest.iter().any(|a| {
                    a.text.starts_with("--template")
                        || a.text.starts_with("-u")
                        || a.text.starts_with("--upload-pack")
                        || a.text.starts_with("--config")
                        || a.text == "-c"
                }) {
                    return Effect::unknown("git clone with a template, upload-pack or config");
                }
            } else {
                e.writes.push((repo.clone(), WriteKind::Tree));
            }
            e
        }
        "push" | "ls-remote" | "request-pull" | "send-email" => {
            if sub == "ls-remote" {
                network("git ls-remote queries a remote".into())
            } else {
                Effect::new(
                    Category::Network,
                    Risk::Medium,
                    format!("git {sub} sends to a remote"),
                )
                .net()
            }
        }
        "archive" => {
            let o = Opts::parse(
                rest,
                &[
                    "-o", "--output", "--format", "--prefix", "--remote", "--exec",
                ],
            );
            if o.has_value(&["--remote", "--exec"]) {
                return Effect::unknown("git archive --remote/--exec");
            }
            let mut e = Effect::ro("git archive writes an archive");
            for w in o.values_of(&["-o", "--output"]) {
                let mut x = Effect::new(Category::Write, Risk::Low, "git archive -o writes a file");
                x.writes.push((cx.target(&w), WriteKind::File));
                e.merge(x);
            }
            e
        }
        _ => Effect::unknown(format!(
            "git {sub} (an alias or an uncatalogued git command)"
        )),
    }
}

trait WideIf {
    fn wide_write_if(self, b: bool) -> Effect;
}

impl WideIf for Effect {
    fn wide_write_if(mut self, b: bool) -> Effect {
        self.wide_write = b;
        self
    }
}
