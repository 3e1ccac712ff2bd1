//! The broker daemon's control socket: creation with path checks, peer checks on
//! every connection, and a session (through [`crate::operator_channel`]) or
//! one approvals request per operator connection.

use crate::operator_channel;
use crate::session::{self, BrokerContext};
use nix::sys::socket::{
    bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr,
};
use nix::unistd::{chown, Gid, Uid};
use std::fs;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use sysward_ipc::operator::{OperatorAnswer, OperatorRequest};
use sysward_ipc::peer::{self, PeerCred};
use sysward_ipc::Channel;

pub const SOCKET_PATH: &str = "/run/sysward/control.sock";
pub const OPERATOR_GROUP: &str = "sysward";

/// Why the control socket could not be set up, or a connection was dropped.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("{}: the control socket path must be absolute and normalized", .0.display())]
    NotNormalized(PathBuf),
    #[error("cannot lstat {}", path.display())]
    Lstat {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is a symlink: the control socket path must not contain any", .0.display())]
    Symlink(PathBuf),
    #[error("{} is not owned by root (uid {uid}): refusing to create the control socket under it", path.display())]
    NotRootOwned { path: PathBuf, uid: u32 },
    #[error("{} is writable by others: refusing to create the control socket under it", .0.display())]
    WritableByOthers(PathBuf),
    #[error("socket path has no directory")]
    NoDirectory,
    #[error(
        "{d} exists with owner {uid}:{gid} mode {mode:o}; expected root:{OPERATOR_GROUP} 0750. Fix it (chown root:{OPERATOR_GROUP} {d}; chmod 0750 {d}) or remove it",
        d = dir.display()
    )]
    BadDirectory {
        dir: PathBuf,
        uid: u32,
        gid: u32,
        mode: u32,
    },
    #[error("cannot create {}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot remove the stale socket {}", path.display())]
    RemoveStale {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} exists and is not a socket; remove it", .0.display())]
    NotASocket(PathBuf),
    #[error("cannot bind {}", path.display())]
    Bind {
        path: PathBuf,
        #[source]
        source: nix::errno::Errno,
    },
    #[error("a sysward broker is already running on {} (pid {pid}); stop it first (systemctl stop sysward) or use another --socket", socket.display())]
    AlreadyRunning { socket: PathBuf, pid: String },
    #[error("a client said nothing within {0} s of connecting: dropped")]
    SilentClient(u64),
    #[error("operator sent a request out of turn: {0}")]
    OutOfTurnWith(sysward_ipc::ChannelError),
    #[error("operator connection: {0}")]
    Connection(sysward_ipc::ChannelError),
    #[error("operator sent a request out of turn")]
    OutOfTurn,
    #[error("group {OPERATOR_GROUP} does not exist: create it with `groupadd --system {OPERATOR_GROUP}`")]
    NoGroup,
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Errno(#[from] nix::errno::Errno),
    #[error(transparent)]
    Channel(#[from] sysward_ipc::ChannelError),
    #[error(transparent)]
    Operator(#[from] operator_channel::OperatorChannelError),
    #[error(transparent)]
    Project(#[from] crate::project::ProjectError),
}

type Result<T, E = ControlError> = std::result::Result<T, E>;

/// Checks every existing component of `path` from `/` with lstat: no symlinks,
/// root-owned, not writable by group or others (except a sticky directory is
/// never accepted as the final parent).
pub fn check_path_components(path: &Path) -> Result<()> {
    let mut current = PathBuf::from("/");
    for comp in path.components() {
        match comp {
            Component::RootDir => {}
            Component::Normal(name) => current.push(name),
            _ => return Err(ControlError::NotNormalized(path.to_path_buf())),
        }
        let meta = match fs::symlink_metadata(&current) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => {
                return Err(ControlError::Lstat {
                    path: current,
                    source,
                })
            }
        };
        if meta.file_type().is_symlink() {
            return Err(ControlError::Symlink(current));
        }
        if meta.is_dir() {
            if meta.uid() != 0 {
                return Err(ControlError::NotRootOwned {
                    path: current,
                    uid: meta.uid(),
                });
            }
            if meta.mode() & 0o002 != 0 {
                return Err(ControlError::WritableByOthers(current));
            }
        }
    }
    Ok(())
}

/// Creates `/run/sysward` (0750 root:sysward) and binds the control socket
/// (0660 root:sysward), removing a stale socket.
pub fn listen_control(path: &Path, operator_gid: u32) -> Result<OwnedFd> {
    check_path_components(path)?;
    let dir = path.parent().ok_or(ControlError::NoDirectory)?;
    match fs::symlink_metadata(dir) {
        Ok(meta) => {
            let mode = meta.mode() & 0o7777;
            if !meta.is_dir() || meta.uid() != 0 || meta.gid() != operator_gid || mode != 0o750 {
                return Err(ControlError::BadDirectory {
                    dir: dir.to_path_buf(),
                    uid: meta.uid(),
                    gid: meta.gid(),
                    mode,
                });
            }
        }
        Err(_) => {
            fs::create_dir(dir).map_err(|source| ControlError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
            fs::set_permissions(dir, fs::Permissions::from_mode(0o750))?;
            chown(
                dir,
                Some(Uid::from_raw(0)),
                Some(Gid::from_raw(operator_gid)),
            )?;
        }
    }
    hold_instance_lock(path)?;
    if let Ok(meta) = fs::symlink_metadata(path) {
        if meta.file_type().is_socket() {
            fs::remove_file(path).map_err(|source| ControlError::RemoveStale {
                path: path.to_path_buf(),
                source,
            })?;
        } else {
            return Err(ControlError::NotASocket(path.to_path_buf()));
        }
    }
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let addr = UnixAddr::new(path)?;
    // Created 0600 by a tight umask, then opened to the group: no window in
    // which others could connect.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = bind(fd.as_raw_fd(), &addr);
    nix::sys::stat::umask(old);
    bound.map_err(|source| ControlError::Bind {
        path: path.to_path_buf(),
        source,
    })?;
    chown(
        path,
        Some(Uid::from_raw(0)),
        Some(Gid::from_raw(operator_gid)),
    )?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o660))?;
    listen(&fd, Backlog::new(16)?)?;
    Ok(fd)
}

/// Takes `<socket>.lock` for the life of this process: a second broker on the
/// same socket is refused, naming the running one, instead of silently
/// replacing its socket (the first would be orphaned and its clients told
/// it crashed).
fn hold_instance_lock(socket: &Path) -> Result<()> {
    match crate::project::take_pid_lock(&socket.with_extension("lock"))? {
        // The lock is held until the process exits.
        Ok(lock) => {
            std::mem::forget(lock);
            Ok(())
        }
        Err(pid) => Err(ControlError::AlreadyRunning {
            socket: socket.to_path_buf(),
            pid,
        }),
    }
}

/// Why a peer on the control socket is not served: audited as the
/// `operator_refused` reason and sent back after "refused: ", in the words
/// both have always had.
#[derive(Debug, thiserror::Error)]
pub enum PeerRefusal {
    #[error("uid {0} is a sysward service user, not an operator")]
    ServiceUser(u32),
    /// The peer's groups could not be read.
    #[error("{0}")]
    Groups(peer::PeerError),
    #[error("uid {0} is neither root nor in the {OPERATOR_GROUP} group")]
    NotOperator(u32),
    #[error("cannot check the peer's ancestry: {0}")]
    Ancestry(peer::PeerError),
    #[error("the peer descends from the broker (an agent, gateway or action)")]
    Descendant,
    #[error("the peer runs inside a sysward action's cgroup")]
    InActionsCgroup,
    #[error("the broker already serves {MAX_CONNECTIONS} connections; try again later")]
    Busy,
    #[error("uid {0} already holds {MAX_CONNECTIONS_PER_UID} connections to the broker; close some first")]
    UidBusy(u32),
}

/// Decides whether a connected peer may act as an operator: root or a member of
/// the operator group; not a sysward service user; not a descendant of this
/// broker (agents, gateways, actions and whatever they start); not inside an
/// action's cgroup (which also catches daemonized, reparented descendants).
pub fn check_peer(
    cred: &PeerCred,
    operator_gid: u32,
    refused_uids: &[u32],
    actions_cgroup: Option<&Path>,
) -> Result<(), PeerRefusal> {
    if refused_uids.contains(&cred.uid) {
        return Err(PeerRefusal::ServiceUser(cred.uid));
    }
    if cred.uid != 0 {
        let groups = peer::process_groups(cred.pid).map_err(PeerRefusal::Groups)?;
        if cred.gid != operator_gid && !groups.contains(&operator_gid) {
            return Err(PeerRefusal::NotOperator(cred.uid));
        }
    }
    let chain = peer::ancestry(cred.pid).map_err(PeerRefusal::Ancestry)?;
    if chain.contains(&(std::process::id() as i32)) && cred.pid != std::process::id() as i32 {
        // Only our own children descend from us: agents, gateways, executors.
        return Err(PeerRefusal::Descendant);
    }
    if let Some(root) = actions_cgroup {
        if in_actions_cgroup(cred.pid, root) {
            return Err(PeerRefusal::InActionsCgroup);
        }
    }
    Ok(())
}

/// True when `pid` runs inside the actions' cgroup tree `root` (which also
/// catches daemonized, reparented descendants of an action).
pub fn in_actions_cgroup(pid: i32, root: &Path) -> bool {
    let cg = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    let rel = root
        .file_name()
        .map(|n| format!("/{}", n.to_string_lossy()))
        .unwrap_or_default();
    cg.lines()
        .any(|l| l.starts_with("0::") && l[3..].starts_with(&rel))
}

/// Serves one accepted operator connection until its session ends.
pub fn serve_connection(ctx: Arc<BrokerContext>, conn: OwnedFd, who: String) -> Result<()> {
    let reader_fd = conn.try_clone()?;
    let tx = Channel::new(conn);
    tx.force_send_buffer(sysward_ipc::operator::OPERATOR_ANSWER_MAX)?;
    // An idle client holds a slot only until the handshake timeout.
    set_receive_timeout(&reader_fd, HANDSHAKE_TIMEOUT)?;
    let timeout_fd = reader_fd.try_clone()?;
    let mut rx = Channel::new(reader_fd);
    if let Err(e) = operator_channel::greet(&tx, &mut rx) {
        if crate::error::chain(&e).contains("EAGAIN") {
            return Err(ControlError::SilentClient(HANDSHAKE_TIMEOUT.as_secs()));
        }
        return Err(e.into());
    }
    let first =
        crate::operator_dispatch::recv(&mut rx, crate::operator_dispatch::OperatorState::Opening);
    // Past the handshake a CLI session may rightly wait for its person.
    set_receive_timeout(&timeout_fd, std::time::Duration::ZERO)?;
    drop(timeout_fd);
    let first = match first {
        Ok(request) => request,
        Err(e @ sysward_ipc::ChannelError::Illegal { .. }) => {
            tx.send(&OperatorAnswer::Error {
                message: "expected run or cli".to_string(),
            })?;
            return Err(ControlError::OutOfTurnWith(e));
        }
        Err(e) => return Err(ControlError::Connection(e)),
    };
    if let Some((mode, opts)) = operator_channel::session_wanted(&first) {
        operator_channel::serve_session(&ctx, tx, rx, mode, &opts, who)?;
        if let Some(why) = ctx.pinned.stopped() {
            // Every later session would meet the same moved paths: the daemon
            // ends, and its unit does not restart it on this exit code.
            eprintln!("sysward: {why}");
            std::process::exit(session::exit::STOPPED);
        }
        return Ok(());
    }
    match first {
        OperatorRequest::Decide { id, deny_note } => {
            // Only here, on a connection that passed the peer checks, can a
            // person who is not root answer a pending approval.
            let by = format!("{who} via the control socket");
            let answer = match crate::approvals::decide_as(
                &ctx.layout,
                &ctx.audit,
                &id,
                deny_note.as_deref(),
                &by,
            ) {
                Ok(Ok(text)) => {
                    eprintln!(
                        "sysward: approval {} {} by {by}",
                        crate::sanitize::one_line(&id, 40),
                        if deny_note.is_some() {
                            "denied"
                        } else {
                            "approved"
                        }
                    );
                    OperatorAnswer::Done { ok: true, text }
                }
                Ok(Err(text)) => OperatorAnswer::Done { ok: false, text },
                Err(e) => OperatorAnswer::Done {
                    ok: false,
                    text: crate::error::chain(&e),
                },
            };
            tx.send(&answer)?;
            Ok(())
        }
        OperatorRequest::ListApprovals => {
            let answer = match crate::approvals::list_json(&ctx.layout) {
                Ok(v) => OperatorAnswer::Done {
                    ok: true,
                    text: v.to_string(),
                },
                Err(e) => OperatorAnswer::Done {
                    ok: false,
                    text: crate::error::chain(&e),
                },
            };
            tx.send(&answer)?;
            Ok(())
        }
        _ => {
            tx.send(&OperatorAnswer::Error {
                message: "expected run or cli".to_string(),
            })?;
            Err(ControlError::OutOfTurn)
        }
    }
}

pub fn operator_gid() -> Result<u32> {
    let group = nix::unistd::Group::from_name(OPERATOR_GROUP)?.ok_or(ControlError::NoGroup)?;
    Ok(group.gid.as_raw())
}

/// Operator connections the daemon serves at once, in all.
pub const MAX_CONNECTIONS: usize = 64;
/// Operator connections one uid may hold at once: a group member cannot
/// take every slot from root.
pub const MAX_CONNECTIONS_PER_UID: usize = 16;
/// Time a client has to say hello and what it wants, before it is dropped.
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The daemon's count of open operator connections, in all and per uid.
#[derive(Default)]
pub struct ConnectionSlots {
    counts: Mutex<(usize, std::collections::HashMap<u32, usize>)>,
}

/// One taken slot, given back when dropped (the connection's thread ends).
pub struct ConnectionSlot {
    slots: Arc<ConnectionSlots>,
    uid: u32,
}

impl ConnectionSlots {
    /// Takes a slot for `uid`, or says why not.
    pub fn take(slots: &Arc<ConnectionSlots>, uid: u32) -> Result<ConnectionSlot, PeerRefusal> {
        let mut c = slots.counts.lock().unwrap_or_else(|p| p.into_inner());
        if c.0 >= MAX_CONNECTIONS {
            return Err(PeerRefusal::Busy);
        }
        let mine = c.1.get(&uid).copied().unwrap_or(0);
        if mine >= MAX_CONNECTIONS_PER_UID {
            return Err(PeerRefusal::UidBusy(uid));
        }
        c.0 += 1;
        c.1.insert(uid, mine + 1);
        Ok(ConnectionSlot {
            slots: Arc::clone(slots),
            uid,
        })
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut c = self.slots.counts.lock().unwrap_or_else(|p| p.into_inner());
        c.0 = c.0.saturating_sub(1);
        if let Some(n) = c.1.get_mut(&self.uid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                c.1.remove(&self.uid);
            }
        }
    }
}

fn set_receive_timeout(fd: &OwnedFd, timeout: std::time::Duration) -> Result<()> {
    let tv = nix::sys::time::TimeVal::new(
        timeout.as_secs() as nix::sys::time::time_t,
        timeout.subsec_micros() as nix::sys::time::suseconds_t,
    );
    nix::sys::socket::setsockopt(fd, nix::sys::socket::sockopt::ReceiveTimeout, &tv)?;
    Ok(())
}

pub fn accept(listener: &OwnedFd) -> Result<OwnedFd> {
    loop {
        match nix::sys::socket::accept4(listener.as_fd(), SockFlag::SOCK_CLOEXEC) {
            Ok(fd) => return Ok(fd),
            Err(nix::errno::Errno::EINTR) | Err(nix::errno::Errno::ECONNABORTED) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}
