//! The program catalog: program name → effect. Programs not listed here are
//! unknown.

use super::{files, net, system, Cx, Effect};
use crate::shell::Arg;
use crate::types::{Category, Risk};

/// Programs that only read (their operands are read paths) whatever their options.
const READERS: &[&str] = &[
    "cat",
    "head",
    "tail",
    "wc",
    "cut",
    "tr",
    "nl",
    "od",
    "hexdump",
    "strings",
    "md5sum",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "sum",
    "base64",
    "base32",
    "basenc",
    "tac",
    "rev",
    "fold",
    "fmt",
    "pr",
    "expand",
    "unexpand",
    "paste",
    "join",
    "column",
    "comm",
    "cmp",
    "diff",
    "diff3",
    "sdiff",
    "file",
    "stat",
    "du",
    "ls",
    "dir",
    "vdir",
    "tree",
    "grep",
    "egrep",
    "fgrep",
    "zgrep",
    "zegrep",
    "zfgrep",
    "rgrep",
    "zcat",
    "bzcat",
    "xzcat",
    "zstdcat",
    "lz4cat",
    "zless",
    "zmore",
    "zdiff",
    "realpath",
    "readlink",
    "namei",
    "lsattr",
    "getfacl",
    "getcap",
    "jq",
    "look",
    "csplit_dry",
    "iconv",
    "numfmt",
    "tsort",
    "shuf",
    "ptx",
    "factor",
    "xmllint",
    "md5",
    "sha1",
    "cat_",
    "lsof",
    "fuser_ro",
    "bat",
    "batcat",
    "ag",
    "ack",
    "wc_",
    "cloc",
    "dos2unix_dry",
    "colordiff",
    "wdiff",
    "pdftotext_dry",
    "exiftool_ro",
];

/// Programs that read system state and take no path operands that matter.
const INSPECTORS: &[&str] = &[
    "echo",
    "printf",
    "true",
    "false",
    ":",
    "test",
    "[",
    "basename",
    "dirname",
    "pwd",
    "whoami",
    "id",
    "groups",
    "who",
    "w",
    "users",
    "last",
    "lastb",
    "lastlog",
    "uname",
    "uptime",
    "free",
    "df",
    "ps",
    "pgrep",
    "pidof",
    "top",
    "htop",
    "atop",
    "vmstat",
    "iostat",
    "mpstat",
    "sar",
    "pidstat",
    "nproc",
    "arch",
    "getconf",
    "locale",
    "tty",
    "lscpu",
    "lspci",
    "lsusb",
    "lsmod",
    "lsblk",
    "blkid",
    "lshw",
    "dmidecode",
    "hwinfo",
    "inxi",
    "findmnt",
    "ss",
    "netstat",
    "getent",
    "printenv",
    "which",
    "whereis",
    "type",
    "locate",
    "plocate",
    "mlocate",
    "seq",
    "sleep",
    "yes",
    "cal",
    "ncal",
    "lsb_release",
    "hostid",
    "sensors",
    "nvidia-smi",
    "lsns",
    "lsipc",
    "lslocks",
    "lslogins",
    "lsmem",
    "lsirq",
    "chage_l",
    "faillog",
    "runlevel",
    "systemd-detect-virt",
    "virt-what",
    "systemd-cgls",
    "systemd-cgtop",
    "systemd-delta",
    "systemd-path",
    "iotop",
    "nethogs",
    "iftop",
    "slabtop",
    "pstree",
    "prtstat",
    "tload",
    "watch_",
    "dstat",
    "glances",
    "nmon",
    "ncdu",
    "duf",
    "dust",
    "pydf",
    "procs",
    "btop",
    "bashtop",
    "mount_",
    "debsums",
    "checkrestart",
    "needrestart_list",
    "apt-cache",
    "apt-file",
    "dpkg-query",
    "dpkg-deb_ro",
    "rpmquery",
    "repoquery",
    "ausearch",
    "aureport",
    "sestatus",
    "getenforce",
    "aa-status",
    "apparmor_status",
    "ulimit",
    "umask",
    "set",
    "shopt_",
    "wait",
    "jobs",
    "dirs",
    "times",
    "cd",
    "pushd",
    "popd",
    "read",
    "mapfile",
    "readarray",
    "getopts",
    "shift",
    "return",
    "exit",
    "break",
    "continue",
    "unset",
    "local",
    "hash_",
    "help",
    "compgen",
    "complete",
    "caller",
    "logger",
    "systemd-analyze",
    "networkctl",
    "busctl_",
    "loginctl_",
    "homectl_",
    "bootctl_",
    "efibootmgr_",
    "who_",
    "zdump",
    "tzselect",
    "dig_",
    "cut_",
    "env_",
    "stty",
    "tput",
    "clear",
    "reset",
    "dircolors",
    "mesg_",
    "uuidgen",
    "mcookie",
    "openssl_rand",
    "ip_",
    "df_",
    "lsscsi",
    "nvme_",
    "smartctl_",
    "hdparm_",
    "lvs",
    "vgs",
    "pvs",
    "lvdisplay",
    "vgdisplay",
    "pvdisplay",
    "lvscan",
    "vgscan",
    "pvscan",
    "dumpe2fs",
    "xfs_info",
    "xfs_db_",
    "swapon_",
    "cryptsetup_",
    "multipath_",
    "iscsiadm_",
    "ethtool_",
    "iw_",
    "iwconfig",
    "arp_",
    "route_",
    "bridge_",
    "brctl_",
    "tc_",
    "nstat",
    "ifstat",
    "rtacct",
    "conntrack_",
    "ipset_",
    "ebtables_",
    "arptables_",
    "nft_",
    "ufw_",
    "firewall-cmd_",
    "chronyc_",
    "ntpq",
    "ntpstat",
    "timedatectl_",
    "hostnamectl_",
    "localectl_",
    "resolvectl_",
    "systemd-resolve_",
    "nmcli_",
    "journalctl_",
    "coredumpctl",
    "systemd-inhibit_",
    "fail2ban-client_",
    "certbot_",
    "apachectl_",
    "nginx_",
    "php_",
    "named-checkconf",
    "named-checkzone",
    "postconf",
    "postqueue_",
    "mailq",
    "exim_",
    "doveconf",
    "sshd_",
    "visudo_",
    "pwck",
    "grpck",
    "id_",
    "getfattr",
    "column_",
    "date_",
];

pub fn classify(name: &str, args: &[Arg], cx: &mut Cx<'_>) -> Effect {
    if READERS.contains(&name) {
        return match name {
            "grep" | "egrep" | "fgrep" | "zgrep" | "rgrep" => grep(name, args, cx),
            // tr reads only its standard input: its operands are character
            // sets (`tr / _`, `tr -d '\r'`), never files.
            "tr" => Effect::ro("tr translates its input"),
            _ => files::reader(name, args, cx, &reader_value_opts(name)),
        };
    }
    if INSPECTORS.contains(&name) {
        return Effect::ro(format!("{name} reads system state"));
    }
    match name {
        "cp" => files::cp_like(name, args, cx, false),
        "install" => files::cp_like(name, args, cx, false),
        "mv" => files::cp_like(name, args, cx, true),
        "rm" | "rmdir" | "unlink" => files::rm(name, args, cx),
        "mkdir" => files::mkdir(args, cx),
        "touch" => files::touch(args, cx),
        "tee" => files::tee(args, cx),
        "ln" | "link" => files::ln(args, cx),
        "chmod" | "chown" | "chgrp" => files::chmod_like(name, args, cx),
        "setfacl" | "chattr" | "chcon" | "restorecon" | "setfattr" => {
            let mut e = files::chmod_like(name, args, cx);
            e.reason = format!("{name} changes file attributes");
            e
        }
        "truncate" | "fallocate" | "mkfifo" | "sponge" | "shuf_o" => {
            let o = super::args::Opts::parse(
                args,
                &[
                    "-s",
                    "--size",
                    "-r",
                    "--reference",
                    "-o",
                    "--offset",
                    "-l",
                    "--length",
                    "-m",
                    "--mode",
                ],
            );
            let mut e = Effect::new(Category::Write, Risk::Low, format!("{name} writes files"));
            for a in &o.operands {
                e.writes.push((cx.target(a), super::WriteKind::File));
            }
            e
        }
        "mktemp" => {
            let mut e = Effect::new(
                Category::Write,
                Risk::Low,
                "mktemp creates a temporary file",
            );
            let o = super::args::Opts::parse(args, &["-p", "--tmpdir", "--suffix"]);
            if let Some(d) = o.values_of(&["-p", "--tmpdir"]).first() {
                e.writes.push((cx.target(d), super::WriteKind::Tree));
            } else if let Some(t) = o.operands.first().filter(|t| t.text.contains('/')) {
                e.writes.push((cx.target(t), super::WriteKind::Create));
            }
            e
        }
        "split" => {
            let mut e = Effect::new(Category::Write, Risk::Low, "split writes pieces");
            e.writes.push((cx.cwd_target(), super::WriteKind::Tree));
            e
        }
        "csplit" => {
            let mut e = Effect::new(Category::Write, Risk::Low, "csplit writes pieces");
            e.writes.push((cx.cwd_target(), super::WriteKind::Tree));
            e
        }
        "shred" => {
            let o = super::args::Opts::parse(
                args,
                &["-n", "--iterations", "-s", "--size", "--random-source"],
            );
            let mut e = Effect::new(
                Category::Destructive,
                Risk::High,
                "shred destroys file contents",
            );
            for a in &o.operands {
                if a.plain().is_some_and(super::is_block_device) {
                    return Effect::critical(
                        Category::Destructive,
                        format!("shred overwrites the block device {}", a.text),
                    );
                }
                e.writes.push((cx.target(a), super::WriteKind::File));
                if o.has_any("u", &["remove"]) {
                    e.deletes.push(cx.target(a));
                }
            }
            e
        }
        "dd" => files::dd(args, cx),
        "find" => files::find(args, cx),
        "sed" => files::sed(args, cx),
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => files::awk(name, args, cx),
        "tar" => files::tar(args, cx),
        "gzip" | "gunzip" | "bzip2" | "bunzip2" | "xz" | "unxz" | "zstd" | "unzstd" | "lz4"
        | "unlz4" | "lzma" | "unlzma" | "pigz" | "pbzip2" | "pixz" | "compress" | "uncompress" => {
            files::compressor(name, args, cx)
        }
        "zip" => {
            for a in args {
                if a.text.starts_with("-TT") || a.text.starts_with("--unzip-command") {
                    return Effect::unknown("zip -TT runs a program");
                }
            }
            let o = super::args::Opts::parse(
                args,
                &["-b", "-n", "-t", "-tt", "-x", "-i", "-O", "--out"],
            );
            let mut e = Effect::new(Category::Write, Risk::Low, "zip writes an archive");
            let mut ops = o.operands.clone();
            if !ops.is_empty() {
                let archive = ops.remove(0);
                e.writes.push((cx.target(archive), super::WriteKind::File));
            }
            for a in ops {
                e.reads.push(cx.target(a));
            }
            if o.has('m') {
                e.merge(Effect::new(
                    Category::Delete,
                    Risk::High,
                    "zip -m deletes the originals",
                ));
            }
            e
        }
        "unzip" => {
            let o = super::args::Opts::parse(args, &["-d", "-x", "-P"]);
            if o.has('l') || o.has('t') || o.has('v') || o.has('Z') || o.has('p') || o.has('c') {
                return files::reader(name, args, cx, &["-d", "-x", "-P"]);
            }
            let mut e = Effect::new(Category::Write, Risk::Low, "unzip extracts files");
            let dir = o
                .values_of(&["-d"])
                .first()
                .map(|d| cx.target(d))
                .unwrap_or_else(|| cx.cwd_target());
            let dir = match dir {
                crate::paths::Target::Path(p) => crate::paths::Target::Beneath(p),
                other => other,
            };
            e.writes.push((dir, super::WriteKind::Tree));
            if let Some(a) = o.operands.first() {
                e.reads.push(cx.target(a));
            }
            e
        }
        "7z" | "7za" | "7zr" => {
            let sub = args.first().and_then(Arg::plain).unwrap_or("");
            match sub {
                "l" | "t" | "i" | "h" => Effect::ro("7z lists or tests an archive"),
                "x" | "e" => {
                    let mut e = Effect::new(Category::Write, Risk::Low, "7z extracts files");
                    e.writes.push((cx.cwd_target(), super::WriteKind::Tree));
                    e
                }
                "a" | "u" | "d" | "rn" => {
                    let mut e = Effect::new(Category::Write, Risk::Low, "7z writes an archive");
                    if let Some(a) = args.get(1) {
                        e.writes.push((cx.target(a), super::WriteKind::File));
                    }
                    e
                }
                _ => Effect::unknown("7z with an unknown command"),
            }
        }
        "sort" => files::sort(args, cx),
        "uniq" => files::uniq(args, cx),
        "xxd" => {
            let o = super::args::Opts::parse(
                args,
                &[
                    "-c", "-g", "-l", "-s", "-o", "-n", "-C", "-cols", "-len", "-seek",
                ],
            );
            let mut e = Effect::ro("xxd dumps");
            if let Some(i) = o.operands.first() {
                e.reads.push(cx.target(i));
            }
            if let Some(out) = o.operands.get(1) {
                let mut w = Effect::new(Category::Write, Risk::Low, "xxd writes its outfile");
                w.writes.push((cx.target(out), super::WriteKind::File));
                e.merge(w);
            }
            e
        }
        "yq" => {
            let o = super::args::Opts::parse(args, &[]);
            if o.has('i') || o.has_long("inplace") {
                let mut e = Effect::new(Category::Write, Risk::Low, "yq -i edits in place");
                for a in o.operands.iter().skip(1) {
                    e.writes.push((cx.target(a), super::WriteKind::Create));
                }
                return e;
            }
            files::reader(name, args, cx, &[])
        }
        "less" | "more" | "most" | "pg" => files::pager(name, args, cx),
        "man" => {
            for a in args {
                if a.text.starts_with("-P")
                    || a.text.starts_with("--pager")
                    || a.text.starts_with("-H")
                    || a.text.starts_with("--html")
                    || a.text.starts_with("-p")
                    || a.text.starts_with("--preprocessor")
                {
                    return Effect::unknown("man with a chosen pager or preprocessor");
                }
            }
            Effect::ro("man shows a manual page")
        }
        "vi" | "vim" | "nvim" | "view" | "vimdiff" | "ex" | "ed" | "red" | "nano" | "pico"
        | "emacs" | "emacsclient" | "joe" | "jed" | "mcedit" | "micro" | "kak" | "helix" | "hx"
        | "sudoedit" | "vipw" | "vigr" | "fc" | "mc" => files::editor(name),
        "rg" | "ripgrep" => {
            for a in args {
                if a.text.starts_with("--pre")
                    || a.text.starts_with("--search-zip")
                    || a.text == "-z"
                {
                    return Effect::unknown("rg --pre runs a program per file");
                }
            }
            files::reader(
                name,
                args,
                cx,
                &[
                    "-e",
                    "--regexp",
                    "-f",
                    "--file",
                    "-g",
                    "--glob",
                    "-t",
                    "--type",
                    "-T",
                    "--type-not",
                    "-m",
                    "--max-count",
                    "-A",
                    "-B",
                    "-C",
                    "--context",
                    "-j",
                    "--threads",
                    "-M",
                    "--max-columns",
                    "--max-depth",
                    "-r",
                    "--replace",
                    "--sort",
                    "--sortr",
                    "--color",
                    "--colors",
                    "--encoding",
                    "-E",
                ],
            )
        }
        "patch" => {
            let o = super::args::Opts::parse(
                args,
                &[
                    "-p",
                    "--strip",
                    "-d",
                    "--directory",
                    "-i",
                    "--input",
                    "-o",
                    "--output",
                    "-r",
                    "--reject-file",
                    "-B",
                    "--prefix",
                    "-z",
                    "--suffix",
                    "-D",
                    "--ifdef",
                    "-F",
                    "--fuzz",
                    "-V",
                    "--version-control",
                ],
            );
            if o.has_long("dry-run") {
                return Effect::ro("patch --dry-run");
            }
            let mut e = Effect::new(Category::Write, Risk::Low, "patch edits files");
            let dir = o
                .values_of(&["-d", "--directory"])
                .first()
                .map(|d| cx.target(d))
                .unwrap_or_else(|| cx.cwd_target());
            let dir = match dir {
                crate::paths::Target::Path(p) => crate::paths::Target::Beneath(p),
                other => other,
            };
            if let Some(out) = o.values_of(&["-o", "--output"]).first() {
                e.writes.push((cx.target(out), super::WriteKind::File));
            } else if let Some(f) = o.operands.first() {
                e.writes.push((cx.target(f), super::WriteKind::Create));
            } else {
                e.writes.push((dir, super::WriteKind::Tree));
            }
            for i in o.values_of(&["-i", "--input"]) {
                e.reads.push(cx.target(&i));
            }
            e
        }
        "htpasswd" => {
            let o = super::args::Opts::parse(args, &[]);
            if o.has('n') {
                return Effect::ro("htpasswd -n prints");
            }
            let mut e = Effect::new(
                Category::Write,
                Risk::Low,
                "htpasswd writes a password file",
            );
            if let Some(f) = o.operands.first() {
                e.writes.push((cx.target(f), super::WriteKind::Create));
            }
            e
        }
        "dmesg" => {
            if args.iter().any(|a| {
                let t = a.text.as_str();
                matches!(
                    t,
                    "-c" | "-C"
                        | "--clear"
                        | "--read-clear"
                        | "-D"
                        | "-E"
                        | "--console-off"
                        | "--console-on"
                ) || t.starts_with("-n")
                    || t.starts_with("--console-level")
            }) {
                Effect::new(
                    Category::Admin,
                    Risk::Medium,
                    "dmesg clears the ring buffer or changes the console level",
                )
                .with_caps(&["CAP_SYSLOG"])
            } else {
                Effect::ro("dmesg reads the kernel log").with_caps(&["CAP_SYSLOG"])
            }
        }
        "eval" => Effect::evasive("eval runs a computed string"),
        "source" | "." => Effect::evasive(format!("{name} runs a script file in the shell")),
        "alias" | "unalias" => Effect::evasive("aliases change what later command names run"),
        "enable" => Effect::evasive("enable changes which builtins exist"),
        "hash" => {
            if args.iter().any(|a| a.text.starts_with("-p")) {
                Effect::evasive("hash -p remaps a command name")
            } else {
                Effect::ro("hash")
            }
        }
        "shopt" => {
            let o = super::args::Opts::parse(args, &[]);
            if o.has('s') || o.has('u') {
                Effect::evasive("shopt changes how the shell parses later commands")
            } else {
                Effect::ro("shopt prints options")
            }
        }
        "trap" => {
            let first = args.first();
            match first {
                Some(a) if a.literal && (a.text.starts_with('-') || a.text.is_empty()) => {
                    Effect::ro("trap lists or resets")
                }
                Some(a) => match a.plain() {
                    Some(s) => {
                        cx.script(s);
                        Effect::ro("trap sets a handler (analysed)")
                    }
                    None => Effect::evasive("trap with a computed handler"),
                },
                None => Effect::ro("trap lists handlers"),
            }
        }
        "export" | "declare" | "typeset" | "readonly" => {
            for a in args {
                if let Some((n, _)) = a.text.split_once('=') {
                    let n = n.trim_end_matches('+');
                    if super::dangerous_var(n) {
                        return Effect::evasive(format!(
                            "{name} {n}=… changes what later commands run"
                        ));
                    }
                }
                if !a.literal && a.text.contains('=') {
                    return Effect::evasive(format!("{name} with a computed assignment"));
                }
            }
            Effect::ro(format!("{name} sets shell variables"))
        }
        "let" => {
            for a in args {
                if a.text.contains("$(") || a.text.contains('`') || a.text.contains('[') {
                    return Effect::evasive("let with substitutions or subscripts");
                }
            }
            Effect::ro("let computes")
        }
        "history" => {
            if args.iter().any(|a| {
                a.text.starts_with("-w")
                    || a.text.starts_with("-a")
                    || a.text.starts_with("-r")
                    || a.text.starts_with("-n")
            }) {
                Effect::unknown("history reads or writes a history file")
            } else {
                Effect::ro("history")
            }
        }
        "python" | "python2" | "python3" | "pypy" | "pypy3" | "perl" | "ruby" | "node"
        | "nodejs" | "php" | "lua" | "luajit" | "tclsh" | "wish" | "expect" | "java" | "deno"
        | "bun" | "Rscript" | "julia" | "pwsh" | "powershell" | "groovy" | "scala" | "guile"
        | "sbcl" | "osascript" | "jshell" | "irb" | "erl" | "elixir" | "iex" | "ghci"
        | "runghc" | "ocaml" | "racket" | "csi" | "gdb" | "lldb" | "strace" | "ltrace"
        | "valgrind" | "perf" | "bpftrace" | "script" | "screen" | "tmux" | "parallel"
        | "make_eval" | "socat" | "expect_" | "npx" | "pipx-run" | "uvx" => {
            if args.len() == 1
                && args.first().is_some_and(|a| {
                    matches!(a.text.as_str(), "--version" | "-V" | "-v" | "version")
                })
            {
                return Effect::ro(format!("{name} --version"));
            }
            if matches!(name, "python" | "python3") {
                if let Some(e) = super::packages::python_module(args, cx) {
                    return e;
                }
            }
            Effect::unknown(format!("{name} runs code the catalog cannot see"))
        }
        _ => system::classify(name, args, cx)
            .or_else(|| net::classify(name, args, cx))
            .unwrap_or_else(|| Effect::unknown(format!("{name} is not in the catalog"))),
    }
}

fn reader_value_opts(name: &str) -> Vec<&'static str> {
    match name {
        "head" | "tail" => vec![
            "-n",
            "--lines",
            "-c",
            "--bytes",
            "--pid",
            "-s",
            "--sleep-interval",
            "--max-unchanged-stats",
        ],
        "cut" => vec![
            "-b",
            "--bytes",
            "-c",
            "--characters",
            "-d",
            "--delimiter",
            "-f",
            "--fields",
            "--output-delimiter",
        ],
        "tr" => vec![],
        "ls" | "dir" | "vdir" => vec![
            "-I",
            "--ignore",
            "-w",
            "--width",
            "-T",
            "--tabsize",
            "--block-size",
            "--color",
            "--format",
            "--hide",
            "--indicator-style",
            "--quoting-style",
            "--sort",
            "--time",
            "--time-style",
        ],
        "du" => vec![
            "-B",
            "--block-size",
            "-d",
            "--max-depth",
            "-t",
            "--threshold",
            "--time-style",
            "-X",
            "--exclude-from",
            "--exclude",
            "--files0-from",
        ],
        "stat" => vec!["-c", "--format", "--printf"],
        "od" | "hexdump" => vec!["-A", "-j", "-N", "-t", "-w", "-S", "-n", "-s", "-e", "-f"],
        "diff" => vec![
            "-C",
            "-U",
            "--context",
            "--unified",
            "-I",
            "--ignore-matching-lines",
            "-x",
            "--exclude",
            "-X",
            "--exclude-from",
            "-S",
            "--starting-file",
            "--label",
            "-W",
            "--width",
            "--line-format",
            "--to-file",
            "--from-file",
            "-F",
            "--show-function-line",
            "--horizon-lines",
            "--color",
            "--palette",
        ],
        "column" => vec![
            "-s",
            "-o",
            "-c",
            "-t",
            "-N",
            "-R",
            "-H",
            "-E",
            "-J",
            "-W",
            "-d",
            "--table-columns",
            "--separator",
        ],
        "jq" => vec![
            "--arg",
            "--argjson",
            "--slurpfile",
            "--rawfile",
            "--indent",
            "-L",
            "--tab",
            "-f",
            "--from-file",
            "--args",
            "--jsonargs",
        ],
        "file" => vec![
            "-m",
            "--magic-file",
            "-F",
            "--separator",
            "-e",
            "--exclude",
            "-f",
            "--files-from",
            "-P",
            "--parameter",
        ],
        "tree" => vec![
            "-L",
            "-P",
            "-I",
            "-o",
            "--filelimit",
            "--timefmt",
            "--sort",
            "-H",
            "-T",
            "--charset",
        ],
        "wc" => vec!["--files0-from"],
        "base64" | "base32" | "basenc" | "fold" | "fmt" => {
            vec!["-w", "--wrap", "-s", "-t", "--width"]
        }
        "nl" => vec!["-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"],
        "paste" | "join" => vec![
            "-d",
            "--delimiters",
            "-t",
            "-1",
            "-2",
            "-j",
            "-o",
            "-e",
            "-a",
            "-v",
        ],
        "pr" => vec![
            "-h", "-l", "-w", "-W", "-o", "-N", "-s", "-S", "-e", "-i", "-n",
        ],
        _ => vec![],
    }
}

fn grep(name: &str, args: &[Arg], cx: &Cx<'_>) -> Effect {
    let vals = [
        "-e",
        "--regexp",
        "-f",
        "--file",
        "-m",
        "--max-count",
        "-A",
        "--after-context",
        "-B",
        "--before-context",
        "-C",
        "--context",
        "--include",
        "--exclude",
        "--exclude-dir",
        "--exclude-from",
        "--label",
        "--color",
        "--colour",
        "-d",
        "--directories",
        "-D",
        "--devices",
        "--binary-files",
        "--group-separator",
    ];
    let o = super::args::Opts::parse(args, &vals);
    let mut e = Effect::ro(format!("{name} searches"));
    let mut ops = o.operands.clone();
    if !o.has_value(&["-e", "--regexp", "-f", "--file"]) && !ops.is_empty() {
        ops.remove(0);
    }
    for f in o.values_of(&["-f", "--file"]) {
        e.reads.push(cx.target(&f));
    }
    for a in ops {
        e.reads.push(cx.target(a));
    }
    e
}
