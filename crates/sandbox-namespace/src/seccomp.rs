//! The seccomp filter every process of a namespace sandbox runs under (issue 18 item 1).
//!
//! A deny-list, on purpose: the sandbox runs the host's own programs, so an allow-list would
//! have to know every syscall of every tool a workflow may call. What it denies is the kernel
//! surface a sandboxed process has no use for and that an escape would need: changing mounts,
//! re-entering or creating namespaces, tracing another process, loading BPF or kernel code,
//! the keyring, `perf_event_open`, `userfaultfd`, `io_uring` (its own syscall surface, which
//! seccomp cannot see into), terminal injection (`TIOCSTI`), and the clocks, swap and reboot.
//! Each returns `EPERM`, so the caller sees an ordinary refusal.
//!
//! `clone3` passes its flags in memory, which a filter cannot read: it gets `ENOSYS`, which
//! makes the C libraries fall back to `clone`, whose flags the filter does read (any
//! `CLONE_NEW*` flag is refused). Two programs, because one filter has one action on a match;
//! the kernel runs both and the stricter answer wins.
//!
//! The programs are compiled in the engine before the fork (compilation allocates) and
//! installed by the sandbox's init after its setup, just before it serves; every command it
//! spawns inherits them and cannot remove them.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The syscalls refused outright with `EPERM`.
pub(crate) const DENIED_SYSCALLS: &[(&str, i64)] = &[
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("open_tree", libc::SYS_open_tree),
    ("move_mount", libc::SYS_move_mount),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("kcmp", libc::SYS_kcmp),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("bpf", libc::SYS_bpf),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("reboot", libc::SYS_reboot),
    ("acct", libc::SYS_acct),
    ("syslog", libc::SYS_syslog),
    ("quotactl", libc::SYS_quotactl),
    ("vhangup", libc::SYS_vhangup),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("adjtimex", libc::SYS_adjtimex),
    ("personality", libc::SYS_personality),
];

/// The namespace flags `clone` may not carry.
const CLONE_NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// The `ioctl` requests refused: pushing bytes into a terminal's input queue.
const DENIED_IOCTLS: &[u64] = &[libc::TIOCSTI, libc::TIOCLINUX];

/// The two compiled programs, in the order they are installed.
pub(crate) struct Programs {
    pub deny: BpfProgram,
    pub clone3: BpfProgram,
}

/// Compiles the filter for this machine's architecture.
///
/// # Errors
///
/// The compiler's message, when the architecture is unknown to it or a rule does not compile.
pub(crate) fn compile() -> Result<Programs, String> {
    let arch: TargetArch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("architecture {}: {e:?}", std::env::consts::ARCH))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (_, number) in DENIED_SYSCALLS {
        rules.insert(*number, Vec::new());
    }
    let masked = |arg: u8, flag: u64| -> Result<SeccompRule, String> {
        let condition = SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )
        .map_err(|e| e.to_string())?;
        SeccompRule::new(vec![condition]).map_err(|e| e.to_string())
    };
    let mut clone_rules = Vec::new();
    for flag in CLONE_NAMESPACE_FLAGS {
        clone_rules.push(masked(0, u64::from(flag.unsigned_abs()))?);
    }
    rules.insert(libc::SYS_clone, clone_rules);
    let mut ioctl_rules = Vec::new();
    for request in DENIED_IOCTLS {
        let condition =
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, *request)
                .map_err(|e| e.to_string())?;
        ioctl_rules.push(SeccompRule::new(vec![condition]).map_err(|e| e.to_string())?);
    }
    rules.insert(libc::SYS_ioctl, ioctl_rules);
    let eperm = u32::try_from(libc::EPERM).unwrap_or(1);
    let deny = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(eperm),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let enosys = u32::try_from(libc::ENOSYS).unwrap_or(38);
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(enosys),
        arch,
    )
    .map_err(|e| e.to_string())?;
    Ok(Programs {
        deny: deny
            .try_into()
            .map_err(|e: seccompiler::BackendError| e.to_string())?,
        clone3: clone3
            .try_into()
            .map_err(|e: seccompiler::BackendError| e.to_string())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_for_this_machine() {
        let programs = compile().unwrap();
        assert!(programs.deny.len() > DENIED_SYSCALLS.len());
        assert!(!programs.clone3.is_empty());
    }
}
