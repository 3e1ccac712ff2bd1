//! The executor's deny-list compiled to a compact BPF program.
//!
//! Attaching a seccomp filter costs the kernel a walk of the program for every
//! syscall number (the action cache, `seccomp_cache_prepare`): measured here
//! at about 1 µs per instruction on the path of an allowed syscall. A linear
//! list of ~60 rules made every confined spawn ~0.2 ms slower. This compiler
//! lays the rules out as a binary search over the syscall numbers, so any
//! syscall reaches its verdict in about a dozen instructions. The attach also
//! JIT-compiles the whole program (measured: a 153-instruction program took
//! ~80 µs to attach, a 109-instruction one ~45 µs), so the program is kept
//! short: neighbouring numbers with one verdict are one range test, every
//! jump goes straight to a shared return, and alike argument checks share one
//! block.
//!
//! Layout: x32 guard (x86_64: kill) → clone3 (ENOSYS, so glibc falls back to
//! clone, whose flags can be checked) → architecture (kill if foreign) →
//! search tree → argument-check blocks → shared returns. Matches return
//! EPERM; everything else is allowed. Tests check it against the same list
//! compiled by seccompiler, through a BPF interpreter.

use crate::SandboxError;
use seccompiler::{sock_filter, BpfProgram};
use std::collections::BTreeMap;

/// When a listed syscall is denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    Always,
    /// The low 32 bits of argument `arg` equal one of `values`.
    Arg32In {
        arg: u8,
        values: Vec<u32>,
    },
    /// The low 32 bits of argument `arg` equal none of `values`.
    Arg32NotIn {
        arg: u8,
        values: Vec<u32>,
    },
    /// Every bit of `mask` is set in the low 32 bits of argument `arg`.
    MaskedLow {
        arg: u8,
        mask: u32,
    },
}

impl When {
    /// The argument it checks; none for [`When::Always`].
    fn arg(&self) -> Option<u8> {
        match self {
            When::Always => None,
            When::Arg32In { arg, .. }
            | When::Arg32NotIn { arg, .. }
            | When::MaskedLow { arg, .. } => Some(*arg),
        }
    }
}

/// Syscall number → when it is denied.
pub type DenyList = BTreeMap<i64, When>;

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JGT_K: u16 = 0x25; // BPF_JMP | BPF_JGT | BPF_K
const AND_K: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

/// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low word of argument `i` (little-endian: x86_64, aarch64).
fn arg_low(i: u8) -> u32 {
    16 + 8 * u32::from(i)
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_DENY: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;
const RET_ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

/// Syscalls a leaf of the search tests one after the other.
const LEAF_ITEMS: usize = 3;

/// Where a jump goes before layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// `n` instructions after the next one.
    Skip(usize),
    Allow,
    Deny,
    Kill,
    Enosys,
    /// An argument-check block (an index into the distinct blocks).
    Checks(usize),
}

#[derive(Debug, Clone, Copy)]
struct Insn {
    code: u16,
    jt: Target,
    jf: Target,
    k: u32,
}

fn stmt(code: u16, k: u32) -> Insn {
    Insn {
        code,
        jt: Target::Skip(0),
        jf: Target::Skip(0),
        k,
    }
}

fn jump(code: u16, k: u32, jt: Target, jf: Target) -> Insn {
    Insn { code, jt, jf, k }
}

/// Consecutive syscall numbers `lo..=hi` with one verdict.
#[derive(Debug, Clone, Copy)]
struct Run {
    lo: u32,
    hi: u32,
    target: Target,
}

/// The listed syscalls as runs: neighbours with the same verdict (the
/// `*xattr` family, `chmod`…`lchown`, `io_uring_*` and the new mount API)
/// cost one range test instead of one test each. Argument checks that are
/// alike share one block.
fn runs(list: &DenyList) -> (Vec<Run>, Vec<When>) {
    let mut blocks: Vec<When> = Vec::new();
    let mut out: Vec<Run> = Vec::new();
    for (&nr, when) in list {
        let target = match when {
            When::Always => Target::Deny,
            When::Arg32In { values, .. } if values.is_empty() => continue,
            When::Arg32NotIn { values, .. } if values.is_empty() => Target::Deny,
            When::Arg32In { .. } | When::Arg32NotIn { .. } | When::MaskedLow { .. } => {
                let index = match blocks.iter().position(|b| b == when) {
                    Some(i) => i,
                    None => {
                        blocks.push(when.clone());
                        blocks.len() - 1
                    }
                };
                Target::Checks(index)
            }
        };
        let nr = nr as u32;
        match out.last_mut() {
            Some(last) if last.target == target && last.hi.checked_add(1) == Some(nr) => {
                last.hi = nr;
            }
            _ => out.push(Run {
                lo: nr,
                hi: nr,
                target,
            }),
        }
    }
    (out, blocks)
}

/// A binary search over `runs` (sorted, disjoint) down to leaves of a few
/// runs tested in order; a number in no run is allowed. No leaf needs a
/// return of its own: every jump goes straight to a shared one.
fn tree(runs: &[Run]) -> Vec<Insn> {
    if runs.len() <= LEAF_ITEMS {
        return leaf(runs);
    }
    let mid = runs.len() / 2;
    let left = tree(&runs[..mid]);
    let right = tree(&runs[mid..]);
    let mut out = Vec::with_capacity(1 + left.len() + right.len());
    // nr >= runs[mid].lo → right half (after the left one); else the left.
    out.push(jump(
        JGE_K,
        runs[mid].lo,
        Target::Skip(left.len()),
        Target::Skip(0),
    ));
    out.extend(left);
    out.extend(right);
    out
}

/// Tests `runs` in ascending order. The number is in none of the runs
/// before the one being tested (a point did not match; a range was below
/// it), so a number below a range is in a gap: allowed.
fn leaf(runs: &[Run]) -> Vec<Insn> {
    let mut out = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let last = i + 1 == runs.len();
        let next = |skip: usize| {
            if last {
                Target::Allow
            } else {
                Target::Skip(skip)
            }
        };
        if r.lo == r.hi {
            out.push(jump(JEQ_K, r.lo, r.target, next(0)));
        } else {
            out.push(jump(JGT_K, r.hi, next(1), Target::Skip(0)));
            out.push(jump(JGE_K, r.lo, r.target, Target::Allow));
        }
    }
    out
}

/// An argument-check block: loads the argument, ends in a shared return.
fn check_block(when: &When) -> Vec<Insn> {
    let Some(arg) = when.arg() else {
        return vec![stmt(RET_K, RET_DENY)];
    };
    let mut out = vec![stmt(LD_W_ABS, arg_low(arg))];
    // Each value but the last falls through to the next test.
    let chain = |values: &[u32], on_match: Target, otherwise: Target| -> Vec<Insn> {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let fall = if i + 1 == values.len() {
                    otherwise
                } else {
                    Target::Skip(0)
                };
                jump(JEQ_K, v, on_match, fall)
            })
            .collect()
    };
    match when {
        When::Always => {}
        When::Arg32In { values, .. } => out.extend(chain(values, Target::Deny, Target::Allow)),
        When::Arg32NotIn { values, .. } => out.extend(chain(values, Target::Allow, Target::Deny)),
        When::MaskedLow { mask, .. } => {
            out.push(stmt(AND_K, *mask));
            out.push(jump(JEQ_K, *mask, Target::Deny, Target::Allow));
        }
    }
    out
}

/// Compiles `list` into one program.
pub fn compile(list: &DenyList) -> Result<BpfProgram, SandboxError> {
    let err = |m: String| SandboxError::step("seccomp", m);
    if let Some((&nr, _)) = list.iter().find(|(&nr, _)| !(0..0x4000_0000).contains(&nr)) {
        return Err(err(format!("syscall number {nr} out of range")));
    }
    if let Some((nr, arg)) = list
        .iter()
        .find_map(|(nr, when)| when.arg().filter(|&a| a > 5).map(|a| (nr, a)))
    {
        return Err(err(format!("syscall {nr}: argument {arg} does not exist")));
    }
    let mut code: Vec<Insn> = vec![stmt(LD_W_ABS, NR)];
    // x32 numbers carry bit 30 under the x86_64 audit arch.
    #[cfg(target_arch = "x86_64")]
    code.push(jump(JGE_K, 0x4000_0000, Target::Kill, Target::Skip(0)));
    code.push(jump(
        JEQ_K,
        libc::SYS_clone3 as u32,
        Target::Enosys,
        Target::Skip(0),
    ));
    code.push(stmt(LD_W_ABS, ARCH));
    code.push(jump(JEQ_K, AUDIT_ARCH, Target::Skip(0), Target::Kill));
    code.push(stmt(LD_W_ABS, NR));
    let (runs, blocks) = runs(list);
    code.extend(tree(&runs));
    let mut block_at = Vec::with_capacity(blocks.len());
    for when in &blocks {
        block_at.push(code.len());
        code.extend(check_block(when));
    }
    // The shared returns last: every jump is forward.
    let returns = [RET_ALLOW, RET_DENY, RET_KILL, RET_ENOSYS].map(|ret| {
        code.push(stmt(RET_K, ret));
        code.len() - 1
    });
    let [allow_at, deny_at, kill_at, enosys_at] = returns;
    // Layout: every target is forward and within a u8 offset.
    let resolve = |at: usize, t: Target| -> Result<u8, SandboxError> {
        let dest = match t {
            Target::Skip(n) => at + 1 + n,
            Target::Allow => allow_at,
            Target::Deny => deny_at,
            Target::Kill => kill_at,
            Target::Enosys => enosys_at,
            Target::Checks(i) => *block_at
                .get(i)
                .ok_or_else(|| err(format!("no argument-check block {i}")))?,
        };
        dest.checked_sub(at + 1)
            .and_then(|off| u8::try_from(off).ok())
            .filter(|_| dest < code.len())
            .ok_or_else(|| err(format!("jump from {at} to {dest} does not fit")))
    };
    if code.len() > 4096 {
        return Err(err(format!("{} instructions", code.len())));
    }
    code.iter()
        .enumerate()
        .map(|(at, i)| {
            let conditional = matches!(i.code, JEQ_K | JGE_K | JGT_K);
            Ok(sock_filter {
                code: i.code,
                jt: if conditional { resolve(at, i.jt)? } else { 0 },
                jf: if conditional { resolve(at, i.jf)? } else { 0 },
                k: i.k,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::seccomp::{executor_deny_list, DenyListOptions};
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    /// The same list compiled by seccompiler (the reference), with the same
    /// guards in front.
    fn reference(list: &DenyList) -> BpfProgram {
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for (&nr, when) in list {
            let r = match when {
                When::Always => Vec::new(),
                When::Arg32In { arg, values } => values
                    .iter()
                    .map(|&v| {
                        SeccompRule::new(vec![SeccompCondition::new(
                            *arg,
                            SeccompCmpArgLen::Dword,
                            SeccompCmpOp::Eq,
                            u64::from(v),
                        )
                        .unwrap()])
                        .unwrap()
                    })
                    .collect(),
                When::Arg32NotIn { arg, values } => vec![SeccompRule::new(
                    values
                        .iter()
                        .map(|&v| {
                            SeccompCondition::new(
                                *arg,
                                SeccompCmpArgLen::Dword,
                                SeccompCmpOp::Ne,
                                u64::from(v),
                            )
                            .unwrap()
                        })
                        .collect(),
                )
                .unwrap()],
                When::MaskedLow { arg, mask } => {
                    vec![SeccompRule::new(vec![SeccompCondition::new(
                        *arg,
                        SeccompCmpArgLen::Qword,
                        SeccompCmpOp::MaskedEq(u64::from(*mask)),
                        u64::from(*mask),
                    )
                    .unwrap()])
                    .unwrap()]
                }
            };
            rules.insert(nr, r);
        }
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            TargetArch::try_from(std::env::consts::ARCH).unwrap(),
        )
        .unwrap();
        let mut prog = BpfProgram::try_from(filter).unwrap();
        crate::seccomp::prepend_clone3_enosys(&mut prog);
        prepend_x32_guard(&mut prog);
        prog
    }

    /// On x86_64, kills any syscall whose number has the x32 bit set, before the
    /// deny-list (whose numbers are x86_64 ones) is consulted.
    fn prepend_x32_guard(prog: &mut BpfProgram) {
        #[cfg(target_arch = "x86_64")]
        {
            const X32_BIT: u32 = 0x4000_0000;
            const BPF_JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
            let guard = [
                sock_filter {
                    code: LD_W_ABS,
                    jt: 0,
                    jf: 0,
                    k: 0,
                }, // seccomp_data.nr
                sock_filter {
                    code: BPF_JGE_K,
                    jt: 0,
                    jf: 1,
                    k: X32_BIT,
                },
                sock_filter {
                    code: RET_K,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_KILL_PROCESS,
                },
            ];
            prog.splice(0..0, guard);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = prog;
    }

    /// A classic-BPF interpreter for the instructions both compilers emit.
    fn run(prog: &[sock_filter], data: &[u8; 64]) -> u32 {
        let word = |off: u32| {
            let o = off as usize;
            u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]])
        };
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = &prog[pc];
            pc += 1;
            match i.code {
                0x20 => a = word(i.k),
                0x06 => return i.k,
                0x54 => a &= i.k,
                0x05 => pc += i.k as usize, // JA
                0x15 | 0x35 | 0x25 | 0x45 => {
                    let taken = match i.code {
                        0x15 => a == i.k,
                        0x35 => a >= i.k,
                        0x25 => a > i.k,
                        _ => a & i.k != 0,
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                other => panic!("opcode {other:#x} not interpreted"),
            }
        }
    }

    fn data(arch: u32, nr: u32, args: [u64; 6]) -> [u8; 64] {
        let mut d = [0u8; 64];
        d[0..4].copy_from_slice(&nr.to_le_bytes());
        d[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            d[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        d
    }

    #[test]
    fn the_tree_decides_like_seccompiler_on_every_syscall() {
        let (pid, pgid) = (4242i32, 4000i32);
        let interesting: Vec<u64> = vec![
            0,
            1,
            pid as u64,
            (-pid) as u32 as u64,
            (-pid) as i64 as u64,
            u32::MAX as u64,
            u64::MAX,
            (-pgid) as u32 as u64,
            pgid as u64,
            libc::CLONE_NEWUSER as u64,
            (libc::CLONE_NEWUSER | libc::CLONE_NEWNET) as u64,
            libc::CLONE_NEWNET as u64,
            0x1_0000_0000 | pid as u64,
            0xdead_beef_0000_0000 | libc::CLONE_NEWUSER as u64,
            libc::AF_UNIX as u64,
            libc::AF_INET as u64,
            libc::AF_INET6 as u64,
            libc::AF_NETLINK as u64,
            libc::AF_PACKET as u64,
            0x7_0000_0000 | libc::AF_UNIX as u64,
        ];
        let mut checked = 0;
        for opts in [
            DenyListOptions {
                allow_mount: false,
                protect_pid: Some(pid),
                protect_pgid: Some(pgid),
                deny_metadata: true,
                deny_inet: true,
            },
            DenyListOptions {
                allow_mount: true,
                protect_pid: None,
                protect_pgid: None,
                deny_metadata: false,
                deny_inet: false,
            },
        ] {
            let list = executor_deny_list(opts);
            let ours = compile(&list).unwrap();
            let theirs = reference(&list);
            assert!(
                ours.len() < theirs.len(),
                "{} vs {}",
                ours.len(),
                theirs.len()
            );
            for arch in [AUDIT_ARCH, 0x4000_0003 /* i386 */] {
                let nrs = (0u32..600).chain([0x4000_0000, 0x4000_0001 + 59, u32::MAX]);
                for nr in nrs {
                    for &a0 in &interesting {
                        let d = data(arch, nr, [a0, 7, 0, 0, 0, 0]);
                        assert_eq!(
                            run(&ours, &d),
                            run(&theirs, &d),
                            "arch {arch:#x} nr {nr} arg0 {a0:#x}"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 30_000);
    }

    /// The whole program is short too: its attach time grows with its length
    /// (see the module comment); the read-only executor's list, the longest,
    /// fits in well under 100 instructions.
    #[test]
    fn every_path_and_the_program_are_short() {
        let list = executor_deny_list(DenyListOptions {
            allow_mount: false,
            protect_pid: Some(10),
            protect_pgid: Some(11),
            deny_metadata: true,
            deny_inet: true,
        });
        let prog = compile(&list).unwrap();
        assert!(prog.len() <= 90, "{} instructions", prog.len());
        // Count the instructions executed for each syscall number.
        for nr in 0u32..600 {
            let d = data(AUDIT_ARCH, nr, [0; 6]);
            let (mut a, mut pc, mut steps) = (0u32, 0usize, 0);
            loop {
                let i = &prog[pc];
                pc += 1;
                steps += 1;
                match i.code {
                    0x20 => {
                        a = u32::from_le_bytes(
                            d[i.k as usize..i.k as usize + 4].try_into().unwrap(),
                        )
                    }
                    0x06 => break,
                    0x54 => a &= i.k,
                    code => {
                        let taken = match code {
                            0x15 => a == i.k,
                            0x35 => a >= i.k,
                            0x25 => a > i.k,
                            other => panic!("opcode {other:#x} not expected"),
                        };
                        pc += usize::from(if taken { i.jt } else { i.jf });
                    }
                }
            }
            assert!(steps <= 20, "nr {nr}: {steps} instructions");
        }
    }

    #[test]
    fn bad_lists_are_refused() {
        let mut list = DenyList::new();
        list.insert(-1, When::Always);
        assert!(compile(&list).is_err());
        let mut list = DenyList::new();
        list.insert(
            1,
            When::Arg32In {
                arg: 6,
                values: vec![1],
            },
        );
        assert!(compile(&list).is_err());
        // Too many checks for a u8 jump: refused, not truncated.
        let mut list = DenyList::new();
        list.insert(
            1,
            When::Arg32In {
                arg: 0,
                values: (0..300).collect(),
            },
        );
        assert!(compile(&list).is_err());
    }
}
