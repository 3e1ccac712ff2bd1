//! The exact argument shapes of a netfilter listing that keep CAP_NET_ADMIN
//! in a read-only action.
//!
//! The kernel refuses every nftables request (listing included) and the
//! iptables-nft listing without CAP_NET_ADMIN, and a read-only action must
//! not have it: with it, netlink changes the firewall, routes and
//! interfaces. So the capability is kept only for an action that is nothing
//! but one of these listings, recognised word by word (every word from a
//! fixed set, or a table or chain name of a safe character set), with no
//! file written, no network, no environment of its own; the broker also
//! checks that the program it runs is the root-owned nft or xtables-nft
//! binary (`sysward::decide`), and runs it directly (no shell). Anything
//! else (`-f`, `-i`, `--modprobe`, a pipeline, a redirection) gets no
//! capability, and a listing then fails with EPERM, as it did before.
//!
//! `iptables-legacy` is not here: it lists through a raw AF_INET socket,
//! which needs CAP_NET_RAW and an inet socket, both refused to read-only
//! actions.

/// The capability a listing keeps.
pub const LIST_CAP: &str = "CAP_NET_ADMIN";

const FAMILIES: &[&str] = &["ip", "ip6", "inet", "arp", "bridge", "netdev"];

/// Objects listed whole (`nft list ruleset [FAMILY]`, `nft list tables …`).
const NFT_ALL: &[&str] = &[
    "ruleset",
    "tables",
    "chains",
    "sets",
    "maps",
    "flowtables",
    "counters",
    "quotas",
    "limits",
    "meters",
];

/// Objects named by table and name (`nft list chain [FAMILY] TABLE NAME`).
const NFT_NAMED: &[&str] = &[
    "chain",
    "set",
    "map",
    "flowtable",
    "counter",
    "quota",
    "limit",
    "meter",
];

/// nft's output options (no `-N`: it resolves names over the network).
const NFT_SHORT: &str = "ajnstypT";
const NFT_LONG: &[&str] = &[
    "--handle",
    "--json",
    "--numeric",
    "--stateless",
    "--terse",
    "--numeric-priority",
    "--numeric-protocol",
    "--numeric-time",
];

const IPT_TABLES: &[&str] = &["filter", "nat", "mangle", "raw", "security"];

/// A table, chain or set name: what nft and iptables accept, minus anything
/// a shell or an option parser could read differently.
fn is_name(s: &str) -> bool {
    // A family keyword is never a name (nft reads `list chain inet filter`
    // as a family and a table, with the chain missing).
    !s.is_empty()
        && !FAMILIES.contains(&s)
        && s.len() <= 64
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// The program name without its directory, when it is one of the names the
/// broker runs for a listing from a root-owned system directory.
fn program(argv0: &str) -> Option<&str> {
    match argv0.rsplit_once('/') {
        None => Some(argv0),
        Some(("/usr/sbin" | "/sbin", name)) => Some(name),
        Some(_) => None,
    }
}

/// True when `argv` (the program first) is exactly a netfilter listing.
pub fn is_listing(argv: &[String]) -> bool {
    let Some((first, args)) = argv.split_first() else {
        return false;
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match program(first) {
        Some("nft") => nft_listing(&args),
        Some("iptables" | "ip6tables" | "iptables-nft" | "ip6tables-nft") => {
            iptables_listing(&args)
        }
        Some("iptables-save" | "ip6tables-save" | "iptables-nft-save" | "ip6tables-nft-save") => {
            iptables_save_listing(&args)
        }
        _ => false,
    }
}

fn nft_listing(args: &[&str]) -> bool {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let short = a.len() >= 2
            && a.starts_with('-')
            && !a.starts_with("--")
            && a[1..].chars().all(|c| NFT_SHORT.contains(c));
        if !(short || NFT_LONG.contains(a)) {
            break;
        }
        i += 1;
    }
    let rest = &args[i..];
    let Some((&"list", rest)) = rest.split_first() else {
        return false;
    };
    let Some((&object, rest)) = rest.split_first() else {
        return false;
    };
    let family = |s: &str| FAMILIES.contains(&s);
    if NFT_ALL.contains(&object) {
        return match rest {
            [] => true,
            [f] => family(f),
            _ => false,
        };
    }
    if object == "table" {
        return match rest {
            [t] => is_name(t),
            [f, t] => family(f) && is_name(t),
            _ => false,
        };
    }
    if NFT_NAMED.contains(&object) {
        return match rest {
            [t, n] => is_name(t) && is_name(n),
            [f, t, n] => family(f) && is_name(t) && is_name(n),
            _ => false,
        };
    }
    false
}

fn iptables_listing(args: &[&str]) -> bool {
    let mut lists = 0;
    let mut chain_allowed = false;
    let mut chain_seen = false;
    let mut i = 0;
    while let Some(&a) = args.get(i) {
        i += 1;
        match a {
            "-L" | "--list" | "-S" | "--list-rules" => {
                lists += 1;
                chain_allowed = true;
            }
            "-n" | "--numeric" | "-v" | "--verbose" | "-x" | "--exact" | "--line-numbers" => {}
            "-t" | "--table" => match args.get(i) {
                Some(t) if IPT_TABLES.contains(t) => i += 1,
                _ => return false,
            },
            _ if a.len() >= 2
                && a.starts_with('-')
                && !a.starts_with("--")
                && a[1..].chars().all(|c| "LSnvx".contains(c)) =>
            {
                let l = a[1..].chars().filter(|c| matches!(c, 'L' | 'S')).count();
                lists += l;
                chain_allowed |= l > 0;
            }
            _ if chain_allowed && !chain_seen && !a.starts_with('-') && is_name(a) => {
                chain_seen = true;
            }
            _ => return false,
        }
    }
    lists == 1
}

fn iptables_save_listing(args: &[&str]) -> bool {
    let mut i = 0;
    while let Some(&a) = args.get(i) {
        i += 1;
        match a {
            "-c" | "--counters" => {}
            "-t" | "--table" => match args.get(i) {
                Some(t) if IPT_TABLES.contains(t) => i += 1,
                _ => return false,
            },
            _ => return false,
        }
    }
    true
}

/// The real programs (after symlinks and alternatives) a listing may run.
pub const LISTING_PROGRAMS: &[&str] = &["nft", "xtables-nft-multi"];

/// The placeholder a validate command's arguments name the candidate file by.
pub const VALIDATE_FILE: &str = "{file}";

/// True when a `write_file`/`edit_file` validate command is exactly nft's
/// check of the candidate file (`nft -c -f {file}`, long options too). nft
/// checks a ruleset by sending it to the kernel in a transaction that is
/// aborted instead of committed, and the kernel refuses that without
/// CAP_NET_ADMIN; this form, run directly from the root-owned nft, keeps
/// it. Nothing else may follow or precede: `-f` without `-c` loads.
pub fn is_check_validate(command: &str, args: &[String]) -> bool {
    if program(command) != Some("nft") {
        return false;
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    matches!(
        args.as_slice(),
        ["-c" | "--check", "-f" | "--file", file] if *file == VALIDATE_FILE
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn listing_forms_are_recognised() {
        for ok in [
            "nft list ruleset",
            "/usr/sbin/nft -a list ruleset",
            "nft -nn -a list ruleset inet",
            "nft --json list tables",
            "nft list table inet filter",
            "nft list table filter",
            "nft -a list chain inet filter input",
            "nft list set ip filter blocked_v4",
            "iptables -L -n",
            "iptables -L INPUT -n -v --line-numbers",
            "iptables -nvL",
            "iptables -t nat -S",
            "ip6tables -S",
            "iptables-nft -L",
            "iptables-save",
            "iptables-save -c -t filter",
        ] {
            assert!(is_listing(&v(ok)), "{ok}");
        }
    }

    #[test]
    fn other_shapes_are_not_listings() {
        for no in [
            "nft",
            "nft add table inet x",
            "nft -f /etc/nftables.conf",
            "nft -c -f /etc/nftables.conf",
            "nft -i",
            "nft list ruleset -f x",
            "nft -N list ruleset",
            "nft list ruleset inet extra",
            "nft list table inet filter;flush",
            "nft list table inet $(id)",
            "nft list chain inet filter",
            "nft flush ruleset",
            "nft monitor",
            "/tmp/nft list ruleset",
            "/usr/local/sbin/nft list ruleset",
            "iptables -A INPUT -j DROP",
            "iptables -L -A INPUT",
            "iptables -L -S",
            "iptables -nvL --modprobe=/tmp/x",
            "iptables -L -M /tmp/x",
            "iptables -L -t evil",
            "iptables -L INPUT OUTPUT",
            "iptables -n",
            "iptables -F",
            "iptables-legacy -L",
            "iptables-save -M /tmp/x",
            "iptables-save -f /etc/x",
            "iptables-restore",
            "ip link",
        ] {
            assert!(!is_listing(&v(no)), "{no}");
        }
    }

    #[test]
    fn only_the_check_of_the_candidate_file_is_a_check_validate() {
        for ok in [
            "nft -c -f {file}",
            "/usr/sbin/nft --check --file {file}",
            "nft -c --file {file}",
        ] {
            let w = v(ok);
            assert!(is_check_validate(&w[0], &w[1..]), "{ok}");
        }
        for no in [
            "nft -f {file}",
            "nft -c -f /etc/nftables.conf",
            "nft -c -f {file} -f {file}",
            "nft -f {file} -c",
            "nft -c -f {file}x",
            "nft -cf {file}",
            "nft -c -i",
            "nft -c list ruleset",
            "/tmp/nft -c -f {file}",
            "sh -c nft -c -f {file}",
            "iptables-restore -t {file}",
        ] {
            let w = v(no);
            assert!(!is_check_validate(&w[0], &w[1..]), "{no}");
        }
    }
}
