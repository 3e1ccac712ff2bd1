//! sysward's own paths protected by the action's mount namespace: every
//! attack on the mechanism's weak spots, each beside the legitimate write in
//! the same directory that must still work.

use super::*;

/// A throwaway project with sysward's files, and the paths of the host this
/// case creates (removed even when a check fails).
struct Fixture {
    base: PathBuf,
    project: PathBuf,
    created: Vec<PathBuf>,
}

impl Fixture {
    fn new() -> Fixture {
        let base = PathBuf::from(format!("/var/tmp/sysward-mounts-{}", std::process::id()));
        let project = base.join("proj");
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(project.join("secrets")).unwrap();
        std::fs::create_dir_all(project.join("approvals")).unwrap();
        std::fs::create_dir_all(project.join(".agent/tmp")).unwrap();
        std::fs::write(project.join("init.conf"), "API_KEY=sk-mounts-test\n").unwrap();
        std::fs::write(project.join("secrets/db"), "sk-mounts-secret\n").unwrap();
        std::fs::write(project.join("audit.log"), "record\n").unwrap();
        std::fs::write(project.join("agent.md"), "# agent\n").unwrap();
        Fixture {
            base,
            project,
            created: Vec::new(),
        }
    }

    fn p(&self, name: &str) -> String {
        self.project.join(name).display().to_string()
    }

    /// A host path this case creates.
    fn host(&mut self, path: &str) -> String {
        self.created.push(PathBuf::from(path));
        path.to_string()
    }

    fn write_profile(&self, write_everywhere: bool) -> ConfinementProfile {
        let mut p = base_profile();
        p.name = "write".into();
        p.capabilities = [
            "CAP_CHOWN",
            "CAP_DAC_OVERRIDE",
            "CAP_FOWNER",
            "CAP_DAC_READ_SEARCH",
        ]
        .iter()
        .map(|c| c.to_string())
        .collect();
        if write_everywhere {
            p.name = "admin".into();
            p.write_everywhere = true;
        } else {
            p.write_paths = vec!["/etc".into(), self.project.display().to_string()];
        }
        p.protected_paths = ["audit.log", "agent.md", "approvals", "init.conf", "secrets"]
            .iter()
            .map(|n| self.p(n))
            .collect();
        p.hidden_paths = vec![self.p("secrets"), self.p("init.conf")];
        p.read_all_except = Some(p.hidden_paths.clone());
        p.scratch_dir = Some(self.p(".agent/tmp"));
        p
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for p in self.created.iter().rev() {
            let _ = std::fs::remove_file(p).or_else(|_| std::fs::remove_dir_all(p));
        }
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn sh(script: &str, profile: &ConfinementProfile) -> Run {
    spawn(
        &command(&["/bin/sh", "-c", script], profile.clone()),
        &Opts::default(),
    )
}

pub(super) fn case_mounts(t: &mut T) {
    println!("mount protection: sysward's paths read-only, secrets covered, ancestors pinned");
    let _etc = SysDir::ensure("/etc/sysward");
    let _dropin = SysDir::ensure("/etc/systemd/system/sysward.service.d");
    let me = std::process::id();
    for everywhere in [false, true] {
        let mut f = Fixture::new();
        let profile = f.write_profile(everywhere);
        let label = if everywhere {
            "admin"
        } else {
            "write /etc + project"
        };
        // The legitimate operations first: each must take effect on the host.
        let new_conf = f.host(&format!("/etc/sysward-mounts-{me}.conf"));
        let new_dir = f.host(&format!("/etc/sysward-mounts-{me}.d"));
        let edited = f.host(&format!("/etc/sysward-mounts-edit-{me}"));
        std::fs::write(&edited, "alpha\n").unwrap();
        let report = f.p("report.txt");
        let scratch = f.p(".agent/tmp/out");
        let legit = format!(
            "set -e; echo conf > {new_conf}; chmod 0640 {new_conf}; mkdir -m 0750 {new_dir}; \
             echo x > {new_dir}/f; sed -i s/alpha/beta/ {edited}; echo r > {report}; \
             echo s > {scratch}; cat {new_conf}"
        );
        let r = sh(&legit, &profile);
        let mode = std::fs::metadata(&new_conf)
            .map(|m| m.permissions().mode() & 0o777)
            .ok();
        t.check(
            r.code() == Some(0)
                && mode == Some(0o640)
                && std::fs::read_to_string(&edited).ok().as_deref() == Some("beta\n")
                && Path::new(&format!("{new_dir}/f")).exists()
                && Path::new(&report).exists()
                && Path::new(&scratch).exists(),
            format!(
                "{label}: new file (0640) and directory in /etc, sed -i, a file in the project root and scratch take effect: {:?} {:?}",
                r.code(),
                r.err()
            ),
        );
        let audit = f.p("audit.log");
        let agent_md = f.p("agent.md");
        let project = f.project.display().to_string();
        let base = f.base.display().to_string();
        let link_in_etc = f.host(&format!("/etc/sysward-mounts-link-{me}"));
        let attacks: Vec<(&str, String)> = vec![
            ("write the audit log", format!("echo forged >> {audit}")),
            ("truncate the audit log", format!(": > {audit}")),
            ("rename the audit log", format!("mv {audit} {audit}.x")),
            ("remove the audit log", format!("rm -f {audit}")),
            ("replace the audit log by rename", format!("echo forged > {project}/new && mv -f {project}/new {audit}")),
            ("hard link to the audit log, then write", format!("ln {audit} {project}/hl && echo forged >> {project}/hl")),
            ("symlink to the audit log, then write", format!("ln -s {audit} {link_in_etc} && echo forged >> {link_in_etc}")),
            ("write agent.md", format!("echo '```policy' >> {agent_md}")),
            ("approve through the approvals directory", format!("echo '{{}}' > {project}/approvals/forged.json")),
            ("read init.conf", format!("cat {project}/init.conf")),
            ("read a secret", format!("cat {project}/secrets/db")),
            ("list the secrets", format!("test -n \"$(ls -A {project}/secrets)\"")),
            ("read init.conf through /proc/self/root", format!("cat /proc/self/root{project}/init.conf")),
            ("write the audit log through /proc/self/root", format!("echo forged >> /proc/self/root{audit}")),
            ("write the audit log through /proc/1/root", format!("echo forged >> /proc/1/root{audit}")),
            ("read init.conf through the test's /proc/<pid>/root", format!("cat /proc/{me}/root{project}/init.conf")),
            ("write the audit log through the test's /proc/<pid>/root", format!("echo forged >> /proc/{me}/root{audit}")),
            ("rename /etc/sysward", "mv /etc/sysward /etc/sysward.moved".into()),
            ("replace /etc/sysward", format!("mkdir /etc/sysward-new-{me} && mv -T /etc/sysward-new-{me} /etc/sysward")),
            ("write in /etc/sysward", "echo x > /etc/sysward/planted".into()),
            ("rename the project directory", format!("mv {project} {project}.moved")),
            ("rename the project's parent", format!("mv {base} {base}.moved")),
            ("unit override drop-in", "echo '[Service]' > /etc/systemd/system/sysward.service.d/x.conf".into()),
            ("umount a cover", format!("umount {project}/init.conf")),
            ("lazy umount a cover", format!("umount -l {project}/secrets")),
            ("mount over the audit log", format!("mount --bind /dev/null {audit}")),
            ("chattr the audit log", format!("chattr +A {audit}")),
            ("open_by_handle_at", format!("python3 -c 'import ctypes,sys;l=ctypes.CDLL(None,use_errno=True);b=ctypes.create_string_buffer(136);ctypes.memmove(b,(128).to_bytes(4,\"little\"),4);m=ctypes.c_int();r=l.name_to_handle_at(-100,b\"{project}/init.conf\",b,ctypes.byref(m),0);sys.exit(0 if r==0 else 1)'")),
        ];
        for (name, script) in attacks {
            if script.starts_with("python3") && which("python3").is_none() {
                t.skip(format!("{label}: {name}: python3 missing"));
                continue;
            }
            let r = sh(&script, &profile);
            t.check(
                r.code() != Some(0),
                format!(
                    "{label}: {name} fails: exit {:?} {:?}",
                    r.code(),
                    r.err().lines().next().unwrap_or("")
                ),
            );
        }
        // As the host sees it: nothing of sysward's changed.
        t.check(
            std::fs::read_to_string(&audit).ok().as_deref() == Some("record\n")
                && std::fs::read_to_string(&agent_md).ok().as_deref() == Some("# agent\n")
                && std::fs::read_dir(f.project.join("approvals"))
                    .map(|d| d.count())
                    .ok()
                    == Some(0)
                && Path::new("/etc/sysward").is_dir()
                && !Path::new("/etc/sysward/planted").exists()
                && !Path::new("/etc/systemd/system/sysward.service.d/x.conf").exists()
                && f.project.join("init.conf").is_file(),
            format!("{label}: the host's copies of sysward's files are untouched"),
        );
        let _ = std::fs::remove_dir(format!("/etc/sysward-new-{me}"));
    }
}
