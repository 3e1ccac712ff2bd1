//! What the generated man pages add to clap's NAME, SYNOPSIS, DESCRIPTION and
//! OPTIONS: EXIT STATUS, FILES, EXAMPLES and SEE ALSO, per page (roff).

const EXIT_RUN: &str = "\
.TP\n.B 0\nevery task DONE (or skipped as DONE and unchanged)\n\
.TP\n.B 1\na session error (model unreachable, agent or gateway lost, configuration error)\n\
.TP\n.B 2\na task BLOCKED (an approval is required: see sysward-approvals(8))\n\
.TP\n.B 3\na task FAILED\n\
.TP\n.B 4\na task INCOMPLETE (step budget exhausted, or never reached)\n\
.TP\n.B 5\nthe broker stopped: one of its own paths changed under it (audited as broker_stopped)\n\
.TP\n.B 130\ninterrupted (a second Ctrl+C)\n\
.TP\n.B 143\nstopped by SIGTERM after recording the running action and the session end\n";

const EXIT_SIMPLE: &str =
    ".TP\n.B 0\nsuccess\n.TP\n.B 1\nfailure, with the reason on standard error\n";

const FILES: &str = "\
.TP\n.I /etc/sysward/init.conf\nthe model server and the service accounts; see sysward-init.conf(5)\n\
.TP\n.I /etc/sysward/agent.md\nthe operator's instructions and the policy block; see sysward-agent.md(5)\n\
.TP\n.I /etc/sysward/*.md\ntask files, run in order by sysward run\n\
.TP\n.I /etc/sysward/secrets/\nsecrets (NAME, 0600) and their scopes (NAME.scope)\n\
.TP\n.I /var/lib/sysward/audit.log\nthe hash-chained audit log (anchor, sealing state and approvals in .agent/)\n\
.TP\n.I /run/sysward/control.sock\nthe daemon's control socket (root and the sysward group)\n\
.TP\n.I /usr/libexec/sysward/sysward-broker\nthe root broker: the daemon (sysward broker, sysward.service), or the broker of one session that sysward run|cli --root starts and talks to over a socketpair\n\
.TP\n.I /dev/cpu_dma_latency\nheld at 0 by a session while an approved command starts (idle CPUs poll instead of halting): from its start record until its answer, never past 5 ms of its run; the kernel drops the request when the broker closes it; CPU_LATENCY_REQUEST=off in init.conf leaves it alone\n";

fn examples(page: &str) -> &'static str {
    match page {
        "sysward" | "sysward-run" => "\
.nf\nsudo sysward init /root/admin\t# a project from commented templates\n\
sudo sysward run --root /root/admin\t# its tasks, no daemon\n\
sysward run\t\t\t\t# through the daemon, as a member of group sysward\n\
sysward run --json --rerun\t\t# every task again, one JSON object per event\n.fi\n",
        "sysward-cli" => ".nf\nsudo sysward cli --root /root/admin\nsysward cli\t# through the daemon\n.fi\n",
        "sysward-approvals" | "sysward-approve" | "sysward-deny" => "\
.nf\nsysward approvals --full\t\t# every pending request, whole\n\
sysward approve 3f2a9c0d41be\t\t# the next run making that request proceeds once\n\
sysward approve --task 10-ssh.md\t# every pending request of one task, after showing them\n\
sysward deny 3f2a9c0d41be --note 'not on a weekday'\n.fi\n",
        "sysward-audit" => "\
.nf\nsudo sysward audit verify\nsudo sysward audit setup-keys > key.txt\t# keep key.txt off this host\n\
sudo sysward audit verify --key-file key.txt --journal\nsudo sysward audit show --session 1a2b3c4d5e6f7a8b\n.fi\n",
        "sysward-policy" => "\
.nf\nsudo sysward policy check\nsudo sysward policy explain -- 'rm -rf /var/log/*'\n.fi\n",
        "sysward-doctor" => ".nf\nsudo sysward doctor\nsudo sysward doctor --root /root/admin --json\n.fi\n",
        "sysward-init" => ".nf\nsudo sysward init /root/admin\nsudo sysward init\t# fills /etc/sysward\n.fi\n",
        "sysward-status" => ".nf\nsysward status\nsudo sysward status --root /root/admin --json\n.fi\n",
        "sysward-broker" => ".nf\nsudo systemctl enable --now sysward\t# runs /usr/libexec/sysward/sysward-broker\nsudo sysward broker --root /root/admin --socket /run/sysward-test/control.sock\n.fi\n",
        "sysward-secrets" => ".nf\nsudo sysward secrets list --json\n.fi\n",
        _ => ".nf\nsysward --help\n.fi\n",
    }
}

/// The extra sections of `page` (`sysward` or `sysward-SUBCOMMAND`).
pub fn extra_sections(page: &str) -> String {
    let exit = if matches!(page, "sysward" | "sysward-run" | "sysward-cli") {
        EXIT_RUN
    } else {
        EXIT_SIMPLE
    };
    let see_also = [
        "sysward(8)",
        "sysward-run(8)",
        "sysward-approvals(8)",
        "sysward-audit(8)",
        "sysward-doctor(8)",
        "sysward-init.conf(5)",
        "sysward-agent.md(5)",
    ]
    .iter()
    .filter(|p| !p.starts_with(&format!("{page}(")))
    .map(|p| {
        let (name, section) = p.split_once('(').unwrap_or((p, "8)"));
        format!(".BR {name} ({section}")
    })
    .collect::<Vec<_>>()
    .join(",\n");
    format!(
        ".SH \"EXIT STATUS\"\n{exit}.SH FILES\n{FILES}.SH EXAMPLES\n{}.SH \"SEE ALSO\"\n{see_also}\n",
        examples(page)
    )
}
