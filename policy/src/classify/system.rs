//! systemd, services, packages, users, kernel, disks, firewall, reboot.

use super::args::Opts;
use super::{Cx, Effect, WriteKind};
use crate::shell::Arg;
use crate::types::{Category, Risk};

pub(super) const PKG_CAPS: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_SETUID",
    "CAP_SETGID",
    "CAP_SETFCAP",
    "CAP_MKNOD",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];
pub(super) const USER_CAPS: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_SETUID",
    "CAP_SETGID",
    "CAP_AUDIT_WRITE",
];
pub(super) const NET_CAPS: &[&str] = &["CAP_NET_ADMIN", "CAP_NET_RAW"];

pub(super) fn package(reason: String) -> Effect {
    Effect::new(Category::Package, Risk::High, reason)
        .with_caps(PKG_CAPS)
        .wide()
}

pub(super) fn package_meta(reason: String) -> Effect {
    Effect::new(Category::Package, Risk::Medium, reason)
        .with_caps(PKG_CAPS)
        .wide()
}

pub(super) fn service(reason: String) -> Effect {
    Effect::new(Category::Service, Risk::High, reason)
}

/// True when the command is exactly a netfilter listing
/// ([`crate::netfilter`]): every word literal, none a pattern.
fn listing(name: &str, args: &[Arg]) -> bool {
    if args
        .iter()
        .any(|a| !a.literal || a.glob || a.under.is_some())
    {
        return false;
    }
    let argv: Vec<String> = std::iter::once(name.to_string())
        .chain(args.iter().map(|a| a.text.clone()))
        .collect();
    crate::netfilter::is_listing(&argv)
}

pub(super) fn admin(risk: Risk, reason: String, caps: &[&'static str]) -> Effect {
    Effect::new(Category::Admin, risk, reason).with_caps(caps)
}

pub(super) fn reboot(reason: String) -> Effect {
    Effect::new(Category::Reboot, Risk::High, reason).with_caps(&["CAP_SYS_BOOT"])
}

/// The first non-option operand (a subcommand), skipping options that take values.
pub(super) fn subcommand<'a>(args: &'a [Arg], with_value: &[&str]) -> (Option<&'a str>, Opts<'a>) {
    let o = Opts::parse(args, with_value);
    let sub = o.operands.first().and_then(|a| a.plain());
    (sub, o)
}

fn is_sysward_unit(u: &str) -> bool {
    let u = u
        .trim_end_matches(".service")
        .trim_end_matches(".socket")
        .trim_end_matches(".timer");
    u.starts_with("sysward")
}

pub fn classify(name: &str, args: &[Arg], cx: &mut Cx<'_>) -> Option<Effect> {
    Some(match name {
        "systemctl" => systemctl(args),
        "service" => {
            let ops: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
            match ops.as_slice() {
                [] | ["--status-all"] | ["--help"] | ["--version"] => Effect::ro("service lists"),
                [unit, ..] if is_sysward_unit(unit) => {
                    Effect::critical(Category::Service, "touches sysward's own service")
                }
                [_, "status"] => Effect::ro("service status"),
                [_, action, ..] => service(format!("service {action}")),
                [_] => Effect::ro("service usage"),
            }
        }
        "journalctl" => {
            let o = Opts::parse(args, &[]);
            let mut e = Effect::ro("journalctl reads the journal");
            for a in args {
                let t = a.text.as_str();
                if t.starts_with("--vacuum") {
                    e = Effect::new(
                        Category::Delete,
                        Risk::High,
                        "journalctl --vacuum deletes journal files",
                    )
                    .wide();
                    e.deletes
                        .push(crate::paths::Target::Beneath("/var/log/journal".into()));
                    e.deletes
                        .push(crate::paths::Target::Beneath("/run/log/journal".into()));
                    return Some(e.with_caps(&["CAP_DAC_OVERRIDE"]));
                }
                if matches!(
                    t,
                    "--rotate"
                        | "--flush"
                        | "--sync"
                        | "--relinquish-var"
                        | "--smart-relinquish-var"
                        | "--setup-keys"
                        | "--update-catalog"
                ) {
                    return Some(
                        admin(
                            Risk::Medium,
                            format!("journalctl {t} changes the journal"),
                            &["CAP_DAC_OVERRIDE"],
                        )
                        .wide(),
                    );
                }
            }
            let _ = o;
            e
        }
        "systemd-run" | "systemd-nspawn" | "machinectl" | "nsenter" | "unshare" | "at"
        | "batch" | "atq_" | "pkexec" => admin(
            Risk::High,
            format!("{name} runs a command outside this action's confinement"),
            &[],
        ),
        "atq" | "atrm" => {
            if name == "atq" {
                Effect::ro("atq lists jobs")
            } else {
                admin(Risk::Medium, "atrm removes jobs".into(), &[])
            }
        }
        "crontab" => {
            let o = Opts::parse(args, &["-u"]);
            if o.has('l') {
                Effect::ro("crontab -l lists")
            } else if o.has('r') {
                Effect::new(
                    Category::Delete,
                    Risk::High,
                    "crontab -r deletes the crontab",
                )
                .wide()
            } else if o.has('e') {
                super::files::editor("crontab -e")
            } else {
                admin(
                    Risk::High,
                    "crontab installs scheduled commands".into(),
                    &[],
                )
                .wide()
            }
        }
        "apt" | "apt-get" | "aptitude" => super::packages::apt(name, args),
        "apt-mark" => {
            let (sub, _) = subcommand(args, &[]);
            match sub {
                Some(s) if s.starts_with("show") => Effect::ro("apt-mark shows"),
                Some(s) => package_meta(format!("apt-mark {s}")),
                None => Effect::ro("apt-mark usage"),
            }
        }
        "apt-key" => {
            let (sub, _) = subcommand(args, &["--keyring"]);
            match sub {
                Some("list" | "finger" | "fingerprint" | "export" | "exportall") => {
                    Effect::ro("apt-key lists")
                }
                _ => package("apt-key changes trusted keys".into()),
            }
        }
        "add-apt-repository" | "apt-add-repository" => {
            package(format!("{name} adds a package source")).net()
        }
        "dpkg" => super::packages::dpkg(args),
        "dpkg-reconfigure"
        | "dpkg-divert"
        | "dpkg-statoverride"
        | "update-alternatives"
        | "ucf"
        | "pam-auth-update" => {
            let ro = args.iter().any(|a| {
                matches!(
                    a.text.as_str(),
                    "--list"
                        | "--display"
                        | "--query"
                        | "--get-selections"
                        | "--help"
                        | "--version"
                )
            });
            if ro {
                Effect::ro(format!("{name} lists"))
            } else {
                package(format!("{name} changes package configuration"))
            }
        }
        "dnf" | "yum" | "microdnf" | "dnf5" => {
            let (sub, o) = subcommand(
                args,
                &[
                    "-c",
                    "--config",
                    "--setopt",
                    "--releasever",
                    "--installroot",
                    "--enablerepo",
                    "--disablerepo",
                    "-x",
                    "--exclude",
                    "--repo",
                    "--repoid",
                ],
            );
            if o.has_value(&["-c", "--config", "--setopt", "--installroot"]) {
                return Some(Effect::unknown(format!(
                    "{name} with a chosen configuration"
                )));
            }
            match sub {
                None => Effect::ro(format!("{name} usage")),
                Some(
                    "list"
                    | "info"
                    | "search"
                    | "provides"
                    | "whatprovides"
                    | "repolist"
                    | "repoinfo"
                    | "deplist"
                    | "repoquery"
                    | "check"
                    | "check-update"
                    | "updateinfo"
                    | "changelog"
                    | "help"
                    | "version"
                    | "alias"
                    | "config-manager-dump",
                ) => Effect::ro(format!("{name} queries packages")),
                Some("history") => {
                    let s2 = o.operands.get(1).and_then(|a| a.plain()).unwrap_or("list");
                    if matches!(s2, "list" | "info" | "summary" | "userinstalled") {
                        Effect::ro("dnf history lists")
                    } else {
                        package(format!("{name} history {s2}")).net()
                    }
                }
                Some("makecache" | "clean") => {
                    package_meta(format!("{name} {}", sub.unwrap_or(""))).net()
                }
                Some(s) => package(format!("{name} {s}")).net(),
            }
        }
        "rpm" => {
            let query = args.iter().any(|a| {
                let t = a.text.as_str();
                (t.starts_with("-q")
                    || t == "--query"
                    || t.starts_with("-V")
                    || t == "--verify"
                    || t == "--querytags"
                    || t == "--showrc"
                    || t == "--eval"
                    || t == "-E"
                    || t == "--version")
                    && !t.starts_with("--eval")
            });
            if args
                .iter()
                .any(|a| a.text.starts_with("--eval") || a.text == "-E")
            {
                Effect::unknown("rpm --eval expands macros (can run shell)")
            } else if query {
                Effect::ro("rpm queries")
            } else {
                package("rpm installs or removes packages".into())
            }
        }
        "pacman" | "yay" | "paru" => {
            let first = args.first().map(|a| a.text.as_str()).unwrap_or("");
            if first.starts_with("-Q")
                || first.starts_with("-Ss")
                || first.starts_with("-Si")
                || first.starts_with("-Sl")
                || first.starts_with("-Sg")
                || first == "-F"
                || first.starts_with("-Fl")
                || first.starts_with("-Fx")
                || first == "-V"
                || first == "--version"
                || first == "-h"
            {
                Effect::ro(format!("{name} queries"))
            } else if first.starts_with("-Sc") {
                package_meta(format!("{name} -Sc cleans the cache"))
            } else {
                package(format!("{name} changes packages")).net()
            }
        }
        "zypper" => {
            let (sub, _) = subcommand(args, &["-R", "--root", "-c", "--config"]);
            match sub {
                None => Effect::ro("zypper usage"),
                Some(
                    "search" | "se" | "info" | "if" | "list-updates" | "lu" | "patches" | "pch"
                    | "repos" | "lr" | "packages" | "pa" | "products" | "pd" | "what-provides"
                    | "wp" | "patterns" | "pt" | "locks" | "ll" | "services" | "ls" | "help" | "lp"
                    | "list-patches",
                ) => Effect::ro("zypper queries"),
                Some("refresh" | "ref" | "clean" | "cc") => {
                    package_meta(format!("zypper {}", sub.unwrap_or(""))).net()
                }
                Some(s) => package(format!("zypper {s}")).net(),
            }
        }
        "apk" => {
            let (sub, _) = subcommand(
                args,
                &[
                    "-X",
                    "--repository",
                    "-p",
                    "--root",
                    "--arch",
                    "--keys-dir",
                    "--cache-dir",
                ],
            );
            match sub {
                None => Effect::ro("apk usage"),
                Some(
                    "info" | "search" | "list" | "policy" | "version" | "audit" | "stats" | "dot"
                    | "verify" | "manifest",
                ) => Effect::ro("apk queries"),
                Some("update" | "cache") => {
                    package_meta(format!("apk {}", sub.unwrap_or(""))).net()
                }
                Some(s) => package(format!("apk {s}")).net(),
            }
        }
        "snap" | "flatpak" => {
            let (sub, _) = subcommand(args, &[]);
            match sub {
                None => Effect::ro(format!("{name} usage")),
                Some(
                    "list" | "info" | "find" | "search" | "services" | "logs" | "changes"
                    | "change" | "version" | "connections" | "interfaces" | "remotes" | "remote-ls"
                    | "history" | "help" | "warnings" | "get" | "tasks" | "ps" | "documents",
                ) => Effect::ro(format!("{name} queries")),
                Some("start" | "stop" | "restart") => {
                    service(format!("{name} {}", sub.unwrap_or("")))
                }
                Some("run") => Effect::unknown(format!("{name} run runs an application")),
                Some(s) => package(format!("{name} {s}")).net(),
            }
        }
        "pip" | "pip3" | "pip2" => super::packages::pip(name, args),
        "pipx" | "gem" | "cargo-install" | "npm" | "yarn" | "pnpm" | "composer" | "bundle"
        | "bundler" | "cpan" | "cpanm" | "luarocks" | "conda" | "mamba" | "uv" | "poetry" => {
            super::packages::lang_pkg(name, args, cx)
        }
        "cargo" | "go" | "make" | "gmake" | "cmake" | "ninja" | "meson" | "gcc" | "g++" | "cc"
        | "c++" | "clang" | "clang++" | "rustc" | "javac" | "mvn" | "gradle" | "ant" | "dotnet"
        | "tsc" => super::packages::build(name, args, cx),
        "useradd" | "adduser" | "usermod" | "groupadd" | "addgroup" | "groupmod" | "gpasswd"
        | "chpasswd" | "chsh" | "chfn" | "newusers" | "passwd" | "chage" | "pwconv" | "grpconv"
        | "pwunconv" | "grpunconv" | "newgrp" | "sg" => {
            if name == "passwd" && args.iter().any(|a| a.text == "-S" || a.text == "--status") {
                return Some(Effect::ro("passwd -S shows status"));
            }
            if name == "chage" && args.iter().any(|a| a.text == "-l" || a.text == "--list") {
                return Some(Effect::ro("chage -l lists"));
            }
            if args.iter().any(|a| {
                a.plain()
                    .is_some_and(|t| t == "sysward" || t == "sysward-agent")
            }) {
                return Some(Effect::critical(
                    Category::Admin,
                    "changes sysward's own accounts",
                ));
            }
            admin(
                Risk::High,
                format!("{name} changes users or groups"),
                USER_CAPS,
            )
            .wide()
        }
        "userdel" | "deluser" | "groupdel" | "delgroup" => {
            if args.iter().any(|a| {
                a.plain()
                    .is_some_and(|t| t == "root" || t == "sysward" || t == "sysward-agent")
            }) {
                return Some(Effect::critical(
                    Category::Destructive,
                    format!("{name} of root or sysward's own account"),
                ));
            }
            Effect::new(
                Category::Destructive,
                Risk::High,
                format!("{name} deletes accounts"),
            )
            .with_caps(USER_CAPS)
            .wide()
        }
        "kill" | "pkill" | "killall" | "skill" | "killall5" | "slay" => kill(name, args),
        "renice" => admin(
            Risk::Medium,
            "renice changes process priority".into(),
            &["CAP_SYS_NICE"],
        ),
        "mount" | "umount" | "swapon" | "swapoff" | "losetup" | "fusermount" | "mount.nfs"
        | "umount.nfs" => {
            if args.is_empty()
                || (name == "swapon" && args.iter().any(|a| a.text == "--show" || a.text == "-s"))
                || (name == "losetup"
                    && args.iter().all(|a| {
                        matches!(
                            a.text.as_str(),
                            "-l" | "-a"
                                | "--list"
                                | "--all"
                                | "-J"
                                | "--json"
                                | "-n"
                                | "--noheadings"
                        )
                    }))
                || (name == "mount"
                    && args.iter().all(|a| {
                        matches!(a.text.as_str(), "-l" | "-t")
                            || !a.text.starts_with('/')
                                && a.text.len() < 10
                                && args.len() <= 2
                                && args
                                    .first()
                                    .is_some_and(|f| f.text == "-t" || f.text == "-l")
                    }))
            {
                Effect::ro(format!("{name} lists"))
            } else {
                let mut e = admin(
                    Risk::High,
                    format!("{name} changes mounts"),
                    &["CAP_SYS_ADMIN", "CAP_DAC_OVERRIDE"],
                )
                .wide();
                e.mount = true;
                e
            }
        }
        "modprobe" | "insmod" | "rmmod" | "depmod" | "kmod" => {
            if args.iter().any(|a| {
                matches!(
                    a.text.as_str(),
                    "-n" | "--dry-run" | "--show-depends" | "-c" | "--showconfig" | "-D"
                )
            }) {
                Effect::ro(format!("{name} dry run"))
            } else {
                admin(
                    Risk::High,
                    format!("{name} loads or unloads kernel modules"),
                    &["CAP_SYS_MODULE"],
                )
                .wide()
            }
        }
        "sysctl" => {
            let o = Opts::parse(args, &["-p", "--load", "-r", "--pattern"]);
            let writes = o.has('w')
                || o.has_long("write")
                || o.has_value(&["-p", "--load"])
                || o.has('p')
                || o.has_long("system")
                || o.operands.iter().any(|a| a.text.contains('='));
            if writes {
                admin(
                    Risk::High,
                    "sysctl changes kernel parameters".into(),
                    &["CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_DAC_OVERRIDE"],
                )
                .wide()
            } else {
                Effect::ro("sysctl reads kernel parameters")
            }
        }
        "hostname" => {
            let o = Opts::parse(args, &["-F", "--file"]);
            if o.operands.is_empty() && !o.has_value(&["-F", "--file"]) {
                Effect::ro("hostname prints")
            } else {
                admin(
                    Risk::High,
                    "hostname sets the host name".into(),
                    &["CAP_SYS_ADMIN"],
                )
            }
        }
        "hostnamectl" | "timedatectl" | "localectl" => {
            let (sub, _) = subcommand(args, &[]);
            match sub {
                None
                | Some(
                    "status"
                    | "show"
                    | "list-timezones"
                    | "timesync-status"
                    | "show-timesync"
                    | "list-locales"
                    | "list-keymaps"
                    | "list-x11-keymap-models"
                    | "list-x11-keymap-layouts"
                    | "hostname"
                    | "icon-name"
                    | "chassis"
                    | "deployment"
                    | "location",
                ) if args.len() <= 1
                    || sub.is_none()
                    || matches!(
                        sub,
                        Some(
                            "status"
                                | "show"
                                | "list-timezones"
                                | "timesync-status"
                                | "show-timesync"
                                | "list-locales"
                                | "list-keymaps"
                        )
                    ) =>
                {
                    Effect::ro(format!("{name} shows"))
                }
                Some(s) => admin(
                    Risk::Medium,
                    format!("{name} {s}"),
                    &["CAP_SYS_TIME", "CAP_SYS_ADMIN"],
                )
                .wide(),
                None => Effect::ro(format!("{name} shows")),
            }
        }
        "date" => {
            let o = Opts::parse(
                args,
                &[
                    "-d",
                    "--date",
                    "-f",
                    "--file",
                    "-r",
                    "--reference",
                    "-I",
                    "--iso-8601",
                    "--rfc-3339",
                    "-s",
                    "--set",
                ],
            );
            if o.has_value(&["-s", "--set"])
                || o.operands
                    .iter()
                    .any(|a| a.text.chars().next().is_some_and(|c| c.is_ascii_digit()))
            {
                admin(
                    Risk::Medium,
                    "date sets the clock".into(),
                    &["CAP_SYS_TIME"],
                )
            } else {
                Effect::ro("date prints")
            }
        }
        "hwclock" => {
            if args.iter().all(|a| {
                matches!(
                    a.text.as_str(),
                    "-r" | "--show"
                        | "--get"
                        | "-V"
                        | "--version"
                        | "--verbose"
                        | "--utc"
                        | "--localtime"
                        | "-u"
                        | "-l"
                )
            }) {
                Effect::ro("hwclock shows")
            } else {
                admin(
                    Risk::Medium,
                    "hwclock sets a clock".into(),
                    &["CAP_SYS_TIME"],
                )
            }
        }
        "ip" => ip(args),
        "ethtool" => {
            let changes = args.iter().any(|a| {
                let t = a.text.as_str();
                matches!(
                    t,
                    "-s" | "-K"
                        | "-A"
                        | "-G"
                        | "-C"
                        | "-L"
                        | "-E"
                        | "-f"
                        | "-r"
                        | "-W"
                        | "-U"
                        | "-N"
                        | "-X"
                        | "-u"
                        | "-p"
                        | "--change"
                        | "--features"
                        | "--offload"
                        | "--pause"
                        | "--coalesce"
                        | "--flash"
                        | "--reset"
                        | "--change-eeprom"
                        | "--config-nfc"
                        | "--config-ntuple"
                        | "--negotiate"
                        | "--identify"
                ) || t.starts_with("--set-")
            });
            if changes {
                admin(Risk::High, "ethtool changes an interface".into(), NET_CAPS)
            } else {
                Effect::ro("ethtool shows an interface")
            }
        }
        "ifconfig" | "route" | "arp" | "iwconfig" | "tc" | "bridge" | "brctl" | "iw" | "ipset"
        | "conntrack" | "ebtables" | "arptables" => {
            let ro_args = args.is_empty()
                || args.iter().all(|a| {
                    a.text.starts_with('-')
                        && matches!(
                            a.text.as_str(),
                            "-n" | "-a"
                                | "-v"
                                | "-e"
                                | "-s"
                                | "-i"
                                | "-S"
                                | "-k"
                                | "-g"
                                | "-l"
                                | "-L"
                                | "--list"
                                | "-j"
                                | "-p"
                                | "-d"
                        )
                })
                || args.iter().any(|a| {
                    matches!(
                        a.text.as_str(),
                        "show"
                            | "list"
                            | "ls"
                            | "dev"
                            | "info"
                            | "-L"
                            | "--list"
                            | "-l"
                            | "-i"
                            | "--driver"
                            | "-S"
                            | "--statistics"
                            | "-k"
                            | "--show-features"
                            | "link"
                            | "scan"
                            | "stats"
                    )
                }) && !args.iter().any(|a| {
                    matches!(
                        a.text.as_str(),
                        "add"
                            | "del"
                            | "delete"
                            | "change"
                            | "replace"
                            | "set"
                            | "flush"
                            | "-s"
                            | "-K"
                            | "-A"
                            | "-G"
                            | "-C"
                            | "-F"
                            | "-D"
                            | "-X"
                            | "-d"
                            | "up"
                            | "down"
                            | "create"
                            | "destroy"
                            | "restore"
                            | "swap"
                            | "rename"
                    )
                });
            if ro_args {
                Effect::ro(format!("{name} shows network state"))
            } else {
                admin(
                    Risk::High,
                    format!("{name} changes network configuration"),
                    NET_CAPS,
                )
            }
        }
        "nft" => {
            let o = Opts::parse(args, &["-f", "--file", "-I", "--includepath"]);
            if o.has('c') || o.has_long("check") {
                return Some(Effect::ro("nft -c checks a ruleset"));
            }
            if o.has('i') || o.has_long("interactive") {
                return Some(Effect::evasive("nft -i reads commands from its input"));
            }
            let first = o.operands.first().and_then(|a| a.plain()).unwrap_or("");
            if o.has_value(&["-f", "--file"]) {
                admin(Risk::High, "nft loads a ruleset file".into(), NET_CAPS)
            } else if listing(name, args) {
                Effect::ro("nft lists rules").netfilter_listing()
            } else if matches!(first, "list" | "describe" | "monitor" | "--version" | "-v")
                || o.operands.is_empty()
            {
                Effect::ro("nft lists rules (not a listing form that keeps CAP_NET_ADMIN)")
            } else {
                admin(
                    Risk::High,
                    format!("nft {first} changes the firewall"),
                    NET_CAPS,
                )
            }
        }
        "iptables" | "ip6tables" | "iptables-legacy" | "ip6tables-legacy" | "iptables-nft"
        | "ip6tables-nft" | "arptables-nft" | "ebtables-nft" => {
            let changes = args.iter().any(|a| {
                let t = a.text.as_str();
                matches!(
                    t,
                    "-A" | "--append"
                        | "-I"
                        | "--insert"
                        | "-D"
                        | "--delete"
                        | "-R"
                        | "--replace"
                        | "-F"
                        | "--flush"
                        | "-X"
                        | "--delete-chain"
                        | "-N"
                        | "--new-chain"
                        | "-P"
                        | "--policy"
                        | "-Z"
                        | "--zero"
                        | "-E"
                        | "--rename-chain"
                ) || (t.starts_with('-')
                    && !t.starts_with("--")
                    && t.len() > 2
                    && t[1..].chars().any(|c| "AIDRFXNPZE".contains(c)))
            });
            if changes {
                admin(Risk::High, format!("{name} changes the firewall"), NET_CAPS)
            } else if listing(name, args) {
                Effect::ro(format!("{name} lists rules")).netfilter_listing()
            } else {
                Effect::ro(format!(
                    "{name} lists rules (not a listing form that keeps CAP_NET_ADMIN)"
                ))
            }
        }
        "iptables-save" | "ip6tables-save" | "nft-save" => {
            let e = super::files::output_file(
                name,
                args,
                cx,
                &["-f", "--file"],
                &["-t", "--table", "-M", "--modprobe"],
            );
            if listing(name, args) {
                e.netfilter_listing()
            } else {
                e
            }
        }
        "iptables-restore" | "ip6tables-restore" | "iptables-apply" | "netfilter-persistent" => {
            if args.iter().any(|a| a.text == "-t" || a.text == "--test") {
                Effect::ro(format!("{name} --test"))
            } else {
                admin(
                    Risk::High,
                    format!("{name} replaces the firewall rules"),
                    NET_CAPS,
                )
            }
        }
        "ufw" | "firewall-cmd" | "firewall-offline-cmd" => {
            let ro = args.is_empty()
                || args.iter().all(|a| {
                    let t = a.text.as_str();
                    matches!(
                        t,
                        "status"
                            | "verbose"
                            | "numbered"
                            | "show"
                            | "app"
                            | "list"
                            | "info"
                            | "version"
                            | "--version"
                            | "--state"
                            | "--help"
                    ) || t.starts_with("--list")
                        || t.starts_with("--get")
                        || t.starts_with("--query")
                        || t.starts_with("--info")
                        || t.starts_with("--zone")
                        || t == "--permanent"
                });
            if ro {
                Effect::ro(format!("{name} shows the firewall"))
            } else {
                admin(Risk::High, format!("{name} changes the firewall"), NET_CAPS).wide()
            }
        }
        "nmcli" | "networkctl" | "resolvectl" | "systemd-resolve" | "netplan" | "ifup"
        | "ifdown" | "dhclient" | "dhcpcd" | "wpa_cli" => {
            let ro = args.is_empty()
                || args.iter().all(|a| {
                    let t = a.text.as_str();
                    t.starts_with('-') && !matches!(t, "--flush-caches" | "--set-dns" | "--revert")
                        || matches!(
                            t,
                            "status"
                                | "show"
                                | "list"
                                | "query"
                                | "statistics"
                                | "dns"
                                | "domain"
                                | "general"
                                | "device"
                                | "connection"
                                | "con"
                                | "dev"
                                | "g"
                                | "c"
                                | "d"
                                | "radio"
                                | "monitor"
                                | "lldp"
                                | "get"
                                | "info"
                                | "--dry-run"
                        )
                });
            if ro && !matches!(name, "ifup" | "ifdown" | "dhclient" | "dhcpcd") {
                Effect::ro(format!("{name} shows network state"))
            } else if name == "netplan"
                && args
                    .first()
                    .is_some_and(|a| matches!(a.text.as_str(), "get" | "info" | "generate"))
            {
                Effect::ro("netplan get")
            } else {
                admin(
                    Risk::High,
                    format!("{name} changes network configuration"),
                    NET_CAPS,
                )
                .wide()
            }
        }
        "chronyc" | "ntpdate" | "sntp" => {
            let ro = name == "chronyc"
                && args.iter().all(|a| {
                    matches!(
                        a.text.as_str(),
                        "tracking"
                            | "sources"
                            | "sourcestats"
                            | "activity"
                            | "clients"
                            | "ntpdata"
                            | "serverstats"
                            | "-n"
                            | "-v"
                            | "-c"
                            | "rtcdata"
                            | "waitsync"
                    )
                });
            if ro {
                Effect::ro("chronyc shows")
            } else {
                admin(
                    Risk::Medium,
                    format!("{name} adjusts the clock"),
                    &["CAP_SYS_TIME"],
                )
                .net()
            }
        }
        "reboot" | "poweroff" | "halt" | "shutdown" | "kexec" | "telinit" | "init" | "rtcwake" => {
            if matches!(name, "init" | "telinit")
                && args.first().is_some_and(|a| {
                    matches!(
                        a.text.as_str(),
                        "q" | "Q" | "u" | "U" | "--version" | "--help"
                    )
                })
            {
                return Some(admin(Risk::Medium, format!("{name} reloads init"), &[]));
            }
            if name == "shutdown" && args.iter().any(|a| a.text == "-c" || a.text == "--show") {
                return Some(admin(
                    Risk::Medium,
                    "shutdown -c cancels a shutdown".into(),
                    &["CAP_SYS_BOOT"],
                ));
            }
            reboot(format!("{name} stops or restarts the machine"))
        }
        "update-grub" | "grub-install" | "grub-mkconfig" | "grub2-mkconfig"
        | "update-initramfs" | "mkinitcpio" | "dracut" | "bootctl" | "efibootmgr"
        | "kernel-install" => {
            if args.is_empty() && matches!(name, "efibootmgr" | "bootctl")
                || args
                    .iter()
                    .any(|a| matches!(a.text.as_str(), "status" | "list" | "-v"))
                    && !args.iter().any(|a| {
                        a.text.starts_with("-c")
                            || a.text.starts_with("-b")
                            || a.text == "-B"
                            || a.text == "install"
                            || a.text == "update"
                            || a.text == "remove"
                    })
            {
                Effect::ro(format!("{name} shows boot configuration"))
            } else {
                admin(
                    Risk::High,
                    format!("{name} changes how the machine boots"),
                    PKG_CAPS,
                )
                .wide()
            }
        }
        "mkfs" | "mke2fs" | "mkswap" | "mkdosfs" | "mkntfs" | "mkexfatfs" | "wipefs"
        | "blkdiscard" | "sfdisk" | "sgdisk" | "fdisk" | "gdisk" | "cfdisk" | "parted"
        | "partprobe" | "cryptsetup" | "badblocks" | "zpool" | "zfs" | "mdadm" | "lvremove"
        | "vgremove" | "pvremove" | "lvcreate" | "vgcreate" | "pvcreate" | "lvextend"
        | "lvreduce" | "lvresize" | "vgextend" | "vgreduce" | "pvmove" | "pvresize"
        | "resize2fs" | "xfs_growfs" | "e2fsck" | "fsck" | "xfs_repair" | "tune2fs" | "btrfs"
        | "hdparm" | "nvme" | "smartctl" | "dmsetup" | "blockdev" | "fstrim" | "mkfs.ext4"
        | "mkfs.ext3" | "mkfs.ext2" | "mkfs.xfs" | "mkfs.btrfs" | "mkfs.vfat" | "mkfs.fat"
        | "mkfs.exfat" | "mkfs.ntfs" | "mkfs.f2fs" | "sync" | "swaplabel" | "e2label"
        | "xfs_admin" => super::storage::disks(name, args),
        _ if name.starts_with("mkfs.") || name.starts_with("fsck.") => {
            super::storage::disks(name, args)
        }
        "nginx" | "apachectl" | "apache2ctl" | "httpd" | "php-fpm" | "haproxy" | "postfix"
        | "rndc" | "supervisorctl" | "pm2" | "exim" | "exim4" | "dovecot" | "named" | "sshd"
        | "squid" | "varnishadm" | "caddy" | "traefik" | "lighttpd" => daemon_ctl(name, args),
        _ if name.starts_with("php-fpm")
            || name.starts_with("php")
                && name.len() <= 6
                && name[3..].chars().all(|c| c.is_ascii_digit() || c == '.') =>
        {
            if args.iter().any(|a| {
                a.text == "-t"
                    || a.text == "-v"
                    || a.text == "--version"
                    || a.text == "-m"
                    || a.text == "-i"
            }) {
                Effect::ro(format!("{name} checks"))
            } else {
                Effect::unknown(format!("{name} runs code"))
            }
        }
        "update-rc.d" | "chkconfig" | "rc-update" | "rc-service" | "sv" | "initctl"
        | "invoke-rc.d" | "needrestart" => {
            if args
                .iter()
                .any(|a| matches!(a.text.as_str(), "--list" | "show" | "status" | "-b" | "-l"))
                && !args.iter().any(|a| {
                    matches!(
                        a.text.as_str(),
                        "restart"
                            | "stop"
                            | "start"
                            | "reload"
                            | "add"
                            | "del"
                            | "enable"
                            | "disable"
                            | "defaults"
                            | "remove"
                            | "on"
                            | "off"
                    )
                })
            {
                Effect::ro(format!("{name} lists"))
            } else if args.iter().any(|a| a.plain().is_some_and(is_sysward_unit)) {
                Effect::critical(Category::Service, "touches sysward's own service")
            } else {
                service(format!("{name} changes services"))
            }
        }
        "fail2ban-client" => {
            if args.iter().all(|a| {
                matches!(
                    a.text.as_str(),
                    "status" | "ping" | "version" | "-V" | "--version" | "-h"
                ) || !args.iter().any(|x| {
                    matches!(
                        x.text.as_str(),
                        "set"
                            | "unban"
                            | "reload"
                            | "start"
                            | "stop"
                            | "restart"
                            | "add"
                            | "banip"
                            | "unbanip"
                            | "flushlogs"
                    )
                })
            }) {
                Effect::ro("fail2ban-client shows")
            } else {
                service("fail2ban-client changes bans or jails".into())
            }
        }
        "unattended-upgrade"
        | "unattended-upgrades"
        | "do-release-upgrade"
        | "apt-listchanges"
        | "pkcon"
        | "packagekit" => {
            if args
                .iter()
                .any(|a| matches!(a.text.as_str(), "--dry-run" | "-d" | "--help" | "--version"))
            {
                Effect::ro(format!("{name} dry run"))
            } else {
                package(format!("{name} upgrades packages")).net()
            }
        }
        "logrotate" => {
            if args.iter().any(|a| a.text == "-d" || a.text == "--debug") {
                Effect::ro("logrotate -d")
            } else {
                admin(Risk::Medium, "logrotate rotates logs".into(), PKG_CAPS).wide()
            }
        }
        "setcap" | "setenforce" | "semanage" | "aa-enforce" | "aa-complain" | "aa-disable"
        | "apparmor_parser" | "auditctl" | "augenrules" | "setsebool" => {
            if name == "auditctl" && args.iter().all(|a| a.text == "-l" || a.text == "-s") {
                Effect::ro("auditctl lists")
            } else {
                admin(
                    Risk::High,
                    format!("{name} changes security policy"),
                    &[
                        "CAP_SYS_ADMIN",
                        "CAP_MAC_ADMIN",
                        "CAP_SETFCAP",
                        "CAP_AUDIT_CONTROL",
                    ],
                )
                .wide()
            }
        }
        "visudo" => {
            if args.iter().any(|a| a.text == "-c" || a.text == "--check") {
                Effect::ro("visudo -c checks")
            } else {
                super::files::editor("visudo")
            }
        }
        "certbot" | "acme.sh" | "letsencrypt" => {
            let (sub, _) = subcommand(args, &[]);
            if matches!(sub, Some("certificates" | "plugins"))
                || args.iter().any(|a| a.text == "--dry-run")
                    && !args.iter().any(|a| a.text.contains("hook"))
            {
                Effect::ro(format!("{name} lists certificates")).net()
            } else if args.iter().any(|a| a.text.contains("hook")) {
                Effect::unknown(format!("{name} hooks run commands"))
            } else {
                admin(
                    Risk::High,
                    format!("{name} issues certificates and reloads services"),
                    PKG_CAPS,
                )
                .wide()
                .net()
            }
        }
        "ssh-keygen" => {
            let o = Opts::parse(
                args,
                &[
                    "-f", "-t", "-b", "-C", "-N", "-P", "-E", "-F", "-R", "-Y", "-n", "-I", "-O",
                    "-V", "-z", "-s", "-a", "-m", "-Z", "-w", "-D",
                ],
            );
            if o.has('l')
                || o.has('y')
                || o.has_value(&["-F", "-E"]) && !o.has_value(&["-R"])
                || o.has('B')
            {
                Effect::ro("ssh-keygen prints")
            } else if o.has_value(&["-D", "-w"]) {
                Effect::unknown("ssh-keygen loads a PKCS#11 or FIDO provider")
            } else {
                let mut e = Effect::new(Category::Write, Risk::Medium, "ssh-keygen writes keys");
                match o.values_of(&["-f"]).first() {
                    Some(f) => e.writes.push((cx.target(f), WriteKind::Create)),
                    None => e
                        .writes
                        .push((crate::paths::Target::Unresolved, WriteKind::Create)),
                }
                e
            }
        }
        "gpg" | "gpg2" => {
            if args.iter().all(|a| {
                matches!(
                    a.text.as_str(),
                    "--verify"
                        | "--list-keys"
                        | "-k"
                        | "--list-public-keys"
                        | "--fingerprint"
                        | "--list-sigs"
                        | "--check-sigs"
                        | "--version"
                        | "--with-colons"
                        | "--batch"
                        | "--show-keys"
                        | "--import-options"
                        | "show-only"
                ) || !a.text.starts_with('-')
            }) && args.iter().any(|a| {
                a.text.starts_with("--list")
                    || a.text == "--verify"
                    || a.text == "-k"
                    || a.text == "--fingerprint"
                    || a.text == "--version"
                    || a.text == "--show-keys"
            }) {
                Effect::ro("gpg lists or verifies")
            } else {
                Effect::unknown("gpg changes keyrings or runs helpers")
            }
        }
        "openssl" => super::net::openssl(args, cx),
        "docker" | "podman" | "nerdctl" => super::containers::container(name, args),
        "kubectl" | "oc" | "helm" | "k3s" | "crictl" | "ctr" | "virsh" | "lxc" | "incus"
        | "vagrant" => super::containers::cluster(name, args),
        "mysql" | "mariadb" | "psql" | "sqlite3" | "redis-cli" | "mongo" | "mongosh" | "influx"
        | "cqlsh" | "clickhouse-client" => {
            Effect::unknown(format!("{name} runs database statements"))
        }
        "mysqldump" | "mariadb-dump" | "pg_dump" | "pg_dumpall" | "mongodump" => {
            super::files::output_file(
                name,
                args,
                cx,
                &["-r", "--result-file", "-f", "--file", "-o", "--out"],
                &[
                    "-u",
                    "--user",
                    "-h",
                    "--host",
                    "-P",
                    "--port",
                    "-U",
                    "--username",
                    "-d",
                    "--dbname",
                    "-p",
                    "-t",
                    "--table",
                    "-n",
                    "--schema",
                    "-F",
                    "--format",
                    "-j",
                    "--jobs",
                    "-E",
                    "--encoding",
                    "-S",
                    "--superuser",
                ],
            )
        }
        "fuser" => {
            if args.iter().any(|a| {
                a.text.starts_with("-k")
                    || (a.text.starts_with('-')
                        && !a.text.starts_with("--")
                        && a.text.contains('k'))
            }) {
                kill("fuser", args)
            } else {
                Effect::ro("fuser lists users of files")
            }
        }
        "loginctl"
        | "busctl"
        | "homectl"
        | "coredumpctl"
        | "systemd-inhibit"
        | "systemd-tmpfiles"
        | "systemd-sysusers"
        | "systemd-machine-id-setup"
        | "systemd-firstboot" => {
            let (sub, _) = subcommand(args, &[]);
            let ro_subs = [
                "list-sessions",
                "list-users",
                "list-seats",
                "show-session",
                "show-user",
                "show-seat",
                "session-status",
                "user-status",
                "seat-status",
                "list",
                "tree",
                "introspect",
                "status",
                "info",
                "monitor",
                "capture_",
                "inspect",
                "get-property",
                "dump_",
                "--cat-config",
                "--dry-run",
            ];
            if sub.is_none_or(|s| ro_subs.contains(&s))
                || args
                    .iter()
                    .any(|a| a.text == "--dry-run" || a.text == "--cat-config")
            {
                Effect::ro(format!("{name} shows"))
            } else if name == "busctl" && matches!(sub, Some("call" | "set-property" | "emit")) {
                admin(
                    Risk::High,
                    "busctl calls services on the system bus".into(),
                    &[],
                )
            } else {
                admin(
                    Risk::High,
                    format!("{name} {}", sub.unwrap_or("")),
                    USER_CAPS,
                )
                .wide()
            }
        }
        _ => return None,
    })
}

fn systemctl(args: &[Arg]) -> Effect {
    let o = Opts::parse(
        args,
        &[
            "-H",
            "--host",
            "-M",
            "--machine",
            "-t",
            "--type",
            "-p",
            "--property",
            "--state",
            "-n",
            "--lines",
            "-o",
            "--output",
            "-s",
            "--signal",
            "--kill-whom",
            "--kill-value",
            "--root",
            "--image",
            "--job-mode",
            "--what",
            "--boot-loader-menu",
            "--boot-loader-entry",
            "--timestamp",
            "--preset-mode",
            "--reboot-argument",
            "--drop-in",
            "--when",
            "--check-inhibitors",
            "--message",
        ],
    );
    if o.has_value(&["-H", "--host", "-M", "--machine"]) {
        return Effect::unknown("systemctl on another host or machine");
    }
    let sub = o
        .operands
        .first()
        .and_then(|a| a.plain())
        .unwrap_or("list-units");
    let units: Vec<&str> = o.operands.iter().skip(1).map(|a| a.text.as_str()).collect();
    const RO: &[&str] = &[
        "status",
        "show",
        "cat",
        "list-units",
        "list-unit-files",
        "list-timers",
        "list-sockets",
        "list-dependencies",
        "list-jobs",
        "list-machines",
        "list-automounts",
        "list-paths",
        "is-active",
        "is-enabled",
        "is-failed",
        "is-system-running",
        "get-default",
        "show-environment",
        "help",
        "--version",
        "log-level_",
        "whoami",
        "-h",
        "--help",
    ];
    if RO.contains(&sub) {
        return Effect::ro(format!("systemctl {sub} shows state"));
    }
    if matches!(
        sub,
        "reboot"
            | "poweroff"
            | "halt"
            | "kexec"
            | "suspend"
            | "hibernate"
            | "hybrid-sleep"
            | "suspend-then-hibernate"
            | "rescue"
            | "emergency"
            | "soft-reboot"
            | "exit"
            | "default"
    ) {
        return reboot(format!("systemctl {sub}"));
    }
    if sub == "isolate" {
        return reboot("systemctl isolate changes the whole system state".into());
    }
    if sub == "edit" {
        return super::files::editor("systemctl edit");
    }
    if units.iter().any(|u| is_sysward_unit(u)) {
        return Effect::critical(Category::Service, "touches sysward's own service");
    }
    if matches!(
        sub,
        "daemon-reload"
            | "daemon-reexec"
            | "reset-failed"
            | "log-level"
            | "log-target"
            | "service-log-level"
            | "service-log-target"
    ) {
        return service(format!("systemctl {sub}"));
    }
    if matches!(
        sub,
        "set-default"
            | "set-environment"
            | "unset-environment"
            | "import-environment"
            | "set-property"
            | "link"
            | "revert"
            | "preset"
            | "preset-all"
            | "add-wants"
            | "add-requires"
            | "bind"
            | "mount-image"
            | "clean"
            | "freeze"
            | "thaw"
    ) {
        return admin(Risk::High, format!("systemctl {sub} changes units"), &[]).wide();
    }
    let mut e = service(
        format!("systemctl {sub} {}", units.join(" "))
            .trim_end()
            .to_string(),
    );
    if sub == "kill" {
        e.signals = true;
    }
    e
}

fn kill(name: &str, args: &[Arg]) -> Effect {
    let mut e = admin(
        Risk::Medium,
        format!("{name} signals processes"),
        &["CAP_KILL"],
    );
    e.signals = true;
    let o = Opts::parse(
        args,
        &[
            "-s",
            "--signal",
            "-n",
            "-u",
            "--user",
            "-g",
            "--pgroup",
            "-P",
            "--parent",
            "-t",
            "--terminal",
            "-G",
            "--group",
            "-U",
            "--uid",
            "-o",
            "--older",
            "-y",
            "--younger",
            "-O",
            "--older-than",
            "-Y",
            "--younger-than",
        ],
    );
    if name == "killall5" {
        return Effect::critical(Category::Admin, "killall5 signals every process");
    }
    for a in &o.operands {
        let t = a.text.as_str();
        if matches!(t, "1" | "-1" | "0") && name == "kill" {
            return Effect::critical(Category::Admin, "kill of init or of every process");
        }
        if t.to_ascii_lowercase().contains("sysward") {
            return Effect::critical(Category::Admin, "signals sysward itself");
        }
        if matches!(name, "pkill" | "killall" | "slay" | "skill")
            && matches!(t, "systemd" | "init" | "sshd" | "." | ".*" | "^" | "sshd.*")
        {
            e.raise(Risk::High);
        }
        if !a.literal {
            e.raise(Risk::High);
        }
    }
    if args.iter().any(|a| a.text == "-1" && name == "kill") {
        return Effect::critical(Category::Admin, "kill -1 signals every process");
    }
    e
}

fn ip(args: &[Arg]) -> Effect {
    let mut i = 0;
    while i < args.len() {
        let t = args[i].text.as_str();
        if !t.starts_with('-') {
            break;
        }
        if matches!(t, "-b" | "-batch" | "--batch") {
            return Effect::evasive("ip -batch reads commands from a file");
        }
        i += if matches!(
            t,
            "-n" | "-netns" | "-f" | "-family" | "-l" | "-loops" | "-rc" | "-rcvbuf"
        ) {
            2
        } else {
            1
        };
    }
    let obj = args.get(i).map(|a| a.text.as_str()).unwrap_or("");
    let verb = args.get(i + 1).map(|a| a.text.as_str()).unwrap_or("show");
    if obj == "netns" && verb == "exec" {
        return Effect::unknown("ip netns exec runs a command in another namespace");
    }
    if matches!(
        verb,
        "show" | "list" | "lst" | "ls" | "l" | "get" | "help" | "monitor" | "s" | "sh"
    ) || obj.is_empty()
        || verb.starts_with("dev") && args.len() <= i + 3 && obj != "link"
    {
        return Effect::ro("ip shows network state");
    }
    admin(
        Risk::High,
        format!("ip {obj} {verb} changes network configuration"),
        NET_CAPS,
    )
}

fn daemon_ctl(name: &str, args: &[Arg]) -> Effect {
    let t: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
    let check = t.iter().any(|a| {
        matches!(
            *a,
            "-t" | "-T"
                | "-V"
                | "-v"
                | "-c"
                | "-S"
                | "-M"
                | "-l"
                | "-L"
                | "-tt"
                | "-G"
                | "configtest"
                | "check"
                | "status"
                | "list"
                | "ls"
                | "--version"
                | "-version"
                | "version"
                | "validate"
                | "-n"
                | "fullstatus"
                | "-h"
                | "--help"
                | "avail"
                | "jlist"
                | "info"
                | "describe"
                | "show"
                | "logs"
                | "adapt_"
        )
    }) && !t.iter().any(|a| {
        matches!(
            *a,
            "-s" | "restart"
                | "reload"
                | "start"
                | "stop"
                | "graceful"
                | "graceful-stop"
                | "flush"
                | "kill"
                | "delete"
                | "update"
                | "abort"
                | "set"
        )
    });
    if name == "sshd" && !check {
        return Effect::unknown("sshd starts a second SSH daemon");
    }
    if check {
        Effect::ro(format!("{name} checks or shows"))
    } else if t.is_empty()
        && matches!(
            name,
            "nginx"
                | "httpd"
                | "haproxy"
                | "named"
                | "dovecot"
                | "squid"
                | "caddy"
                | "lighttpd"
                | "exim"
                | "exim4"
        )
    {
        service(format!("{name} starts a daemon"))
    } else {
        service(format!("{name} {}", t.join(" ")).trim_end().to_string())
    }
}
