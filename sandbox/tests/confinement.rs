//! Acceptance test for the agent and gateway confinement (issue 2).
//!
//! `harness = false`: this binary is both the test driver and the probe. The
//! driver (run as root) re-executes itself as a probe; the probe calls the very
//! same `confine_agent` / `confine_gateway` the real binaries call and then
//! attempts what a hijacked process would, printing one `name result` line per
//! attempt. The driver asserts each result is the kernel's error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::CString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use sysward_sandbox::{confine_agent, confine_gateway, AgentConfinement, GatewayConfinement};
use sysward_testdir::RemoveOnDrop;

fn errno_name(e: i32) -> String {
    match e {
        libc::EPERM => "EPERM".into(),
        libc::EACCES => "EACCES".into(),
        libc::ENOENT => "ENOENT".into(),
        libc::ENOSYS => "ENOSYS".into(),
        libc::ECONNREFUSED => "ECONNREFUSED".into(),
        other => format!("errno{other}"),
    }
}

fn last_err() -> String {
    errno_name(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

fn io_res<T>(r: std::io::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => e
            .raw_os_error()
            .map(errno_name)
            .unwrap_or_else(|| format!("{e}")),
    }
}

fn try_open(path: &str) -> String {
    io_res(std::fs::File::open(path).and_then(|mut f| {
        let mut s = String::new();
        f.read_to_string(&mut s)
    }))
}

fn try_socket(domain: i32, ty: i32) -> String {
    // SAFETY: plain socket(2) call with integer arguments.
    let fd = unsafe { libc::socket(domain, ty, 0) };
    if fd < 0 {
        last_err()
    } else {
        // SAFETY: closing the fd we just created.
        unsafe { libc::close(fd) };
        "ok".into()
    }
}

fn try_exec() -> String {
    let sh = CString::new("/bin/sh").unwrap();
    let arg = CString::new("-c").unwrap();
    let cmd = CString::new("exit 0").unwrap();
    let argv = [sh.as_ptr(), arg.as_ptr(), cmd.as_ptr(), std::ptr::null()];
    let envp = [std::ptr::null()];
    // SAFETY: valid NUL-terminated argv/envp arrays; returns only on failure.
    unsafe { libc::execve(sh.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    last_err()
}

fn try_ptrace() -> String {
    // SAFETY: PTRACE_ATTACH on our parent; integer arguments only.
    let rc = unsafe { libc::ptrace(libc::PTRACE_ATTACH, libc::getppid(), 0, 0) };
    if rc < 0 {
        last_err()
    } else {
        "ok".into()
    }
}

fn try_fork() -> String {
    // SAFETY: fork in a single-threaded probe; the child exits at once.
    let pid = unsafe { libc::fork() };
    match pid {
        0 => {
            // SAFETY: the child leaves immediately without touching shared state.
            unsafe { libc::_exit(0) }
        }
        p if p > 0 => "ok".into(),
        _ => last_err(),
    }
}

fn try_unshare(flags: i32) -> String {
    // SAFETY: integer arguments only.
    if unsafe { libc::unshare(flags) } < 0 {
        last_err()
    } else {
        "ok".into()
    }
}

fn try_kill_parent() -> String {
    // SAFETY: signal 0 only probes permission.
    if unsafe { libc::kill(libc::getppid(), 0) } < 0 {
        last_err()
    } else {
        "ok".into()
    }
}

fn try_setuid0() -> String {
    // SAFETY: integer argument only.
    if unsafe { libc::setuid(0) } < 0 {
        last_err()
    } else {
        "ok".into()
    }
}

fn try_dumpable() -> String {
    // SAFETY: integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) } < 0 {
        last_err()
    } else {
        "ok".into()
    }
}

fn report(out: &mut impl Write, name: &str, res: String) {
    writeln!(out, "{name} {res}").unwrap();
    out.flush().unwrap();
}

fn probe_agent(args: &[String]) {
    let (uid, gid) = (args[0].parse().unwrap(), args[1].parse().unwrap());
    let (init_conf, secret, allowed) = (&args[2], &args[3], &args[4]);
    let c = AgentConfinement {
        uid,
        gid,
        read_paths: vec![PathBuf::from(allowed)],
        keep_fds: vec![0, 1],
    };
    if let Err(e) = confine_agent(&c) {
        println!("confine FAILED {e}");
        std::process::exit(3);
    }
    let mut out = std::io::stdout();
    report(&mut out, "confined", "ok".into());
    report(
        &mut out,
        "set_non_dumpable_again",
        io_res(sysward_sandbox::set_non_dumpable().map_err(std::io::Error::other)),
    );
    report(&mut out, "make_dumpable", try_dumpable());
    report(&mut out, "read_allowed", try_open(allowed));
    report(&mut out, "open_shadow", try_open("/etc/shadow"));
    report(&mut out, "open_sysward", try_open(secret));
    report(&mut out, "open_init_conf", try_open(init_conf));
    report(&mut out, "open_passwd", try_open("/etc/passwd"));
    report(
        &mut out,
        "write_tmp",
        io_res(std::fs::write("/tmp/sysward-agent-probe", b"x")),
    );
    report(
        &mut out,
        "socket_inet",
        try_socket(libc::AF_INET, libc::SOCK_STREAM),
    );
    report(
        &mut out,
        "socket_unix",
        try_socket(libc::AF_UNIX, libc::SOCK_STREAM),
    );
    report(&mut out, "ptrace", try_ptrace());
    report(&mut out, "fork", try_fork());
    report(&mut out, "unshare_user", try_unshare(libc::CLONE_NEWUSER));
    report(&mut out, "kill_parent", try_kill_parent());
    report(&mut out, "setuid0", try_setuid0());
    report(&mut out, "execve", try_exec());
    report(&mut out, "done", "ok".into());
    // Stay alive until the driver has inspected /proc/<pid>.
    let mut b = [0u8; 1];
    let _ = std::io::stdin().read(&mut b);
}

fn probe_threaded(args: &[String]) {
    let (uid, gid) = (args[0].parse().unwrap(), args[1].parse().unwrap());
    let _t = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(5)));
    let c = AgentConfinement {
        uid,
        gid,
        read_paths: vec![],
        keep_fds: vec![0, 1],
    };
    match confine_agent(&c) {
        Ok(()) => println!("confined_with_thread ok"),
        Err(e) => println!(
            "confined_with_thread refused:{}",
            e.to_string().replace(' ', "_")
        ),
    }
    println!("done ok");
}

fn probe_gateway(args: &[String]) {
    let (uid, gid): (u32, u32) = (args[0].parse().unwrap(), args[1].parse().unwrap());
    let (ok_port, bad_port): (u16, u16) = (args[2].parse().unwrap(), args[3].parse().unwrap());
    let c = GatewayConfinement {
        uid,
        gid,
        api_port: ok_port,
        read_paths: vec![],
        keep_fds: vec![0, 1],
    };
    if let Err(e) = confine_gateway(&c) {
        println!("confine FAILED {e}");
        std::process::exit(3);
    }
    let mut out = std::io::stdout();
    report(&mut out, "confined", "ok".into());
    report(
        &mut out,
        "set_non_dumpable_again",
        io_res(sysward_sandbox::set_non_dumpable().map_err(std::io::Error::other)),
    );
    report(&mut out, "make_dumpable", try_dumpable());
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            report(&mut out, "runtime", format!("{e}"));
            std::process::exit(4);
        }
    };
    report(&mut out, "runtime", "ok".into());
    let (good, bad, blocking, bind) = rt.block_on(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let good = match tokio::net::TcpStream::connect(("127.0.0.1", ok_port)).await {
            Ok(mut s) => {
                let w = s.write_all(b"ping").await;
                let mut buf = [0u8; 4];
                let r = s.read_exact(&mut buf).await;
                match (w, r) {
                    (Ok(()), Ok(_)) if &buf == b"pong" => "ok".to_string(),
                    (w, r) => format!("io:{w:?}/{r:?}"),
                }
            }
            Err(e) => io_res::<()>(Err(e)),
        };
        let bad = io_res(tokio::net::TcpStream::connect(("127.0.0.1", bad_port)).await);
        let blocking = tokio::task::spawn_blocking(|| 7).await.map(|v| v == 7);
        let bind = io_res(tokio::net::TcpListener::bind(("127.0.0.1", 0)).await);
        (good, bad, format!("{blocking:?}"), bind)
    });
    report(&mut out, "connect_api_port", good);
    report(&mut out, "connect_other_port", bad);
    report(&mut out, "spawn_blocking", blocking);
    report(&mut out, "bind", bind);
    report(
        &mut out,
        "socket_udp",
        try_socket(libc::AF_INET, libc::SOCK_DGRAM),
    );
    report(
        &mut out,
        "socket_unix",
        try_socket(libc::AF_UNIX, libc::SOCK_STREAM),
    );
    report(
        &mut out,
        "socket_raw",
        try_socket(libc::AF_INET, libc::SOCK_RAW),
    );
    report(&mut out, "open_passwd", try_open("/etc/passwd"));
    report(&mut out, "ptrace", try_ptrace());
    report(&mut out, "fork", try_fork());
    report(&mut out, "unshare_net", try_unshare(libc::CLONE_NEWNET));
    report(&mut out, "execve", try_exec());
    report(&mut out, "done", "ok".into());
    let mut b = [0u8; 1];
    let _ = std::io::stdin().read(&mut b);
    drop(rt);
}

// ---------------------------------------------------------------- driver

/// A sysward system directory the test needs: created 0700 if missing and
/// removed again (when empty) at the end, so the host is left as found.
struct SysDir(Option<PathBuf>);

impl SysDir {
    fn ensure(path: &str) -> SysDir {
        let p = PathBuf::from(path);
        if p.exists() {
            return SysDir(None);
        }
        std::fs::create_dir_all(&p).unwrap();
        std::fs::set_permissions(
            &p,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o700),
        )
        .unwrap();
        SysDir(Some(p))
    }
}

impl Drop for SysDir {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_dir(p);
        }
    }
}

fn ensure_user(name: &str) -> (u32, u32) {
    let lookup = || -> Option<(u32, u32)> {
        let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
        passwd.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 3 && f[0] == name)
                .then(|| (f[2].parse().ok(), f[3].parse().ok()))
                .and_then(|(u, g)| Some((u?, g?)))
        })
    };
    if let Some(ids) = lookup() {
        return ids;
    }
    let st = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--user-group",
            "--shell",
            "/usr/sbin/nologin",
            name,
        ])
        .status()
        .expect("run useradd");
    assert!(st.success(), "useradd {name} failed");
    lookup().expect("user exists after useradd")
}

struct Probe {
    child: std::process::Child,
    results: Vec<(String, String)>,
}

fn run_probe(mode: &str, args: &[String]) -> Probe {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .arg(mode)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut results = Vec::new();
    let stdout = child.stdout.take().unwrap();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        let (k, v) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        results.push((k.to_string(), v.to_string()));
        if k == "done" || k == "confine" {
            break;
        }
    }
    Probe { child, results }
}

fn expect(p: &Probe, name: &str, want: &[&str]) -> bool {
    let got = p
        .results
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str());
    let ok = matches!(got, Some(g) if want.contains(&g));
    println!(
        "  {} {name}: got {:?}, want {:?}",
        if ok { "ok  " } else { "FAIL" },
        got,
        want
    );
    ok
}

fn status_field(pid: u32, key: &str) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

fn test_agent(dir: &Path) -> bool {
    println!("test agent confinement");
    let (uid, gid) = ensure_user("sysward-agent");
    // A project init.conf readable by everyone: only Landlock can stop it.
    let init_conf = dir.join("init.conf");
    std::fs::write(&init_conf, "API_URL=http://127.0.0.1:1\n").unwrap();
    let allowed = dir.join("allowed.txt");
    std::fs::write(&allowed, "fine\n").unwrap();
    for p in [dir, init_conf.as_path(), allowed.as_path()] {
        let mode = if p.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    }
    let _etc = SysDir::ensure("/etc/sysward");
    let secret = "/etc/sysward/confine-probe.secret";
    // Dropped before `_etc`: the file goes first, then the directory if
    // this test made it, whether the test passes or fails.
    let _secret_file = RemoveOnDrop(PathBuf::from(secret));
    std::fs::write(secret, "API_KEY=sk-probe\n").unwrap();
    let args = vec![
        uid.to_string(),
        gid.to_string(),
        init_conf.display().to_string(),
        secret.to_string(),
        allowed.display().to_string(),
    ];
    let _probe_file = RemoveOnDrop(PathBuf::from("/tmp/sysward-agent-probe"));
    let mut p = run_probe("probe-agent", &args);
    let pid = p.child.id();
    let mut ok = expect(&p, "confined", &["ok"]);
    ok &= expect(&p, "set_non_dumpable_again", &["ok"]);
    ok &= expect(&p, "make_dumpable", &["EPERM"]);
    ok &= expect(&p, "read_allowed", &["ok"]);
    ok &= expect(&p, "open_shadow", &["EACCES"]);
    ok &= expect(&p, "open_sysward", &["EACCES"]);
    ok &= expect(&p, "open_init_conf", &["EACCES"]);
    ok &= expect(&p, "open_passwd", &["EACCES"]);
    ok &= expect(&p, "write_tmp", &["EACCES"]);
    ok &= expect(&p, "socket_inet", &["EPERM"]);
    ok &= expect(&p, "socket_unix", &["EPERM"]);
    ok &= expect(&p, "ptrace", &["EPERM"]);
    ok &= expect(&p, "fork", &["EPERM"]);
    ok &= expect(&p, "unshare_user", &["EPERM"]);
    ok &= expect(&p, "kill_parent", &["EPERM"]);
    ok &= expect(&p, "setuid0", &["EPERM"]);
    ok &= expect(&p, "execve", &["EPERM"]);
    ok &= expect(&p, "done", &["ok"]);
    // What the kernel says about the live process.
    let checks = [
        ("Uid:", format!("{uid}\t{uid}\t{uid}\t{uid}")),
        ("Gid:", format!("{gid}\t{gid}\t{gid}\t{gid}")),
        ("Groups:", String::new()),
        ("CapInh:", "0000000000000000".into()),
        ("CapPrm:", "0000000000000000".into()),
        ("CapEff:", "0000000000000000".into()),
        ("CapBnd:", "0000000000000000".into()),
        ("CapAmb:", "0000000000000000".into()),
        ("NoNewPrivs:", "1".into()),
        ("Seccomp:", "2".into()),
    ];
    for (key, want) in checks {
        let got = status_field(pid, key);
        let good = got == want;
        println!(
            "  {} /proc status {key} {got:?} (want {want:?})",
            if good { "ok  " } else { "FAIL" }
        );
        ok &= good;
    }
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    let good = ours != theirs;
    println!(
        "  {} netns {theirs:?} differs from {ours:?}",
        if good { "ok  " } else { "FAIL" }
    );
    ok &= good;
    let dev = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).unwrap();
    let ifaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    let good = ifaces == ["lo"];
    println!(
        "  {} interfaces {ifaces:?}",
        if good { "ok  " } else { "FAIL" }
    );
    ok &= good;
    let dumpable = std::fs::metadata(format!("/proc/{pid}/environ"))
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    let good = matches!(dumpable, Ok(0));
    println!(
        "  {} /proc/<pid>/environ owned by root (non-dumpable): {dumpable:?}",
        if good { "ok  " } else { "FAIL" }
    );
    ok &= good;
    drop(p.child.stdin.take());
    let st = p.child.wait().unwrap();
    println!("  probe exit {st:?}");
    let _ = std::fs::remove_file(secret);
    let mut p = run_probe("probe-threaded", &[uid.to_string(), gid.to_string()]);
    let good = p
        .results
        .iter()
        .any(|(k, v)| k == "confined_with_thread" && v.starts_with("refused"));
    println!(
        "  {} a second thread makes confine_agent refuse: {:?}",
        if good { "ok  " } else { "FAIL" },
        p.results
    );
    ok &= good;
    drop(p.child.stdin.take());
    let _ = p.child.wait();
    ok
}

fn test_gateway() -> bool {
    println!("test gateway confinement");
    let (uid, gid) = ensure_user("sysward-model");
    let ok_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let bad_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let ok_port = ok_listener.local_addr().unwrap().port();
    let bad_port = bad_listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        if let Ok((mut s, _)) = ok_listener.accept() {
            let mut b = [0u8; 4];
            if s.read_exact(&mut b).is_ok() && &b == b"ping" {
                let _ = s.write_all(b"pong");
            }
        }
    });
    let args = vec![
        uid.to_string(),
        gid.to_string(),
        ok_port.to_string(),
        bad_port.to_string(),
    ];
    let mut p = run_probe("probe-gateway", &args);
    let pid = p.child.id();
    let mut ok = expect(&p, "confined", &["ok"]);
    ok &= expect(&p, "set_non_dumpable_again", &["ok"]);
    ok &= expect(&p, "make_dumpable", &["EPERM"]);
    ok &= expect(&p, "runtime", &["ok"]);
    ok &= expect(&p, "connect_api_port", &["ok"]);
    ok &= expect(&p, "connect_other_port", &["EACCES"]);
    ok &= expect(&p, "spawn_blocking", &["Ok(true)"]);
    ok &= expect(&p, "bind", &["EPERM", "EACCES"]);
    ok &= expect(&p, "socket_udp", &["EPERM"]);
    ok &= expect(&p, "socket_unix", &["EPERM"]);
    ok &= expect(&p, "socket_raw", &["EPERM"]);
    ok &= expect(&p, "open_passwd", &["EACCES"]);
    ok &= expect(&p, "ptrace", &["EPERM"]);
    ok &= expect(&p, "fork", &["EPERM"]);
    ok &= expect(&p, "unshare_net", &["EPERM"]);
    ok &= expect(&p, "execve", &["EPERM"]);
    ok &= expect(&p, "done", &["ok"]);
    for (key, want) in [
        ("Uid:", format!("{uid}\t{uid}\t{uid}\t{uid}")),
        ("CapEff:", "0000000000000000".to_string()),
        ("CapBnd:", "0000000000000000".to_string()),
        ("NoNewPrivs:", "1".to_string()),
        ("Seccomp:", "2".to_string()),
    ] {
        let got = status_field(pid, key);
        let good = got == want;
        println!(
            "  {} /proc status {key} {got:?}",
            if good { "ok  " } else { "FAIL" }
        );
        ok &= good;
    }
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    let good = ours == theirs;
    println!(
        "  {} gateway keeps the host netns",
        if good { "ok  " } else { "FAIL" }
    );
    ok &= good;
    drop(p.child.stdin.take());
    let _ = p.child.wait();
    drop(bad_listener);
    let _ = server.join();
    ok
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("probe-agent") => return probe_agent(&args[2..]),
        Some("probe-gateway") => return probe_gateway(&args[2..]),
        Some("probe-threaded") => return probe_threaded(&args[2..]),
        _ => {}
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("\n!!! SKIPPED: the confinement tests must run as root (they drop to real users); NOT TESTED !!!\n");
        return;
    }
    let dir = std::env::temp_dir().join(format!("sysward-confine-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cleanup = RemoveOnDrop(dir.clone());
    let filter = args.iter().skip(1).find(|a| !a.starts_with('-')).cloned();
    let mut ok = true;
    if filter.as_deref().is_none_or(|f| "agent".contains(f)) {
        ok &= test_agent(&dir);
    }
    if filter.as_deref().is_none_or(|f| "gateway".contains(f)) {
        ok &= test_gateway();
    }
    // Removed here: exit (below) runs no destructors.
    drop(cleanup);
    if !ok {
        eprintln!("confinement test FAILED");
        std::process::exit(1);
    }
    println!("confinement tests passed");
}
