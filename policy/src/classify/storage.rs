//! Disks, partitions, filesystems, volumes.

use super::system::admin;
use super::Effect;
use crate::shell::Arg;
use crate::types::{Category, Risk};

pub(super) fn disks(name: &str, args: &[Arg]) -> Effect {
    let ops: Vec<&str> = args
        .iter()
        .filter(|a| !a.text.starts_with('-'))
        .map(|a| a.text.as_str())
        .collect();
    let flags: Vec<&str> = args
        .iter()
        .filter(|a| a.text.starts_with('-'))
        .map(|a| a.text.as_str())
        .collect();
    let on_device = args
        .iter()
        .any(|a| a.plain().is_some_and(super::is_block_device));
    let crit = |why: &str| Effect::critical(Category::Destructive, format!("{name} {why}"));
    let read_only = |why: &str| Effect::ro(format!("{name} {why}"));
    let high = |why: &str| {
        Effect::new(Category::Destructive, Risk::High, format!("{name} {why}"))
            .with_caps(&["CAP_SYS_ADMIN", "CAP_SYS_RAWIO", "CAP_DAC_OVERRIDE"])
            .wide()
    };
    let adm = |why: &str| {
        admin(
            Risk::High,
            format!("{name} {why}"),
            &["CAP_SYS_ADMIN", "CAP_SYS_RAWIO", "CAP_DAC_OVERRIDE"],
        )
        .wide()
    };
    match name {
        _ if name.starts_with("mkfs")
            || matches!(
                name,
                "mke2fs" | "mkswap" | "mkdosfs" | "mkntfs" | "mkexfatfs"
            ) =>
        {
            if flags.iter().any(|f| *f == "-n" && name == "mke2fs")
                || flags.contains(&"-V") && ops.is_empty()
            {
                return read_only("dry run");
            }
            if on_device || ops.is_empty() {
                crit("formats a device")
            } else {
                high("formats an image file")
            }
        }
        "wipefs" => {
            if flags.iter().any(|f| {
                matches!(*f, "-a" | "--all" | "-o" | "--offset")
                    || f.starts_with("-a")
                    || f.starts_with("--offset")
            }) && !flags.iter().any(|f| matches!(*f, "-n" | "--no-act"))
            {
                crit("erases signatures")
            } else {
                read_only("lists signatures")
            }
        }
        "blkdiscard" => crit("discards every block of a device"),
        "sfdisk" => {
            if flags.iter().any(|f| {
                matches!(
                    *f,
                    "-l" | "--list"
                        | "-d"
                        | "--dump"
                        | "-s"
                        | "--show-size"
                        | "-J"
                        | "--json"
                        | "-V"
                        | "--verify"
                        | "--list-free"
                        | "-F"
                        | "--help"
                        | "--version"
                        | "--no-act"
                        | "-n"
                )
            }) {
                read_only("lists partitions")
            } else {
                crit("rewrites a partition table")
            }
        }
        "sgdisk" | "gdisk" | "fdisk" | "cfdisk" | "parted" => {
            let ro = flags.iter().any(|f| {
                matches!(
                    *f,
                    "-l" | "--list" | "-p" | "--print" | "-i" | "--info" | "-v" | "--verify" | "-L"
                )
            }) || (name == "parted"
                && ops
                    .iter()
                    .skip(1)
                    .all(|o| matches!(*o, "print" | "p" | "unit" | "s" | "B" | "MiB" | "GiB"))
                && ops.len() >= 2);
            if ro {
                return read_only("lists partitions");
            }
            if flags
                .iter()
                .any(|f| matches!(*f, "-Z" | "--zap-all" | "-z" | "--zap" | "-o" | "--clear"))
                || ops
                    .iter()
                    .any(|o| matches!(*o, "mklabel" | "mktable" | "rm"))
            {
                crit("destroys a partition table")
            } else {
                high("changes partitions")
            }
        }
        "partprobe" => adm("re-reads partition tables"),
        "cryptsetup" => {
            let sub = ops.first().copied().unwrap_or("");
            match sub {
                "status" | "luksDump" | "isLuks" | "benchmark" | "luksUUID" | "tcryptDump"
                | "bitlkDump" => read_only("shows"),
                "luksFormat" | "erase" | "luksErase" | "reencrypt" | "format" => {
                    crit("destroys encrypted data")
                }
                "luksKillSlot" | "luksRemoveKey" => high("removes keys"),
                _ => adm("opens or changes encrypted volumes"),
            }
        }
        "badblocks" => {
            if flags.iter().any(|f| f.contains('w')) {
                crit("-w overwrites a device")
            } else if flags.iter().any(|f| f.contains('n')) {
                high("-n rewrites a device")
            } else {
                read_only("reads a device")
            }
        }
        "zpool" | "zfs" => {
            let sub = ops.first().copied().unwrap_or("list");
            match sub {
                "list" | "status" | "get" | "iostat" | "history" | "events" | "holds"
                | "version" | "diff" | "userspace" | "groupspace" | "projectspace" => {
                    read_only("shows")
                }
                "destroy" | "labelclear" => crit("destroys a pool or dataset"),
                "rollback" | "remove" | "detach" | "offline" | "export" => high(sub),
                _ => adm(sub),
            }
        }
        "mdadm" => {
            if flags.iter().any(|f| {
                matches!(
                    *f,
                    "--detail"
                        | "-D"
                        | "--examine"
                        | "-E"
                        | "--query"
                        | "-Q"
                        | "--detail-platform"
                        | "--version"
                )
            }) {
                read_only("shows arrays")
            } else if flags.iter().any(|f| {
                matches!(
                    *f,
                    "--create" | "-C" | "--zero-superblock" | "--build" | "-B"
                )
            }) {
                crit("creates or wipes arrays")
            } else {
                adm("manages arrays")
            }
        }
        "lvremove" | "vgremove" | "pvremove" | "lvreduce" => high("removes or shrinks volumes"),
        "lvresize" => {
            if flags
                .iter()
                .any(|f| f.starts_with("-L-") || f.starts_with("--size=-"))
                || ops.iter().any(|o| o.starts_with('-'))
            {
                high("shrinks a volume")
            } else {
                adm("resizes a volume")
            }
        }
        "lvcreate" | "vgcreate" | "pvcreate" | "lvextend" | "vgextend" | "vgreduce" | "pvmove"
        | "pvresize" | "resize2fs" | "xfs_growfs" | "swaplabel" | "e2label" | "xfs_admin"
        | "fstrim" | "dmsetup" | "partx" => {
            if name == "dmsetup"
                && ops.first().is_some_and(|o| {
                    matches!(
                        *o,
                        "ls" | "info" | "status" | "table" | "deps" | "version" | "targets"
                    )
                })
            {
                return read_only("shows");
            }
            adm("changes storage")
        }
        "e2fsck" | "fsck" | "xfs_repair" => {
            if flags.iter().any(|f| *f == "-n" || f.starts_with("-n")) {
                read_only("checks without repairing")
            } else {
                high("repairs a filesystem (can lose data)")
            }
        }
        _ if name.starts_with("fsck.") => {
            if flags.contains(&"-n") {
                read_only("checks")
            } else {
                high("repairs a filesystem")
            }
        }
        "tune2fs" => {
            if flags.iter().all(|f| *f == "-l") && !flags.is_empty() {
                read_only("lists")
            } else {
                adm("changes filesystem parameters")
            }
        }
        "btrfs" => {
            let verbs: Vec<&str> = ops.iter().take(2).copied().collect();
            if verbs.iter().any(|v| {
                matches!(
                    *v,
                    "show"
                        | "df"
                        | "usage"
                        | "list"
                        | "status"
                        | "get"
                        | "version"
                        | "stats"
                        | "find-new"
                )
            }) {
                read_only("shows")
            } else if verbs.iter().any(|v| matches!(*v, "delete" | "remove")) {
                high("deletes subvolumes")
            } else {
                adm("changes btrfs")
            }
        }
        "hdparm" => {
            if flags.iter().all(|f| {
                matches!(
                    *f,
                    "-I" | "-i"
                        | "-t"
                        | "-T"
                        | "-g"
                        | "-C"
                        | "-B"
                        | "-M"
                        | "-a"
                        | "-d"
                        | "-r"
                        | "-W"
                        | "--direct"
                )
            }) && flags.iter().all(|f| f.len() == 2)
                && !args
                    .iter()
                    .any(|a| a.text.chars().nth(2).is_some_and(|c| c.is_ascii_digit()))
            {
                read_only("shows drive settings")
            } else if flags.iter().any(|f| {
                f.contains("security-erase")
                    || f.contains("trim-sector")
                    || f.contains("write-sector")
                    || f.contains("fwdownload")
            }) {
                crit("erases or rewrites a drive")
            } else {
                adm("changes drive settings")
            }
        }
        "nvme" => {
            let sub = ops.first().copied().unwrap_or("");
            if matches!(
                sub,
                "list"
                    | "smart-log"
                    | "id-ctrl"
                    | "id-ns"
                    | "error-log"
                    | "fw-log"
                    | "list-subsys"
                    | "show-regs"
                    | "version"
                    | "list-ns"
            ) {
                read_only("shows")
            } else if matches!(
                sub,
                "format" | "sanitize" | "delete-ns" | "write-zeroes" | "fw-download" | "fw-commit"
            ) {
                crit("erases or reprograms a drive")
            } else {
                adm("manages a drive")
            }
        }
        "smartctl" => {
            if flags.iter().any(|f| {
                f.starts_with("-t")
                    || f.starts_with("--test")
                    || f.starts_with("-s")
                    || f.starts_with("--smart")
                    || f.starts_with("-X")
                    || f.starts_with("-o")
                    || f.starts_with("-S")
            }) {
                adm("changes SMART settings or runs tests")
            } else {
                read_only("reads SMART data")
            }
        }
        "blockdev" => {
            if flags
                .iter()
                .all(|f| f.starts_with("--get") || *f == "--report" || *f == "-v" || *f == "-q")
            {
                read_only("reads device settings")
            } else {
                adm("changes device settings")
            }
        }
        "sync" => Effect::ro("sync flushes buffers"),
        _ => high("changes storage"),
    }
}
