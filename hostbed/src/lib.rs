//! sysward-hostbed — throwaway Debian hosts (moved here from
//! `tests/src/hosts.rs` so that the eval runner can use them at run time;
//! the tests use it through `sysward_tests::hosts`, with the same API).
//!
//! Throwaway Debian hosts: systemd-nspawn containers over an overlayfs of the
//! cached base root file system that `scripts/hosts/base.sh` builds. A test
//! boots one (systemd as PID 1) or starts one without systemd, runs commands
//! in it through nsenter, and drops it; the drop powers it off and removes
//! every trace (processes, mounts, cgroups, files), also when the test
//! panicked.
//!
//! The containers share this machine's network namespace (so a scripted
//! model on this machine's loopback and the Debian archive are reachable from
//! inside) and run with every capability and without nspawn's own seccomp
//! filter, which the broker's confinement of its children needs — except the
//! two whose effect is not namespaced: CAP_SYS_TIME (a container's
//! `timedatectl set-timezone` makes the kernel warp this machine's clock by
//! the zone's offset, once per boot; `date -s` sets it outright) and
//! CAP_SYS_MODULE (loading or unloading this machine's kernel modules).
//! Neither the containers nor the commands run in them hold those.
//!
//! When the base is missing or the kernel refuses nspawn the tests skip with
//! a loud notice, unless `SYSWARD_REQUIRE_HOSTS=1` (CI), when they fail.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Capabilities no container and no command run in one may hold (their
/// effect reaches this machine), as nspawn and setpriv spell them.
const HOST_WIDE_CAPS_NSPAWN: &str = "--drop-capability=CAP_SYS_TIME,CAP_SYS_MODULE";
const HOST_WIDE_CAPS_SETPRIV: &str = "--bounding-set=-sys_time,-sys_module";

/// The PATH commands in a container run with.
const CONTAINER_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Where the temporary directories of the containers go.
const WORK: &str = "/var/tmp/sysward-hosts";
/// The cgroup (in each hierarchy nspawn and a container's systemd use)
/// under which each container gets its own, so that containers never share
/// one and nothing a container's systemd creates lands at the root.
const CGROUP_PARENT: &str = "sysward-hosts";

/// How long a boot may take on a loaded 2-core machine.
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(180);
/// The default limit of a command run in a container.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Why a host could not be started or used.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The machine cannot run test hosts (a skip, unless they are required).
    #[error("no Debian test host: {why}. Fix: {fix}")]
    Unavailable { why: String, fix: String },
    /// A file or process operation on this machine failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The container did not come up as expected.
    #[error("{0}")]
    Failed(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HostError {
    let what = what.into();
    move |source| HostError::Io { what, source }
}

fn unavail(why: impl Into<String>, fix: impl Into<String>) -> HostError {
    HostError::Unavailable {
        why: why.into(),
        fix: fix.into(),
    }
}

/// True when this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|v| v.parse().unwrap_or(1)))
        })
        .unwrap_or(1)
        == 0
}

/// True when running as root. Otherwise prints a loud skip notice.
pub fn require_root(test: &str) -> bool {
    if is_root() {
        return true;
    }
    eprintln!("\n*** SKIPPED {test}: needs root (it runs the real broker, users and kernel confinement). CI runs it as root. ***\n");
    false
}

/// What a command printed and whether it was killed at its time limit.
#[derive(Debug)]
pub struct Limited {
    pub output: Output,
    pub timed_out: bool,
}

/// Waits for a child at most `timeout`; kills it then.
pub fn wait_limited(mut child: Child, timeout: Duration) -> std::io::Result<Limited> {
    // Read both pipes while the child runs: a child whose output outgrows
    // a pipe's buffer (64 KiB) would otherwise block on its write forever.
    fn drain<R: std::io::Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let start = Instant::now();
    let (status, timed_out) = loop {
        if let Some(status) = child.try_wait()? {
            break (status, false);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            break (child.wait()?, true);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Limited {
        output: Output {
            status,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        },
        timed_out,
    })
}

/// Exit status, stdout and stderr of a command, for messages.
pub fn describe(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The cached base root file system.
pub fn base_dir() -> PathBuf {
    let cache =
        std::env::var_os("SYSWARD_CI_CACHE").unwrap_or_else(|| "/var/cache/sysward-ci".into());
    PathBuf::from(cache).join("debian-base")
}

fn required() -> bool {
    std::env::var("SYSWARD_REQUIRE_HOSTS").is_ok_and(|v| v == "1")
}

/// Skips loudly (returns None), or fails when hosts are required.
fn unavailable(test: &str, why: &str, fix: &str) -> Option<Host> {
    let msg = format!("{test}: no Debian test host: {why}. Fix: {fix}");
    if required() {
        panic!("{msg} (SYSWARD_REQUIRE_HOSTS=1: this is a failure, not a skip)");
    }
    let line = format!(
        "\n*** SKIPPED {msg}. (Set SYSWARD_REQUIRE_HOSTS=1 to make this a failure; CI does.) ***\n"
    );
    // Straight to the process's stderr, past the test harness's capture of
    // eprintln, so that the skip shows even when the test "passes". Append
    // mode: stderr may be a log file.
    let direct = fs::OpenOptions::new()
        .append(true)
        .open("/proc/self/fd/2")
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if direct.is_err() {
        eprintln!("{line}");
    }
    None
}

fn in_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
                .any(|d| d.join(program).is_file())
        })
        .unwrap_or(false)
}

/// Where the cgroup hierarchies a container uses are mounted here: the v2
/// one and, on a hybrid host, the v1 `name=systemd` one.
fn cgroup_mounts() -> Vec<PathBuf> {
    let Ok(mountinfo) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut r = right.split_whitespace();
            let fstype = r.next()?;
            let opts = r.nth(1).unwrap_or("");
            let target = left.split_whitespace().nth(4)?;
            let wanted = fstype == "cgroup2"
                || (fstype == "cgroup" && opts.split(',').any(|o| o == "name=systemd"));
            wanted.then(|| PathBuf::from(target))
        })
        .collect()
}

/// Mount points (as this process sees them) at or beneath `dir`.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(mountinfo) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    mountinfo
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .map(unescape_mount_path)
        .filter(|p| p.starts_with(dir))
        .collect()
}

fn unescape_mount_path(s: &str) -> PathBuf {
    // mountinfo escapes space, tab, newline and backslash as \ooo.
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// A port of this machine's loopback that nothing listens on now (the
/// kernel's choice for a bind to port 0, released at once).
pub fn free_loopback_port() -> u16 {
    match std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(a) => a.port(),
        Err(e) => panic!("cannot bind a port on this machine's loopback: {e}"),
    }
}

/// Start time of a process (field 22 of its stat), to tell it from a later
/// process that reuses its pid.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for task in fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let p = task.path().join("children");
        if let Ok(s) = fs::read_to_string(p) {
            found.extend(s.split_whitespace().filter_map(|c| c.parse::<u32>().ok()));
        }
    }
    found
}

/// The container's PID 1 among the descendants of nspawn: the process that
/// is pid 1 in its own, nested PID namespace.
fn find_pid1(nspawn: u32) -> Option<u32> {
    let mut queue = children(nspawn);
    while let Some(pid) = queue.pop() {
        let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let nspid: Vec<&str> = status
            .lines()
            .find(|l| l.starts_with("NSpid:"))
            .map(|l| l["NSpid:".len()..].split_whitespace().collect())
            .unwrap_or_default();
        if nspid.len() >= 2 && nspid.last() == Some(&"1") {
            return Some(pid);
        }
        queue.extend(children(pid));
    }
    None
}

fn processes_in(cgroup: &Path) -> Vec<u32> {
    let mut pids = Vec::new();
    let mut stack = vec![cgroup.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if let Ok(s) = fs::read_to_string(dir.join("cgroup.procs")) {
            pids.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
        for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    pids
}

/// Removes a cgroup and every cgroup beneath it (deepest first).
fn remove_cgroup_tree(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    for e in fs::read_dir(dir)?.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            remove_cgroup_tree(&e.path())?;
        }
    }
    fs::remove_dir(dir)
}

fn kill(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// What identifies a container's traces on this machine, kept so a test can
/// check after the drop that none is left.
#[derive(Clone, Debug)]
pub struct Traces {
    pub name: String,
    /// The temporary directory (overlay upper/work, merged root, console).
    pub dir: PathBuf,
    /// systemd-nspawn's pid and start time.
    pub nspawn: (u32, u64),
    /// The container's PID 1 and its start time, once found.
    pub pid1: Option<(u32, u64)>,
    /// The container's own cgroups on this machine.
    pub cgroups: Vec<PathBuf>,
    /// The directory nspawn makes on this machine for mount propagation.
    pub propagate: PathBuf,
}

impl Traces {
    /// Everything of this container still present on the machine, described.
    pub fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        for m in mounts_under(&self.dir) {
            left.push(format!("mount {}", m.display()));
        }
        let alive = |(pid, start): (u32, u64)| start_time(pid) == Some(start);
        if alive(self.nspawn) {
            left.push(format!("systemd-nspawn (pid {})", self.nspawn.0));
        }
        if let Some(p1) = self.pid1.filter(|p| alive(*p)) {
            left.push(format!("the container's PID 1 (pid {})", p1.0));
        }
        for cg in &self.cgroups {
            let procs = processes_in(cg);
            if !procs.is_empty() {
                left.push(format!("processes {procs:?} in {}", cg.display()));
            }
            if cg.exists() {
                left.push(format!("cgroup {}", cg.display()));
            }
        }
        if self.dir.exists() {
            left.push(format!("directory {}", self.dir.display()));
        }
        if self.propagate.exists() {
            left.push(format!("directory {}", self.propagate.display()));
        }
        left
    }
}

/// A running container. Dropping it tears it down.
pub struct Host {
    traces: Traces,
    root: PathBuf,
    console: PathBuf,
    nspawn: Option<Child>,
    booted: bool,
    mounted: bool,
    torn_down: bool,
}

/// How a container is started.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Boot systemd as PID 1 (`-b`), else a stub PID 1 with nothing running.
    pub boot: bool,
    /// Extra systemd-nspawn arguments.
    pub nspawn_args: Vec<String>,
    /// Keep nspawn's own seccomp filter (by default it is off: it refuses
    /// what the broker needs to confine its children).
    pub nspawn_seccomp: bool,
}

impl Host {
    /// Boots a container (systemd as PID 1) and waits until
    /// `systemctl is-system-running` says running or degraded. None (after a
    /// loud skip notice) when hosts are unavailable here.
    pub fn boot(test: &str) -> Option<Host> {
        Host::start_with(
            test,
            Options {
                boot: true,
                ..Options::default()
            },
        )
    }

    /// Starts a container without systemd: commands run in its namespaces.
    pub fn start(test: &str) -> Option<Host> {
        Host::start_with(test, Options::default())
    }

    /// Starts a container (see [`Options`]); skips loudly (None) when
    /// hosts are unavailable here, panics when a started host fails.
    pub fn start_with(test: &str, opts: Options) -> Option<Host> {
        if !require_root(test) {
            return None;
        }
        match Host::try_start(opts) {
            Ok(h) => Some(h),
            Err(HostError::Unavailable { why, fix }) => unavailable(test, &why, &fix),
            Err(e) => panic!("{test}: {e}"),
        }
    }

    /// Starts a container, or says why not.
    pub fn try_start(opts: Options) -> Result<Host, HostError> {
        if !is_root() {
            return Err(unavail("not root", "run as root"));
        }
        if !in_path("systemd-nspawn") || !in_path("nsenter") || !in_path("setpriv") {
            return Err(unavail(
                "systemd-nspawn, nsenter or setpriv is not installed",
                "apt-get install -y debootstrap systemd-container util-linux",
            ));
        }
        let base = base_dir();
        if !base.join(".sysward-base-stamp").is_file() {
            return Err(unavail(
                format!("the base root file system {} is missing", base.display()),
                "sudo bash scripts/hosts/base.sh (about 3 minutes, then cached)",
            ));
        }
        let cgroup_roots = cgroup_mounts();
        if cgroup_roots.is_empty() {
            return Err(unavail(
                "no cgroup v2 hierarchy is mounted",
                "mount cgroup2 (systemd-nspawn needs it)",
            ));
        }

        let name = format!(
            "swh-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        fs::create_dir_all(WORK).map_err(io_err(format!("mkdir {WORK}")))?;
        fs::set_permissions(WORK, fs::Permissions::from_mode(0o700))
            .map_err(io_err(format!("chmod {WORK}")))?;
        let dir = Path::new(WORK).join(&name);
        let _ = fs::remove_dir_all(&dir);
        for sub in ["upper", "work", "root"] {
            fs::create_dir_all(dir.join(sub)).map_err(io_err(format!("mkdir {sub}")))?;
        }
        let root = dir.join("root");
        let console = dir.join("console.log");
        let cgroups: Vec<PathBuf> = cgroup_roots
            .iter()
            .map(|m| m.join(CGROUP_PARENT).join(&name))
            .collect();
        let mut host = Host {
            traces: Traces {
                name: name.clone(),
                dir: dir.clone(),
                nspawn: (0, 0),
                pid1: None,
                cgroups: cgroups.clone(),
                propagate: PathBuf::from("/run/systemd/nspawn/propagate").join(&name),
            },
            root: root.clone(),
            console: console.clone(),
            nspawn: None,
            booted: opts.boot,
            mounted: false,
            torn_down: false,
        };

        // A throwaway copy of the base: its changes go to upper/.
        let mount = Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o"])
            .arg(format!(
                "lowerdir={},upperdir={},workdir={}",
                base.display(),
                dir.join("upper").display(),
                dir.join("work").display()
            ))
            .arg(&root)
            .output()
            .map_err(io_err("mount"))?;
        if !mount.status.success() {
            drop(host);
            return Err(unavail(
                format!(
                    "the overlay mount over {} failed: {}",
                    base.display(),
                    String::from_utf8_lossy(&mount.stderr).trim()
                ),
                "a kernel with overlayfs and a /var/tmp that can hold an overlay's upper directory",
            ));
        }
        host.mounted = true;
        for cg in &cgroups {
            fs::create_dir_all(cg).map_err(io_err(format!("mkdir {}", cg.display())))?;
        }

        // nspawn starts in the container's own cgroups: with --keep-unit it
        // uses its own cgroup as the container's.
        let mut cmd = Command::new("/bin/sh");
        let mut script = String::new();
        for cg in &cgroups {
            script.push_str(&format!("echo $$ > '{}/cgroup.procs' && ", cg.display()));
        }
        script.push_str("exec \"$@\"");
        cmd.args(["-c", &script, "sh", "systemd-nspawn"])
            .args([
                "--register=no",
                "--keep-unit",
                "-q",
                "--link-journal=no",
                "--capability=all",
                HOST_WIDE_CAPS_NSPAWN,
            ])
            .arg(format!("--machine={name}"))
            .arg("-D")
            .arg(&root)
            .args(&opts.nspawn_args);
        if opts.boot {
            cmd.args(["--console=read-only", "-b"]);
        } else {
            // A stub PID 1 that reaps; `sleep` keeps the container alive.
            cmd.args(["--console=pipe", "--as-pid2", "sleep", "infinity"]);
        }
        let log = fs::File::create(&console).map_err(io_err("console log"))?;
        let log2 = log.try_clone().map_err(io_err("console log"))?;
        cmd.env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("SYSTEMD_NSPAWN_LOCK", "0")
            .stdin(Stdio::null())
            .stdout(log2)
            .stderr(log);
        if !opts.nspawn_seccomp {
            // nspawn's own seccomp filter refuses what the broker needs to
            // confine its children.
            cmd.env("SYSTEMD_SECCOMP", "0");
        }
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                drop(host);
                return Err(unavail(
                    format!("systemd-nspawn could not be started: {e}"),
                    "apt-get install -y systemd-container",
                ));
            }
        };
        let nspawn_pid = child.id();
        host.traces.nspawn = (nspawn_pid, start_time(nspawn_pid).unwrap_or(0));
        host.nspawn = Some(child);

        // PID 1 appears once nspawn has set the container up.
        let start = Instant::now();
        let pid1 = loop {
            if let Some(status) = host.nspawn_exited()? {
                let out = host.console_output();
                drop(host);
                return Err(unavail(
                    format!(
                        "systemd-nspawn exited ({status}) before the container started:\n{out}"
                    ),
                    "a kernel that allows nspawn's namespaces (see the output above)",
                ));
            }
            if let Some(p) = find_pid1(nspawn_pid) {
                break p;
            }
            if start.elapsed() > Duration::from_secs(60) {
                return Err(HostError::Failed(format!(
                    "{name}: no PID 1 of the container after 60 s; console:\n{}",
                    host.console_output()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        host.traces.pid1 = Some((pid1, start_time(pid1).unwrap_or(0)));
        if opts.boot {
            host.wait_booted(BOOT_TIMEOUT)?;
        }
        Ok(host)
    }

    fn nspawn_exited(&mut self) -> Result<Option<std::process::ExitStatus>, HostError> {
        match self.nspawn.as_mut() {
            Some(c) => c.try_wait().map_err(io_err("wait for systemd-nspawn")),
            None => Err(HostError::Failed("systemd-nspawn is gone".into())),
        }
    }

    fn wait_booted(&mut self, timeout: Duration) -> Result<(), HostError> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.nspawn_exited()? {
                return Err(HostError::Failed(format!(
                    "{}: systemd-nspawn exited ({status}) during boot; console:\n{}",
                    self.traces.name,
                    self.console_output()
                )));
            }
            let out = self
                .try_run(&["systemctl", "is-system-running"], Duration::from_secs(30))?
                .output;
            let last = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if last == "running" || last == "degraded" {
                if last == "degraded" {
                    let failed = self.run(&["systemctl", "--failed", "--no-legend"]);
                    eprintln!(
                        "{}: booted degraded; failed units:\n{}",
                        self.traces.name,
                        String::from_utf8_lossy(&failed.stdout)
                    );
                }
                eprintln!(
                    "{}: booted ({last}) in {:.1} s",
                    self.traces.name,
                    start.elapsed().as_secs_f64()
                );
                return Ok(());
            }
            if start.elapsed() > timeout {
                let jobs = self.run_timeout(&["systemctl", "list-jobs"], Duration::from_secs(30));
                return Err(HostError::Failed(format!(
                    "{}: not booted after {timeout:?}: systemctl is-system-running says {last:?}\njobs:\n{}\nconsole:\n{}",
                    self.traces.name,
                    String::from_utf8_lossy(&jobs.stdout),
                    self.console_output()
                )));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    pub fn name(&self) -> &str {
        &self.traces.name
    }

    /// The container's root directory as seen from this machine (the
    /// overlay's merged view).
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn pid1(&self) -> u32 {
        self.traces.pid1.map(|p| p.0).unwrap_or(0)
    }

    pub fn booted(&self) -> bool {
        self.booted
    }

    /// What identifies this container on the machine.
    pub fn traces(&self) -> Traces {
        self.traces.clone()
    }

    /// What the container printed on its console so far (nspawn's output).
    pub fn console_output(&self) -> String {
        let text = fs::read_to_string(&self.console).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(120);
        lines[from..].join("\n")
    }

    /// A command to run in the container's namespaces, root directory and
    /// working directory, with a clean environment.
    pub fn command(&self, argv: &[&str]) -> Command {
        // nsenter keeps this machine's capabilities, not the container's.
        let mut cmd = Command::new("setpriv");
        cmd.args([HOST_WIDE_CAPS_SETPRIV, "--", "nsenter"])
            .args(["-t", &self.pid1().to_string(), "-a", "--"])
            .args(argv)
            .env_clear()
            .env("PATH", CONTAINER_PATH)
            .env("LANG", "C.UTF-8")
            .env("HOME", "/root")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs a command in the container (killed after COMMAND_TIMEOUT).
    pub fn run(&self, argv: &[&str]) -> Output {
        self.run_timeout(argv, COMMAND_TIMEOUT)
    }

    /// Runs a command in the container; panics when it cannot be started
    /// or does not finish within `timeout` (test helper).
    pub fn run_timeout(&self, argv: &[&str], timeout: Duration) -> Output {
        match self.try_run(argv, timeout) {
            Ok(l) if !l.timed_out => l.output,
            Ok(l) => panic!(
                "{}: `{}` did not finish within {timeout:?}\n{}",
                self.traces.name,
                argv.join(" "),
                describe(&l.output)
            ),
            Err(e) => panic!("{}: {e}", self.traces.name),
        }
    }

    /// Runs a command in the container, killed after `timeout`.
    pub fn try_run(&self, argv: &[&str], timeout: Duration) -> Result<Limited, HostError> {
        let child = self
            .command(argv)
            .spawn()
            .map_err(io_err(format!("nsenter {}", argv.join(" "))))?;
        wait_limited(child, timeout).map_err(io_err("wait for nsenter"))
    }

    /// Runs a shell script in the container.
    pub fn sh(&self, script: &str) -> Output {
        self.run(&["/bin/sh", "-c", script])
    }

    /// Runs a command and asserts it succeeded; returns its stdout.
    pub fn ok(&self, argv: &[&str]) -> String {
        let out = self.run(argv);
        assert!(
            out.status.success(),
            "{}: `{}` failed in the container\n{}",
            self.traces.name,
            argv.join(" "),
            describe(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs a shell script and asserts it succeeded; returns its stdout.
    pub fn sh_ok(&self, script: &str) -> String {
        self.ok(&["/bin/sh", "-c", script])
    }

    /// The path on this machine of `path` in the container.
    pub fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// Writes a file into the container (through the merged directory),
    /// creating its parent directories; owned by root.
    pub fn write(&self, path: &str, content: impl AsRef<[u8]>, mode: u32) {
        if let Err(e) = self.try_write(path, content, mode) {
            panic!("{}: {e}", self.traces.name);
        }
    }

    /// Writes a file into the container, or says why not.
    pub fn try_write(
        &self,
        path: &str,
        content: impl AsRef<[u8]>,
        mode: u32,
    ) -> Result<(), HostError> {
        let p = self.path(path);
        let what = format!("write {path} in {}", self.traces.name);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).map_err(io_err(what.clone()))?;
        }
        let mut f = fs::File::create(&p).map_err(io_err(what.clone()))?;
        f.write_all(content.as_ref())
            .map_err(io_err(what.clone()))?;
        drop(f);
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).map_err(io_err(what))
    }

    /// Copies a file of this machine into the container.
    pub fn copy_in(&self, src: &Path, path: &str, mode: u32) {
        let bytes = fs::read(src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        self.write(path, bytes, mode);
    }

    /// Reads a file of the container, if it exists.
    pub fn read(&self, path: &str) -> Option<String> {
        fs::read_to_string(self.path(path)).ok()
    }

    /// Starts an sshd in a booted container on a free port of this
    /// machine's loopback (the containers share its network namespace, so
    /// port 22 and the packaged ssh.service stay masked): fresh host keys,
    /// an account `user` (created when absent, a password nobody can use)
    /// with passwordless sudo, `authorized_key` its only key. Returns the
    /// port once sshd accepts connections. For Ansible's builtin ssh
    /// connection.
    pub fn start_sshd(&self, user: &str, authorized_key: &str) -> u16 {
        assert!(
            self.booted,
            "{}: start_sshd needs a booted host",
            self.traces.name
        );
        let port = free_loopback_port();
        self.sh_ok(&format!(
            "id -u {user} >/dev/null 2>&1 || useradd -m -s /bin/bash {user}; usermod -p '*' {user}; \
             install -d -m 0700 -o {user} -g {user} /home/{user}/.ssh; \
             ssh-keygen -A >/dev/null"
        ));
        self.write(
            &format!("/home/{user}/.ssh/authorized_keys"),
            format!("{}\n", authorized_key.trim()),
            0o600,
        );
        self.ok(&[
            "chown",
            &format!("{user}:{user}"),
            &format!("/home/{user}/.ssh/authorized_keys"),
        ]);
        self.write(
            &format!("/etc/sudoers.d/90-{user}"),
            format!("{user} ALL=(ALL) NOPASSWD: ALL\n"),
            0o440,
        );
        self.write(
            "/etc/systemd/system/sysward-test-sshd.service",
            format!(
                "[Unit]\nDescription=sshd on 127.0.0.1:{port} (test bed)\nAfter=network.target\n\n\
                 [Service]\nExecStart=/usr/sbin/sshd -D -e -p {port} -o ListenAddress=127.0.0.1 \
                 -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no -o UseDNS=no \
                 -o AllowUsers={user} -o MaxStartups=100:30:200 -o MaxSessions=50\n\
                 RuntimeDirectory=sshd\nRuntimeDirectoryMode=0755\nRestart=on-failure\n"
            ),
            0o644,
        );
        self.sh_ok("systemctl daemon-reload && systemctl start sysward-test-sshd.service");
        let start = Instant::now();
        loop {
            let up = std::net::TcpStream::connect_timeout(
                &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
                Duration::from_secs(2),
            )
            .is_ok();
            if up {
                return port;
            }
            if start.elapsed() > Duration::from_secs(60) {
                let status = self.run(&[
                    "systemctl",
                    "status",
                    "--no-pager",
                    "-l",
                    "sysward-test-sshd.service",
                ]);
                panic!(
                    "{}: sshd on 127.0.0.1:{port} does not accept connections after 60 s\n{}",
                    self.traces.name,
                    crate::describe(&status)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Powers the container off and removes every trace of it; returns what
    /// could not be removed (nothing, normally). Done by the drop too.
    pub fn shutdown(mut self) -> Vec<String> {
        self.teardown()
    }

    fn teardown(&mut self) -> Vec<String> {
        if self.torn_down {
            return Vec::new();
        }
        self.torn_down = true;
        let mut problems = Vec::new();
        if let Some(mut child) = self.nspawn.take() {
            let alive = |c: &mut Child| c.try_wait().ok().flatten().is_none();
            let wait = |c: &mut Child, limit: Duration| {
                let start = Instant::now();
                while alive(c) && start.elapsed() < limit {
                    std::thread::sleep(Duration::from_millis(50));
                }
                !alive(c)
            };
            let pid1 = self.traces.pid1.filter(|p| start_time(p.0) == Some(p.1));
            let mut gone = false;
            if alive(&mut child) {
                if let (true, Some((p, _))) = (self.booted, pid1) {
                    // systemd's poweroff signal: a clean shutdown.
                    kill(p, "RTMIN+4");
                    gone = wait(&mut child, Duration::from_secs(60));
                    if !gone {
                        problems.push("no clean poweroff within 60 s".into());
                    }
                }
                if !gone {
                    // nspawn ends the container (SIGKILL to its PID 1 when
                    // not booted).
                    kill(child.id(), "TERM");
                    gone = wait(&mut child, Duration::from_secs(20));
                }
                if !gone {
                    if let Some((p, _)) = pid1 {
                        kill(p, "KILL");
                    }
                    let _ = child.kill();
                    wait(&mut child, Duration::from_secs(10));
                }
            }
            let _ = child.wait();
        }
        // Whatever is left in the container's cgroups (a stuck process, one
        // that escaped the PID namespace) is killed.
        for cg in &self.traces.cgroups {
            let start = Instant::now();
            while !processes_in(cg).is_empty() && start.elapsed() < Duration::from_secs(10) {
                if cg.join("cgroup.kill").exists() {
                    let _ = fs::write(cg.join("cgroup.kill"), "1");
                } else {
                    for p in processes_in(cg) {
                        kill(p, "KILL");
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        for cg in &self.traces.cgroups {
            let start = Instant::now();
            loop {
                match remove_cgroup_tree(cg) {
                    Ok(()) => break,
                    Err(e) if start.elapsed() > Duration::from_secs(10) => {
                        problems.push(format!("cannot remove cgroup {}: {e}", cg.display()));
                        break;
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
            // The shared parent goes when the last container is gone.
            if let Some(parent) = cg.parent() {
                let _ = fs::remove_dir(parent);
            }
        }
        if self.mounted {
            // Deepest first: anything nspawn left mounted, then the overlay.
            let mut mounts = mounts_under(&self.traces.dir);
            mounts.sort_by_key(|m| std::cmp::Reverse(m.as_os_str().len()));
            for m in mounts {
                let mut ok = false;
                for _ in 0..50 {
                    let out = Command::new("umount").arg(&m).output();
                    if out.is_ok_and(|o| o.status.success()) || !mounts_under(&m).contains(&m) {
                        ok = true;
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                if !ok {
                    problems.push(format!("{} stayed busy: detached lazily", m.display()));
                    let _ = Command::new("umount").arg("-l").arg(&m).output();
                }
            }
            self.mounted = false;
        }
        let keep = std::env::var_os("SYSWARD_KEEP_TEST_DIRS").is_some();
        if mounts_under(&self.traces.dir).is_empty() {
            if !keep {
                if let Err(e) = fs::remove_dir_all(&self.traces.dir) {
                    problems.push(format!("cannot remove {}: {e}", self.traces.dir.display()));
                }
            }
        } else {
            problems.push(format!(
                "{} still has mounts: not removed",
                self.traces.dir.display()
            ));
        }
        let _ = fs::remove_dir(WORK);
        // nspawn refuses to delete its propagation directory on a /run that
        // is not a tmpfs (this machine's).
        let _ = fs::remove_dir_all(&self.traces.propagate);
        for p in ["/run/systemd/nspawn/propagate", "/run/systemd/nspawn"] {
            let _ = fs::remove_dir(p);
        }
        if keep {
            eprintln!(
                "{}: kept {} (SYSWARD_KEEP_TEST_DIRS)",
                self.traces.name,
                self.traces.dir.display()
            );
        }
        problems
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let problems = self.teardown();
        if !problems.is_empty() {
            eprintln!(
                "{}: teardown problems: {}",
                self.traces.name,
                problems.join("; ")
            );
        }
    }
}
