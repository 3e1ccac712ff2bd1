//! A SEQPACKET endpoint that sends and receives whole, bounded frames.

use crate::codec::{self, CodecError, Header, Message};
use nix::errno::Errno;
use nix::sys::socket::{
    recvmsg, send, setsockopt, socketpair, sockopt, AddressFamily, MsgFlags, SockFlag, SockType,
};
use std::io::IoSliceMut;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("peer closed the channel")]
    Closed,
    #[error("socket error: {0}")]
    Io(#[from] Errno),
    #[error("frame truncated: the peer sent more than the {max}-byte limit")]
    Truncated { max: usize },
    #[error(transparent)]
    Codec(#[from] CodecError),
    #[error("{kind} is not permitted {state}")]
    Illegal { kind: String, state: String },
}

impl ChannelError {
    /// True when the peer simply went away (EOF, reset), as opposed to sending
    /// something malformed.
    pub fn is_disconnect(&self) -> bool {
        matches!(
            self,
            ChannelError::Closed | ChannelError::Io(Errno::ECONNRESET) | ChannelError::Io(Errno::EPIPE)
        )
    }
}

/// Receive buffers above this size are released after use, so one large message
/// does not keep its pages resident for the rest of the session.
const KEEP_BUFFER: usize = 1 << 20;

/// One end of a SEQPACKET channel.
#[derive(Debug)]
pub struct Channel {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl Channel {
    pub fn new(fd: OwnedFd) -> Self {
        Channel { fd, buf: Vec::new() }
    }

    /// A connected pair, both ends close-on-exec.
    pub fn pair() -> Result<(Channel, Channel), ChannelError> {
        let (a, b) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        Ok((Channel::new(a), Channel::new(b)))
    }

    /// Raises the send buffer so one datagram of `bytes` fits. An AF_UNIX
    /// datagram cannot exceed the sender's `SO_SNDBUF` (≈208 KiB by default);
    /// `SO_SNDBUFFORCE` needs CAP_NET_ADMIN, so the broker sets it on both ends
    /// of a pair before handing one to an unprivileged child.
    pub fn force_send_buffer(&self, bytes: usize) -> Result<(), ChannelError> {
        let size = bytes.saturating_add(64 << 10).min(i32::MAX as usize / 2);
        setsockopt(&self.fd, sockopt::SndBufForce, &size)?;
        Ok(())
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }

    /// Sends one message as one datagram.
    pub fn send<M: Message>(&self, msg: &M) -> Result<(), ChannelError> {
        let frame = codec::encode(msg)?;
        self.send_frame(&frame)
    }

    /// Sends raw bytes as one datagram (tests use this to send garbage).
    pub fn send_frame(&self, frame: &[u8]) -> Result<(), ChannelError> {
        loop {
            match send(self.fd.as_raw_fd(), frame, MsgFlags::MSG_NOSIGNAL) {
                Ok(n) if n == frame.len() => return Ok(()),
                Ok(_) => return Err(ChannelError::Io(Errno::EMSGSIZE)),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Receives one datagram of at most `max` bytes; a longer one is an error
    /// (`MSG_TRUNC`), never silently cut.
    pub fn recv_frame(&mut self, max: usize) -> Result<&[u8], ChannelError> {
        if self.buf.len() > KEEP_BUFFER && max <= KEEP_BUFFER {
            self.buf = Vec::new();
        }
        if self.buf.len() < max + 1 {
            // Zeroed allocation of a large size is an untouched mapping: only the
            // pages a message writes become resident.
            self.buf = vec![0u8; max + 1];
        }
        let n = loop {
            let mut iov = [IoSliceMut::new(&mut self.buf[..max + 1])];
            match recvmsg::<()>(self.fd.as_raw_fd(), &mut iov, None, MsgFlags::MSG_CMSG_CLOEXEC) {
                Ok(msg) => {
                    if msg.flags.contains(MsgFlags::MSG_TRUNC) || msg.bytes > max {
                        return Err(ChannelError::Truncated { max });
                    }
                    break msg.bytes;
                }
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        };
        if n == 0 {
            return Err(ChannelError::Closed);
        }
        Ok(&self.buf[..n])
    }

    /// Receives and decodes one message of type `M`.
    pub fn recv<M: Message>(&mut self) -> Result<M, ChannelError> {
        self.recv_checked(|_| Ok(M::MAX_FRAME))
    }

    /// Receives one message, asking `permit` about its header first: `permit`
    /// returns the size cap for that kind or refuses the kind outright. Nothing
    /// of the body is decoded for a refused kind.
    pub fn recv_checked<M: Message>(
        &mut self,
        permit: impl FnOnce(Header) -> Result<usize, ChannelError>,
    ) -> Result<M, ChannelError> {
        let frame = self.recv_frame(M::MAX_FRAME)?;
        let header = Header::parse(frame)?;
        if M::kind_name(header.kind).is_none() {
            return Err(CodecError::UnknownKind(header.kind).into());
        }
        let cap = permit(header)?;
        if frame.len() > cap {
            return Err(CodecError::TooLarge {
                len: frame.len(),
                max: cap,
            }
            .into());
        }
        Ok(codec::decode::<M>(frame)?)
    }

    /// Waits up to `timeout_ms` for the channel to become readable.
    pub fn wait_readable(&self, timeout_ms: i32) -> Result<bool, ChannelError> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        let timeout = PollTimeout::try_from(timeout_ms.max(-1)).unwrap_or(PollTimeout::NONE);
        loop {
            match poll(&mut fds, timeout) {
                Ok(n) => return Ok(n > 0),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}
