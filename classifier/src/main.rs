//! `sysward-classify`: started by the root broker with its channel on fd 3
//! and an empty environment; confines itself before it reads a message and
//! then answers classification requests (see the library).

fn main() -> std::process::ExitCode {
    sysward_classify::run(|_| None)
}
