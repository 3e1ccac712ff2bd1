//! A SEQPACKET endpoint that sends and receives whole, bounded frames.

use crate::codec::{self, CodecError, Header, Message, HEADER_LEN};
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
            ChannelError::Closed
                | ChannelError::Io(Errno::ECONNRESET)
                | ChannelError::Io(Errno::EPIPE)
        )
    }
}

/// Largest datagram sent or accepted, header included. Linux refuses an
/// AF_UNIX datagram above the sender's `SO_SNDBUF` (≈208 KiB by default) and,
/// whatever the buffer, above ≈4 MiB (the largest linear skb), so a message
/// larger than this travels as several fragments, each with the full header.
pub const FRAGMENT: usize = 192 << 10;

/// Header flag (byte 6): more fragments of this message follow.
pub const FLAG_MORE: u8 = 0x01;

/// Reassembly buffers above this size are released after use, so one large
/// message does not keep its pages for the rest of the session.
const KEEP_BUFFER: usize = 1 << 20;

/// One end of a SEQPACKET channel.
#[derive(Debug)]
pub struct Channel {
    fd: OwnedFd,
    /// One datagram.
    datagram: Vec<u8>,
    /// The message being reassembled.
    message: Vec<u8>,
}

impl Channel {
    pub fn new(fd: OwnedFd) -> Self {
        Channel {
            fd,
            datagram: Vec::new(),
            message: Vec::new(),
        }
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

    /// Raises the send buffer so that several fragments of a large message can
    /// be in flight at once (fewer wake-ups). `SO_SNDBUFFORCE` needs
    /// CAP_NET_ADMIN, so the broker sets it on both ends of a pair before
    /// handing one to an unprivileged child. Messages work without it.
    pub fn force_send_buffer(&self, bytes: usize) -> Result<(), ChannelError> {
        let size = bytes.clamp(FRAGMENT * 2, 8 << 20);
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

    /// Sends one message (fragmented when larger than [`FRAGMENT`]).
    pub fn send<M: Message>(&self, msg: &M) -> Result<(), ChannelError> {
        let frame = codec::encode(msg)?;
        self.send_frame(&frame)
    }

    /// Sends an encoded frame, fragmenting it as needed.
    pub fn send_frame(&self, frame: &[u8]) -> Result<(), ChannelError> {
        if frame.len() <= FRAGMENT || frame.len() < HEADER_LEN {
            return self.send_datagram(frame);
        }
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&frame[..HEADER_LEN]);
        let body = &frame[HEADER_LEN..];
        let per = FRAGMENT - HEADER_LEN;
        let count = body.len().div_ceil(per);
        let mut datagram = Vec::with_capacity(FRAGMENT);
        for (i, chunk) in body.chunks(per).enumerate() {
            datagram.clear();
            datagram.extend_from_slice(&header);
            if i + 1 < count {
                datagram[6] |= FLAG_MORE;
            } else {
                datagram[6] &= !FLAG_MORE;
            }
            datagram.extend_from_slice(chunk);
            self.send_datagram(&datagram)?;
        }
        Ok(())
    }

    /// Sends raw bytes as exactly one datagram (tests use it to send garbage).
    pub fn send_datagram(&self, bytes: &[u8]) -> Result<(), ChannelError> {
        loop {
            match send(self.fd.as_raw_fd(), bytes, MsgFlags::MSG_NOSIGNAL) {
                Ok(n) if n == bytes.len() => return Ok(()),
                Ok(_) => return Err(ChannelError::Io(Errno::EMSGSIZE)),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Receives one datagram of at most [`FRAGMENT`] bytes; a longer one is an
    /// error (`MSG_TRUNC`), never silently cut.
    fn recv_datagram(&mut self) -> Result<usize, ChannelError> {
        if self.datagram.len() < FRAGMENT + 1 {
            self.datagram = vec![0u8; FRAGMENT + 1];
        }
        let n = loop {
            let mut iov = [IoSliceMut::new(&mut self.datagram[..])];
            match recvmsg::<()>(
                self.fd.as_raw_fd(),
                &mut iov,
                None,
                MsgFlags::MSG_CMSG_CLOEXEC,
            ) {
                Ok(msg) => {
                    if msg.flags.contains(MsgFlags::MSG_TRUNC) || msg.bytes > FRAGMENT {
                        return Err(ChannelError::Truncated { max: FRAGMENT });
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
        Ok(n)
    }

    /// Receives one whole frame of at most `max` bytes (reassembled from its
    /// fragments), asking `permit` about its header as soon as the first
    /// fragment arrives: `permit` returns the cap for that kind or refuses it.
    fn recv_frame_checked(
        &mut self,
        max: usize,
        permit: impl FnOnce(Header) -> Result<usize, ChannelError>,
    ) -> Result<&[u8], ChannelError> {
        if self.message.capacity() > KEEP_BUFFER {
            self.message = Vec::new();
        }
        self.message.clear();
        let n = self.recv_datagram()?;
        let header = Header::parse(&self.datagram[..n])?;
        let cap = permit(header)?.min(max);
        let mut more = self.datagram[6] & FLAG_MORE != 0;
        if n > cap {
            return Err(CodecError::TooLarge { len: n, max: cap }.into());
        }
        self.message.extend_from_slice(&self.datagram[..n]);
        while more {
            let n = self.recv_datagram()?;
            let next = Header::parse(&self.datagram[..n])?;
            if next.kind != header.kind {
                return Err(CodecError::KindMismatch {
                    header: header.kind,
                    body: next.kind,
                }
                .into());
            }
            let total = self.message.len() + n - HEADER_LEN;
            if total > cap {
                return Err(CodecError::TooLarge {
                    len: total,
                    max: cap,
                }
                .into());
            }
            more = self.datagram[6] & FLAG_MORE != 0;
            self.message
                .extend_from_slice(&self.datagram[HEADER_LEN..n]);
        }
        Ok(&self.message)
    }

    /// Receives one raw frame of at most `max` bytes (reassembled).
    pub fn recv_frame(&mut self, max: usize) -> Result<&[u8], ChannelError> {
        self.recv_frame_checked(max, |_| Ok(max))
    }

    /// Receives and decodes one message of type `M`.
    pub fn recv<M: Message>(&mut self) -> Result<M, ChannelError> {
        self.recv_checked(|_| Ok(M::MAX_FRAME))
    }

    /// Receives one message, asking `permit` about its header first: `permit`
    /// returns the size cap for that kind or refuses the kind outright. Nothing
    /// of the body is decoded (or even reassembled) for a refused kind.
    pub fn recv_checked<M: Message>(
        &mut self,
        permit: impl FnOnce(Header) -> Result<usize, ChannelError>,
    ) -> Result<M, ChannelError> {
        let frame = self.recv_frame_checked(M::MAX_FRAME, |header| {
            if M::kind_name(header.kind).is_none() {
                return Err(CodecError::UnknownKind(header.kind).into());
            }
            permit(header)
        })?;
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
