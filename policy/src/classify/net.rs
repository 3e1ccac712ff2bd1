//! Network tools, git, openssl, containers and clusters.

use super::args::Opts;
use super::{Cx, Effect, WriteKind};
use crate::paths::Target;
use crate::shell::Arg;
use crate::types::{Category, Risk};

pub(super) fn network(reason: String) -> Effect {
    Effect::new(Category::Network, Risk::Low, reason).net()
}

pub(super) fn download(reason: String) -> Effect {
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
        "git" => super::git::git(args, cx),
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
