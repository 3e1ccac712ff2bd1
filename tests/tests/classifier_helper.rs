//! The command classifier runs in confined, killable helper processes
//! (`sysward-classify`): a classification that never ends, or allocates
//! without bound, costs one denial and one restart of the helper; the helper
//! cannot write, read, connect, exec or signal; and it decides exactly as the
//! broker's engine does in process. The misbehaving helper is
//! `sysward-test-evil-classifier`: the shipped helper's channel, confinement
//! and serve loop with a probe that loops, allocates or tries what the
//! confinement forbids on request. Every test needs root (the helper confines
//! itself as root does) and skips loudly otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use sysward_broker::classifier::{ClassifierPool, EngineHandle, Incident};
use sysward_policy::{parse_agent_md, Engine, HostFacts, OwnedRequest, PolicyBlock, Verdict};
use sysward_tests::*;

const LIMIT: Duration = Duration::from_millis(1500);

fn real_pool(warm: usize) -> ClassifierPool {
    ClassifierPool::start(&bin_dir().join("sysward-classify"), warm).unwrap()
}

fn evil_pool(warm: usize) -> ClassifierPool {
    let path = bin_dir().join("sysward-test-evil-classifier");
    assert!(
        path.exists(),
        "build the test binaries first (cargo build --workspace --bins)"
    );
    ClassifierPool::start(&path, warm).unwrap()
}

fn default_engine() -> Arc<EngineHandle> {
    EngineHandle::new(PolicyBlock::default(), HostFacts::packaged(0, 0))
}

fn shell(script: &str) -> OwnedRequest {
    OwnedRequest::Shell {
        script: script.to_string(),
        cwd: PathBuf::from("/"),
    }
}

fn probe(what: &str) -> OwnedRequest {
    shell(&format!("sysward-test-classifier: {what}"))
}

fn gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// A runaway request through `pool`: one denial with `source`, the helper
/// that served it killed and reaped, a fresh one ready, and the next
/// ordinary request decided normally by it.
fn runaway_costs_one_denial(pool: &ClassifierPool, what: &str, sources: &[&str]) -> Incident {
    let engine = default_engine();
    let before = pool.idle_pids();
    assert_eq!(before.len(), 1, "one warm helper");
    let started = Instant::now();
    let late = pool.decide(&engine, probe(what), what, LIMIT);
    let took = started.elapsed();
    assert!(late.decision.verdict.is_deny(), "{late:?}");
    assert!(sources.contains(&late.decision.source.as_str()), "{late:?}");
    assert!(
        late.decision
            .reason
            .contains("classification did not finish"),
        "{late:?}"
    );
    assert!(late.decision.profile.is_none());
    let incident = late.incident.expect("an incident for the killed helper");
    assert_eq!(incident.pid, before[0], "the helper that served it");
    assert!(incident.restarted, "{incident:?}");
    assert!(gone(incident.pid), "helper {} not reaped", incident.pid);
    assert!(took < LIMIT + Duration::from_secs(2), "took {took:?}");
    let after = pool.idle_pids();
    assert_eq!(after.len(), 1, "a fresh helper is ready: {after:?}");
    assert_ne!(after[0], before[0]);
    let ok = pool.decide(&engine, shell("echo hello | wc -c"), "echo", LIMIT);
    assert_eq!(ok.decision.verdict, Verdict::Allow, "{ok:?}");
    assert!(ok.incident.is_none());
    assert_eq!(pool.idle_pids(), after, "the fresh helper decided it");
    incident
}

#[test]
fn a_classification_that_never_ends_costs_one_denial_and_one_restart() {
    if !require_root("a_classification_that_never_ends_costs_one_denial_and_one_restart") {
        return;
    }
    let pool = evil_pool(1);
    let incident = runaway_costs_one_denial(&pool, "loop", &["classifier time limit"]);
    assert!(
        incident.what.contains("killed after 1500 ms"),
        "{incident:?}"
    );
}

#[test]
fn a_classification_that_allocates_without_bound_costs_one_denial_and_one_restart() {
    if !require_root(
        "a_classification_that_allocates_without_bound_costs_one_denial_and_one_restart",
    ) {
        return;
    }
    let pool = evil_pool(1);
    // The address-space limit (1 GiB) makes an allocation fail long before
    // the deadline, and the helper aborts (SIGABRT).
    let incident = runaway_costs_one_denial(&pool, "allocate", &["classifier failure"]);
    assert!(incident.what.contains("signal 6"), "{incident:?}");
}

#[test]
fn a_decision_past_its_deadline_is_a_denial_and_the_next_one_works() {
    if !require_root("a_decision_past_its_deadline_is_a_denial_and_the_next_one_works") {
        return;
    }
    let pool = real_pool(1);
    let engine = default_engine();
    // A zero deadline cannot be met: the helper has not even been asked.
    let late = pool.decide(&engine, shell("echo hello | wc -c"), "echo", Duration::ZERO);
    assert!(late.decision.verdict.is_deny(), "{late:?}");
    assert_eq!(late.decision.source, "classifier time limit");
    assert!(late.decision.profile.is_none());
    let ok = pool.decide(&engine, shell("echo hello | wc -c"), "echo", LIMIT);
    assert_eq!(ok.decision.verdict.as_str(), "allow", "{ok:?}");
}

/// A decision hands the helper the asking thread's CPU: the helper may run
/// only where its last requester ran, and follows the requester when it
/// moves (so that asking wakes it on a busy CPU instead of an idle one);
/// what it decides is unchanged.
#[test]
fn the_helper_runs_on_the_cpu_of_the_thread_that_asks() {
    if !require_root("the_helper_runs_on_the_cpu_of_the_thread_that_asks") {
        return;
    }
    let pool = real_pool(1);
    let engine = default_engine();
    let pid = pool.idle_pids()[0];
    std::thread::scope(|s| {
        s.spawn(|| {
            for cpu in sysward_testdir::cpu_tour() {
                sysward_testdir::pin_this_thread(cpu);
                let d = pool.decide(&engine, shell("echo hello | wc -c"), "echo", LIMIT);
                assert_eq!(d.decision.verdict, Verdict::Allow, "{d:?}");
                assert_eq!(pool.idle_pids(), vec![pid], "the same helper decided");
                assert_eq!(
                    sysward_testdir::allowed_cpus(i32::try_from(pid).unwrap()),
                    Some(cpu.to_string()),
                    "the helper follows its requester to CPU {cpu}"
                );
            }
        })
        .join()
        .unwrap();
    });
}

#[test]
fn the_helper_cannot_write_read_connect_exec_or_signal() {
    if !require_root("the_helper_cannot_write_read_connect_exec_or_signal") {
        return;
    }
    let dir = Path::new("/var/tmp/sysward-tests/classifier-probe");
    std::fs::create_dir_all(dir).unwrap();
    let target = dir.join("written");
    let _ = std::fs::remove_file(&target);
    let pool = evil_pool(1);
    let engine = default_engine();
    let pid = pool.idle_pids()[0];
    let me = std::process::id();
    for (what, expect) in [
        (format!("write {}", target.display()), "write failed"),
        ("read /etc/hostname".to_string(), "read failed"),
        ("socket".to_string(), "tcp failed"),
        ("socket".to_string(), "unix failed"),
        ("exec".to_string(), "exec failed"),
        (format!("kill {me}"), "kill failed"),
        // Beyond the address-space limit (1 GiB) in one allocation.
        ("reserve 1200000000".to_string(), "reserve failed"),
        // Within it: an ordinary large analysis still has room.
        ("reserve 200000000".to_string(), "reserve succeeded"),
    ] {
        let d = pool.decide(&engine, probe(&what), &what, LIMIT);
        assert_eq!(d.decision.source, "test probe", "{what}: {d:?}");
        assert!(
            d.decision.reason.contains(expect),
            "{what}: {}",
            d.decision.reason
        );
        assert!(d.incident.is_none());
    }
    assert!(!target.exists(), "the helper wrote {}", target.display());
    // The same helper still decides, and resolves paths as root does.
    assert_eq!(pool.idle_pids(), vec![pid]);
    let ok = pool.decide(&engine, shell("echo ok"), "echo ok", LIMIT);
    assert_eq!(ok.decision.verdict, Verdict::Allow, "{ok:?}");
}

/// `/proc/PID/status` and `/proc/PID/limits` of the shipped helper.
#[test]
fn the_shipped_helper_runs_with_one_capability_no_new_privs_seccomp_and_limits() {
    if !require_root("the_shipped_helper_runs_with_one_capability_no_new_privs_seccomp_and_limits")
    {
        return;
    }
    let pool = real_pool(1);
    let pid = pool.idle_pids()[0];
    let field = |k: &str| status_field(pid, k).unwrap_or_default();
    // CAP_DAC_READ_SEARCH is capability 2.
    for set in ["CapEff:", "CapPrm:", "CapBnd:"] {
        assert_eq!(field(set), "0000000000000004", "{set}");
    }
    // The sandbox sets inheritable to the kept set; it would matter only
    // across an exec, which seccomp refuses.
    assert_eq!(field("CapInh:"), "0000000000000004");
    assert_eq!(field("CapAmb:"), "0000000000000000");
    assert_eq!(field("NoNewPrivs:"), "1");
    assert_eq!(field("Seccomp:"), "2");
    assert_eq!(field("Groups:"), "");
    let uids = field("Uid:");
    assert!(
        uids.split_whitespace().count() == 4 && uids.split_whitespace().all(|u| u == "0"),
        "{uids}"
    );
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let limit = |name: &str| {
        limits
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| {
                l[name.len()..]
                    .split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    };
    assert_eq!(limit("Max address space"), "1073741824 1073741824");
    assert_eq!(limit("Max cpu time"), "60 60");
    assert_eq!(limit("Max core file size"), "0 0");
    // Nothing but its channel (and /dev/null on 0-2) is open.
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    assert_eq!(fds, 4, "open descriptors of the helper");
    // Not dumpable: its memory belongs to root only, and nothing can attach.
    let mem = std::fs::metadata(format!("/proc/{pid}/mem")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&mem), 0);
}

/// A host layout with symlinks whose real targets matter, one of them
/// beneath a directory only its owner (not root's uid without
/// CAP_DAC_READ_SEARCH) can traverse.
fn path_fixture() -> PathBuf {
    let base = Path::new("/var/tmp/sysward-tests/classifier-paths");
    let _ = std::fs::remove_dir_all(base);
    std::fs::create_dir_all(base.join("project/work")).unwrap();
    let private = base.join("private");
    std::fs::create_dir_all(&private).unwrap();
    symlink("/etc/shadow", private.join("to-shadow")).unwrap();
    symlink("/etc", base.join("project/etc-link")).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&private, Some(65534), Some(65534)).unwrap();
    base.to_path_buf()
}

fn requests(base: &Path) -> Vec<OwnedRequest> {
    let corpus = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../policy/tests/corpus/commands.tsv"),
    )
    .unwrap();
    let cwd = base.join("project/work");
    let mut out: Vec<OwnedRequest> = corpus
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split('\t').next())
        .map(|s| OwnedRequest::Shell {
            script: s.replace("\\n", "\n"),
            cwd: cwd.clone(),
        })
        .collect();
    let private = base.join("private/to-shadow").display().to_string();
    let etc = base.join("project/etc-link/hosts").display().to_string();
    for script in [
        format!("cat {private}"),
        format!("echo x > {etc}"),
        format!("rm -rf {}", base.join("project/etc-link").display()),
        "cat ../etc-link/passwd".to_string(),
    ] {
        out.push(OwnedRequest::Shell {
            script,
            cwd: cwd.clone(),
        });
    }
    out.push(OwnedRequest::Exec {
        argv: vec!["cat".into(), private.clone()],
        env: vec![("LC_ALL".into(), "C".into())],
        stdin: Some("input".into()),
        cwd: cwd.clone(),
    });
    for (tool, targets) in [
        ("read_file", vec![PathBuf::from(&private)]),
        ("write_file", vec![PathBuf::from(&etc)]),
        ("write_file", vec![base.join("project/work/new.txt")]),
        (
            "copy_file",
            vec![base.join("project/work/a"), PathBuf::from(&etc)],
        ),
        ("remove_file", vec![base.join("project/etc-link")]),
        ("system_info", vec![]),
        ("no_such_tool", vec![]),
    ] {
        out.push(OwnedRequest::Tool {
            name: tool.into(),
            targets,
            recursive: tool == "remove_file",
            cwd: cwd.clone(),
        });
    }
    out
}

#[test]
fn the_helper_decides_exactly_as_the_engine_in_process() {
    if !require_root("the_helper_decides_exactly_as_the_engine_in_process") {
        return;
    }
    let base = path_fixture();
    let pool = real_pool(1);
    for md in [
        "```policy\nEXECUTION_MODE=guarded\n```\n",
        "```policy\nEXECUTION_MODE=privileged\nALLOW_NETWORK=true\nALLOW_DOWNLOADS=true\nALLOW_PACKAGE_INSTALL=true\nALLOW_SERVICE_RESTART=true\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_DELETE=true\nCOMMAND_DENY=git push\nCOMMAND_ASK=ls -la\nWRITE_ALLOW=/etc/hosts\n```\n",
    ] {
        let block = parse_agent_md(md).unwrap().block;
        let mut facts = HostFacts::packaged(0, 0);
        facts.project_root = base.join("project");
        facts.scratch_dir = base.join("project/.agent/tmp");
        let handle = EngineHandle::new(block.clone(), facts.clone());
        let in_process = Engine::new(block, facts);
        let mut compared = 0;
        for r in requests(&base) {
            let here = sysward_classify::decide(&in_process, &r);
            let there = pool.decide(&handle, r.clone(), "", LIMIT);
            assert!(there.incident.is_none(), "{r:?}: {there:?}");
            assert_eq!(there.decision, here, "{r:?}");
            compared += 1;
        }
        assert!(compared > 700, "only {compared} requests compared");
    }
    // The private symlink was resolved through the 0700 directory: judged
    // as /etc/shadow, not as a file of the fixture.
    let d = pool.decide(
        &EngineHandle::new(PolicyBlock::default(), HostFacts::packaged(0, 0)),
        shell(&format!("cat {}", base.join("private/to-shadow").display())),
        "",
        LIMIT,
    );
    assert!(d.decision.verdict.is_deny(), "{d:?}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn engines_the_helper_dropped_are_sent_again() {
    if !require_root("engines_the_helper_dropped_are_sent_again") {
        return;
    }
    let pool = real_pool(1);
    // More engines than a helper keeps (16); the first is dropped and sent
    // again when asked for.
    let engines: Vec<Arc<EngineHandle>> = (0..20)
        .map(|i| {
            let md = format!("```policy\nEXECUTION_MODE=guarded\nCOMMAND_DENY=echo {i}\n```\n");
            EngineHandle::new(
                parse_agent_md(&md).unwrap().block,
                HostFacts::packaged(0, 0),
            )
        })
        .collect();
    for round in 0..2 {
        for (i, e) in engines.iter().enumerate() {
            let denied = pool.decide(e, shell(&format!("echo {i}")), "", LIMIT);
            assert!(denied.decision.verdict.is_deny(), "{round}/{i}: {denied:?}");
            assert!(
                denied.decision.source.starts_with("operator rule"),
                "{denied:?}"
            );
            let other = pool.decide(e, shell(&format!("echo {}", i + 1)), "", LIMIT);
            assert_eq!(
                other.decision.verdict,
                Verdict::Allow,
                "{round}/{i}: {other:?}"
            );
        }
    }
}

#[test]
fn a_helper_killed_while_idle_is_replaced_without_a_denial() {
    if !require_root("a_helper_killed_while_idle_is_replaced_without_a_denial") {
        return;
    }
    let pool = real_pool(1);
    let pid = pool.idle_pids()[0];
    // SAFETY: kill takes two integers.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    wait_for(Duration::from_secs(5), "the helper to die", || {
        let state = status_field(pid, "State:").unwrap_or_default();
        (state.starts_with('Z') || gone(pid)).then_some(())
    });
    let d = pool.decide(&default_engine(), shell("echo hi"), "", LIMIT);
    assert_eq!(d.decision.verdict, Verdict::Allow, "{d:?}");
    assert!(d.incident.is_none());
    assert_ne!(pool.idle_pids(), vec![pid]);
}

#[test]
fn decisions_do_not_wait_behind_a_stuck_helper() {
    if !require_root("decisions_do_not_wait_behind_a_stuck_helper") {
        return;
    }
    let pool = Arc::new(evil_pool(2));
    let engine = default_engine();
    let stuck = {
        let (pool, engine) = (Arc::clone(&pool), Arc::clone(&engine));
        std::thread::spawn(move || {
            let started = Instant::now();
            let d = pool.decide(&engine, probe("loop"), "loop", LIMIT);
            (d, started.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    for i in 0..20 {
        let t = Instant::now();
        let d = pool.decide(&engine, shell(&format!("echo {i}")), "", LIMIT);
        assert_eq!(d.decision.verdict, Verdict::Allow, "{d:?}");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
    }
    let others = started.elapsed();
    let (late, took) = stuck.join().unwrap();
    assert_eq!(late.decision.source, "classifier time limit", "{late:?}");
    assert!(
        others < took,
        "20 decisions took {others:?}, the stuck one {took:?}"
    );
}

/// `sysward policy explain` run by an operator who is not root starts the
/// helper as that user: it confines itself without a capability and still
/// decides.
#[test]
fn a_helper_started_by_a_user_who_is_not_root_confines_itself_and_decides() {
    if !require_root("a_helper_started_by_a_user_who_is_not_root_confines_itself_and_decides") {
        return;
    }
    use std::os::unix::process::CommandExt;
    use sysward_classify::{Answer, Request};
    use sysward_ipc::classify::ClassifyAnswer;
    let (mut ours, theirs) = sysward_ipc::Channel::pair().unwrap();
    let fd = theirs.raw_fd();
    let mut cmd = std::process::Command::new(bin_dir().join("sysward-classify"));
    cmd.uid(65534).gid(65534).env_clear();
    // SAFETY: dup2 is async-signal-safe; it copies the channel onto fd 3
    // (clearing close-on-exec on the copy) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(theirs);
    ours.send(&Request::Hello {
        build: sysward_ipc::BUILD_VERSION.to_string(),
    })
    .unwrap();
    let welcome: Answer = ours.recv().unwrap();
    assert!(
        matches!(welcome, ClassifyAnswer::Welcome { .. }),
        "{welcome:?}"
    );
    let pid = child.id();
    let field = |k: &str| status_field(pid, k).unwrap_or_default();
    assert_eq!(field("CapEff:"), "0000000000000000");
    assert_eq!(field("CapPrm:"), "0000000000000000");
    assert_eq!(field("NoNewPrivs:"), "1");
    assert_eq!(field("Seccomp:"), "2");
    assert!(field("Uid:").split_whitespace().all(|u| u == "65534"));
    ours.send(&Request::LoadEngine {
        id: 1,
        setup: sysward_policy::EngineSetup {
            block: PolicyBlock::default(),
            facts: HostFacts::packaged(0, 0),
        },
    })
    .unwrap();
    let loaded: Answer = ours.recv().unwrap();
    assert_eq!(loaded, ClassifyAnswer::Loaded { id: 1 });
    ours.send(&Request::Decide {
        engine: 1,
        request: shell("echo hello | wc -c"),
    })
    .unwrap();
    match ours.recv::<Answer>().unwrap() {
        ClassifyAnswer::Decided { decision, retiring } => {
            assert_eq!(decision.verdict, Verdict::Allow, "{decision:?}");
            assert!(!retiring);
        }
        other => panic!("{other:?}"),
    }
    // Out of turn: a second hello ends it with an error answer.
    ours.send(&Request::Hello {
        build: sysward_ipc::BUILD_VERSION.to_string(),
    })
    .unwrap();
    let refused: Answer = ours.recv().unwrap();
    assert!(
        matches!(&refused, ClassifyAnswer::Error { message } if message.contains("not permitted")),
        "{refused:?}"
    );
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
}

/// A helper that answers beyond what the policy's flags allow (writing
/// everywhere with ALLOW_OUTSIDE_PROJECT_WRITE=false, on the network with
/// ALLOW_NETWORK=false) is treated as broken: killed, replaced, the request
/// denied. The engine's own decisions pass the same check (the identity test
/// above runs every corpus command through it).
#[test]
fn a_decision_beyond_the_policy_flags_is_a_denial_and_a_restart() {
    if !require_root("a_decision_beyond_the_policy_flags_is_a_denial_and_a_restart") {
        return;
    }
    let pool = evil_pool(1);
    let lie = pool.decide(&default_engine(), probe("lie"), "lie", LIMIT);
    assert!(lie.decision.verdict.is_deny(), "{lie:?}");
    assert_eq!(lie.decision.source, "classifier failure");
    let incident = lie.incident.expect("the lying helper was killed");
    assert!(incident.what.contains("does not allow"), "{incident:?}");
    assert!(incident.restarted && gone(incident.pid));
    let ok = pool.decide(&default_engine(), shell("echo fine"), "", LIMIT);
    assert_eq!(ok.decision.verdict, Verdict::Allow, "{ok:?}");
}

/// A helper that cannot start (here a program that exits at once; on a
/// host, a kernel or container that refuses Landlock) does not stop the
/// broker: the pool starts empty and says why, and every decision is a
/// denial that names the cause.
#[test]
fn a_helper_that_cannot_start_makes_every_decision_a_denial_naming_the_cause() {
    if !require_root("a_helper_that_cannot_start_makes_every_decision_a_denial_naming_the_cause") {
        return;
    }
    let pool = ClassifierPool::start(Path::new("/bin/false"), 1).unwrap();
    let why = pool.start_error().unwrap_or_default().to_string();
    assert!(why.contains("did not start"), "{why}");
    assert!(pool.idle_pids().is_empty());
    let d = pool.decide(&default_engine(), shell("echo hi"), "echo hi", LIMIT);
    assert!(d.decision.verdict.is_deny(), "{d:?}");
    assert_eq!(d.decision.source, "classifier unavailable");
    assert!(
        d.decision.reason.contains("cannot start") && d.decision.reason.contains("did not start"),
        "{d:?}"
    );
    assert!(d.incident.is_none());
}
