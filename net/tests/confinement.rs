//! The network executor's two confinement layers, applied by the very
//! functions `sysward-net` calls, then tried the way a hijacked executor
//! would try them.
//!
//! `harness = false`: this binary is the driver and, re-executed with
//! `probe`, the probe (confinement needs a single-threaded process). The
//! driver, as root, opens two listeners: the probe may connect to the first
//! only, and after the second layer it may open no UDP, packet, unix or
//! netlink socket and no file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use sysward_net::confine;

fn errno_of(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) => "EPERM".into(),
        Some(libc::EACCES) => "EACCES".into(),
        Some(other) => format!("errno{other}"),
        None => e.to_string(),
    }
}

fn res<T>(r: std::io::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => errno_of(&e),
    }
}

fn raw_socket(domain: i32, ty: i32) -> String {
    // SAFETY: plain integer arguments; the descriptor, if any, is closed below.
    let fd = unsafe { libc::socket(domain, ty, 0) };
    if fd < 0 {
        return errno_of(&std::io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by socket and is ours.
    unsafe { libc::close(fd) };
    "ok".into()
}

fn probe(allowed: u16, other: u16) {
    let mut out = std::io::stdout();
    let mut say = |name: &str, result: String| {
        let _ = writeln!(out, "{name} {result}");
    };
    if let Err(e) = confine::before_resolving(65534, 65534, 1, &[allowed], &[]) {
        say("first_layer", format!("failed {e}"));
        return;
    }
    say("first_layer", "ok".into());
    // SAFETY: getuid has no preconditions.
    say("a_uid", unsafe { libc::getuid() }.to_string());
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) };
    say("a_address_space", limit.rlim_cur.to_string());
    say(
        "a_connect_allowed",
        res(TcpStream::connect(("127.0.0.1", allowed))),
    );
    say(
        "a_connect_other",
        res(TcpStream::connect(("127.0.0.1", other))),
    );
    say("a_bind", res(TcpListener::bind("127.0.0.1:0")));
    // DNS needs UDP; nothing else local.
    say("a_udp", res(UdpSocket::bind("127.0.0.1:0")));
    say("a_packet", raw_socket(libc::AF_PACKET, libc::SOCK_RAW));
    say("a_unix", raw_socket(libc::AF_UNIX, libc::SOCK_STREAM));
    say("a_exec", res(Command::new("/bin/true").status()));
    say("a_read_hosts", res(std::fs::read("/etc/hosts")));
    say("a_read_passwd", res(std::fs::read("/etc/passwd")));
    say(
        "a_write_tmp",
        res(std::fs::write("/tmp/sysward-net-probe", b"x")),
    );
    if let Err(e) = confine::before_connecting(allowed) {
        say("second_layer", format!("failed {e}"));
        return;
    }
    say("second_layer", "ok".into());
    say(
        "b_connect_allowed",
        res(TcpStream::connect(("127.0.0.1", allowed))),
    );
    say(
        "b_connect_other",
        res(TcpStream::connect(("127.0.0.1", other))),
    );
    say("b_udp", res(UdpSocket::bind("127.0.0.1:0")));
    say("b_packet", raw_socket(libc::AF_PACKET, libc::SOCK_RAW));
    say("b_unix", raw_socket(libc::AF_UNIX, libc::SOCK_STREAM));
    say("b_netlink", raw_socket(libc::AF_NETLINK, libc::SOCK_RAW));
    say("b_read_hosts", res(std::fs::read("/etc/hosts")));
    say("b_exec", res(Command::new("/bin/true").status()));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("probe") {
        probe(args[2].parse().unwrap(), args[3].parse().unwrap());
        return;
    }
    // Under `cargo test` the harness passes its own flags; they are ignored.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: the network executor's confinement test needs root");
        return;
    }
    // What the probe would leave in /tmp were it not confined, removed
    // when the test ends (passed or not).
    let _probe_file = sysward_testdir::RemoveOnDrop("/tmp/sysward-net-probe".into());
    let allowed = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .arg("probe")
        .arg(allowed.local_addr().unwrap().port().to_string())
        .arg(other.local_addr().unwrap().port().to_string())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let got: std::collections::HashMap<&str, &str> =
        text.lines().filter_map(|l| l.split_once(' ')).collect();
    let expected = [
        ("first_layer", "ok"),
        ("a_uid", "65534"),
        ("a_address_space", "1073741824"),
        ("a_connect_allowed", "ok"),
        ("a_connect_other", "EACCES"),
        ("a_bind", "EACCES"),
        ("a_udp", "ok"),
        ("a_packet", "EPERM"),
        ("a_unix", "EPERM"),
        ("a_exec", "EPERM"),
        ("a_read_hosts", "ok"),
        ("a_read_passwd", "EACCES"),
        ("a_write_tmp", "EACCES"),
        ("second_layer", "ok"),
        ("b_connect_allowed", "ok"),
        ("b_connect_other", "EACCES"),
        ("b_udp", "EPERM"),
        ("b_packet", "EPERM"),
        ("b_unix", "EPERM"),
        ("b_netlink", "EPERM"),
        ("b_read_hosts", "EACCES"),
        ("b_exec", "EPERM"),
    ];
    let mut wrong = Vec::new();
    for (name, want) in expected {
        let have = got.get(name).copied().unwrap_or("(missing)");
        let ok = have == want;
        println!("  {} {name}: {have}", if ok { "ok  " } else { "FAIL" });
        if !ok {
            wrong.push(format!("{name}: expected {want}, got {have}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{}\nprobe stdout:\n{text}\nstderr:\n{}",
        wrong.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "network executor confinement: {} checks passed",
        expected.len()
    );
}
