//! Files: coreutils, findutils, sed, awk, archives, compressors, editors.

use super::args::Opts;
use super::{Cx, Effect, WriteKind};
use crate::paths::{self, Target};
use crate::shell::Arg;
use crate::types::{Category, Risk};

/// Reads every operand (that is not `-`).
pub fn reader(name: &str, args: &[Arg], cx: &Cx<'_>, with_value: &[&str]) -> Effect {
    let o = Opts::parse(args, with_value);
    let mut e = Effect::ro(format!("{name} reads"));
    for a in &o.operands {
        if a.text != "-" {
            e.reads.push(cx.target(a));
        }
    }
    e
}

fn write_effect(name: &str, reason: &str) -> Effect {
    Effect::new(Category::Write, Risk::Low, format!("{name} {reason}"))
}

pub fn cp_like(name: &str, args: &[Arg], cx: &Cx<'_>, moves: bool) -> Effect {
    let o = Opts::parse(
        args,
        &[
            "-t",
            "--target-directory",
            "-S",
            "--suffix",
            "--backup",
            "--reflink",
            "--sparse",
            "--preserve",
            "--no-preserve",
            "-m",
            "--mode",
            "-o",
            "--owner",
            "-g",
            "--group",
            "--context",
            "--strip-program",
        ],
    );
    if o.has_value(&["--strip-program"]) {
        return Effect::unknown(format!("{name} --strip-program runs a program"));
    }
    let mut e = write_effect(name, if moves { "moves files" } else { "copies files" });
    let recursive = o.has_any("rRa", &["recursive", "archive"]) || moves;
    let mut sources: Vec<&Arg> = o.operands.clone();
    let dest: Option<Arg> = match o
        .values_of(&["-t", "--target-directory"])
        .into_iter()
        .next()
    {
        Some(d) => Some(d),
        None => sources.pop().cloned(),
    };
    if name == "install" && o.has('d') {
        for a in o.operands.iter() {
            e.writes.push((cx.target(a), WriteKind::Create));
        }
        return e;
    }
    let Some(dest) = dest else {
        return e;
    };
    for s in &sources {
        let t = cx.target(s);
        if moves {
            e.writes.push((t, WriteKind::Move));
        } else {
            e.reads.push(t);
        }
    }
    let dt = cx.target(&dest);
    e.writes.push((
        dt,
        if recursive {
            WriteKind::Tree
        } else {
            WriteKind::File
        },
    ));
    if moves {
        e.writes.push((cx.target(&dest), WriteKind::Create));
    }
    if o.has_value(&["-o", "--owner", "-g", "--group"]) {
        e = e.with_caps(&["CAP_CHOWN"]);
    }
    e
}

pub fn rm(name: &str, args: &[Arg], cx: &Cx<'_>) -> Effect {
    let o = Opts::parse(args, &["--interactive", "--preserve-root"]);
    let recursive = name == "rm" && o.has_any("rR", &["recursive"]);
    let mut e = Effect::new(Category::Delete, Risk::High, format!("{name} deletes"));
    e.recursive = recursive;
    for a in &o.operands {
        e.deletes.push(cx.target(a));
    }
    if o.has_long("no-preserve-root") {
        e.raise(Risk::Critical);
        e.reason = "rm --no-preserve-root".to_string();
    }
    e
}

pub fn mkdir(args: &[Arg], cx: &Cx<'_>) -> Effect {
    let o = Opts::parse(args, &["-m", "--mode", "-Z", "--context"]);
    let mut e = write_effect("mkdir", "creates directories");
    for a in &o.operands {
        e.writes.push((cx.target(a), WriteKind::Create));
    }
    e
}

pub fn touch(args: &[Arg], cx: &Cx<'_>) -> Effect {
    let o = Opts::parse(args, &["-r", "--reference", "-d", "--date", "-t"]);
    let mut e = write_effect("touch", "creates or updates files");
    for r in o.values_of(&["-r", "--reference"]) {
        e.reads.push(cx.target(&r));
    }
    for a in &o.operands {
        e.writes.push((cx.target(a), WriteKind::File));
    }
    e
}

pub fn tee(args: &[Arg], cx: &Cx<'_>) -> Effect {
    let o = Opts::parse(args, &["--output-error"]);
    let mut e = Effect::ro("tee copies input to output");
    for a in &o.operands {
        if let Some(d) = super::device_write(a) {
            e.merge(d);
            continue;
        }
        e.writes.push((cx.target(a), WriteKind::File));
    }
    if !e.writes.is_empty() && e.category == Category::ReadOnly {
        e.category = Category::Write;
        e.reason = "tee writes files".to_string();
        e.raise(Risk::Low);
    }
    e
}

pub fn ln(args: &[Arg], cx: &Cx<'_>) -> Effect {
    let o = Opts::parse(
        args,
        &["-t", "--target-directory", "-S", "--suffix", "--backup"],
    );
    let mut e = write_effect("ln", "creates links");
    let mut ops = o.operands.clone();
    let target_dir = o
        .values_of(&["-t", "--target-directory"])
        .into_iter()
        .next();
    let into_dir = target_dir.is_some();
    let dest = match target_dir {
        Some(d) => Some(d),
        None if ops.len() >= 2 => ops.pop().cloned(),
        None => {
            // `ln -s TARGET`: link in the cwd.
            if let (Some(c), Some(t)) = (&cx.cwd, ops.first()) {
                let base = t.text.rsplit('/').next().unwrap_or("").to_string();
                Some(Arg::lit(&c.join(base).to_string_lossy()))
            } else {
                None
            }
        }
    };
    if let Some(d) = dest {
        // The link replaces the name itself (`ln -sf X /etc/localtime`
        // rewrites /etc's entry, not the zone file it points at), or — a
        // name that is a link to a directory, without -n/-T — goes inside
        // that directory: both, unless -n/-T rules the second out. A `-t`
        // directory is only ever entered.
        let followed = cx.target(&d);
        if into_dir {
            e.writes.push((followed, WriteKind::Create));
        } else {
            let itself = paths::resolve_no_follow(&d, cx.cwd.as_deref(), cx.paths);
            let no_deref = o.has_any("nT", &["no-dereference", "no-target-directory"]);
            if !no_deref && followed != itself {
                e.writes.push((followed, WriteKind::Create));
            }
            e.writes.push((itself, WriteKind::Create));
        }
    } else {
        e.writes.push((Target::Unresolved, WriteKind::Create));
    }
    e
}

pub fn chmod_like(name: &str, args: &[Arg], cx: &Cx<'_>) -> Effect {
    let o = Opts::parse(args, &["--reference", "--from"]);
    let recursive = o.has_any("R", &["recursive"]);
    let has_ref = o.has_value(&["--reference"]);
    let mut ops = o.operands.clone();
    // chmod MODE FILES; chown OWNER FILES; setfacl -m ACL FILES (handled by caller)
    if !has_ref && !ops.is_empty() {
        ops.remove(0);
    }
    // chmod's `-x`-style modes look like options: recover them.
    let mut e = Effect::new(
        Category::Admin,
        if recursive { Risk::High } else { Risk::Medium },
        format!(
            "{name} changes {}",
            if name == "chmod" {
                "permissions"
            } else {
                "ownership"
            }
        ),
    )
    .with_caps(&["CAP_CHOWN", "CAP_FOWNER", "CAP_DAC_OVERRIDE"]);
    e.recursive = recursive;
    for a in ops {
        e.writes.push((
            cx.target(a),
            if recursive {
                WriteKind::Tree
            } else {
                WriteKind::File
            },
        ));
    }
    e
}

pub fn find(args: &[Arg], cx: &mut Cx<'_>) -> Effect {
    let mut i = 0;
    // Leading options -H -L -P -D x -O n
    while i < args.len() {
        let t = args[i].text.as_str();
        match t {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            _ if t.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    let mut starts: Vec<Arg> = Vec::new();
    while i < args.len() {
        let a = &args[i];
        let t = a.text.as_str();
        if a.literal && (t.starts_with('-') || t == "(" || t == "!" || t == ",") {
            break;
        }
        starts.push(a.clone());
        i += 1;
    }
    if starts.is_empty() {
        starts.push(Arg::lit("."));
    }
    let mut e = Effect::ro("find lists files");
    for s in &starts {
        e.reads.push(cx.target(s));
    }
    let with_value = [
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-iwholename",
        "-regex",
        "-iregex",
        "-type",
        "-xtype",
        "-perm",
        "-user",
        "-group",
        "-size",
        "-mtime",
        "-mmin",
        "-atime",
        "-amin",
        "-ctime",
        "-cmin",
        "-maxdepth",
        "-mindepth",
        "-printf",
        "-links",
        "-inum",
        "-uid",
        "-gid",
        "-fstype",
        "-context",
        "-used",
        "-regextype",
        "-lname",
        "-ilname",
        "-samefile",
        "-newer",
        "-anewer",
        "-cnewer",
        "-files0-from",
    ];
    let flags = [
        "-print",
        "-print0",
        "-ls",
        "-prune",
        "-quit",
        "-true",
        "-false",
        "-empty",
        "-xdev",
        "-mount",
        "-follow",
        "-depth",
        "-daystart",
        "-noleaf",
        "-readable",
        "-writable",
        "-executable",
        "-nouser",
        "-nogroup",
        "-o",
        "-or",
        "-a",
        "-and",
        "-not",
        "!",
        "(",
        ")",
        ",",
        "-d",
        "-ignore_readdir_race",
        "-noignore_readdir_race",
        "-warn",
        "-nowarn",
        "-help",
        "--help",
        "-version",
        "--version",
    ];
    while i < args.len() {
        let a = &args[i];
        let t = a.text.as_str();
        i += 1;
        if !a.literal {
            continue;
        }
        if flags.contains(&t) {
            continue;
        }
        if with_value.contains(&t) || t.starts_with("-newer") {
            if matches!(
                t,
                "-newer" | "-anewer" | "-cnewer" | "-samefile" | "-files0-from"
            ) {
                if let Some(f) = args.get(i) {
                    e.reads.push(cx.target(f));
                }
            }
            i += 1;
            continue;
        }
        match t {
            "-delete" => {
                let mut d = Effect::new(
                    Category::Delete,
                    Risk::High,
                    "find -delete deletes what it finds",
                );
                d.recursive = true;
                for s in &starts {
                    d.deletes.push(match cx.target(s) {
                        Target::Path(p) => Target::Beneath(p),
                        other => other,
                    });
                }
                e.merge(d);
            }
            "-fprint" | "-fprint0" | "-fls" | "-fprintf" => {
                if let Some(f) = args.get(i) {
                    let mut w = Effect::new(
                        Category::Write,
                        Risk::Low,
                        format!("find {t} writes a file"),
                    );
                    w.writes.push((cx.target(f), WriteKind::File));
                    e.merge(w);
                }
                i += if t == "-fprintf" { 2 } else { 1 };
            }
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let mut inner: Vec<Arg> = Vec::new();
                while i < args.len() {
                    let w = &args[i];
                    i += 1;
                    if w.literal && (w.text == ";" || w.text == "+") {
                        break;
                    }
                    inner.push(w.clone());
                }
                // `{}` stands for the files found beneath the start points.
                let under = starts.first().and_then(|s| s.plain()).map(str::to_string);
                let mut expanded = Vec::new();
                for w in inner {
                    if w.literal && w.text.contains("{}") {
                        expanded.push(Arg {
                            text: w.text.clone(),
                            literal: under.is_some() && starts.len() == 1,
                            glob: false,
                            under: under.clone(),
                        });
                    } else {
                        expanded.push(w);
                    }
                }
                if t == "-execdir" || t == "-okdir" {
                    cx.cwd = None;
                }
                cx.nested_argv(expanded);
            }
            _ => {
                e.merge(Effect::unknown(format!(
                    "find with the unknown primary {t}"
                )));
            }
        }
    }
    e
}

/// sed: `-i` edits in place (renaming into place); the script's `w`, `W`,
/// `r`, `R` and `e` commands and `s///w`/`s///e` flags are found by a small
/// parser of sed scripts; anything it does not understand is unknown.
pub fn sed(args: &[Arg], cx: &Cx<'_>) -> Effect {
    // `-i[SUFFIX]` / `--in-place[=SUFFIX]` take an optional attached suffix only.
    let mut in_place = false;
    let mut rest: Vec<Arg> = Vec::new();
    let mut after_dashdash = false;
    for a in args {
        let t = a.text.as_str();
        if !after_dashdash && a.literal {
            if t == "--" {
                after_dashdash = true;
            } else if t.starts_with("--in-place") {
                in_place = true;
                continue;
            } else if t.starts_with('-') && !t.starts_with("--") && t.len() > 1 {
                // A short cluster: `-i`, `-ni`, `-i.bak`, `-Ei`.
                let body = &t[1..];
                if let Some(pos) = body.find('i') {
                    if !body[..pos].contains(['e', 'f', 'l']) {
                        in_place = true;
                        let before = &body[..pos];
                        if !before.is_empty() {
                            rest.push(Arg::lit(&format!("-{before}")));
                        }
                        continue;
                    }
                }
            }
        }
        rest.push(a.clone());
    }
    let o = Opts::parse(
        &rest,
        &["-e", "--expression", "-f", "--file", "-l", "--line-length"],
    );
    let mut scripts: Vec<Arg> = o.values_of(&["-e", "--expression"]);
    let mut files: Vec<&Arg> = o.operands.clone();
    if !o.values_of(&["-f", "--file"]).is_empty() {
        return Effect::unknown("sed -f runs a script file");
    }
    if scripts.is_empty() {
        if files.is_empty() {
            return Effect::ro("sed without a script");
        }
        scripts.push(files.remove(0).clone());
    }
    let in_place_files = files.clone();
    let mut e = Effect::ro("sed filters text");
    for s in &scripts {
        let Some(text) = s.plain() else {
            return Effect::evasive("sed with a computed script");
        };
        match sed_script(text) {
            Ok(fx) => {
                if fx.exec {
                    return Effect::unknown("sed script runs commands (e)");
                }
                for w in fx.writes {
                    if w == "/dev/stdout" || w == "/dev/stderr" {
                        continue;
                    }
                    let mut we = write_effect("sed", "writes a file from its script (w)");
                    we.writes.push((cx.target(&Arg::lit(&w)), WriteKind::File));
                    e.merge(we);
                }
                for r in fx.reads {
                    e.reads.push(cx.target(&Arg::lit(&r)));
                }
            }
            Err(why) => return Effect::unknown(format!("sed script not understood: {why}")),
        }
    }
    if in_place {
        let mut we = write_effect("sed -i", "edits files in place");
        for f in &in_place_files {
            we.writes.push((cx.target(f), WriteKind::Create));
        }
        e.merge(we);
    } else {
        for f in &files {
            e.reads.push(cx.target(f));
        }
    }
    e
}

#[derive(Default)]
struct SedFx {
    writes: Vec<String>,
    reads: Vec<String>,
    exec: bool,
}

fn sed_script(s: &str) -> Result<SedFx, String> {
    let c: Vec<char> = s.chars().collect();
    let mut fx = SedFx::default();
    let mut i = 0;
    let n = c.len();
    let skip_ws = |i: &mut usize| {
        while *i < n && (c[*i] == ' ' || c[*i] == '\t') {
            *i += 1;
        }
    };
    let read_to_eol = |i: &mut usize| -> String {
        let start = *i;
        while *i < n && c[*i] != '\n' {
            *i += 1;
        }
        c[start..*i].iter().collect::<String>().trim().to_string()
    };
    let mut guard = 0;
    while i < n {
        guard += 1;
        if guard > 10_000 {
            return Err("too long".into());
        }
        skip_ws(&mut i);
        if i >= n {
            break;
        }
        if matches!(c[i], ';' | '\n' | '{' | '}') {
            i += 1;
            continue;
        }
        if c[i] == '#' {
            read_to_eol(&mut i);
            continue;
        }
        // Address: numbers, $, /re/, \cREc, ranges, ~step, !
        loop {
            skip_ws(&mut i);
            if i >= n {
                break;
            }
            match c[i] {
                '0'..='9' | '$' | ',' | '~' | '+' | '!' => i += 1,
                '/' | '\\' => {
                    let delim = if c[i] == '\\' {
                        i += 1;
                        *c.get(i).ok_or("bad address")?
                    } else {
                        '/'
                    };
                    i += 1;
                    while i < n && c[i] != delim {
                        if c[i] == '\\' {
                            i += 1;
                        }
                        i += 1;
                    }
                    i += 1;
                    // I / M flags on addresses
                    while i < n && (c[i] == 'I' || c[i] == 'M') {
                        i += 1;
                    }
                }
                _ => break,
            }
        }
        skip_ws(&mut i);
        if i >= n {
            break;
        }
        let cmd = c[i];
        i += 1;
        match cmd {
            '{' | '}' | ';' => {}
            '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'l' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z'
            | 'F' => {}
            'q' | 'Q' | 'L' => {
                while i < n && (c[i].is_ascii_digit() || c[i] == ' ') {
                    i += 1;
                }
            }
            ':' | 'b' | 't' | 'T' => {
                while i < n && c[i] != ';' && c[i] != '\n' {
                    i += 1;
                }
            }
            'a' | 'i' | 'c' => {
                // Text to end of line (with backslash continuations).
                while i < n && c[i] != '\n' {
                    if c[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            'r' | 'R' => fx.reads.push(read_to_eol(&mut i)),
            'w' | 'W' => fx.writes.push(read_to_eol(&mut i)),
            'e' => {
                fx.exec = true;
                read_to_eol(&mut i);
            }
            'y' => {
                let delim = *c.get(i).ok_or("bad y")?;
                i += 1;
                for _ in 0..2 {
                    while i < n && c[i] != delim {
                        if c[i] == '\\' {
                            i += 1;
                        }
                        i += 1;
                    }
                    i += 1;
                }
            }
            's' => {
                let delim = *c.get(i).ok_or("bad s")?;
                if delim == '\n' || delim == '\\' {
                    return Err("bad s delimiter".into());
                }
                i += 1;
                for _ in 0..2 {
                    while i < n && c[i] != delim {
                        if c[i] == '\\' {
                            i += 1;
                        }
                        i += 1;
                    }
                    if i >= n {
                        return Err("unterminated s".into());
                    }
                    i += 1;
                }
                // Flags
                while i < n {
                    match c[i] {
                        'g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9' => i += 1,
                        'e' => {
                            fx.exec = true;
                            i += 1;
                        }
                        'w' => {
                            i += 1;
                            fx.writes.push(read_to_eol(&mut i));
                        }
                        _ => break,
                    }
                }
            }
            other => return Err(format!("command {other}")),
        }
    }
    Ok(fx)
}

/// awk: reading is fine; `system()`, pipes to or from commands, output
/// redirection and `getline` from commands run code or write files.
pub fn awk(name: &str, args: &[Arg], cx: &Cx<'_>) -> Effect {
    let o = Opts::parse(
        args,
        &[
            "-F",
            "-v",
            "-f",
            "--file",
            "-i",
            "--include",
            "-l",
            "--load",
            "-E",
            "--exec",
            "--field-separator",
            "--assign",
        ],
    );
    if o.has_value(&[
        "-f",
        "--file",
        "-i",
        "--include",
        "-l",
        "--load",
        "-E",
        "--exec",
    ]) {
        return Effect::unknown(format!("{name} runs a program file or extension"));
    }
    let mut ops = o.operands.clone();
    if ops.is_empty() {
        return Effect::ro(format!("{name} without a program"));
    }
    let prog = ops.remove(0);
    let Some(p) = prog.plain() else {
        return Effect::evasive(format!("{name} with a computed program"));
    };
    if awk_is_unsafe(p) {
        return Effect::unknown(format!(
            "{name} program can run commands or write files (system, pipes, redirection)"
        ));
    }
    let mut e = Effect::ro(format!("{name} filters text"));
    for a in ops {
        if a.literal && a.text.contains('=') && !a.text.starts_with('/') {
            continue; // var=value assignment operand
        }
        e.reads.push(cx.target(a));
    }
    e
}

fn awk_is_unsafe(p: &str) -> bool {
    if p.contains("system")
        || p.contains("getline")
        || p.contains("ENVIRON")
        || p.contains("@load")
        || p.contains("@include")
    {
        return true;
    }
    // Pipes and redirections are looked for in the code only: a `|` or `>`
    // in a string ("a|b") or a regular expression (/^(root|daemon):/) is
    // text, and `||` is a logical or.
    let code = awk_code(p);
    let b = code.as_bytes();
    let mut k = 0;
    while k < b.len() {
        match b[k] {
            b'|' if b.get(k + 1) == Some(&b'|') => {
                k += 2;
                continue;
            }
            b'|' => return true,
            b'>' => {
                let mut j = k + 1;
                if j < b.len() && b[j] == b'=' {
                    k += 2;
                    continue;
                }
                // `>` is output redirection unless it compares with a
                // number or an expression (`$3 > 100`, `NR>=2`, `$1 > $2`).
                while j < b.len() && b[j] == b' ' {
                    j += 1;
                }
                let numeric = j < b.len()
                    && (b[j].is_ascii_digit() || b[j] == b'-' || b[j] == b'$' || b[j] == b'(');
                if !numeric {
                    return true;
                }
            }
            _ => {}
        }
        k += 1;
    }
    false
}

/// The awk program with the contents of its strings and regular expression
/// literals blanked (their delimiters kept), so that only code is searched.
/// A `/` opens a regular expression where only an operand can follow (at
/// the start, after `(`, `,`, `{`, `}`, `;`, `!`, `~`, `&`, `|`, `=`, `<`,
/// `>`, `*`, `%`, `^`, `?`, `:`, a newline); elsewhere it divides, and after
/// `+` or `-` it may do either (`x++ / 2`), so it is read as a division: a
/// division mistaken for a regular expression would hide code, the other
/// way round only shows more. A literal ends at its first unescaped
/// delimiter (a `/` inside brackets included, as the one-true-awk reads it)
/// or at a newline (awk has no multi-line literals).
fn awk_code(p: &str) -> String {
    let b = p.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut prev = b'\n';
    let mut k = 0;
    while k < b.len() {
        let ch = b[k];
        let regex = ch == b'/' && b"\n(,{};!~&|=<>*%^?:".contains(&prev);
        if ch == b'"' || regex {
            out.push(ch);
            k += 1;
            while k < b.len() && b[k] != ch && b[k] != b'\n' {
                if b[k] == b'\\' && k + 1 < b.len() && b[k + 1] != b'\n' {
                    out.push(b' ');
                    k += 1;
                }
                out.push(b' ');
                k += 1;
            }
            if k < b.len() && b[k] == ch {
                out.push(ch);
                k += 1;
            }
            prev = b'a';
            continue;
        }
        out.push(ch);
        if !ch.is_ascii_whitespace() || ch == b'\n' {
            prev = ch;
        }
        k += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub fn tar(args: &[Arg], cx: &Cx<'_>) -> Effect {
    // Old style: `tar xzf file.tgz` — the first word is a cluster of flags.
    let mut args: Vec<Arg> = args.to_vec();
    if let Some(first) = args.first_mut() {
        if first.literal
            && !first.text.starts_with('-')
            && first.text.chars().all(|c| c.is_ascii_alphabetic())
        {
            first.text = format!("-{}", first.text);
        }
    }
    for a in &args {
        if !a.literal {
            continue;
        }
        let t = a.text.as_str();
        for bad in [
            "--to-command",
            "--checkpoint-action",
            "--use-compress-program",
            "--info-script",
            "--new-volume-script",
            "--rmt-command",
            "--rsh-command",
            "--index-file",
        ] {
            if t.starts_with(bad) {
                return Effect::unknown(format!("tar {bad} runs a program"));
            }
        }
        if t == "-I" || (t.starts_with("-I") && !t.starts_with("--")) || t == "-F" {
            return Effect::unknown("tar -I/-F runs a program");
        }
    }
    let o = Opts::parse(
        &args,
        &[
            "-f",
            "--file",
            "-C",
            "--directory",
            "-T",
            "--files-from",
            "-X",
            "--exclude-from",
            "-b",
            "--blocking-factor",
            "-H",
            "--format",
            "--exclude",
            "--transform",
            "--xform",
            "--owner",
            "--group",
            "--mode",
            "--mtime",
            "-N",
            "--newer",
            "--label",
            "-V",
            "--strip-components",
            "--suffix",
        ],
    );
    let archive = o.values_of(&["-f", "--file"]).into_iter().next();
    if let Some(a) = &archive {
        if a.plain()
            .is_some_and(|t| t.contains(':') && !t.starts_with('/'))
        {
            return Effect::unknown("tar with a remote archive runs rsh");
        }
    }
    let dir = o
        .values_of(&["-C", "--directory"])
        .into_iter()
        .last()
        .map(|d| cx.target(&d))
        .unwrap_or_else(|| cx.cwd_target());
    let create = o.has_any(
        "cru",
        &["create", "append", "update", "delete", "concatenate"],
    ) || o.has('A');
    let extract = o.has_any("x", &["extract", "get"]);
    let list = o.has_any("t", &["list", "diff", "compare"]) || o.has('d');
    let mut e;
    if extract {
        e = write_effect("tar -x", "extracts files");
        e.writes.push((as_tree(dir), WriteKind::Tree));
        if let Some(a) = &archive {
            if a.text != "-" {
                e.reads.push(cx.target(a));
            }
        }
        if o.has_long("remove-files") {
            e.merge(Effect::new(
                Category::Delete,
                Risk::High,
                "tar --remove-files deletes",
            ));
        }
    } else if create {
        e = write_effect("tar -c", "writes an archive");
        if let Some(a) = &archive {
            if a.text != "-" {
                if let Some(d) = super::device_write(a) {
                    e.merge(d);
                } else {
                    e.writes.push((cx.target(a), WriteKind::File));
                }
            }
        }
        for a in &o.operands {
            e.reads.push(cx.target(a));
        }
        if o.has_long("remove-files") {
            let mut d = Effect::new(
                Category::Delete,
                Risk::High,
                "tar --remove-files deletes what it archives",
            );
            for a in &o.operands {
                d.deletes.push(cx.target(a));
            }
            d.recursive = true;
            e.merge(d);
        }
    } else if list {
        e = Effect::ro("tar lists an archive");
        if let Some(a) = &archive {
            e.reads.push(cx.target(a));
        }
    } else {
        e = Effect::ro("tar --help/--version");
    }
    e
}

fn as_tree(t: Target) -> Target {
    match t {
        Target::Path(p) => Target::Beneath(p),
        other => other,
    }
}

/// gzip & co: in place unless writing to stdout or only testing/listing.
pub fn compressor(name: &str, args: &[Arg], cx: &Cx<'_>) -> Effect {
    let o = Opts::parse(
        args,
        &[
            "-S",
            "--suffix",
            "-o",
            "--output",
            "-b",
            "-T",
            "--threads",
            "-L",
            "--level",
            "-D",
            "--dict",
            "-M",
            "--memory",
        ],
    );
    let stdout_only = name.ends_with("cat")
        || o.has_any("ctl", &["stdout", "to-stdout", "test", "list"])
        || o.operands.is_empty();
    let mut e = Effect::ro(format!("{name} (de)compresses to its output"));
    for a in &o.operands {
        e.reads.push(cx.target(a));
    }
    if let Some(out) = o.values_of(&["-o", "--output"]).into_iter().next() {
        let mut w = write_effect(name, "writes its output file");
        w.writes.push((cx.target(&out), WriteKind::File));
        e.merge(w);
        return e;
    }
    if !stdout_only {
        let mut w = write_effect(name, "replaces files by their (de)compressed version");
        for a in &o.operands {
            w.writes.push((cx.target(a), WriteKind::Create));
        }
        e.merge(w);
    }
    e
}

/// Editors and pagers with command escapes.
pub fn editor(name: &str) -> Effect {
    Effect::unknown(format!("{name} is an editor (it can run commands)"))
}

pub fn pager(name: &str, args: &[Arg], cx: &Cx<'_>) -> Effect {
    for a in args {
        if !a.literal {
            continue;
        }
        let t = a.text.as_str();
        if t.starts_with('+')
            || t.contains('!')
            || t.starts_with("-k")
            || t.starts_with("--lesskey")
            || t.starts_with("--lesskey-src")
        {
            return Effect::unknown(format!("{name} with commands on its command line"));
        }
    }
    reader(
        name,
        args,
        cx,
        &[
            "-b",
            "-h",
            "-j",
            "-o",
            "-O",
            "-p",
            "-P",
            "-t",
            "-T",
            "-x",
            "-y",
            "-z",
            "--log-file",
            "--LOG-FILE",
        ],
    )
}

pub fn sort(args: &[Arg], cx: &Cx<'_>) -> Effect {
    let o = Opts::parse(
        args,
        &[
            "-o",
            "--output",
            "-k",
            "--key",
            "-t",
            "--field-separator",
            "-S",
            "--buffer-size",
            "-T",
            "--temporary-directory",
            "--parallel",
            "--batch-size",
            "--compress-program",
            "--files0-from",
            "--random-source",
            "--sort",
        ],
    );
    if o.has_value(&["--compress-program"]) {
        return Effect::unknown("sort --compress-program runs a program");
    }
    let mut e = Effect::ro("sort sorts");
    for a in &o.operands {
        e.reads.push(cx.target(a));
    }
    for out in o.values_of(&["-o", "--output"]) {
        let mut w = write_effect("sort -o", "writes its output file");
        w.writes.push((cx.target(&out), WriteKind::File));
        e.merge(w);
    }
    e
}

pub fn uniq(args: &[Arg], cx: &Cx<'_>) -> Effect {
    let o = Opts::parse(
        args,
        &[
            "-f",
            "--skip-fields",
            "-s",
            "--skip-chars",
            "-w",
            "--check-chars",
            "--group",
            "--all-repeated",
        ],
    );
    let mut e = Effect::ro("uniq filters lines");
    if let Some(i) = o.operands.first() {
        e.reads.push(cx.target(i));
    }
    if let Some(out) = o.operands.get(1) {
        // `uniq IN OUT` writes OUT.
        let mut w = write_effect("uniq", "writes its OUTPUT operand");
        w.writes.push((cx.target(out), WriteKind::File));
        e.merge(w);
    }
    e
}

pub fn dd(args: &[Arg], cx: &Cx<'_>) -> Effect {
    let mut e = Effect::new(Category::Destructive, Risk::High, "dd copies raw data");
    let mut has_of = false;
    for a in args {
        let Some(t) = a.plain() else {
            if a.text.starts_with("of=") {
                return Effect::new(
                    Category::Destructive,
                    Risk::High,
                    "dd writes to a computed destination",
                );
            }
            continue;
        };
        if let Some(f) = t.strip_prefix("if=") {
            e.reads.push(cx.target(&Arg::lit(f)));
        } else if let Some(f) = t.strip_prefix("of=") {
            has_of = true;
            let fa = Arg::lit(f);
            if let Some(d) = super::device_write(&fa) {
                if d.risk == Risk::Critical {
                    return Effect::critical(
                        Category::Destructive,
                        format!("dd writes straight onto the block device {f}"),
                    );
                }
                e.merge(d);
            } else {
                e.writes.push((cx.target(&fa), WriteKind::File));
            }
        }
    }
    if !has_of {
        e.reason = "dd copies raw data to its output".to_string();
    }
    e
}

/// Programs that write their last operand or `-o FILE` and read the others.
pub fn output_file(
    name: &str,
    args: &[Arg],
    cx: &Cx<'_>,
    out_opts: &[&str],
    value_opts: &[&str],
) -> Effect {
    let mut all: Vec<&str> = out_opts.to_vec();
    all.extend_from_slice(value_opts);
    let o = Opts::parse(args, &all);
    let mut e = Effect::ro(format!("{name} reads"));
    for a in &o.operands {
        e.reads.push(cx.target(a));
    }
    for out in o.values_of(out_opts) {
        if out.text == "-" {
            continue;
        }
        let mut w = write_effect(name, "writes its output file");
        w.writes.push((cx.target(&out), WriteKind::File));
        e.merge(w);
    }
    e
}
