//! Network tools, git, openssl, containers and clusters.

use super::args::Opts;
use super::{Cx, Effect, WriteKind};
use crate::paths::Target;
use crate::shell::Arg;
use crate::types::{Category, Risk};

fn network(reason: String) -> Effect {
    Effect::new(Category::Network, Risk::Low, reason).net()
}

fn download(reason: String) -> Effect {
    Effect::new(Category::Download, Risk::Medium, reason).net()
}

pub fn classify(name: &str, args: &[Arg], cx: &mut Cx<'_>) -> Option<Effect> {
    Some(match name {
        "ping" | "ping6" | "traceroute" | "traceroute6" | "tracepath" | "mtr" | "arping"
        | "fping" => network(format!("{name} probes the network")).with_caps(&["CAP_NET_RAW"]),
        "dig" | "host" | "nslookup" | "whois" | "drill" | "delv" | "kdig" | "ssh-keyscan"
        | "ntpdig" => {
            let mut e = network(format!("{name} queries the network"));
            let o = Opts::parse(
                args,
                &["-f", "-k", "-b", "-p", "-q", "-t", "-c", "-x", "-y"],
            );
            for f in o.values_of(&["-f", "-k"]) {
                e.reads.push(cx.target(&f));
            }
            e
        }
        "nmap" | "masscan" | "zmap" => {
            if args.iter().any(|a| {
                a.text.starts_with("--script")
                    || a.text.starts_with("-o")
                    || a.text == "-sC"
                    || a.text == "-A"
                    || a.text.starts_with("--resume")
                    || a.text.starts_with("--datadir")
            }) {
                Effect::unknown(format!("{name} runs scripts or writes files"))
            } else {
                Effect::new(
                    Category::Network,
                    Risk::Medium,
                    format!("{name} scans the network"),
                )
                .net()
                .with_caps(&["CAP_NET_RAW"])
            }
        }
        "tcpdump" | "tshark" | "ngrep" => {
            let o = Opts::parse(
                args,
                &[
                    "-w", "-r", "-i", "-c", "-s", "-C", "-G", "-W", "-z", "-Z", "-F", "-y", "-E",
                    "-T", "-B", "-M",
                ],
            );
            if o.has_value(&["-z"]) {
                return Some(Effect::unknown(format!(
                    "{name} -z runs a command per file"
                )));
            }
            let mut e = Effect::new(
                Category::Network,
                Risk::Medium,
                format!("{name} captures traffic"),
            )
            .with_caps(&["CAP_NET_RAW", "CAP_NET_ADMIN"]);
            for w in o.values_of(&["-w"]) {
                e.writes.push((cx.target(&w), WriteKind::File));
            }
            for r in o.values_of(&["-r", "-F"]) {
                e.reads.push(cx.target(&r));
            }
            e
        }
        "curl" => curl(args, cx),
        "wget" | "wget2" => wget(name, args, cx),
        "aria2c" | "axel" | "lftpget" | "http" | "https" | "xh" | "httpie" => {
            let mut e = download(format!("{name} downloads into the cwd"));
            e.writes.push((cx.cwd_target(), WriteKind::Tree));
            e
        }
        "ssh" | "autossh" | "mosh" => ssh(name, args, cx),
        "scp" | "rsync" | "sftp" => copy_remote(name, args, cx),
        "ssh-copy-id" => Effect::new(
            Category::Network,
            Risk::Medium,
            "ssh-copy-id installs a key on another host",
        )
        .net(),
        "ftp" | "lftp" | "tftp" | "telnet" | "smbclient" => {
            if args
                .iter()
                .any(|a| a.text == "-c" || a.text == "-f" || a.text == "-e" || a.text == "-s")
            {
                Effect::unknown(format!("{name} runs a command script"))
            } else {
                Effect::new(
                    Category::Network,
                    Risk::Medium,
                    format!("{name} connects to another host"),
                )
                .net()
            }
        }
        "nc" | "ncat" | "netcat" | "nc.openbsd" | "nc.traditional" => {
            for a in args {
                let t = a.text.as_str();
                if t == "-e"
                    || t == "-c"
                    || t.starts_with("--exec")
                    || t.starts_with("--sh-exec")
                    || t.starts_with("--lua-exec")
                    || (t.starts_with('-')
                        && !t.starts_with("--")
                        && (t.contains('e') || t.contains('c'))
                        && t.len() > 2)
                {
                    return Some(Effect::evasive(format!(
                        "{name} -e/-c runs a command on a socket"
                    )));
                }
            }
            let o = Opts::parse(
                args,
                &[
                    "-o", "--output", "-p", "-s", "-w", "-i", "-q", "-x", "-X", "-P", "-T", "-I",
                    "-O", "-V", "-W", "-M", "-m",
                ],
            );
            let mut e = if o.has('l') || o.has_long("listen") {
                Effect::new(
                    Category::Network,
                    Risk::Medium,
                    format!("{name} listens on a port"),
                )
                .net()
            } else {
                network(format!("{name} opens a connection"))
            };
            for w in o.values_of(&["-o", "--output"]) {
                e.writes.push((cx.target(&w), WriteKind::File));
            }
            e
        }
        "git" => git(args, cx),
        _ => return None,
    })
}

fn curl(args: &[Arg], cx: &Cx<'_>) -> Effect {
    let vals = [
        "-o",
        "--output",
        "-D",
        "--dump-header",
        "-c",
        "--cookie-jar",
        "--trace",
        "--trace-ascii",
        "--libcurl",
        "--stderr",
        "-K",
        "--config",
        "-T",
        "--upload-file",
        "-d",
        "--data",
        "--data-binary",
        "--data-raw",
        "--data-urlencode",
        "-F",
        "--form",
        "-H",
        "--header",
        "-u",
        "--user",
        "-X",
        "--request",
        "-A",
        "--user-agent",
        "-e",
        "--referer",
        "-x",
        "--proxy",
        "-m",
        "--max-time",
        "--connect-timeout",
        "-w",
        "--write-out",
        "--output-dir",
        "-b",
        "--cookie",
        "--cacert",
        "--capath",
        "--cert",
        "--key",
        "-E",
        "--resolve",
        "--retry",
        "-r",
        "--range",
        "-C",
        "--continue-at",
        "-Y",
        "-y",
        "--interface",
        "--limit-rate",
        "--url",
        "-z",
        "--time-cond",
        "--etag-save",
        "--etag-compare",
        "--hsts",
        "--alt-svc",
        "--netrc-file",
        "-U",
        "--proxy-user",
        "--max-filesize",
        "--json",
        "--variable",
        "--expand-url",
        "--create-file-mode",
        "-Q",
        "--quote",
    ];
    let o = Opts::parse(args, &vals);
    if o.has_value(&["-K", "--config"]) {
        return Effect::unknown("curl -K reads options from a file");
    }
    let mut e = network("curl fetches to its output".to_string());
    let mut writes = Vec::new();
    for w in o.values_of(&[
        "-o",
        "--output",
        "-D",
        "--dump-header",
        "-c",
        "--cookie-jar",
        "--trace",
        "--trace-ascii",
        "--libcurl",
        "--stderr",
        "--etag-save",
        "--hsts",
        "--alt-svc",
    ]) {
        if w.text == "-"
            || w.text == "/dev/null"
            || w.text == "/dev/stdout"
            || w.text == "/dev/stderr"
        {
            continue;
        }
        writes.push(cx.target(&w));
    }
    if o.has('O') || o.has_long("remote-name") || o.has_long("remote-name-all") || o.has('J') {
        let dir = o
            .values_of(&["--output-dir"])
            .first()
            .map(|d| cx.target(d))
            .unwrap_or_else(|| cx.cwd_target());
        writes.push(match dir {
            Target::Path(p) => Target::Beneath(p),
            other => other,
        });
    }
    for r in o.values_of(&[
        "-T",
        "--upload-file",
        "--netrc-file",
        "--cacert",
        "--cert",
        "--key",
        "-b",
        "--cookie",
    ]) {
        e.reads.push(cx.target(&r));
    }
    if o.has_value(&["-T", "--upload-file"]) {
        e.raise(Risk::Medium);
        e.reason = "curl uploads a local file".to_string();
    }
    for d in o.values_of(&[
        "-d",
        "--data",
        "--data-binary",
        "--data-urlencode",
        "-F",
        "--form",
        "--json",
    ]) {
        if let Some(p) = d.text.split('@').nth(1).filter(|_| d.text.contains('@')) {
            e.reads.push(cx.target(&Arg {
                text: p.trim_start_matches('<').to_string(),
                ..d.clone()
            }));
            e.raise(Risk::Medium);
            e.reason = "curl sends a local file".to_string();
        }
    }
    for u in o.operands.iter().chain(
        o.values
            .iter()
            .filter(|(k, _)| k == "--url")
            .map(|(_, a)| a),
    ) {
        let t = u.text.to_ascii_lowercase();
        if t.starts_with("file:") {
            let path = u
                .text
                .split_once(':')
                .map_or("", |(_, p)| p)
                .trim_start_matches("//");
            let path = if path.starts_with('/') {
                path.to_string()
            } else {
                format!("/{path}")
            };
            e.reads.push(cx.target(&Arg::lit(&path)));
        }
    }
    if !writes.is_empty() {
        let mut d = download("curl saves what it fetches".to_string());
        for w in writes {
            d.writes.push((w, WriteKind::File));
        }
        e.merge(d);
    }
    e
}

fn wget(name: &str, args: &[Arg], cx: &Cx<'_>) -> Effect {
    let vals = [
        "-O",
        "--output-document",
        "-o",
        "--output-file",
        "-a",
        "--append-output",
        "-P",
        "--directory-prefix",
        "-i",
        "--input-file",
        "-e",
        "--execute",
        "-U",
        "--user-agent",
        "--header",
        "--post-data",
        "--post-file",
        "--body-file",
        "-t",
        "--tries",
        "-T",
        "--timeout",
        "-w",
        "--wait",
        "--user",
        "--password",
        "--ca-certificate",
        "--certificate",
        "--private-key",
        "--load-cookies",
        "--save-cookies",
        "-Q",
        "--quota",
        "--limit-rate",
        "-l",
        "--level",
        "-A",
        "--accept",
        "-R",
        "--reject",
        "-D",
        "--domains",
        "--config",
        "--method",
        "--body-data",
        "--use-askpass",
        "-B",
        "--base",
        "--bind-address",
    ];
    let o = Opts::parse(args, &vals);
    if o.has_value(&["-e", "--execute", "--config", "--use-askpass"]) {
        return Effect::unknown(format!("{name} -e/--config runs wgetrc commands"));
    }
    if o.has_long("spider") {
        return network(format!("{name} --spider checks a URL"));
    }
    let mut e = download(format!("{name} downloads"));
    let out = o.values_of(&["-O", "--output-document"]);
    if let Some(w) = out.first() {
        if w.text == "-" {
            e = network(format!("{name} -O - fetches to its output"));
        } else {
            e.writes.push((cx.target(w), WriteKind::File));
        }
    } else {
        let dir = o
            .values_of(&["-P", "--directory-prefix"])
            .first()
            .map(|d| cx.target(d))
            .unwrap_or_else(|| cx.cwd_target());
        e.writes.push((
            match dir {
                Target::Path(p) => Target::Beneath(p),
                other => other,
            },
            WriteKind::Tree,
        ));
    }
    for w in o.values_of(&[
        "-o",
        "--output-file",
        "-a",
        "--append-output",
        "--save-cookies",
    ]) {
        e.writes.push((cx.target(&w), WriteKind::File));
    }
    for r in o.values_of(&[
        "-i",
        "--input-file",
        "--post-file",
        "--body-file",
        "--load-cookies",
        "--certificate",
        "--private-key",
    ]) {
        e.reads.push(cx.target(&r));
    }
    e
}

fn ssh_option_runs_code(v: &str) -> bool {
    let l = v.to_ascii_lowercase().replace(['=', ' '], "");
    [
        "proxycommand",
        "localcommand",
        "permitlocalcommand",
        "knownhostscommand",
        "match",
        "include",
        "remotecommand",
        "pkcs11provider",
        "securitykeyprovider",
        "controlpath",
        "controlmaster",
        "sessiontype",
        "stdinnull",
        "forkafterauthentication",
        "proxyusefdpass",
    ]
    .iter()
    .any(|k| l.starts_with(k))
}

fn ssh(name: &str, args: &[Arg], cx: &Cx<'_>) -> Effect {
    let vals = [
        "-b", "-B", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o",
        "-p", "-Q", "-R", "-S", "-W", "-w", "-P",
    ];
    let o = Opts::parse(args, &vals);
    for v in o.values_of(&["-o"]) {
        if !v.literal || ssh_option_runs_code(&v.text) {
            return Effect::unknown(format!("{name} -o {} can run local commands", v.text));
        }
    }
    if o.has_value(&["-F", "-I", "-S", "-O"]) {
        return Effect::unknown(format!(
            "{name} with a config file, PKCS#11 provider or control socket"
        ));
    }
    let mut e = network(format!("{name} connects to another host"));
    for k in o.values_of(&["-i"]) {
        e.reads.push(cx.target(&k));
    }
    for w in o.values_of(&["-E"]) {
        e.writes.push((cx.target(&w), WriteKind::File));
    }
    if o.has_value(&["-L", "-R", "-D", "-W", "-w"]) {
        e.raise(Risk::Medium);
        e.reason = format!("{name} forwards ports");
    }
    if o.operands.len() > 1 {
        e.raise(Risk::Medium);
        e.reason = format!("{name} runs a command on another host");
    }
    e
}

fn is_remote(t: &str) -> bool {
    if t.starts_with('/') || t.starts_with("./") {
        return false;
    }
    if t.starts_with("rsync://") || t.starts_with("scp://") || t.starts_with("sftp://") {
        return true;
    }
    match t.find(':') {
        Some(c) => !t[..c].contains('/'),
        None => false,
    }
}

fn copy_remote(name: &str, args: &[Arg], cx: &Cx<'_>) -> Effect {
    let vals: &[&str] = match name {
        "scp" => &["-c", "-F", "-i", "-J", "-l", "-o", "-P", "-S", "-D", "-X"],
        "sftp" => &[
            "-B", "-b", "-c", "-D", "-F", "-i", "-J", "-l", "-o", "-P", "-R", "-S", "-s", "-X",
        ],
        _ => &[
            "-e",
            "--rsh",
            "--rsync-path",
            "--log-file",
            "--files-from",
            "--exclude-from",
            "--include-from",
            "--exclude",
            "--include",
            "-f",
            "--filter",
            "--write-batch",
            "--only-write-batch",
            "--read-batch",
            "--password-file",
            "--backup-dir",
            "--suffix",
            "--partial-dir",
            "--temp-dir",
            "-T",
            "--compare-dest",
            "--copy-dest",
            "--link-dest",
            "--chmod",
            "--chown",
            "--usermap",
            "--groupmap",
            "-B",
            "--block-size",
            "--max-size",
            "--min-size",
            "--timeout",
            "--contimeout",
            "--port",
            "--bwlimit",
            "--info",
            "--debug",
            "--out-format",
            "--log-file-format",
            "--iconv",
            "--sockopts",
            "--outbuf",
            "--modify-window",
            "--max-delete",
            "--checksum-choice",
            "--compress-choice",
            "--compress-level",
            "--skip-compress",
            "--address",
        ],
    };
    let o = Opts::parse(args, vals);
    for v in o.values_of(&["-o"]) {
        if !v.literal || ssh_option_runs_code(&v.text) {
            return Effect::unknown(format!("{name} -o {} can run local commands", v.text));
        }
    }
    if o.has_value(&["-F", "-S", "-b", "-D", "-s"]) && name != "rsync" {
        return Effect::unknown(format!("{name} with a config file, batch file or program"));
    }
    if name == "rsync" {
        for v in o.values_of(&["-e", "--rsh"]) {
            let ok = v.plain().is_some_and(|t| {
                let mut w = t.split_whitespace();
                matches!(w.next(), Some("ssh"))
                    && w.all(|x| {
                        !x.contains("Command") && !x.starts_with("-F") && !x.contains("Match")
                    })
            });
            if !ok {
                return Effect::unknown("rsync -e runs a chosen remote shell");
            }
        }
        if o.has_value(&["--read-batch", "--only-write-batch"]) {
            return Effect::unknown("rsync batch mode");
        }
    }
    if name == "sftp" {
        return Effect::new(
            Category::Network,
            Risk::Medium,
            "sftp connects to another host",
        )
        .net();
    }
    let mut ops: Vec<&Arg> = o.operands.clone();
    let Some(dest) = ops.pop() else {
        return Effect::ro(format!("{name} usage"));
    };
    let dest_remote = dest.plain().is_some_and(is_remote);
    let any_remote_src = ops.iter().any(|a| a.plain().is_some_and(is_remote));
    let deleting = args
        .iter()
        .any(|a| a.text.starts_with("--delete") || a.text == "--remove-source-files");
    let mut e = if dest_remote {
        let mut e = Effect::new(
            Category::Network,
            Risk::Medium,
            format!("{name} sends files to another host"),
        )
        .net();
        for s in &ops {
            e.reads.push(cx.target(s));
        }
        e
    } else if any_remote_src {
        let mut e = download(format!("{name} fetches files from another host"));
        e.writes.push((cx.target(dest), WriteKind::Tree));
        e
    } else {
        let mut e = Effect::new(
            Category::Write,
            Risk::Low,
            format!("{name} copies files locally"),
        );
        for s in &ops {
            e.reads.push(cx.target(s));
        }
        e.writes.push((cx.target(dest), WriteKind::Tree));
        e
    };
    if deleting {
        let mut d = Effect::new(
            Category::Delete,
            Risk::High,
            format!("{name} --delete removes files"),
        );
        d.recursive = true;
        if !dest_remote {
            d.deletes.push(match cx.target(dest) {
                Target::Path(p) => Target::Beneath(p),
                other => other,
            });
        }
        if args.iter().any(|a| a.text == "--remove-source-files") {
            for s in &ops {
                if !s.plain().is_some_and(is_remote) {
                    d.deletes.push(cx.target(s));
                }
            }
        }
        e.merge(d);
    }
    for w in o.values_of(&["--log-file", "--write-batch"]) {
        e.writes.push((cx.target(&w), WriteKind::File));
    }
    for r in o.values_of(&[
        "--files-from",
        "--exclude-from",
        "--include-from",
        "--password-file",
        "-i",
    ]) {
        e.reads.push(cx.target(&r));
    }
    e
}

fn git(args: &[Arg], cx: &mut Cx<'_>) -> Effect {
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

pub fn openssl(args: &[Arg], cx: &Cx<'_>) -> Effect {
    let sub = args.first().and_then(Arg::plain).unwrap_or("help");
    let rest = args.get(1..).unwrap_or(&[]);
    for a in rest {
        if a.text.starts_with("-engine") || a.text.starts_with("-provider") {
            return Effect::unknown("openssl loads an engine or provider");
        }
    }
    // openssl options are single-dash words, each taking at most one value.
    let value_opts = [
        "-in",
        "-out",
        "-keyout",
        "-CAfile",
        "-CApath",
        "-connect",
        "-servername",
        "-key",
        "-cert",
        "-CA",
        "-CAkey",
        "-config",
        "-extfile",
        "-passin",
        "-passout",
        "-inkey",
        "-signkey",
        "-certfile",
        "-name",
        "-subj",
        "-days",
        "-newkey",
        "-pkeyopt",
        "-inform",
        "-outform",
        "-starttls",
        "-sigopt",
        "-md",
        "-set_serial",
        "-reqexts",
        "-extensions",
        "-port",
        "-accept",
        "-nameopt",
        "-rand",
        "-writerand",
        "-sess_out",
        "-sess_in",
        "-msgfile",
        "-keylogfile",
        "-untrusted",
        "-crl",
        "-purpose",
        "-ext",
        "-checkhost",
        "-checkemail",
        "-checkip",
        "-K",
        "-iv",
        "-S",
        "-pass",
        "-k",
        "-kfile",
        "-attime",
        "-policy",
        "-verify",
        "-signature",
        "-sigfile",
        "-CAserial",
    ];
    let mut values: Vec<(&str, &Arg)> = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let t = rest[i].text.as_str();
        if let Some(k) = value_opts.iter().find(|k| **k == t) {
            if let Some(v) = rest.get(i + 1) {
                values.push((k, v));
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    let vals = |names: &[&str]| -> Vec<Arg> {
        values
            .iter()
            .filter(|(k, _)| names.contains(k))
            .map(|(_, v)| (*v).clone())
            .collect()
    };
    let mut e = match sub {
        "s_client" => Effect::new(
            Category::Network,
            Risk::Low,
            "openssl s_client connects to a server",
        )
        .net(),
        "s_server" | "s_time" | "ocsp" => Effect::new(
            Category::Network,
            Risk::Medium,
            format!("openssl {sub} uses the network"),
        )
        .net(),
        _ => Effect::ro(format!("openssl {sub}")),
    };
    for r in vals(&[
        "-in",
        "-CAfile",
        "-key",
        "-cert",
        "-CA",
        "-CAkey",
        "-config",
        "-extfile",
        "-inkey",
        "-signkey",
        "-certfile",
        "-untrusted",
        "-crl",
        "-sess_in",
        "-msgfile",
        "-kfile",
        "-verify",
    ]) {
        e.reads.push(cx.target(&r));
    }
    for w in vals(&["-out", "-keyout", "-writerand", "-sess_out", "-keylogfile"]) {
        let mut x = Effect::new(
            Category::Write,
            Risk::Low,
            format!("openssl {sub} writes a file"),
        );
        x.writes.push((cx.target(&w), WriteKind::File));
        e.merge(x);
    }
    e
}

pub fn container(name: &str, args: &[Arg]) -> Effect {
    let mut i = 0;
    while i < args.len() && args[i].text.starts_with('-') {
        let t = args[i].text.as_str();
        if matches!(
            t,
            "-H" | "--host"
                | "-c"
                | "--context"
                | "--config"
                | "--log-level"
                | "-l"
                | "--connection"
                | "--url"
                | "--root"
                | "--runroot"
        ) {
            return Effect::unknown(format!("{name} talks to another engine"));
        }
        i += 1;
    }
    let sub = args.get(i).and_then(Arg::plain).unwrap_or("help");
    let sub2 = args.get(i + 1).and_then(Arg::plain).unwrap_or("");
    let ro = |w: &str| Effect::ro(format!("{name} {w} shows"));
    let admin_high = |w: &str| {
        Effect::new(
            Category::Admin,
            Risk::High,
            format!("{name} {w} (the container engine acts as root)"),
        )
        .wide()
    };
    match sub {
        "ps" | "images" | "inspect" | "logs" | "version" | "info" | "stats" | "top" | "port"
        | "diff" | "history" | "events" | "search" | "help" | "--version" | "healthcheck" => {
            ro(sub)
        }
        "network" | "volume" | "image" | "container" | "system" | "compose" | "context"
        | "secret" | "config" | "node" | "service" | "stack" | "pod" | "buildx" | "plugin"
        | "machine" => {
            let s2 = if sub == "compose" {
                args.iter()
                    .skip(i + 1)
                    .find(|a| !a.text.starts_with('-'))
                    .and_then(Arg::plain)
                    .unwrap_or("")
            } else {
                sub2
            };
            match s2 {
                "ls" | "list" | "inspect" | "ps" | "logs" | "df" | "info" | "images" | "config"
                | "version" | "top" | "events" | "port" | "" => ro(&format!("{sub} {s2}")),
                "rm" | "remove" | "prune" | "down" | "kill" => {
                    let mut e = Effect::new(
                        Category::Delete,
                        Risk::High,
                        format!("{name} {sub} {s2} deletes"),
                    )
                    .wide();
                    e.deletes.push(Target::Unresolved);
                    e
                }
                "pull" => download(format!("{name} {sub} pull fetches images")).wide(),
                "exec" | "run" => {
                    Effect::unknown(format!("{name} {sub} {s2} runs a command as root"))
                }
                _ => admin_high(&format!("{sub} {s2}")),
            }
        }
        "rm" | "rmi" | "prune" | "kill" => {
            let mut e = Effect::new(
                Category::Delete,
                Risk::High,
                format!("{name} {sub} deletes containers or images"),
            )
            .wide();
            e.deletes.push(Target::Unresolved);
            e
        }
        "pull" => download(format!("{name} pull fetches an image")).wide(),
        "push" | "login" | "logout" => {
            Effect::new(Category::Network, Risk::Medium, format!("{name} {sub}")).net()
        }
        "exec" | "run" | "create" | "build" | "cp" | "commit" | "import" | "load" | "save"
        | "attach" => admin_high(sub),
        "start" | "stop" | "restart" | "pause" | "unpause" | "update" | "rename" | "tag"
        | "wait" => Effect::new(
            Category::Service,
            Risk::High,
            format!("{name} {sub} changes containers"),
        )
        .wide(),
        _ => Effect::unknown(format!("{name} {sub} is not in the catalog")),
    }
}

pub fn cluster(name: &str, args: &[Arg]) -> Effect {
    for a in args {
        if a.text.starts_with("--kubeconfig")
            || a.text == "--token"
            || a.text.starts_with("--token=")
            || a.text.starts_with("--server")
            || a.text.starts_with("--exec")
        {
            return Effect::unknown(format!("{name} with another cluster or credentials"));
        }
    }
    let ops: Vec<&str> = args
        .iter()
        .filter(|a| !a.text.starts_with('-'))
        .map(|a| a.text.as_str())
        .collect();
    let sub = ops.first().copied().unwrap_or("help");
    let sub2 = ops.get(1).copied().unwrap_or("");
    let ro = matches!(
        sub,
        "get"
            | "describe"
            | "logs"
            | "explain"
            | "version"
            | "api-resources"
            | "api-versions"
            | "top"
            | "cluster-info"
            | "diff"
            | "list"
            | "ls"
            | "status"
            | "show"
            | "template"
            | "history"
            | "search"
            | "help"
            | "dominfo"
            | "domstate"
            | "nodeinfo"
            | "info"
            | "inspect"
            | "ps"
            | "images"
            | "lint"
            | "env"
    ) || (sub == "config"
        && matches!(
            sub2,
            "view" | "get-contexts" | "current-context" | "get-clusters"
        ))
        || (sub == "auth" && sub2 == "can-i")
        || (sub == "rollout" && matches!(sub2, "status" | "history"));
    let mut e = if ro {
        Effect::ro(format!("{name} {sub} reads cluster state"))
    } else if matches!(
        sub,
        "delete" | "destroy" | "undefine" | "uninstall" | "rmi" | "rm" | "drain"
    ) {
        Effect::new(
            Category::Delete,
            Risk::High,
            format!("{name} {sub} deletes"),
        )
    } else if matches!(
        sub,
        "exec"
            | "run"
            | "attach"
            | "cp"
            | "port-forward"
            | "proxy"
            | "debug"
            | "plugin"
            | "console"
            | "ssh"
    ) {
        Effect::unknown(format!("{name} {sub} runs commands or opens channels"))
    } else {
        Effect::new(
            Category::Admin,
            Risk::High,
            format!("{name} {sub} changes the cluster"),
        )
    };
    if matches!(name, "kubectl" | "oc" | "helm") {
        e.network = true;
        if e.category == Category::ReadOnly {
            e.category = Category::Network;
            e.risk = Risk::Low;
        }
    }
    e
}
