//! Spawn latency, measured in one run: a bare `/bin/true`, `/bin/true` through
//! `sysward-exec` with a read-only profile (uid drop, caps cleared,
//! no_new_privs, Landlock read-all-except-protected, seccomp deny-list, the
//! broker's pre-made empty network namespace), and bubblewrap
//! (`--ro-bind / / --unshare-net --unshare-pid --die-with-parent`).
//! The executor is measured twice: building the profile's Landlock ruleset
//! itself, and with the ruleset prebuilt once (the broker's per-profile
//! cache, passed as fd 5). Runs are interleaved so drift hits all three alike. Needs root.
//!
//! `cargo bench -p sysward-exec --bench spawn [-- RUNS]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use sysward_ipc::exec::{CommandSpec, ExecSpec};
use sysward_ipc::profile::{ConfinementProfile, ResourceLimits};
use sysward_ipc::Channel;

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

fn exec(frame: &[u8], netns: &OwnedFd, ruleset: Option<&OwnedFd>) -> Duration {
    let t = Instant::now();
    let (mut ours, theirs) = Channel::pair().unwrap();
    let fd = theirs.raw_fd();
    let ns = netns.as_raw_fd();
    let ll = ruleset.map(|f| f.as_raw_fd());
    let mut cmd = Command::new(EXE);
    cmd.env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only dup2 between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 3) < 0 || libc::dup2(ns, 4) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(ll) = ll {
                if libc::dup2(ll, 5) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    drop(theirs);
    ours.send_frame(frame).unwrap();
    // EOF (no report) = confined and exec'd; a garbage frame is refused.
    match ours.recv::<sysward_ipc::exec::ExecReport>() {
        Err(e) if e.is_disconnect() => {}
        Ok(sysward_ipc::exec::ExecReport::Refused { .. }) if frame == b"garbage" => {
            let _ = child_wait(child);
            return t.elapsed();
        }
        other => panic!("executor reported instead of running: {other:?}"),
    }
    finish(child);
    t.elapsed()
}

/// A descriptor kept above the fds the child's dup2s overwrite.
fn high_fd(fd: OwnedFd) -> OwnedFd {
    // SAFETY: F_DUPFD_CLOEXEC on a live fd returns a new fd >= 10 or -1.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
    assert!(n >= 10);
    // SAFETY: the fd was just created and is ours.
    unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(n) }
}

/// The process holding the empty network namespace; killed even on panic.
struct Holder(std::process::Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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
    // The broker keeps one empty network namespace and hands it to every
    // executor as fd 4 (creating one per action costs ~0.5 ms and has tails).
    let holder = Holder(
        Command::new("unshare")
            .args(["-n", "sleep", "100000"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(100));
    let opened: OwnedFd = std::fs::File::open(format!("/proc/{}/ns/net", holder.0.id()))
        .unwrap()
        .into();
    let netns = high_fd(opened);
    let profile = ConfinementProfile {
        name: "read-only".into(),
        uid: 65534,
        gid: 65534,
        groups: vec![],
        capabilities: vec![],
        read_paths: vec![],
        read_all_except: Some(vec!["/etc/sysward".into(), "/var/lib/sysward".into()]),
        write_paths: vec![],
        write_all_except: None,
        network: false,
        scope_signals: true,
        allow_mount: false,
        timeout_secs: 60,
        limits: ResourceLimits::default(),
        scratch_dir: None,
    };
    let spec = ExecSpec::Command {
        id: 1,
        profile,
        command: CommandSpec {
            argv: vec!["/bin/true".into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: "/".into(),
            netns_path: Some("/proc/self/fd/4".into()),
            cgroup_dir: None,
            prebuilt_landlock: false,
        },
    };
    let frame = sysward_ipc::codec::encode(&spec).unwrap();
    // The broker's per-profile cache: the ruleset built once, passed as fd 5.
    let profile = match &spec {
        ExecSpec::Command { profile, .. } => profile.clone(),
        ExecSpec::File { profile, .. } => profile.clone(),
    };
    let ruleset = high_fd(sysward_sandbox::profile_rules::prebuild_ruleset(&profile).unwrap());
    let spec_pre = match spec.clone() {
        ExecSpec::Command {
            id,
            profile,
            mut command,
        } => {
            command.prebuilt_landlock = true;
            ExecSpec::Command {
                id,
                profile,
                command,
            }
        }
        other => other,
    };
    let frame_pre = sysward_ipc::codec::encode(&spec_pre).unwrap();
    // Warm up caches.
    for _ in 0..20 {
        bare();
        exec(&frame, &netns, None);
        exec(&frame_pre, &netns, Some(&ruleset));
        if have_bwrap {
            bwrap();
        }
    }
    let (mut b, mut e, mut p, mut w) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut g = Vec::new();
    for _ in 0..runs {
        b.push(bare());
        g.push(exec(b"garbage", &netns, None));
        e.push(exec(&frame, &netns, None));
        p.push(exec(&frame_pre, &netns, Some(&ruleset)));
        if have_bwrap {
            w.push(bwrap());
        }
    }
    drop(holder);
    let sb = stats(&mut b);
    let se = stats(&mut e);
    let sp = stats(&mut p);
    let sg = stats(&mut g);
    let row = |name: &str, s: &Stats| {
        println!(
            "  {name:<48} median {:>6.3}  p99 {:>6.3}  mean {:>6.3}",
            s.median, s.p99, s.mean
        )
    };
    println!("spawn latency over {runs} interleaved runs (ms):");
    row("bare /bin/true", &sb);
    row("sysward-exec read-only, ruleset built per action", &se);
    row("sysward-exec read-only, prebuilt ruleset (fd 5)", &sp);
    row("(sysward-exec start + refuse, no confinement)", &sg);
    println!(
        "  sysward-exec / bare (median): built {:.2}x, prebuilt {:.2}x   target <= 2x",
        se.median / sb.median,
        sp.median / sb.median
    );
    if have_bwrap {
        let sw = stats(&mut w);
        row("bwrap --ro-bind / / --unshare-net --unshare-pid", &sw);
        println!(
            "  bwrap / sysward-exec (median): built {:.2}x, prebuilt {:.2}x   target >= 3x",
            sw.median / se.median,
            sw.median / sp.median
        );
    } else {
        println!("  bwrap not installed (apt-get install -y bubblewrap): comparison skipped");
    }
}
