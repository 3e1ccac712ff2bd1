//! A cancel flag that a blocking wait can poll on (Ctrl+C from the operator).

use nix::unistd::{pipe2, read, write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    flag: AtomicBool,
    read_end: OwnedFd,
    write_end: OwnedFd,
}

impl CancelToken {
    pub fn new() -> std::io::Result<CancelToken> {
        let (read_end, write_end) =
            pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        Ok(CancelToken {
            inner: Arc::new(Inner {
                flag: AtomicBool::new(false),
                read_end,
                write_end,
            }),
        })
    }

    pub fn cancel(&self) {
        self.inner.flag.store(true, Ordering::SeqCst);
        // A full pipe already wakes every poller; the error is irrelevant.
        let _ = write(&self.inner.write_end, &[1]);
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.flag.load(Ordering::SeqCst)
    }

    /// Clears the flag at the start of a new turn.
    pub fn reset(&self) {
        self.inner.flag.store(false, Ordering::SeqCst);
        let mut buf = [0u8; 64];
        while matches!(read(&self.inner.read_end, &mut buf), Ok(n) if n > 0) {}
    }

    /// Readable when cancelled: include it in a poll set.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inner.read_end.as_fd()
    }
}
