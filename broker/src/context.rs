//! Setting up a broker before its first session.

use crate::{action, audit, cgroup, project, session, spawn};
use std::sync::Arc;

/// Why a broker could not be set up; nothing has been served yet.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    #[error("cannot make the broker non-dumpable")]
    NonDumpable(#[source] sysward_sandbox::SandboxError),
    #[error("cannot load the secrets")]
    Secrets(#[source] crate::secrets::SecretError),
    #[error(transparent)]
    Project(#[from] project::ProjectError),
    #[error(transparent)]
    Approvals(#[from] crate::approvals::ApprovalsError),
    #[error(transparent)]
    StaleTemps(#[from] crate::stale_temps::StaleTempsError),
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
    #[error(transparent)]
    Classifier(#[from] crate::classifier::ClassifierError),
    #[error(transparent)]
    Pinned(#[from] crate::pinned::PinnedError),
    #[error(transparent)]
    Spawn(#[from] spawn::SpawnSetupError),
}

type Result<T, E = ContextError> = std::result::Result<T, E>;

/// Classifier helpers started with the broker: one per core of the 2-core
/// machines sysward is measured on, so that two sessions deciding at once
/// find one ready each. A third starts its own (2-5 ms measured, spawn,
/// confinement and hello) and keeps it for later (up to four idle).
const WARM_CLASSIFIERS: usize = 2;

/// Everything a broker needs before its first session.
pub fn broker_context(layout: project::Layout) -> Result<session::BrokerContext> {
    broker_context_with_binaries(layout, &spawn::helper_dir()?)
}

/// The same, with sysward's binaries taken from `bin_dir` (each checked to be
/// root-owned and not writable by others).
pub fn broker_context_with_binaries(
    layout: project::Layout,
    bin_dir: &std::path::Path,
) -> Result<session::BrokerContext> {
    sysward_sandbox::set_non_dumpable().map_err(ContextError::NonDumpable)?;
    project::ensure_private_dir(&layout.agent_dir())?;
    project::ensure_private_dir(&layout.tmp_dir())?;
    if !layout.standalone {
        project::ensure_tools_dir(&layout.tools_dir())?;
    }
    crate::approvals::Approvals::open(&layout)?;
    crate::stale_temps::prepare(&layout)?;
    let audit = audit::Audit::open(&layout.audit_log(), &layout.audit_head())?;
    // Before the secrets are loaded: the classifier helpers never share an
    // address space with them, not even for the moment between fork and exec.
    let classifier = crate::classifier::start_pool(bin_dir, WARM_CLASSIFIERS)?;
    if let Some(why) = classifier.start_error() {
        eprintln!("sysward: warning: the command classifier does not start ({why}): every command is denied until it does; run `sysward doctor`");
    }
    let secrets = crate::secrets::SecretStore::load(&layout).map_err(ContextError::Secrets)?;
    for w in secrets.warnings() {
        eprintln!("sysward: warning: {w}");
    }
    // Actions' cgroups go under this broker's own directory; what brokers
    // that died left behind is killed first.
    let cgroup_dir = cgroup::actions_root().and_then(|top| {
        for line in cgroup::clean_stale(&top) {
            eprintln!("sysward: cleaned a stale action cgroup: {line}");
        }
        cgroup::broker_root(&top)
    });
    let exec_path = spawn::checked(bin_dir, "sysward-exec")?;
    let agent_path = spawn::checked(bin_dir, "sysward-agent")?;
    let gateway_path = spawn::checked(bin_dir, "sysward-gateway")?;
    let classifier_path = classifier.program().to_path_buf();
    let pinned = crate::pinned::Pinned::open(
        &layout,
        &[&exec_path, &agent_path, &gateway_path, &classifier_path],
    )?;
    let runner = action::Runner::new(
        exec_path,
        cgroup_dir.as_ref().map(|d| d.path().to_path_buf()),
        layout.tmp_dir(),
    );
    let hostname = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".to_string());
    Ok(session::BrokerContext {
        audit: Arc::new(audit),
        secrets: Arc::new(secrets),
        runner,
        classifier: Arc::new(classifier),
        agent_path,
        gateway_path,
        pinned,
        log_to_stderr: false,
        hostname,
        layout,
        cgroup_dir,
    })
}
