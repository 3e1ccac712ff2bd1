//! Strict argv: `--uid U --gid G --port P`, each exactly once, in any order,
//! nothing else. The gateway takes no configuration from argv or the
//! environment beyond these; the rest arrives over the channel.

use std::ffi::OsString;

pub const USAGE: &str = "usage: sysward-gateway --uid UID --gid GID --port PORT\n\
(started by the sysward broker with the broker channel on fd 3; not for direct use)";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Args {
    pub uid: u32,
    pub gid: u32,
    pub port: u16,
}

impl Args {
    /// Parses the arguments after argv[0].
    pub fn parse<I>(args: I) -> Result<Args, String>
    where
        I: IntoIterator<Item = OsString>,
    {
        let mut uid = None;
        let mut gid = None;
        let mut port = None;
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            let flag = flag
                .into_string()
                .map_err(|f| format!("argument {f:?} is not UTF-8"))?;
            let slot = match flag.as_str() {
                "--uid" => &mut uid,
                "--gid" => &mut gid,
                "--port" => &mut port,
                other => return Err(format!("unknown argument {other:?}")),
            };
            if slot.is_some() {
                return Err(format!("{flag} given twice"));
            }
            let value = it
                .next()
                .ok_or_else(|| format!("{flag} needs a value"))?
                .into_string()
                .map_err(|v| format!("{flag} value {v:?} is not UTF-8"))?;
            *slot = Some(value);
        }
        let uid = number::<u32>("--uid", uid)?;
        let gid = number::<u32>("--gid", gid)?;
        let port = number::<u16>("--port", port)?;
        if uid == 0 || gid == 0 {
            return Err(
                "--uid and --gid must name an unprivileged user and group (not 0): the gateway \
                 never runs as root"
                    .to_string(),
            );
        }
        if port == 0 {
            return Err("--port must be the API port, 1-65535".to_string());
        }
        Ok(Args { uid, gid, port })
    }
}

fn number<T: std::str::FromStr>(flag: &str, value: Option<String>) -> Result<T, String> {
    let value = value.ok_or_else(|| format!("{flag} is required"))?;
    // Only plain decimal digits: no sign, no spaces, no 0x.
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) || value.len() > 10 {
        return Err(format!("{flag} {value:?} is not a decimal number"));
    }
    value
        .parse::<T>()
        .map_err(|_| format!("{flag} {value:?} is out of range"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Args, String> {
        Args::parse(v.iter().map(OsString::from))
    }

    #[test]
    fn accepts_the_three_flags_in_any_order() {
        let a = parse(&["--port", "8080", "--uid", "990", "--gid", "991"]).unwrap();
        assert_eq!(
            a,
            Args {
                uid: 990,
                gid: 991,
                port: 8080
            }
        );
    }

    #[test]
    fn refuses_everything_else() {
        for bad in [
            &[][..],
            &["--uid", "1", "--gid", "1"],
            &["--uid", "1", "--gid", "1", "--port", "1", "--x", "1"],
            &["--uid", "1", "--gid", "1", "--port", "1", "--port", "2"],
            &["--uid=1", "--gid", "1", "--port", "1"],
            &["--uid", "0", "--gid", "1", "--port", "1"],
            &["--uid", "1", "--gid", "0", "--port", "1"],
            &["--uid", "1", "--gid", "1", "--port", "0"],
            &["--uid", "1", "--gid", "1", "--port", "65536"],
            &["--uid", "+1", "--gid", "1", "--port", "1"],
            &["--uid", "1", "--gid", "1", "--port"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
