//! `init.conf`: one `KEY=VALUE` per line, `#` comments, blank lines. Repeated keys
//! are an error, unknown keys a warning (seed 000). sysward adds `AGENT_USER` and
//! `MODEL_USER`.

use std::collections::HashSet;
use sysward_ipc::agent::{ToolCalling, ToolSchema};

pub const DEFAULT_AGENT_USER: &str = "sysward-agent";
pub const DEFAULT_MODEL_USER: &str = "sysward-model";
/// init.conf larger than this is refused: it is a short key=value file.
const MAX_INIT_CONF: usize = 64 << 10;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("init.conf is larger than {MAX_INIT_CONF} bytes")]
    TooLarge,
    #[error("init.conf line {line}: expected KEY=VALUE, found {text:?}")]
    Syntax { line: usize, text: String },
    #[error("init.conf line {line}: {key} is repeated (first set on line {first})")]
    Repeated {
        line: usize,
        key: String,
        first: usize,
    },
    #[error("init.conf: {0} is required")]
    Missing(&'static str),
    #[error(
        "init.conf line {line}: API_URL must be an http(s) URL, e.g. http://127.0.0.1:8080/v1"
    )]
    BadUrl { line: usize },
    #[error("init.conf line {line}: {key}={value:?} is invalid: {why}")]
    Invalid {
        line: usize,
        key: String,
        value: String,
        why: &'static str,
    },
}

/// A parsed `API_URL`: scheme, host, port and path prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiUrl {
    pub raw: String,
    pub https: bool,
    pub host: String,
    pub port: u16,
}

impl ApiUrl {
    /// Strict enough for a model endpoint: `http(s)://host[:port][/path]`, no
    /// user-info, no query, no fragment.
    pub fn parse(raw: &str) -> Option<ApiUrl> {
        let (https, rest) = if let Some(r) = raw.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = raw.strip_prefix("http://") {
            (false, r)
        } else {
            return None;
        };
        if rest.contains(['?', '#', '@', ' ', '\\']) {
            return None;
        }
        let authority = rest.split('/').next().unwrap_or("");
        if authority.is_empty() {
            return None;
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6.split_once(']')?;
            let port = match after.strip_prefix(':') {
                Some(p) => p.parse().ok()?,
                None if after.is_empty() => default_port(https),
                None => return None,
            };
            (h.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p.parse().ok()?),
                None => (authority.to_string(), default_port(https)),
            }
        };
        if host.is_empty() || port == 0 {
            return None;
        }
        Some(ApiUrl {
            raw: raw.trim_end_matches('/').to_string(),
            https,
            host,
            port,
        })
    }
}

fn default_port(https: bool) -> u16 {
    if https {
        443
    } else {
        80
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitConf {
    pub api_url: ApiUrl,
    pub api_key: String,
    pub model: String,
    pub context_size: Option<u64>,
    pub request_timeout_secs: u32,
    pub tool_calling: ToolCalling,
    /// Largest reply asked of the model (`max_tokens`); None: sized from the context.
    pub max_reply_tokens: Option<u32>,
    /// `TOOL_SCHEMA`: how much the tool descriptions say.
    pub tool_schema: ToolSchema,
    pub search_url: Option<String>,
    /// `cve_lookup`'s services (None: the real NVD and Debian tracker).
    pub nvd_url: Option<String>,
    pub tracker_url: Option<String>,
    pub agent_user: String,
    pub model_user: String,
    /// `CPU_LATENCY_REQUEST`: whether a session asks for zero CPU wake-up
    /// latency while an approved command starts (see
    /// `sysward_actions::wake_latency`).
    pub cpu_latency_request: bool,
}

impl InitConf {
    /// The key as it may be displayed: `sk-2f1...8a9`.
    pub fn masked_key(&self) -> String {
        mask_secret(&self.api_key)
    }
}

/// Masks a credential for display: the first 6 and last 3 characters of a long
/// one, nothing of a short one.
pub fn mask_secret(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    if chars.is_empty() {
        return "(none)".to_string();
    }
    if chars.len() < 12 {
        return "***".to_string();
    }
    let head: String = chars[..6].iter().collect();
    let tail: String = chars[chars.len() - 3..].iter().collect();
    format!("{head}...{tail}")
}

pub fn parse(text: &str) -> Result<(InitConf, Vec<String>), ConfigError> {
    if text.len() > MAX_INIT_CONF {
        return Err(ConfigError::TooLarge);
    }
    let mut warnings = Vec::new();
    let mut seen: Vec<(String, usize)> = Vec::new();
    let mut api_url: Option<(String, usize)> = None;
    let mut conf = InitConf {
        api_url: ApiUrl {
            raw: String::new(),
            https: false,
            host: String::new(),
            port: 0,
        },
        api_key: String::new(),
        model: String::new(),
        context_size: None,
        request_timeout_secs: 300,
        tool_calling: ToolCalling::Auto,
        max_reply_tokens: None,
        tool_schema: ToolSchema::Auto,
        search_url: None,
        nvd_url: None,
        tracker_url: None,
        agent_user: DEFAULT_AGENT_USER.to_string(),
        model_user: DEFAULT_MODEL_USER.to_string(),
        cpu_latency_request: true,
    };
    let known: HashSet<&str> = [
        "API_URL",
        "API_KEY",
        "MODEL",
        "CONTEXT_SIZE",
        "REQUEST_TIMEOUT",
        "TOOL_CALLING",
        "MAX_REPLY_TOKENS",
        "TOOL_SCHEMA",
        "SEARCH_URL",
        "NVD_URL",
        "DEBIAN_TRACKER_URL",
        "AGENT_USER",
        "MODEL_USER",
        "CPU_LATENCY_REQUEST",
    ]
    .into_iter()
    .collect();
    for (idx, raw_line) in text.lines().enumerate() {
        let line = idx + 1;
        let trimmed = raw_line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let Some((key, value)) = trimmed.split_once('=') else {
            return Err(ConfigError::Syntax {
                line,
                text: trimmed.chars().take(80).collect(),
            });
        };
        let key = key.trim().to_string();
        let value = unquote(value.trim()).to_string();
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
            return Err(ConfigError::Repeated {
                line,
                key,
                first: *first,
            });
        }
        seen.push((key.clone(), line));
        if !known.contains(key.as_str()) {
            warnings.push(format!("init.conf line {line}: unknown key {key} ignored"));
            continue;
        }
        let invalid = |why| ConfigError::Invalid {
            line,
            key: key.clone(),
            value: value.clone(),
            why,
        };
        match key.as_str() {
            "API_URL" => api_url = Some((value, line)),
            "API_KEY" => conf.api_key = value,
            "MODEL" => conf.model = value,
            "CONTEXT_SIZE" => {
                let n: u64 = value.parse().map_err(|_| invalid("a number of tokens"))?;
                conf.context_size = (n > 0).then_some(n);
            }
            "REQUEST_TIMEOUT" => {
                let n: u32 = value.parse().map_err(|_| invalid("seconds, > 0"))?;
                if n == 0 || n > 86_400 {
                    return Err(invalid("seconds between 1 and 86400"));
                }
                conf.request_timeout_secs = n;
            }
            "TOOL_CALLING" => {
                conf.tool_calling = match value.as_str() {
                    "auto" => ToolCalling::Auto,
                    "native" => ToolCalling::Native,
                    "json" => ToolCalling::Json,
                    _ => return Err(invalid("auto, native or json")),
                }
            }
            "MAX_REPLY_TOKENS" => {
                let n: u32 = value
                    .parse()
                    .map_err(|_| invalid("a number of tokens between 16 and 1048576"))?;
                if !(16..=1 << 20).contains(&n) {
                    return Err(invalid("a number of tokens between 16 and 1048576"));
                }
                conf.max_reply_tokens = Some(n);
            }
            "TOOL_SCHEMA" => {
                conf.tool_schema = match value.as_str() {
                    "auto" => ToolSchema::Auto,
                    "full" => ToolSchema::Full,
                    "compact" => ToolSchema::Compact,
                    _ => return Err(invalid("auto, full or compact")),
                }
            }
            "SEARCH_URL" => conf.search_url = (!value.is_empty()).then_some(value),
            "NVD_URL" => conf.nvd_url = (!value.is_empty()).then_some(value),
            "DEBIAN_TRACKER_URL" => conf.tracker_url = (!value.is_empty()).then_some(value),
            "AGENT_USER" => conf.agent_user = value,
            "MODEL_USER" => conf.model_user = value,
            "CPU_LATENCY_REQUEST" => {
                conf.cpu_latency_request = match value.as_str() {
                    "on" => true,
                    "off" => false,
                    _ => return Err(invalid("on or off")),
                }
            }
            _ => {}
        }
    }
    let (raw_url, url_line) = api_url.ok_or(ConfigError::Missing("API_URL"))?;
    conf.api_url = ApiUrl::parse(&raw_url).ok_or(ConfigError::BadUrl { line: url_line })?;
    if conf.model.is_empty() {
        return Err(ConfigError::Missing("MODEL"));
    }
    if conf.agent_user == conf.model_user {
        return Err(ConfigError::Invalid {
            line: 0,
            key: "MODEL_USER".to_string(),
            value: conf.model_user.clone(),
            why: "the model gateway must run as a different user than the agent",
        });
    }
    Ok((conf, warnings))
}

fn unquote(v: &str) -> &str {
    if v.len() >= 2
        && ((v.starts_with('"') && v.ends_with('"')) || (v.starts_with('\'') && v.ends_with('\'')))
    {
        &v[1..v.len() - 1]
    } else {
        v
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn minimal_file_parses_with_defaults() {
        let (c, w) = parse("API_URL=http://127.0.0.1:8080/v1\nMODEL=qwen\n").unwrap();
        assert_eq!(c.api_url.host, "127.0.0.1");
        assert_eq!(c.api_url.port, 8080);
        assert_eq!(c.request_timeout_secs, 300);
        assert_eq!(c.context_size, None);
        assert!(c.cpu_latency_request);
        assert!(w.is_empty());
    }

    #[test]
    fn the_cpu_latency_request_is_on_or_off() {
        let base = "API_URL=http://h/v1\nMODEL=m\n";
        let with = |v: &str| parse(&format!("{base}CPU_LATENCY_REQUEST={v}\n"));
        assert!(with("on").unwrap().0.cpu_latency_request);
        assert!(!with("off").unwrap().0.cpu_latency_request);
        let e = with("no").unwrap_err().to_string();
        assert!(
            e.contains("CPU_LATENCY_REQUEST") && e.contains("on or off"),
            "{e}"
        );
    }

    #[test]
    fn repeated_key_is_an_error_naming_both_lines() {
        let e = parse("MODEL=a\n# c\nMODEL=b\nAPI_URL=http://x/v1\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "init.conf line 3: MODEL is repeated (first set on line 1)"
        );
    }

    #[test]
    fn unknown_key_warns() {
        let (_, w) = parse("API_URL=http://h/v1\nMODEL=m\nFOO=1\n").unwrap();
        assert_eq!(
            w,
            vec!["init.conf line 3: unknown key FOO ignored".to_string()]
        );
    }

    #[test]
    fn bad_url_and_missing_keys() {
        assert_eq!(
            parse("API_URL=127.0.0.1:8080\nMODEL=m\n")
                .unwrap_err()
                .to_string(),
            "init.conf line 1: API_URL must be an http(s) URL, e.g. http://127.0.0.1:8080/v1"
        );
        assert_eq!(
            parse("MODEL=m\n").unwrap_err(),
            ConfigError::Missing("API_URL")
        );
        assert_eq!(
            parse("API_URL=http://h\n").unwrap_err(),
            ConfigError::Missing("MODEL")
        );
        assert!(parse("API_URL=http://user@h/v1\nMODEL=m\n").is_err());
        assert!(parse("garbage\n").is_err());
    }

    #[test]
    fn url_forms() {
        let u = ApiUrl::parse("https://api.example.com/v1/").unwrap();
        assert_eq!(
            (u.https, u.port, u.raw.as_str()),
            (true, 443, "https://api.example.com/v1")
        );
        let u = ApiUrl::parse("http://[::1]:9000/v1").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 9000));
        assert!(ApiUrl::parse("http://h:0/").is_none());
        assert!(ApiUrl::parse("ftp://h/").is_none());
    }

    #[test]
    fn key_masking() {
        assert_eq!(mask_secret("sk-2f1abcdefghijk8a9"), "sk-2f1...8a9");
        assert_eq!(mask_secret("short"), "***");
        assert_eq!(mask_secret(""), "(none)");
    }

    #[test]
    fn values_are_validated() {
        assert!(parse("API_URL=http://h\nMODEL=m\nTOOL_CALLING=maybe\n").is_err());
        assert!(parse("API_URL=http://h\nMODEL=m\nREQUEST_TIMEOUT=0\n").is_err());
        let (c, _) = parse("API_URL=http://h\nMODEL=m\nCONTEXT_SIZE=0\n").unwrap();
        assert_eq!(c.context_size, None);
    }
}
