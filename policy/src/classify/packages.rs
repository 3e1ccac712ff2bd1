//! Package managers, language package tools and builds.

use super::args::Opts;
use super::system::{package, package_meta, subcommand, PKG_CAPS};
use super::{Cx, Effect, WriteKind};
use crate::shell::Arg;
use crate::types::{Category, Risk};

pub(super) fn apt(name: &str, args: &[Arg]) -> Effect {
    let o = Opts::parse(
        args,
        &[
            "-o",
            "--option",
            "-c",
            "--config-file",
            "-t",
            "--target-release",
            "-a",
            "--host-architecture",
            "-P",
            "--build-profiles",
        ],
    );
    for v in o.values_of(&["-o", "--option"]) {
        let t = v.text.to_ascii_lowercase();
        if !v.literal
            || [
                "invoke",
                "hook",
                "pre-",
                "post-",
                "exec",
                "binary",
                "dir",
                "method",
                "::options",
                "script",
            ]
            .iter()
            .any(|k| t.contains(k))
                && !t.starts_with("dpkg::options::=--force-conf")
        {
            return Effect::unknown(format!("{name} -o {} can run commands", v.text));
        }
    }
    if o.has_value(&["-c", "--config-file"]) {
        return Effect::unknown(format!("{name} with a configuration file"));
    }
    let simulate = o.has_any(
        "s",
        &[
            "simulate",
            "just-print",
            "dry-run",
            "recon",
            "no-act",
            "print-uris",
        ],
    );
    let sub = o.operands.first().and_then(|a| a.plain());
    match sub {
        None => Effect::ro(format!("{name} usage")),
        Some(
            "list" | "search" | "show" | "showsrc" | "policy" | "depends" | "rdepends" | "madison"
            | "help" | "moo" | "check" | "indextargets" | "version" | "why" | "why-not"
            | "versions",
        ) => Effect::ro(format!("{name} queries packages")),
        Some("changelog") => Effect::ro(format!("{name} changelog")).net(),
        Some(_) if simulate => Effect::ro(format!("{name} simulates")),
        Some("update") => package_meta(format!("{name} update refreshes package lists")).net(),
        Some("clean" | "autoclean") => package_meta(format!("{name} cleans the cache")),
        Some("download" | "source") => {
            let mut e = Effect::new(
                Category::Download,
                Risk::Medium,
                format!("{name} {} fetches into the cwd", sub.unwrap_or("")),
            )
            .net();
            e.writes
                .push((crate::paths::Target::Unresolved, WriteKind::Tree));
            e
        }
        Some("edit-sources") => super::files::editor("apt edit-sources"),
        Some(s) => {
            if o.operands
                .iter()
                .skip(1)
                .any(|a| a.plain().is_some_and(|p| p.starts_with("sysward")))
                && matches!(s, "remove" | "purge" | "autoremove")
            {
                return Effect::critical(Category::Package, "removes sysward itself");
            }
            if matches!(s, "install" | "reinstall")
                && o.operands
                    .iter()
                    .skip(1)
                    .any(|a| a.plain().is_some_and(names_sysward))
            {
                return Effect::critical(Category::Package, INSTALLS_ITSELF);
            }
            package(format!("{name} {s}")).net()
        }
    }
}

/// Why sysward never installs or upgrades itself from an action: its own
/// files are read-only there, so dpkg would stop half-way and leave the
/// package half-installed.
const INSTALLS_ITSELF: &str = "installs or upgrades sysward itself, which cannot complete inside an action (sysward's own files are read-only there: dpkg would stop half-way); run apt-get or dpkg as root outside sysward";

/// A package name or .deb path that is sysward (`sysward`, `sysward=1.2`,
/// `./sysward_1.2_amd64.deb`).
fn names_sysward(p: &str) -> bool {
    let file = p.rsplit('/').next().unwrap_or(p);
    file == "sysward"
        || file.starts_with("sysward=")
        || file.starts_with("sysward:")
        || (file.starts_with("sysward_") && file.ends_with(".deb"))
}

pub(super) fn dpkg(args: &[Arg]) -> Effect {
    for a in args {
        let t = a.text.as_str();
        if matches!(
            t,
            "-l" | "--list"
                | "-L"
                | "--listfiles"
                | "-s"
                | "--status"
                | "-S"
                | "--search"
                | "-p"
                | "--print-avail"
                | "--get-selections"
                | "-c"
                | "--contents"
                | "-I"
                | "--info"
                | "--print-architecture"
                | "--print-foreign-architectures"
                | "--version"
                | "-C"
                | "--audit"
                | "-V"
                | "--verify"
                | "--compare-versions"
                | "--help"
                | "-f"
                | "--field"
        ) || t.starts_with("--list")
        {
            return Effect::ro("dpkg queries");
        }
        if t == "--simulate" || t == "--dry-run" || t == "--no-act" {
            return Effect::ro("dpkg simulates");
        }
        if t.starts_with("--admindir") || t.starts_with("--instdir") || t.starts_with("--root") {
            return Effect::unknown("dpkg with another root");
        }
        if (t == "-r" || t == "-P" || t == "--remove" || t == "--purge")
            && args
                .iter()
                .any(|x| x.plain().is_some_and(|p| p.starts_with("sysward")))
        {
            return Effect::critical(Category::Package, "removes sysward itself");
        }
        if matches!(t, "-i" | "--install" | "--unpack" | "-x" | "--extract")
            && args.iter().any(|x| x.plain().is_some_and(names_sysward))
        {
            return Effect::critical(Category::Package, INSTALLS_ITSELF);
        }
    }
    package("dpkg installs, removes or configures packages".into())
}

pub(super) fn pip(name: &str, args: &[Arg]) -> Effect {
    let (sub, o) = subcommand(
        args,
        &[
            "-r",
            "--requirement",
            "-c",
            "--constraint",
            "-e",
            "--editable",
            "-t",
            "--target",
            "--prefix",
            "--root",
            "-i",
            "--index-url",
            "--extra-index-url",
            "-f",
            "--find-links",
            "--log",
            "--cache-dir",
            "--python",
            "--src",
            "-d",
            "--dest",
        ],
    );
    match sub {
        None => Effect::ro(format!("{name} usage")),
        Some(
            "list" | "show" | "freeze" | "check" | "help" | "debug" | "inspect" | "hash"
            | "--version",
        ) => Effect::ro(format!("{name} queries")),
        Some("config")
            if o.operands
                .get(1)
                .is_some_and(|a| matches!(a.text.as_str(), "list" | "get" | "debug")) =>
        {
            Effect::ro(format!("{name} config"))
        }
        Some("search" | "index") => Effect::ro(format!("{name} searches")).net(),
        Some("download" | "wheel") => {
            let mut e = Effect::new(
                Category::Download,
                Risk::Medium,
                format!("{name} {} fetches packages", sub.unwrap_or("")),
            )
            .net();
            e.writes
                .push((crate::paths::Target::Unresolved, WriteKind::Tree));
            e
        }
        Some("cache") => package_meta(format!("{name} cache")),
        Some(s) => package(format!(
            "{name} {s} installs packages (and runs their build code)"
        ))
        .net(),
    }
}

pub fn python_module(args: &[Arg], _cx: &Cx<'_>) -> Option<Effect> {
    let pos = args.iter().position(|a| a.text == "-m")?;
    let module = args.get(pos + 1)?.plain()?;
    match module {
        "pip" => Some(pip("python -m pip", &args[pos + 2..])),
        "json.tool" => Some(Effect::ro("python -m json.tool formats JSON")),
        "venv" | "virtualenv" => {
            let mut e = Effect::new(
                Category::Write,
                Risk::Low,
                "python -m venv creates an environment",
            );
            if let Some(d) = args.get(pos + 2) {
                e.writes.push((_cx.target(d), WriteKind::Tree));
            }
            Some(e)
        }
        _ => None,
    }
}

pub(super) fn lang_pkg(name: &str, args: &[Arg], cx: &Cx<'_>) -> Effect {
    let (sub, o) = subcommand(
        args,
        &[
            "--prefix",
            "-C",
            "--cwd",
            "--registry",
            "--cache",
            "-w",
            "--workspace",
        ],
    );
    let global = o.has('g') || o.has_long("global") || o.has_long("system");
    let ro = [
        "list",
        "ls",
        "ll",
        "la",
        "view",
        "info",
        "show",
        "search",
        "outdated",
        "config",
        "get",
        "help",
        "doctor",
        "explain",
        "why",
        "root",
        "bin",
        "prefix",
        "version",
        "--version",
        "-v",
        "audit",
        "owner",
        "query",
        "whoami",
        "licenses",
        "env",
        "environment",
        "contents",
        "dependency",
        "specification",
        "which",
    ];
    match sub {
        None => Effect::ro(format!("{name} usage")),
        Some(s)
            if ro.contains(&s)
                && !args
                    .iter()
                    .any(|a| a.text == "set" || a.text == "fix" || a.text == "delete") =>
        {
            Effect::ro(format!("{name} {s}"))
        }
        Some(
            "run" | "run-script" | "exec" | "start" | "test" | "t" | "x" | "dlx" | "create"
            | "init_",
        ) => Effect::unknown(format!("{name} {} runs project scripts", sub.unwrap_or(""))),
        Some(s) => {
            if global || matches!(name, "gem" | "cpan" | "cpanm" | "pipx" | "luarocks") {
                package(format!("{name} {s} installs packages system-wide")).net()
            } else {
                let mut e = Effect::new(
                    Category::Package,
                    Risk::High,
                    format!("{name} {s} installs into the project (and runs install scripts)"),
                )
                .net();
                e.writes.push((cx.cwd_target(), WriteKind::Tree));
                e
            }
        }
    }
}

pub(super) fn build(name: &str, args: &[Arg], cx: &Cx<'_>) -> Effect {
    if args.iter().any(|a| {
        a.text == "--version" || a.text == "-V" || a.text == "version" || a.text == "--help"
    }) && args.len() == 1
    {
        return Effect::ro(format!("{name} --version"));
    }
    if matches!(name, "make" | "gmake")
        && args.iter().any(|a| {
            a.text.starts_with("--eval")
                || a.text.starts_with("-E")
                || a.text.starts_with("SHELL=")
                || a.text.starts_with("-f")
                || a.text.starts_with("--file")
                || a.text.starts_with("--makefile")
        })
    {
        return Effect::unknown(format!("{name} with --eval, SHELL= or another makefile"));
    }
    let sub = args
        .iter()
        .find(|a| !a.text.starts_with('-'))
        .and_then(|a| a.plain())
        .unwrap_or("");
    if matches!(name, "go" | "cargo" | "dotnet") {
        match sub {
            "version" | "env" | "list" | "doc" | "help" | "tree" | "metadata"
            | "locate-project" | "pkgid" | "verify-project" | "search" | "info" => {
                return Effect::ro(format!("{name} {sub}"))
            }
            "run" | "generate" | "tool" | "exec" | "watch" => {
                return Effect::unknown(format!("{name} {sub} runs code"))
            }
            "install" | "get" | "uninstall" | "publish" | "login" | "owner" | "yank" => {
                return Effect::new(Category::Package, Risk::High, format!("{name} {sub}"))
                    .net()
                    .wide()
            }
            _ => {}
        }
    }
    if matches!(name, "make" | "gmake")
        && args
            .iter()
            .any(|a| a.text == "install" || a.text == "uninstall")
    {
        return Effect::new(
            Category::Package,
            Risk::High,
            format!("{name} install writes system-wide"),
        )
        .with_caps(PKG_CAPS)
        .wide();
    }
    if matches!(name, "cmake") && args.iter().any(|a| a.text == "--install" || a.text == "-P") {
        return Effect::new(
            Category::Package,
            Risk::High,
            "cmake --install writes system-wide",
        )
        .with_caps(PKG_CAPS)
        .wide();
    }
    let mut dir = cx.cwd_target();
    for (i, a) in args.iter().enumerate() {
        if (a.text == "-C" || a.text == "--directory") && name != "tsc" {
            if let Some(d) = args.get(i + 1) {
                dir = match cx.target(d) {
                    crate::paths::Target::Path(p) => crate::paths::Target::Beneath(p),
                    other => other,
                };
            }
        }
    }
    let mut e = Effect::new(
        Category::Write,
        Risk::Low,
        format!("{name} builds in its directory (runs the build's own steps)"),
    );
    e.writes.push((dir, WriteKind::Tree));
    e
}
