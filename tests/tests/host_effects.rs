//! Approved admin work takes effect on the host, as the host sees it: the
//! positive controls beside the attack tests. Each operation is requested by
//! the scripted model through the real broker → agent → gateway → action
//! tree, approved by an operator that allows every request once, and then
//! checked on the host from outside sysward. Everything the test changes in
//! `/etc`, users, packages and the kernel's settings is restored afterwards,
//! also when a check fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use sysward_ipc::operator::{ApprovalDecision, ApprovalPrompt};
use sysward_tests::*;

/// An operator who approves every request once and remembers what the
/// approval panel showed.
struct Approver {
    inner: Recorder,
    prompts: Mutex<Vec<ApprovalPrompt>>,
}

impl sysward_broker::operator::Operator for Approver {
    fn session_started(&self, a: &str, b: &str) {
        self.inner.session_started(a, b)
    }
    fn event(&self, e: &sysward_ipc::agent::AgentEvent) {
        self.inner.event(e)
    }
    fn next_input(&self) -> Option<String> {
        None
    }
    fn approve(&self, prompt: &ApprovalPrompt) -> Option<(ApprovalDecision, String)> {
        self.prompts.lock().unwrap().push(prompt.clone());
        Some((ApprovalDecision::AllowOnce, "approved by the test".into()))
    }
    fn finished(&self, s: &sysward_ipc::operator::SessionSummary) {
        self.inner.finished(s)
    }
    fn cancel_token(&self) -> &sysward_broker::cancel::CancelToken {
        self.inner.cancel_token()
    }
}

/// Files restored, accounts and paths removed, when the test ends.
struct Restore {
    files: Vec<(PathBuf, Vec<u8>, u32)>,
    paths: Vec<PathBuf>,
    users: Vec<&'static str>,
    groups: Vec<&'static str>,
    package: Option<&'static str>,
    /// `/etc`'s entries before: the backups the broker writes beside an
    /// edited file (`BACKUP_BEFORE_SYSTEM_EDIT`) are removed afterwards.
    etc_before: Vec<std::ffi::OsString>,
}

fn etc_entries() -> Vec<std::ffi::OsString> {
    std::fs::read_dir("/etc")
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

impl Restore {
    fn new(files: &[&str]) -> Restore {
        let files = files
            .iter()
            .filter_map(|f| {
                let bytes = std::fs::read(f).ok()?;
                let mode = std::fs::metadata(f).ok()?.mode();
                Some((PathBuf::from(f), bytes, mode))
            })
            .collect();
        Restore {
            files,
            paths: Vec::new(),
            users: Vec::new(),
            groups: Vec::new(),
            package: None,
            etc_before: etc_entries(),
        }
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        for u in &self.users {
            let _ = Command::new("userdel").args(["-r", u]).output();
        }
        for g in &self.groups {
            let _ = Command::new("groupdel").arg(g).output();
        }
        // After userdel/groupdel, which rewrite these files themselves.
        for (path, bytes, mode) in &self.files {
            let _ = std::fs::write(path, bytes);
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(*mode));
        }
        for name in etc_entries() {
            let backup = name.to_string_lossy().contains(".sysward.")
                && name.to_string_lossy().contains(".bak");
            if backup && !self.etc_before.contains(&name) {
                let _ = std::fs::remove_file(Path::new("/etc").join(&name));
            }
        }
        for p in self.paths.iter().rev() {
            let _ = std::fs::remove_file(p).or_else(|_| std::fs::remove_dir_all(p));
        }
        if let Some(pkg) = self.package {
            let _ = Command::new("apt-get")
                .args(["remove", "-y", "-q", pkg])
                .env("DEBIAN_FRONTEND", "noninteractive")
                .output();
        }
    }
}

fn installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

fn shell(cmd: &str) -> serde_json::Value {
    serde_json::json!({"tool_calls":[{"name":"shell","arguments":{"command":cmd,"timeout_seconds":300}}]})
}

fn tool(name: &str, args: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"tool_calls":[{"name":name,"arguments":args}]})
}

/// The text of the tool result the model received after step `i`.
fn result_of(server: &Handle, i: usize) -> String {
    let chats = server.chat_requests();
    chats
        .get(i + 1)
        .and_then(|c| c.messages().last().cloned())
        .map(|m| sysward_scripted_model::message_text(&m))
        .unwrap_or_else(|| format!("no result for step {i}"))
}

/// The cases change the same host files, user and package: one at a time
/// even when the harness runs tests in parallel.
static HOST: Mutex<()> = Mutex::new(());

fn run_layout(test: &str, project: &Path) {
    if !require_root(test) {
        return;
    }
    let _one_at_a_time = HOST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    ensure_accounts();
    let pid = std::process::id();
    let _ = std::fs::remove_dir_all(project);
    std::fs::create_dir_all(project).unwrap();
    std::fs::set_permissions(project, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut restore = Restore::new(&[
        "/etc/hosts",
        "/etc/login.defs",
        "/etc/passwd",
        "/etc/group",
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/subuid",
        "/etc/subgid",
    ]);
    restore.paths.push(project.to_path_buf());
    let (user, group) = ("swtestusr", "swtestgrp");
    let _ = Command::new("userdel").args(["-r", user]).output();
    let _ = Command::new("groupdel").arg(group).output();
    restore.users.push(user);
    restore.groups.push(group);
    let etc_dir = format!("/etc/sysward-effects-{pid}.d");
    let var_lib = format!("/var/lib/sysward-effects-{pid}");
    let beside = project
        .parent()
        .unwrap()
        .join(format!("sysward-effects-beside-{pid}"));
    // Trees of which nothing exists yet, several levels deep.
    let var_tmp_tree = format!("/var/tmp/sysward-effects-tree-{pid}");
    let var_lib_tree = format!("/var/lib/sysward-effects-tree-{pid}");
    for p in [&etc_dir, &var_lib, &var_tmp_tree, &var_lib_tree] {
        restore.paths.push(PathBuf::from(p));
    }
    restore.paths.push(beside.clone());
    // A link in /etc to a file elsewhere, as /etc/localtime is: `ln -sf`
    // replaces the link in /etc, not the file it points at.
    let etc_link = format!("/etc/sysward-effects-{pid}.link");
    let _ = std::fs::remove_file(&etc_link);
    std::os::unix::fs::symlink("/usr/lib/os-release", &etc_link).unwrap();
    restore.paths.push(PathBuf::from(&etc_link));
    // Another user's 0700 directory with a key in it.
    let home = PathBuf::from(format!("/var/tmp/sysward-effects-home-{pid}"));
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(
        home.join(".ssh/authorized_keys"),
        "ssh-ed25519 AAAA-test ops@host\n",
    )
    .unwrap();
    for (p, mode) in [
        (home.join(".ssh"), 0o700),
        (home.join(".ssh/authorized_keys"), 0o600),
    ] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
    }
    restore.paths.push(home.clone());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let host_ifaces: Vec<String> = std::fs::read_to_string("/proc/net/dev")
        .unwrap()
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(|s| s.trim().to_string()))
        .collect();
    let login_line = std::fs::read_to_string("/etc/login.defs")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("PASS_WARN_AGE"))
        .map(str::to_string);
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let package =
        (!installed("hello") && Path::new("/usr/bin/apt-get").exists()).then_some("hello");

    let mut steps: Vec<(&str, serde_json::Value)> = vec![
        ("write_file /etc/hosts", tool("write_file", serde_json::json!({"path":"/etc/hosts","content":format!("{hosts}# sysward-effects-write\n")}))),
        ("sed -i /etc/hosts", shell("sed -i 's/sysward-effects-write/sysward-effects-sed/' /etc/hosts")),
        ("sed -i /etc/login.defs", shell("sed -i 's/^LOGIN_TIMEOUT.*/LOGIN_TIMEOUT\t61/' /etc/login.defs")),
        ("users and groups", shell(&format!("groupadd {group} && useradd -m -s /bin/sh {user} && usermod -aG {group} {user} && passwd -l {user} && chage -M 90 {user}"))),
        ("a directory and a 0640 file in /etc", shell(&format!("mkdir -m 0750 {etc_dir} && install -m 0640 /dev/null {etc_dir}/x.conf"))),
        ("a directory in /var/lib", shell(&format!("mkdir {var_lib}"))),
        ("a file in the project root", shell("echo report > report.txt")),
        ("a file beside the project", shell(&format!("echo beside > {}", beside.display()))),
        ("ss -tln", shell("ss -tln")),
        ("ip -br link", shell("ip -br link")),
        ("another user's 0700 directory", shell(&format!("cat {}/.ssh/authorized_keys", home.display()))),
        ("ln -sf over a link in /etc", shell(&format!("ln -sf /etc/hostname {etc_link}"))),
        ("mkdir -p of a new tree in /var/tmp and a file in it", shell(&format!("mkdir -p {var_tmp_tree}/a/b && echo deep > {var_tmp_tree}/a/b/f"))),
        ("the mkdir tool, a new tree in /var/lib", tool("mkdir", serde_json::json!({"path": format!("{var_lib_tree}/x/y")}))),
        ("write_file into the new tree", tool("write_file", serde_json::json!({"path": format!("{var_lib_tree}/x/y/z.conf"), "content": "deep=1\n"}))),
        ("rm -rf of another user's 0700 directory", shell(&format!("rm -rf {}", home.display()))),
    ];
    if let Some(line) = &login_line {
        steps.push(("edit_file /etc/login.defs", tool("edit_file", serde_json::json!({"path":"/etc/login.defs","old_text":line,"new_text":"PASS_WARN_AGE\t9"}))));
    }
    if let Some(pkg) = package {
        restore.package = Some(pkg);
        steps.push((
            "apt-get install",
            shell(&format!(
                "DEBIAN_FRONTEND=noninteractive apt-get install -y -q {pkg}"
            )),
        ));
        steps.push((
            "apt-get remove",
            shell(&format!(
                "DEBIAN_FRONTEND=noninteractive apt-get remove -y -q {pkg}"
            )),
        ));
    }
    let mut script: Vec<serde_json::Value> = steps.iter().map(|s| s.1.clone()).collect();
    script.push(serde_json::json!({"content":"done\nTASK_STATUS: DONE"}));
    let server = scenario(&serde_json::json!({ "steps": script }).to_string());
    let write = |name: &str, content: String| {
        let p = project.join(name);
        std::fs::write(&p, content).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    };
    write(
        "init.conf",
        format!(
            "API_URL={}\nAPI_KEY=sk-test-0123456789abcdef\nMODEL=scripted\nREQUEST_TIMEOUT=60\n",
            server.base_url()
        ),
    );
    write("agent.md", "# Test agent\n\n```policy\nEXECUTION_MODE=unrestricted\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_PACKAGE_INSTALL=true\nALLOW_NETWORK=true\nALLOW_DELETE=true\nMAX_STEPS=60\nDEFAULT_COMMAND_TIMEOUT=300\n```\n".into());
    write("01-admin.md", "# Admin\nDo the admin work.\n".into());
    let layout = sysward_broker::project::Layout::standalone(project).unwrap();
    let ctx = sysward_broker::context::broker_context_with_binaries(layout, &bin_dir()).unwrap();
    let op = Approver {
        inner: Recorder::new(),
        prompts: Mutex::new(Vec::new()),
    };
    let _ = run_tasks(&ctx, &op);
    drop(listener);
    let results: Vec<String> = (0..steps.len()).map(|i| result_of(&server, i)).collect();
    let ok = |i: usize| results[i].contains("status=\"ok\"");
    let mut failures: Vec<String> = Vec::new();
    let mut check = |cond: bool, what: &str, i: usize| {
        println!("  {} {what}", if cond { "ok  " } else { "FAIL" });
        if !cond {
            failures.push(format!(
                "{what}: {}",
                results[i].chars().take(1500).collect::<String>()
            ));
        }
    };
    let hosts_now = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    check(
        ok(0) && ok(1) && hosts_now.contains("# sysward-effects-sed"),
        "write_file and sed -i of /etc/hosts",
        1,
    );
    let defs = std::fs::read_to_string("/etc/login.defs").unwrap_or_default();
    check(
        ok(2) && defs.contains("LOGIN_TIMEOUT\t61"),
        "sed -i of /etc/login.defs",
        2,
    );
    let id = Command::new("id")
        .arg(user)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    let shadow = std::fs::read_to_string("/etc/shadow").unwrap_or_default();
    let shadow_line = shadow
        .lines()
        .find(|l| l.starts_with(&format!("{user}:")))
        .unwrap_or("");
    let fields: Vec<&str> = shadow_line.split(':').collect();
    check(
        ok(3)
            && id.contains(group)
            && Path::new(&format!("/home/{user}")).is_dir()
            && fields.get(1).is_some_and(|p| p.starts_with('!'))
            && fields.get(4) == Some(&"90"),
        "useradd -m, groupadd, usermod -aG, passwd -l, chage -M",
        3,
    );
    let mode = std::fs::metadata(format!("{etc_dir}/x.conf"))
        .map(|m| m.mode() & 0o777)
        .ok();
    check(
        ok(4) && mode == Some(0o640),
        "a new directory and 0640 file in /etc",
        4,
    );
    check(
        ok(5) && Path::new(&var_lib).is_dir(),
        "a new directory in /var/lib",
        5,
    );
    check(
        ok(6) && project.join("report.txt").is_file(),
        "a new file in the project root",
        6,
    );
    check(
        ok(7) && beside.is_file(),
        "a new file beside the project",
        7,
    );
    check(
        ok(8) && results[8].contains(&format!(":{port}")),
        "ss -tln shows the test's listener",
        8,
    );
    check(
        ok(9) && host_ifaces.iter().all(|i| results[9].contains(i.as_str())),
        "ip -br link shows the host's interfaces",
        9,
    );
    check(
        ok(10) && results[10].contains("AAAA-test"),
        "cat in another user's 0700 directory",
        10,
    );
    check(
        ok(11)
            && std::fs::read_link(&etc_link).ok() == Some(PathBuf::from("/etc/hostname"))
            && std::fs::read_to_string("/usr/lib/os-release").is_ok_and(|t| t.contains("ID=")),
        "ln -sf replaces a link in /etc (the file it pointed at is untouched)",
        11,
    );
    check(
        ok(12)
            && std::fs::read_to_string(format!("{var_tmp_tree}/a/b/f"))
                .ok()
                .as_deref()
                == Some("deep\n"),
        "mkdir -p of a tree of which nothing exists, and a file in it",
        12,
    );
    check(
        ok(13) && Path::new(&format!("{var_lib_tree}/x/y")).is_dir(),
        "the mkdir tool makes a new tree with its missing parents",
        13,
    );
    check(
        ok(14)
            && std::fs::read_to_string(format!("{var_lib_tree}/x/y/z.conf"))
                .ok()
                .as_deref()
                == Some("deep=1\n"),
        "write_file into the new tree",
        14,
    );
    check(
        ok(15) && !home.exists(),
        "rm -rf of a tree holding another user's 0700 directory",
        15,
    );
    let mut next = 16;
    if login_line.is_some() {
        let defs = std::fs::read_to_string("/etc/login.defs").unwrap_or_default();
        check(
            ok(next) && defs.contains("PASS_WARN_AGE\t9"),
            "edit_file of /etc/login.defs",
            next,
        );
        next += 1;
    }
    if package.is_some() {
        check(
            ok(next),
            "apt-get install -y hello (its files in /usr/bin, /usr/share)",
            next,
        );
        check(
            ok(next + 1) && !installed("hello"),
            "apt-get remove -y hello",
            next + 1,
        );
        let audit = Command::new("dpkg")
            .arg("--audit")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
            .unwrap_or_default();
        check(audit.trim().is_empty(), "dpkg --audit is clean", next + 1);
    } else {
        println!("  SKIP apt-get: hello is installed already (never removed by a test that did not add it) or apt-get is missing");
    }
    // The approval panel said what the kernel would do.
    let prompts = op.prompts.lock().unwrap();
    check(
        prompts.iter().any(|p| {
            p.profile
                .contains("writes beneath /etc (sysward's own paths read-only)")
        }),
        "the approval panel shows the kernel's write grant",
        1,
    );
    drop(prompts);
    drop(restore);
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n---\n")
    );
}

#[test]
fn approved_admin_work_takes_effect_project_under_tmp() {
    run_layout(
        "approved_admin_work_takes_effect_project_under_tmp",
        &PathBuf::from(format!("/tmp/sysward-effects-{}", std::process::id())),
    );
}

#[test]
fn approved_admin_work_takes_effect_project_under_root() {
    run_layout(
        "approved_admin_work_takes_effect_project_under_root",
        &PathBuf::from(format!("/root/sysward-effects-{}", std::process::id())),
    );
}

/// An approved `sysctl -w net.*` changes the network namespace the broker
/// runs in — here a test namespace made for it, never this machine's own.
#[test]
fn an_approved_network_sysctl_reaches_the_brokers_namespace() {
    if !require_root("an_approved_network_sysctl_reaches_the_brokers_namespace") {
        return;
    }
    ensure_accounts();
    let _one_at_a_time = HOST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let host_before = std::fs::read_to_string("/proc/sys/net/ipv4/conf/all/rp_filter").unwrap();
    let pid = std::process::id();
    let project = PathBuf::from(format!("/var/tmp/sysward-effects-netns-{pid}"));
    let (value, result) = std::thread::spawn({
        let project = project.clone();
        move || {
            // This thread, the broker's threads it starts and every action
            // they fork live in a fresh network namespace.
            // SAFETY: integer argument only; it affects this thread alone.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
            assert!(Command::new("ip").args(["link", "set", "lo", "up"]).status().unwrap().success());
            std::fs::write("/proc/sys/net/ipv4/conf/all/rp_filter", "0").unwrap();
            let server = scenario(&serde_json::json!({"steps":[
                shell("sysctl -w net.ipv4.conf.all.rp_filter=1"),
                {"content":"done\nTASK_STATUS: DONE"}
            ]}).to_string());
            let _ = std::fs::remove_dir_all(&project);
            std::fs::create_dir_all(&project).unwrap();
            std::fs::set_permissions(&project, std::fs::Permissions::from_mode(0o700)).unwrap();
            for (name, content) in [
                ("init.conf", format!("API_URL={}\nAPI_KEY=sk-test-0123456789abcdef\nMODEL=scripted\nREQUEST_TIMEOUT=30\n", server.base_url())),
                ("agent.md", "# T\n\n```policy\nEXECUTION_MODE=unrestricted\nALLOW_OUTSIDE_PROJECT_WRITE=true\n```\n".to_string()),
                ("01-t.md", "# T\nHarden rp_filter.\n".to_string()),
            ] {
                std::fs::write(project.join(name), content).unwrap();
                std::fs::set_permissions(project.join(name), std::fs::Permissions::from_mode(0o600)).unwrap();
            }
            let layout = sysward_broker::project::Layout::standalone(&project).unwrap();
            let ctx = sysward_broker::context::broker_context_with_binaries(layout, &bin_dir()).unwrap();
            let op = Approver { inner: Recorder::new(), prompts: Mutex::new(Vec::new()) };
            let _ = run_tasks(&ctx, &op);
            let value = std::fs::read_to_string("/proc/sys/net/ipv4/conf/all/rp_filter").unwrap();
            (value, result_of(&server, 0))
        }
    })
    .join()
    .unwrap();
    let _ = std::fs::remove_dir_all(&project);
    assert_eq!(
        value.trim(),
        "1",
        "the approved sysctl did not reach the namespace: {result}"
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/conf/all/rp_filter").unwrap(),
        host_before,
        "the machine's own namespace changed"
    );
}
