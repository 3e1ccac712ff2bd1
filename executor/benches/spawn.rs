//! Spawn latency, measured in one run: a bare `/bin/true`, `/bin/true`
//! started the broker's way (`sysward_sandbox::jail`: a read-only profile —
//! uid drop, caps cleared, no_new_privs, Landlock read-all-except-protected,
//! seccomp deny-list, the broker's pre-made empty network namespace — applied
//! in a clone(CLONE_VM|CLONE_VFORK) child before its execve), and bubblewrap
//! (`--ro-bind / / --unshare-net --unshare-pid --die-with-parent`). The jail
//! is measured with the broker's cached ruleset and with the ruleset built per
//! action; `sysward-exec` starting and refusing shows what a second exec would
//! cost. Runs are interleaved so drift hits all alike. Needs root.
//!
//! `cargo bench -p sysward-exec --bench spawn [-- RUNS]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use sysward_ipc::exec::CommandSpec;
use sysward_ipc::profile::{ConfinementProfile, ResourceLimits};
use sysward_ipc::Channel;
use sysward_sandbox::jail::{self, Jail, JailParts};

const EXE: &str = env!("CARGO_BIN_EXE_sysward-exec");

fn finish(mut child: std::process::Child) {
    let mut sink = Vec::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_end(&mut sink);
    }
    let st = child.wait().unwrap();
    assert!(
        st.success(),
        "child failed: {st:?} {}",
        String::from_utf8_lossy(&sink)
    );
}

fn bare() -> Duration {
    let t = Instant::now();
    let child = Command::new("/bin/true")
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(child);
    t.elapsed()
}

fn bwrap() -> Duration {
    let t = Instant::now();
    let child = Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--unshare-net",
            "--unshare-pid",
            "--die-with-parent",
            "/bin/true",
        ])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(child);
    t.elapsed()
}

/// `sysward-exec` started and refusing a garbage frame: the cost of the
/// second exec the jail saves.
fn exec_refuse() -> Duration {
    let t = Instant::now();
    let (mut ours, theirs) = Channel::pair().unwrap();
    let fd = theirs.raw_fd();
    let mut cmd = Command::new(EXE);
    cmd.env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only dup2 between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    drop(theirs);
    ours.send_frame(b"garbage").unwrap();
    match ours.recv::<sysward_ipc::exec::ExecReport>() {
        Ok(sysward_ipc::exec::ExecReport::Refused { .. }) => {}
        other => panic!("executor did not refuse: {other:?}"),
    }
    let _ = child_wait(child);
    t.elapsed()
}

/// The broker's way: prepare (cached ruleset and seccomp program), one
/// clone(CLONE_VM|CLONE_VFORK), the steps in the child, execve; then wait.
fn jailed(profile: &ConfinementProfile, command: &CommandSpec, parts: JailParts) -> Duration {
    let t = Instant::now();
    let jail = Jail::prepare(profile, command, parts).unwrap();
    let (mut out_r, out_w) = std::io::pipe().unwrap();
    let (mut err_r, err_w) = std::io::pipe().unwrap();
    let child = jail.spawn(out_w.into(), err_w.into(), None).unwrap();
    let mut sink = Vec::new();
    let _ = out_r.read_to_end(&mut sink);
    let _ = err_r.read_to_end(&mut sink);
    let st = child.wait().unwrap();
    assert!(st.success(), "jailed /bin/true failed: {st:?}");
    t.elapsed()
}

fn child_wait(mut child: std::process::Child) -> std::process::ExitStatus {
    child.wait().unwrap()
}

struct Stats {
    median: f64,
    p99: f64,
    mean: f64,
}

fn stats(v: &mut [Duration]) -> Stats {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let n = v.len();
    Stats {
        median: ms(v[n / 2]),
        p99: ms(v[(n * 99 / 100).min(n - 1)]),
        mean: v.iter().map(|d| ms(*d)).sum::<f64>() / n as f64,
    }
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("spawn bench: needs root (sysward-exec drops privileges); skipped");
        return;
    }
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    let have_bwrap = Command::new("bwrap").arg("--version").output().is_ok();
    let profile = ConfinementProfile {
        name: "read-only".into(),
        uid: 65534,
        gid: 65534,
        groups: vec![],
        capabilities: vec![],
        read_paths: vec![],
        read_all_except: Some(vec!["/etc/sysward".into(), "/var/lib/sysward".into()]),
        write_paths: vec![],
        write_everywhere: false,
        protected_paths: vec![],
        hidden_paths: vec![],
        network: false,
        scope_signals: true,
        allow_mount: false,
        timeout_secs: 60,
        limits: ResourceLimits::default(),
        scratch_dir: None,
    };
    let command = CommandSpec {
        argv: vec!["/bin/true".into()],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: "/".into(),
        cgroup_dir: None,
        stdin: None,
    };
    // The broker's caches: the ruleset and the seccomp program built once.
    let ruleset = Arc::new(
        sysward_sandbox::profile_rules::prebuild_ruleset(&profile, &Default::default()).unwrap(),
    );
    let seccomp = Arc::new(
        jail::kernel_program(&jail::seccomp_program(&profile, std::process::id() as i32).unwrap())
            .unwrap(),
    );
    let cached = || JailParts {
        landlock_ruleset: Arc::clone(&ruleset),
        seccomp: Arc::clone(&seccomp),
        mounts: None,
        cgroup: None,
        extra: Default::default(),
    };
    let built = || JailParts {
        landlock_ruleset: Arc::new(
            sysward_sandbox::profile_rules::prebuild_ruleset(&profile, &Default::default())
                .unwrap(),
        ),
        ..cached()
    };
    // Warm up caches.
    for _ in 0..20 {
        bare();
        jailed(&profile, &command, cached());
        exec_refuse();
        if have_bwrap {
            bwrap();
        }
    }
    let (mut b, mut j, mut jb, mut g, mut w) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        b.push(bare());
        j.push(jailed(&profile, &command, cached()));
        jb.push(jailed(&profile, &command, built()));
        g.push(exec_refuse());
        if have_bwrap {
            w.push(bwrap());
        }
    }
    let sb = stats(&mut b);
    let sj = stats(&mut j);
    let sjb = stats(&mut jb);
    let sg = stats(&mut g);
    let row = |name: &str, s: &Stats| {
        println!(
            "  {name:<52} median {:>6.3}  p99 {:>6.3}  mean {:>6.3}",
            s.median, s.p99, s.mean
        )
    };
    println!("spawn latency over {runs} interleaved runs (ms):");
    row("bare /bin/true", &sb);
    row("jailed read-only /bin/true, cached ruleset+seccomp", &sj);
    row("jailed, ruleset built per action", &sjb);
    row("(sysward-exec start + refuse: the exec saved)", &sg);
    println!(
        "  jailed / bare (median): cached {:.2}x, built {:.2}x",
        sj.median / sb.median,
        sjb.median / sb.median
    );
    if have_bwrap {
        let sw = stats(&mut w);
        row("bwrap --ro-bind / / --unshare-net --unshare-pid", &sw);
        println!(
            "  bwrap / jailed (median): cached {:.2}x, built {:.2}x",
            sw.median / sj.median,
            sw.median / sjb.median
        );
    } else {
        println!("  bwrap not installed (apt-get install -y bubblewrap): comparison skipped");
    }
}
