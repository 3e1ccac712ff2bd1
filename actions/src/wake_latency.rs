//! A short request for zero CPU wake-up latency while an action starts.
//!
//! Starting an action hands work between CPUs several times (the broker, the
//! audit writer, the confined child on the other CPU, the broker again when
//! the child has exec'd and when it exits, the agent). An idle CPU halts, and
//! on a virtual machine waking a halted one costs an interrupt and the
//! hypervisor's return to it: tens of µs each, most of what the broker adds
//! to a short command. The kernel's CPU latency request
//! (`/dev/cpu_dma_latency`, Documentation/power/pm_qos_interface.rst) at 0
//! keeps idle CPUs polling instead, so that a hand-over costs next to
//! nothing.
//!
//! The request is bounded: a session holds it from an approved action's
//! start until the command has ended or has run for [`HOLD_AT_MOST`], never
//! while a person is asked or a model answers, so idle CPUs poll for a few
//! milliseconds per action at most. The kernel drops the request when its
//! descriptor closes, so a broker that is killed leaves nothing behind.
//! Where the device is missing or cannot be opened (a container), nothing is
//! requested and nothing else changes.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a command may run with the request held: a longer one gains
/// nothing measurable from a fast start and must not keep CPUs awake.
pub const HOLD_AT_MOST: Duration = Duration::from_millis(5);

const DEVICE: &str = "/dev/cpu_dma_latency";

/// The kernel's default: no constraint (`PM_QOS_CPU_LATENCY_DEFAULT_VALUE`).
const NO_CONSTRAINT_US: i32 = 2_000_000_000;

/// One session's latency request, released unless held.
#[derive(Debug)]
pub struct WakeLatency {
    device: Option<File>,
    held: AtomicBool,
}

impl WakeLatency {
    /// Opens the session's request (unconstrained until held); without the
    /// device, a request that does nothing.
    pub fn open() -> WakeLatency {
        let device = std::fs::OpenOptions::new()
            .write(true)
            .open(DEVICE)
            .ok()
            .filter(|f| write_value(f, NO_CONSTRAINT_US));
        WakeLatency {
            device,
            held: AtomicBool::new(false),
        }
    }

    /// A request that does nothing (tests, tools that start no action).
    pub fn none() -> WakeLatency {
        WakeLatency {
            device: None,
            held: AtomicBool::new(false),
        }
    }

    /// Whether the device took the request: false in a container without it.
    pub fn is_active(&self) -> bool {
        self.device.is_some()
    }

    /// Asks for zero wake-up latency until [`WakeLatency::release`].
    pub fn hold(&self) {
        if let Some(f) = &self.device {
            if !self.held.swap(true, Ordering::AcqRel) && !write_value(f, 0) {
                self.held.store(false, Ordering::Release);
            }
        }
    }

    /// Drops the constraint (a no-op when not held).
    pub fn release(&self) {
        if let Some(f) = &self.device {
            if self.held.swap(false, Ordering::AcqRel) {
                let _ = write_value(f, NO_CONSTRAINT_US);
            }
        }
    }

    pub fn is_held(&self) -> bool {
        self.held.load(Ordering::Acquire)
    }
}

/// The device takes a native-endian 32-bit number of microseconds.
fn write_value(mut f: &File, us: i32) -> bool {
    f.write_all(&us.to_ne_bytes()).is_ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::io::Read;

    /// The system's current limit, as the device reports it (it opens a
    /// request of its own, unconstrained).
    fn current_limit() -> i32 {
        let mut b = [0u8; 4];
        File::open(DEVICE).unwrap().read_exact(&mut b).unwrap();
        i32::from_ne_bytes(b)
    }

    #[test]
    fn the_limit_is_zero_while_held_and_back_once_released_or_closed() {
        if !std::path::Path::new(DEVICE).exists() || !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED: needs root and {DEVICE}");
            return;
        }
        let before = current_limit();
        let w = WakeLatency::open();
        assert!(w.is_active());
        assert_eq!(
            current_limit(),
            before,
            "an open request constrains nothing"
        );
        w.hold();
        w.hold();
        assert!(w.is_held());
        assert_eq!(current_limit(), 0);
        w.release();
        assert!(!w.is_held());
        assert_eq!(current_limit(), before);
        w.hold();
        assert_eq!(current_limit(), 0);
        drop(w);
        assert_eq!(current_limit(), before, "closing the descriptor drops it");
        let none = WakeLatency::none();
        none.hold();
        assert!(!none.is_held() && !none.is_active());
        assert_eq!(current_limit(), before);
    }
}
