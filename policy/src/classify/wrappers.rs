//! Programs that run another program: sudo, doas, su, env, timeout, nice,
//! ionice, nohup, stdbuf, setsid, flock, chroot, xargs, shells with `-c`,
//! watch, busybox, command/builtin/exec, time, taskset, chrt.

use super::args::Opts;
use super::{catalog, program_name, Cx, Effect, WriteKind};
use crate::shell::{Arg, Stdin};
use crate::types::{Category, Risk};

enum Step {
    /// Continue with this argv (and this extra effect of the wrapper itself).
    Inner(Vec<Arg>, Option<Effect>),
    /// Classification finished.
    Done(Effect),
}

const MAX_WRAPPERS: usize = 32;

pub fn unwrap_and_classify(argv: Vec<Arg>, cx: &mut Cx<'_>) -> (Effect, Vec<Arg>) {
    let mut argv = argv;
    let mut extra: Option<Effect> = None;
    for _ in 0..MAX_WRAPPERS {
        if argv.is_empty() {
            let e = extra.unwrap_or_else(|| Effect::ro("a wrapper with nothing to run"));
            return (e, argv);
        }
        let name = match program_name(&argv[0]) {
            Ok(n) => n,
            Err(e) => return (with_extra(*e, extra), argv),
        };
        let step = unwrap_one(&name, &argv[1..], cx);
        match step {
            Step::Inner(next, e) => {
                if let Some(e) = e {
                    match &mut extra {
                        Some(x) => x.merge(e),
                        None => extra = Some(e),
                    }
                }
                argv = next;
            }
            Step::Done(e) => return (with_extra(e, extra), argv),
        }
    }
    (Effect::evasive("too many nested wrappers"), argv)
}

fn with_extra(mut e: Effect, extra: Option<Effect>) -> Effect {
    if let Some(x) = extra {
        e.merge(x);
    }
    e
}

fn rest(args: &[Arg], from: usize) -> Vec<Arg> {
    args.get(from..).map(<[Arg]>::to_vec).unwrap_or_default()
}

/// Index of the first operand, skipping options; `with_value` options consume
/// the next word. Stops at `--` (returns the index after it).
fn skip_opts(args: &[Arg], with_value: &[&str], stop_at_operand: bool) -> usize {
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let t = a.text.as_str();
        if !a.literal || !t.starts_with('-') || t == "-" {
            if stop_at_operand {
                return i;
            }
            i += 1;
            continue;
        }
        if t == "--" {
            return i + 1;
        }
        if t.starts_with("--") {
            let name = t.split('=').next().unwrap_or(t);
            if with_value.contains(&name) && !t.contains('=') {
                i += 2;
            } else {
                i += 1;
            }
            continue;
        }
        // Short cluster: a value option consumes the rest or the next word.
        let chars: Vec<char> = t[1..].chars().collect();
        let mut consumed_next = false;
        for (j, c) in chars.iter().enumerate() {
            let key = format!("-{c}");
            if with_value.contains(&key.as_str()) {
                if j + 1 == chars.len() {
                    consumed_next = true;
                }
                break;
            }
        }
        i += if consumed_next { 2 } else { 1 };
    }
    i
}

fn unwrap_one(name: &str, args: &[Arg], cx: &mut Cx<'_>) -> Step {
    match name {
        "sudo" => {
            let o = Opts::parse(args, &[]);
            let _ = o;
            let vals = [
                "-u",
                "-g",
                "-C",
                "-D",
                "-h",
                "-p",
                "-r",
                "-t",
                "-T",
                "-U",
                "--user",
                "--group",
                "--close-from",
                "--chdir",
                "--host",
                "--prompt",
                "--role",
                "--type",
                "--command-timeout",
                "--other-user",
            ];
            let i = skip_opts(args, &vals, true);
            let head: Vec<&str> = args[..i.min(args.len())]
                .iter()
                .map(|a| a.text.as_str())
                .collect();
            if head.iter().any(|t| *t == "-e" || *t == "--edit") {
                return Step::Done(Effect::unknown("sudoedit runs an editor"));
            }
            if i >= args.len() {
                if head.iter().any(|t| {
                    t.starts_with("-l") || *t == "-v" || *t == "-k" || *t == "-K" || *t == "-V"
                }) {
                    return Step::Done(Effect::ro("sudo bookkeeping"));
                }
                return Step::Done(Effect::evasive("sudo without a command opens a shell"));
            }
            Step::Inner(rest(args, i), None)
        }
        "doas" => {
            let i = skip_opts(args, &["-u", "-C"], true);
            if i >= args.len() {
                return Step::Done(Effect::evasive("doas without a command opens a shell"));
            }
            Step::Inner(rest(args, i), None)
        }
        "su" | "runuser" => {
            let o = Opts::parse(
                args,
                &[
                    "-c",
                    "--command",
                    "-s",
                    "--shell",
                    "-u",
                    "--user",
                    "-g",
                    "--group",
                    "-G",
                    "--supp-group",
                    "-w",
                    "--whitelist-environment",
                    "--session-command",
                ],
            );
            let cmds = o.values_of(&["-c", "--command", "--session-command"]);
            if o.has_value(&["-s", "--shell"]) {
                return Step::Done(Effect::evasive("su with a chosen shell"));
            }
            if let Some(c) = cmds.first() {
                return match c.plain() {
                    Some(script) => {
                        cx.script(script);
                        Step::Done(Effect::ro("su -c runs a script"))
                    }
                    None => Step::Done(Effect::evasive("su -c with a computed script")),
                };
            }
            if name == "runuser" {
                // runuser -u USER -- CMD ARGS
                if o.has_value(&["-u", "--user"]) {
                    let i = skip_opts(
                        args,
                        &[
                            "-u",
                            "--user",
                            "-g",
                            "--group",
                            "-G",
                            "--supp-group",
                            "-w",
                            "--whitelist-environment",
                        ],
                        true,
                    );
                    if i < args.len() {
                        return Step::Inner(rest(args, i), None);
                    }
                }
            }
            Step::Done(Effect::evasive("su without -c opens a shell"))
        }
        "env" => unwrap_env(args, cx),
        "timeout" => {
            let i = skip_opts(args, &["-s", "--signal", "-k", "--kill-after"], true);
            if i + 1 > args.len() {
                return Step::Done(Effect::ro("timeout with nothing to run"));
            }
            Step::Inner(rest(args, i + 1), None)
        }
        "nice" => {
            let mut i = 0;
            while i < args.len() {
                let t = args[i].text.as_str();
                if t == "-n" || t == "--adjustment" {
                    i += 2;
                } else if t.starts_with('-') && t.len() > 1 && args[i].literal {
                    i += 1;
                    if t == "--" {
                        break;
                    }
                } else {
                    break;
                }
            }
            if i >= args.len() {
                return Step::Done(Effect::ro("nice prints the niceness"));
            }
            Step::Inner(rest(args, i), None)
        }
        "ionice" => {
            let o = Opts::parse(
                args,
                &[
                    "-c",
                    "--class",
                    "-n",
                    "--classdata",
                    "-p",
                    "--pid",
                    "-P",
                    "--pgid",
                    "-u",
                    "--uid",
                ],
            );
            if o.has_value(&["-p", "--pid", "-P", "--pgid", "-u", "--uid"]) {
                return Step::Done(
                    Effect::new(
                        Category::Admin,
                        Risk::Medium,
                        "changes the I/O priority of other processes",
                    )
                    .with_caps(&["CAP_SYS_NICE"]),
                );
            }
            let i = skip_opts(args, &["-c", "--class", "-n", "--classdata"], true);
            if i >= args.len() {
                return Step::Done(Effect::ro("ionice prints the I/O class"));
            }
            Step::Inner(rest(args, i), None)
        }
        "nohup" => {
            let i = skip_opts(args, &[], true);
            Step::Inner(rest(args, i), None)
        }
        "setsid" => {
            let i = skip_opts(args, &[], true);
            Step::Inner(rest(args, i), None)
        }
        "stdbuf" => {
            let i = skip_opts(
                args,
                &["-i", "-o", "-e", "--input", "--output", "--error"],
                true,
            );
            Step::Inner(rest(args, i), None)
        }
        "taskset" => {
            let o = Opts::parse(args, &[]);
            if o.has('p') || o.has_long("pid") {
                return Step::Done(
                    Effect::new(
                        Category::Admin,
                        Risk::Medium,
                        "changes the CPU affinity of a process",
                    )
                    .with_caps(&["CAP_SYS_NICE"]),
                );
            }
            let i = skip_opts(args, &[], true);
            // The mask or CPU list, then the command.
            Step::Inner(rest(args, i + 1), None)
        }
        "chrt" => {
            let o = Opts::parse(args, &[]);
            if o.has('p') || o.has_long("pid") {
                return Step::Done(
                    Effect::new(
                        Category::Admin,
                        Risk::Medium,
                        "changes the scheduling of a process",
                    )
                    .with_caps(&["CAP_SYS_NICE"]),
                );
            }
            let i = skip_opts(
                args,
                &[
                    "-T",
                    "-P",
                    "-D",
                    "--sched-runtime",
                    "--sched-period",
                    "--sched-deadline",
                ],
                true,
            );
            Step::Inner(
                rest(args, i + 1),
                Some(
                    Effect::new(Category::Admin, Risk::Medium, "real-time scheduling")
                        .with_caps(&["CAP_SYS_NICE"]),
                ),
            )
        }
        "flock" => {
            let o = Opts::parse(
                args,
                &[
                    "-w",
                    "--wait",
                    "--timeout",
                    "-E",
                    "--conflict-exit-code",
                    "-c",
                    "--command",
                ],
            );
            let lockfile = o.operands.first().copied();
            let mut extra = None;
            if let Some(l) = lockfile {
                if !l.text.bytes().all(|b| b.is_ascii_digit()) {
                    let mut e =
                        Effect::new(Category::Write, Risk::Low, "flock creates its lock file");
                    e.writes.push((cx.target(l), WriteKind::File));
                    extra = Some(e);
                }
            }
            if let Some(c) = o.values_of(&["-c", "--command"]).first() {
                return match c.plain() {
                    Some(script) => {
                        cx.script(script);
                        Step::Done(extra.unwrap_or_else(|| Effect::ro("flock -c runs a script")))
                    }
                    None => Step::Done(Effect::evasive("flock -c with a computed script")),
                };
            }
            // flock [opts] FILE CMD ARGS: the command starts after the lock file.
            let i = skip_opts(
                args,
                &["-w", "--wait", "--timeout", "-E", "--conflict-exit-code"],
                true,
            );
            if i + 1 >= args.len() {
                return Step::Done(extra.unwrap_or_else(|| Effect::ro("flock on a descriptor")));
            }
            Step::Inner(rest(args, i + 1), extra)
        }
        "chroot" => {
            let i = skip_opts(args, &["--userspec", "--groups"], true);
            if i + 1 >= args.len() {
                return Step::Done(Effect::evasive("chroot without a command opens a shell"));
            }
            let mut e = Effect::new(
                Category::Admin,
                Risk::High,
                "runs a command inside another root directory",
            )
            .with_caps(&["CAP_SYS_CHROOT"]);
            e.wide_write = true;
            // Paths inside resolve under the new root: unknown to us.
            cx.cwd = None;
            Step::Inner(rest(args, i + 1), Some(e))
        }
        "xargs" => unwrap_xargs(args, cx),
        "command" | "builtin" => {
            let o = Opts::parse(args, &[]);
            if name == "command" && (o.has('v') || o.has('V')) {
                return Step::Done(Effect::ro("command -v looks a program up"));
            }
            let i = skip_opts(args, &[], true);
            if i >= args.len() {
                return Step::Done(Effect::ro("nothing to run"));
            }
            Step::Inner(rest(args, i), None)
        }
        "exec" => {
            let i = skip_opts(args, &["-a"], true);
            if i >= args.len() {
                return Step::Done(Effect::ro("exec only redirects"));
            }
            Step::Inner(rest(args, i), None)
        }
        "time" => {
            let o = Opts::parse(args, &["-o", "--output", "-f", "--format"]);
            let mut extra = None;
            for out in o.values_of(&["-o", "--output"]) {
                let mut e = Effect::new(
                    Category::Write,
                    Risk::Low,
                    "time writes its report to a file",
                );
                e.writes.push((cx.target(&out), WriteKind::File));
                extra = Some(e);
            }
            let i = skip_opts(args, &["-o", "--output", "-f", "--format"], true);
            if i >= args.len() {
                return Step::Done(Effect::ro("time with nothing to run"));
            }
            Step::Inner(rest(args, i), extra)
        }
        "busybox" => {
            if args.is_empty() {
                return Step::Done(Effect::ro("busybox lists its applets"));
            }
            if args[0].literal && args[0].text.starts_with('-') {
                return Step::Done(Effect::ro("busybox --list / --help"));
            }
            Step::Inner(args.to_vec(), None)
        }
        "watch" => unwrap_watch(args, cx),
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "rbash" | "lksh" | "posh"
        | "yash" => Step::Done(shell(name, args, cx)),
        _ => Step::Done(catalog::classify(name, args, cx)),
    }
}

fn unwrap_env(args: &[Arg], cx: &mut Cx<'_>) -> Step {
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let t = a.text.as_str();
        if !a.literal {
            break;
        }
        if t == "--" {
            i += 1;
            break;
        }
        if t == "-S"
            || t == "--split-string"
            || t.starts_with("--split-string=")
            || (t.starts_with("-S") && t.len() > 2)
            || (t.starts_with('-') && !t.starts_with("--") && t.contains('S'))
        {
            // env -S 'cmd args': split the string into words.
            let value = if let Some(v) = t.strip_prefix("--split-string=") {
                Some(Arg::lit(v))
            } else if let Some(pos) = t.find('S').filter(|_| !t.starts_with("--")) {
                let tail = &t[pos + 1..];
                if tail.is_empty() {
                    args.get(i + 1).cloned()
                } else {
                    Some(Arg::lit(tail))
                }
            } else {
                args.get(i + 1).cloned()
            };
            let Some(v) = value.and_then(|v| v.plain().map(str::to_string)) else {
                return Step::Done(Effect::evasive("env -S with a computed string"));
            };
            if !v
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b" \t_./=:,+@%-".contains(&b))
            {
                return Step::Done(Effect::evasive("env -S with quoting or expansions"));
            }
            let consumed = if t.ends_with('S') || t == "--split-string" {
                2
            } else {
                1
            };
            let mut words: Vec<Arg> = v.split_whitespace().map(Arg::lit).collect();
            words.extend(rest(args, i + consumed));
            return Step::Inner([vec![Arg::lit("env")], words].concat(), None);
        }
        if t.starts_with('-') {
            let takes = matches!(t, "-u" | "--unset" | "-C" | "--chdir");
            if t == "-C" || t == "--chdir" {
                cx.cwd = args.get(i + 1).and_then(|d| match cx.target(d) {
                    crate::paths::Target::Path(p) => Some(p),
                    _ => None,
                });
            } else if let Some(d) = t.strip_prefix("--chdir=") {
                cx.cwd = match cx.target(&Arg::lit(d)) {
                    crate::paths::Target::Path(p) => Some(p),
                    _ => None,
                };
            }
            i += if takes { 2 } else { 1 };
            continue;
        }
        if let Some((name, value)) = t.split_once('=') {
            let v = Arg::lit(value);
            if !super::benign_env(name, &v) {
                return Step::Done(Effect::evasive(format!(
                    "runs with {name}={} in its environment",
                    crate::shell::words::clip(value)
                )));
            }
            i += 1;
            continue;
        }
        break;
    }
    if i >= args.len() {
        return Step::Done(Effect::ro("env prints the environment"));
    }
    Step::Inner(rest(args, i), None)
}

fn unwrap_xargs(args: &[Arg], cx: &mut Cx<'_>) -> Step {
    let vals = [
        "-a",
        "--arg-file",
        "-E",
        "--eof",
        "-I",
        "--replace",
        "-L",
        "--max-lines",
        "-n",
        "--max-args",
        "-P",
        "--max-procs",
        "-s",
        "--max-chars",
        "-d",
        "--delimiter",
        "--process-slot-var",
    ];
    let mut i = 0;
    let mut replace: Option<String> = None;
    let mut reads = Vec::new();
    while i < args.len() {
        let a = &args[i];
        let t = a.text.as_str();
        if !a.literal || !t.starts_with('-') || t == "-" {
            break;
        }
        if t == "--" {
            i += 1;
            break;
        }
        if t == "-I" {
            replace = args.get(i + 1).map(|r| r.text.clone());
            i += 2;
            continue;
        }
        if let Some(r) = t.strip_prefix("-I") {
            replace = Some(r.to_string());
            i += 1;
            continue;
        }
        if let Some(r) = t.strip_prefix("--replace") {
            replace = Some(r.strip_prefix('=').unwrap_or("{}").to_string());
            i += 1;
            continue;
        }
        if t.starts_with("-i") {
            replace = Some(
                t.get(2..)
                    .filter(|s| !s.is_empty())
                    .unwrap_or("{}")
                    .to_string(),
            );
            i += 1;
            continue;
        }
        if t == "-a" || t == "--arg-file" {
            if let Some(f) = args.get(i + 1) {
                reads.push(cx.target(f));
            }
        }
        let name = t.split('=').next().unwrap_or(t);
        if vals.contains(&name) && !t.contains('=') && t.len() == name.len() {
            i += 2;
        } else {
            i += 1;
        }
    }
    let mut inner: Vec<Arg> = rest(args, i);
    if inner.is_empty() {
        inner.push(Arg::lit("echo"));
    }
    // Arguments come from the input at run time.
    let unknown = Arg {
        text: "<input>".to_string(),
        literal: false,
        glob: false,
        under: None,
    };
    match &replace {
        Some(r) if !r.is_empty() => {
            for a in inner.iter_mut().skip(1) {
                if a.text.contains(r.as_str()) {
                    *a = unknown.clone();
                }
            }
        }
        _ => inner.push(unknown),
    }
    let extra = if reads.is_empty() {
        None
    } else {
        let mut e = Effect::ro("xargs reads its arguments from a file");
        e.reads = reads;
        Some(e)
    };
    Step::Inner(inner, extra)
}

fn unwrap_watch(args: &[Arg], cx: &mut Cx<'_>) -> Step {
    let vals = ["-n", "--interval", "-d", "-q", "--equexit", "--errexit"];
    let o = Opts::parse(args, &["-n", "--interval", "-q", "--equexit"]);
    let i = skip_opts(args, &vals[..2], true);
    let cmd = rest(args, i);
    if cmd.is_empty() {
        return Step::Done(Effect::ro("watch with nothing to run"));
    }
    if o.has('x') || o.has_long("exec") {
        return Step::Inner(cmd, None);
    }
    // watch joins its arguments and runs them with `sh -c`.
    let mut script = String::new();
    for a in &cmd {
        match a.plain() {
            Some(t) => {
                script.push_str(t);
                script.push(' ');
            }
            None => return Step::Done(Effect::evasive("watch with a computed command")),
        }
    }
    cx.script(script.trim_end());
    Step::Done(Effect::ro("watch runs a command repeatedly"))
}

/// `bash -c SCRIPT`, `bash FILE`, `bash` reading stdin.
fn shell(name: &str, args: &[Arg], cx: &mut Cx<'_>) -> Effect {
    let mut i = 0;
    let mut dash_c = false;
    let mut read_stdin = false;
    while i < args.len() {
        let a = &args[i];
        let t = a.text.as_str();
        if !a.literal {
            return Effect::evasive(format!("{name} with computed options"));
        }
        if t == "--" || t == "-" {
            i += 1;
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            match long {
                "login" | "norc" | "noprofile" | "posix" | "noediting" | "restricted"
                | "verbose" | "debugger" | "dump-strings" | "dump-po-strings" | "protected"
                | "version" | "help" | "pretty-print" => {}
                "rcfile" | "init-file" => {
                    return Effect::unknown(format!("{name} --{long} runs a file"));
                }
                _ => return Effect::unknown(format!("{name} with option --{long}")),
            }
            i += 1;
            continue;
        }
        if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
            let takes_value = t.ends_with('o') || t.ends_with('O');
            if t[1..].contains('c') {
                dash_c = true;
            }
            if t[1..].contains('s') {
                read_stdin = true;
            }
            i += if takes_value { 2 } else { 1 };
            continue;
        }
        break;
    }
    if dash_c {
        return match args.get(i) {
            Some(s) => match s.plain() {
                Some(script) => {
                    cx.script(script);
                    Effect::ro(format!("{name} -c runs a script"))
                }
                None => Effect::evasive(format!("{name} -c with a computed script")),
            },
            None => Effect::evasive(format!("{name} -c without a script")),
        };
    }
    if i < args.len() && !read_stdin {
        return Effect::unknown(format!("{name} runs the script file {}", args[i].text));
    }
    if args
        .iter()
        .any(|a| a.text == "--version" || a.text == "--help")
    {
        return Effect::ro(format!("{name} --version"));
    }
    match cx.stdin.clone() {
        Stdin::Here {
            body,
            literal: true,
        } => {
            cx.script(&body);
            Effect::ro(format!("{name} runs the script in its heredoc"))
        }
        Stdin::Here { .. } => Effect::evasive(format!("{name} runs a heredoc with expansions")),
        Stdin::Pipe => Effect::evasive(format!("{name} runs commands read from a pipe")),
        Stdin::Inherit => Effect::evasive(format!("{name} runs commands read from its input")),
    }
}
