//! `nft -c -f {file}` as a write's validate command: the kernel checks a
//! ruleset only for a process with CAP_NET_ADMIN, which a file tool's profile
//! does not keep, so without this the check can never pass and an operator
//! cannot have a firewall file checked before it replaces the old one. The
//! capability is added to the decision (so the approval panel and the audit
//! record show it) only when the validate is exactly that check
//! (`sysward_policy::netfilter::is_check_validate`) and the program is the
//! root-owned nft, which the validate then runs by its real path. Anything
//! else — `nft -f`, a shell around it — runs without it, and a load fails
//! with EPERM.

use crate::command_plan;
use std::path::{Path, PathBuf};
use sysward_ipc::exec::FileOp;
use sysward_policy::{netfilter, Decision, Verdict};

/// The real path of the netfilter program `argv0` names (PATH lookup, then
/// symlinks and alternatives followed), when it is nft or xtables-nft in
/// /usr/sbin or /sbin, owned by root and writable by nobody else, as is its
/// directory. None: it keeps no capability.
pub fn trusted_program(argv0: &str) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let program = command_plan::resolve_program(argv0).ok()?;
    let real = std::fs::canonicalize(&program).ok()?;
    let name = real.file_name()?.to_str()?;
    if !netfilter::LISTING_PROGRAMS.contains(&name) {
        return None;
    }
    let trusted = |p: &Path| {
        std::fs::symlink_metadata(p)
            .is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0 && !m.file_type().is_symlink())
    };
    let dir = real.parent()?;
    if !matches!(dir.to_str(), Some("/usr/sbin" | "/sbin")) || !trusted(&real) || !trusted(dir) {
        return None;
    }
    Some(real)
}

/// Adds CAP_NET_ADMIN to a file operation's decision when its validate command is
/// exactly nft's check of the candidate file, and pins that command to the
/// trusted nft. A denied request, or one without a profile, is left alone.
pub fn grant_check_capability(op: &mut FileOp, decision: &mut Decision) {
    if matches!(decision.verdict, Verdict::Deny { .. }) {
        return;
    }
    let validate = match op {
        FileOp::WriteFile(a) => a.validate.as_mut(),
        FileOp::EditFile(a) => a.validate.as_mut(),
        _ => None,
    };
    let Some(validate) = validate else {
        return;
    };
    let args = validate.args.clone().unwrap_or_default();
    if !netfilter::is_check_validate(&validate.command, &args) {
        return;
    }
    let Some(real) = trusted_program(&validate.command) else {
        return;
    };
    if real.file_name().and_then(|n| n.to_str()) != Some("nft") {
        return;
    }
    let Some(profile) = decision.profile.as_mut() else {
        return;
    };
    validate.command = real.display().to_string();
    let cap = netfilter::LIST_CAP.to_string();
    if !profile.capabilities.contains(&cap) {
        profile.capabilities.push(cap);
    }
}
