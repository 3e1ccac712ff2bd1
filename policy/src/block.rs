//! The ```policy fenced block of agent.md (seed `000`), plus sysward's extensions:
//! `APPROVAL_MODE` (seed `002`) and operator command rules.

use crate::error::PolicyError;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt::Write as _;

/// agent.md is refused above this size (seed: instruction files ≤ 1 MiB).
pub const MAX_AGENT_MD: usize = 1 << 20;

/// `EXECUTION_MODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ExecutionMode {
    /// Default: read-only, and writes only inside the project.
    Guarded,
    /// Writes outside the project (with the flag), admin and unknown programs.
    Privileged,
    /// Also destructive programs. Only when written literally; implies no `ALLOW_*`.
    Unrestricted,
}

impl ExecutionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionMode::Guarded => "guarded",
            ExecutionMode::Privileged => "privileged",
            ExecutionMode::Unrestricted => "unrestricted",
        }
    }
}

/// `APPROVAL_MODE` (seed `002`): which risk levels need a person's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ApprovalMode {
    /// Default: medium and high ask.
    Strict,
    /// Only high asks.
    Permissive,
}

impl ApprovalMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Strict => "strict",
            ApprovalMode::Permissive => "permissive",
        }
    }
}

/// What an operator rule pins a command prefix to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RuleAction {
    /// No approval prompt (never lifts a flag, a path rule or a hard deny).
    Allow,
    /// Always ask, even for a safe command.
    Ask,
    /// Never run; cannot be approved.
    Deny,
}

impl RuleAction {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleAction::Allow => "allow",
            RuleAction::Ask => "ask",
            RuleAction::Deny => "deny",
        }
    }

    fn directive(self) -> &'static str {
        match self {
            RuleAction::Allow => "COMMAND_ALLOW",
            RuleAction::Ask => "COMMAND_ASK",
            RuleAction::Deny => "COMMAND_DENY",
        }
    }
}

/// `COMMAND_ALLOW=` / `COMMAND_ASK=` / `COMMAND_DENY=`: a command prefix, as
/// words, matched against each simple command after unwrapping (program name
/// without its directory, then its arguments).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OperatorRule {
    pub action: RuleAction,
    pub prefix: Vec<String>,
    /// agent.md line, for `source`.
    pub line: usize,
    /// Where the rule comes from when not agent.md: a task's pre-approvals
    /// (`10-ssh.md (sha256 ab12…)`), valid for that task's content only.
    pub origin: Option<String>,
}

/// Who stated a rule, for a decision's `source`.
fn rule_source(origin: &Option<String>, line: usize) -> String {
    match origin {
        Some(o) => format!("pre-approved by {o} line {line}"),
        None => format!("operator rule line {line}"),
    }
}

impl OperatorRule {
    /// The directive as written (`COMMAND_DENY=git push`).
    pub fn describe(&self) -> String {
        format!("{}={}", self.action.directive(), self.prefix.join(" "))
    }

    /// The decision's `source` when this rule decided.
    pub fn source(&self) -> String {
        rule_source(&self.origin, self.line)
    }

    /// Whether the rule's words are a prefix of `argv`.
    pub fn matches(&self, argv: &[String]) -> bool {
        !self.prefix.is_empty()
            && self.prefix.len() <= argv.len()
            && self.prefix.iter().zip(argv).all(|(a, b)| a == b)
    }
}

/// `WRITE_ALLOW=` / `WRITE_ASK=` / `WRITE_DENY=`: the file tools' counterpart
/// of the command rules, a path glob (`*` and `?` within one path component,
/// `**` across them) that every path a file tool changes must match.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WriteRule {
    pub action: RuleAction,
    pub glob: String,
    /// Only this file tool (a task's `write_file /etc/x-*.conf`); None: any.
    pub tool: Option<String>,
    pub line: usize,
    pub origin: Option<String>,
}

impl WriteRule {
    pub fn describe(&self) -> String {
        let directive = match self.action {
            RuleAction::Allow => "WRITE_ALLOW",
            RuleAction::Ask => "WRITE_ASK",
            RuleAction::Deny => "WRITE_DENY",
        };
        match &self.tool {
            Some(t) => format!("{directive}={t} {}", self.glob),
            None => format!("{directive}={}", self.glob),
        }
    }

    pub fn source(&self) -> String {
        rule_source(&self.origin, self.line)
    }

    /// Whether the rule covers file tool `tool` changing all of `paths`
    /// (absolute, normalized).
    pub fn matches(&self, tool: &str, paths: &[&std::path::Path]) -> bool {
        self.tool.as_deref().is_none_or(|t| t == tool)
            && !paths.is_empty()
            && paths.iter().all(|p| {
                p.to_str()
                    .is_some_and(|p| crate::glob::matches(&self.glob, p))
            })
    }
}

/// The effective policy block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyBlock {
    pub execution_mode: ExecutionMode,
    pub allow_network: bool,
    pub allow_web_research: bool,
    pub allow_downloads: bool,
    pub allow_package_install: bool,
    pub allow_service_restart: bool,
    pub allow_outside_project_read: bool,
    pub allow_outside_project_write: bool,
    pub allow_delete: bool,
    pub allow_reboot: bool,
    pub allow_self_tool_creation: bool,
    pub backup_before_system_edit: bool,
    /// Seconds, 1..=7200.
    pub default_command_timeout: u32,
    /// Model calls per task or message, 1..=1000.
    pub max_steps: u32,
    /// Bytes.
    pub max_download_size: u64,
    /// Task file names in run order (empty: lexicographic).
    pub task_order: Vec<String>,
    pub approval_mode: ApprovalMode,
    pub rules: Vec<OperatorRule>,
    pub write_rules: Vec<WriteRule>,
    /// `NETWORK_ALLOW=`: the loopback, private, link-local and other internal
    /// destinations the network tools may reach (every other internal
    /// address is refused); public addresses need no listing.
    pub network_allow: Vec<sysward_ipc::net::NetAllow>,
    /// `NETWORK_EXTRA_ROOTS=`: a PEM file of trust roots the network tools
    /// accept besides the system's (an internal CA).
    pub network_extra_roots: Option<String>,
}

impl Default for PolicyBlock {
    fn default() -> Self {
        PolicyBlock {
            execution_mode: ExecutionMode::Guarded,
            allow_network: false,
            allow_web_research: false,
            allow_downloads: false,
            allow_package_install: false,
            allow_service_restart: false,
            allow_outside_project_read: false,
            allow_outside_project_write: false,
            allow_delete: false,
            allow_reboot: false,
            allow_self_tool_creation: false,
            backup_before_system_edit: true,
            default_command_timeout: 60,
            max_steps: 40,
            max_download_size: 1 << 30,
            task_order: Vec::new(),
            approval_mode: ApprovalMode::Strict,
            rules: Vec::new(),
            write_rules: Vec::new(),
            network_allow: Vec::new(),
            network_extra_roots: None,
        }
    }
}

/// The result of reading agent.md: the block and the warnings to show the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedPolicy {
    pub block: PolicyBlock,
    pub warnings: Vec<String>,
}

/// The ten `ALLOW_*` flags, in the seed's order.
pub const ALLOW_FLAGS: [&str; 10] = [
    "ALLOW_NETWORK",
    "ALLOW_WEB_RESEARCH",
    "ALLOW_DOWNLOADS",
    "ALLOW_PACKAGE_INSTALL",
    "ALLOW_SERVICE_RESTART",
    "ALLOW_OUTSIDE_PROJECT_READ",
    "ALLOW_OUTSIDE_PROJECT_WRITE",
    "ALLOW_DELETE",
    "ALLOW_REBOOT",
    "ALLOW_SELF_TOOL_CREATION",
];

impl PolicyBlock {
    /// The value of an `ALLOW_*` flag by name (None for an unknown name).
    pub fn flag(&self, name: &str) -> Option<bool> {
        Some(match name {
            "ALLOW_NETWORK" => self.allow_network,
            "ALLOW_WEB_RESEARCH" => self.allow_web_research,
            "ALLOW_DOWNLOADS" => self.allow_downloads,
            "ALLOW_PACKAGE_INSTALL" => self.allow_package_install,
            "ALLOW_SERVICE_RESTART" => self.allow_service_restart,
            "ALLOW_OUTSIDE_PROJECT_READ" => self.allow_outside_project_read,
            "ALLOW_OUTSIDE_PROJECT_WRITE" => self.allow_outside_project_write,
            "ALLOW_DELETE" => self.allow_delete,
            "ALLOW_REBOOT" => self.allow_reboot,
            "ALLOW_SELF_TOOL_CREATION" => self.allow_self_tool_creation,
            _ => return None,
        })
    }

    fn flag_mut(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "ALLOW_NETWORK" => &mut self.allow_network,
            "ALLOW_WEB_RESEARCH" => &mut self.allow_web_research,
            "ALLOW_DOWNLOADS" => &mut self.allow_downloads,
            "ALLOW_PACKAGE_INSTALL" => &mut self.allow_package_install,
            "ALLOW_SERVICE_RESTART" => &mut self.allow_service_restart,
            "ALLOW_OUTSIDE_PROJECT_READ" => &mut self.allow_outside_project_read,
            "ALLOW_OUTSIDE_PROJECT_WRITE" => &mut self.allow_outside_project_write,
            "ALLOW_DELETE" => &mut self.allow_delete,
            "ALLOW_REBOOT" => &mut self.allow_reboot,
            "ALLOW_SELF_TOOL_CREATION" => &mut self.allow_self_tool_creation,
            _ => return None,
        })
    }

    /// The effective policy as the body of a ```policy block: one directive per
    /// line, every directive present (defaults included), rules last. Parsing
    /// the rendered text inside a ```policy fence gives back an equal block.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "EXECUTION_MODE={}", self.execution_mode.as_str());
        let _ = writeln!(out, "APPROVAL_MODE={}", self.approval_mode.as_str());
        for name in ALLOW_FLAGS {
            let _ = writeln!(out, "{name}={}", self.flag(name).unwrap_or(false));
        }
        let _ = writeln!(
            out,
            "BACKUP_BEFORE_SYSTEM_EDIT={}",
            self.backup_before_system_edit
        );
        let _ = writeln!(
            out,
            "DEFAULT_COMMAND_TIMEOUT={}",
            self.default_command_timeout
        );
        let _ = writeln!(out, "MAX_STEPS={}", self.max_steps);
        let _ = writeln!(
            out,
            "MAX_DOWNLOAD_SIZE={}",
            render_size(self.max_download_size)
        );
        if self.task_order.is_empty() {
            out.push_str("# TASK_ORDER unset: lexicographic\n");
        } else {
            let _ = writeln!(
                out,
                "TASK_ORDER={}",
                quote_value(&self.task_order.join(","))
            );
        }
        for rule in self.rules.iter().filter(|r| r.origin.is_none()) {
            let _ = writeln!(
                out,
                "{}={}",
                rule.action.directive(),
                quote_value(&rule.prefix.join(" "))
            );
        }
        for rule in self.write_rules.iter().filter(|r| r.origin.is_none()) {
            let _ = writeln!(out, "{}", rule.describe());
        }
        if !self.network_allow.is_empty() {
            let list: Vec<String> = self.network_allow.iter().map(|a| a.to_string()).collect();
            let _ = writeln!(out, "NETWORK_ALLOW={}", list.join(", "));
        }
        if let Some(roots) = &self.network_extra_roots {
            let _ = writeln!(out, "NETWORK_EXTRA_ROOTS={}", quote_value(roots));
        }
        out
    }
}

/// A value that the parser would unquote gets a layer of quotes it can strip.
fn quote_value(v: &str) -> String {
    if v.starts_with(['"', '\'']) || v.ends_with(['"', '\'']) {
        format!("\"{v}\"")
    } else {
        v.to_string()
    }
}

fn render_size(n: u64) -> String {
    for (suffix, shift) in [("G", 30u32), ("M", 20), ("K", 10)] {
        let unit = 1u64 << shift;
        if n >= unit && n.is_multiple_of(unit) {
            return format!("{}{suffix}", n / unit);
        }
    }
    n.to_string()
}

/// One fenced block found in agent.md.
struct Fence {
    ch: char,
    len: usize,
}

/// Parses an opening or closing fence line: up to three spaces, then three or
/// more backticks or tildes, then an info string.
fn fence_of(line: &str) -> Option<(char, usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let ch = rest.chars().next()?;
    if ch != '`' && ch != '~' {
        return None;
    }
    let len = rest.len() - rest.trim_start_matches(ch).len();
    if len < 3 {
        return None;
    }
    let info = rest[len..].trim();
    if ch == '`' && info.contains('`') {
        return None;
    }
    Some((ch, len, info))
}

/// Reads agent.md: only a fenced block whose info string is `policy` is
/// interpreted (so `KEY=VALUE` examples in prose or in other code blocks never
/// grant anything). No block → defaults.
pub fn parse_agent_md(text: &str) -> Result<ParsedPolicy, PolicyError> {
    if text.len() > MAX_AGENT_MD {
        return Err(PolicyError::TooLarge {
            size: text.len(),
            max: MAX_AGENT_MD,
        });
    }
    let mut open: Option<(Fence, bool, usize)> = None; // fence, is policy, start line
    let mut body: Vec<(usize, &str)> = Vec::new();
    let mut found: Option<usize> = None;
    let mut blocks: Vec<Vec<(usize, &str)>> = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        let lineno = idx + 1;
        match &open {
            None => {
                if let Some((ch, len, info)) = fence_of(line) {
                    let is_policy = info.split_whitespace().next() == Some("policy");
                    if is_policy {
                        if let Some(first) = found {
                            return Err(PolicyError::MultiplePolicyBlocks {
                                first,
                                second: lineno,
                            });
                        }
                        found = Some(lineno);
                    }
                    open = Some((Fence { ch, len }, is_policy, lineno));
                }
            }
            Some((fence, is_policy, _)) => {
                let closes = matches!(fence_of(line), Some((ch, len, info))
                    if ch == fence.ch && len >= fence.len && info.is_empty());
                if closes {
                    if *is_policy {
                        blocks.push(std::mem::take(&mut body));
                    }
                    open = None;
                } else if *is_policy {
                    body.push((lineno, line));
                }
            }
        }
    }
    if let Some((_, true, start)) = open {
        return Err(PolicyError::Unterminated { line: start });
    }
    let mut block = PolicyBlock::default();
    let mut warnings = Vec::new();
    if let Some(lines) = blocks.into_iter().next() {
        parse_directives(&lines, &mut block, &mut warnings)?;
    }
    Ok(ParsedPolicy { block, warnings })
}

fn parse_directives(
    lines: &[(usize, &str)],
    block: &mut PolicyBlock,
    warnings: &mut Vec<String>,
) -> Result<(), PolicyError> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for &(line, raw) in lines {
        let text = raw.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let Some((key, value)) = text.split_once('=') else {
            return Err(PolicyError::Syntax {
                line,
                text: truncate(text),
            });
        };
        let key = key.trim();
        let value = unquote(value.trim());
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(PolicyError::Syntax {
                line,
                text: truncate(text),
            });
        }
        let repeatable = matches!(
            key,
            "COMMAND_ALLOW"
                | "COMMAND_ASK"
                | "COMMAND_DENY"
                | "WRITE_ALLOW"
                | "WRITE_ASK"
                | "WRITE_DENY"
                | "NETWORK_ALLOW"
        );
        if !repeatable {
            if let Some(&first) = seen.get(key) {
                return Err(PolicyError::Duplicate {
                    line,
                    key: key.to_string(),
                    first,
                });
            }
            seen.insert(key.to_string(), line);
        }
        apply(block, warnings, line, key, value)?;
    }
    Ok(())
}

fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

fn invalid(line: usize, key: &str, value: &str, expected: &str) -> PolicyError {
    PolicyError::InvalidValue {
        line,
        key: key.to_string(),
        value: truncate(value),
        expected: expected.to_string(),
    }
}

fn apply(
    block: &mut PolicyBlock,
    warnings: &mut Vec<String>,
    line: usize,
    key: &str,
    value: &str,
) -> Result<(), PolicyError> {
    if let Some(slot) = block.flag_mut(key) {
        *slot = parse_bool(value)
            .ok_or_else(|| invalid(line, key, value, "true/false, yes/no, 1/0 or on/off"))?;
        return Ok(());
    }
    match key {
        "EXECUTION_MODE" => {
            block.execution_mode = match value {
                "guarded" => ExecutionMode::Guarded,
                "privileged" => ExecutionMode::Privileged,
                "unrestricted" => ExecutionMode::Unrestricted,
                _ => {
                    return Err(invalid(
                        line,
                        key,
                        value,
                        "guarded, privileged or unrestricted, in lower case",
                    ))
                }
            }
        }
        "APPROVAL_MODE" => {
            block.approval_mode = match value {
                "strict" => ApprovalMode::Strict,
                "permissive" => ApprovalMode::Permissive,
                _ => return Err(invalid(line, key, value, "strict or permissive")),
            }
        }
        "BACKUP_BEFORE_SYSTEM_EDIT" => {
            block.backup_before_system_edit = parse_bool(value)
                .ok_or_else(|| invalid(line, key, value, "true/false, yes/no, 1/0 or on/off"))?;
        }
        "DEFAULT_COMMAND_TIMEOUT" => {
            block.default_command_timeout = value
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=7200).contains(n))
                .ok_or_else(|| invalid(line, key, value, "seconds, 1 to 7200"))?;
        }
        "MAX_STEPS" => {
            block.max_steps = value
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=1000).contains(n))
                .ok_or_else(|| invalid(line, key, value, "1 to 1000"))?;
        }
        "MAX_DOWNLOAD_SIZE" => {
            block.max_download_size = parse_size(value)
                .ok_or_else(|| invalid(line, key, value, "bytes > 0, optional suffix K, M or G"))?;
        }
        "TASK_ORDER" => {
            let mut order: Vec<String> = Vec::new();
            for item in value.split(',') {
                let item = item.trim();
                if item.is_empty()
                    || item.contains('/')
                    || item.contains('\0')
                    || item == "."
                    || item == ".."
                {
                    return Err(invalid(
                        line,
                        key,
                        value,
                        "comma-separated task file names in the project root",
                    ));
                }
                if order.iter().any(|o| o == item) {
                    return Err(invalid(line, key, value, "a task named twice"));
                }
                order.push(item.to_string());
            }
            block.task_order = order;
        }
        "COMMAND_ALLOW" | "COMMAND_ASK" | "COMMAND_DENY" => {
            let action = match key {
                "COMMAND_ALLOW" => RuleAction::Allow,
                "COMMAND_ASK" => RuleAction::Ask,
                _ => RuleAction::Deny,
            };
            let prefix: Vec<String> = value.split_whitespace().map(str::to_string).collect();
            if prefix.is_empty() {
                return Err(invalid(
                    line,
                    key,
                    value,
                    "a command prefix, e.g. `systemctl restart nginx`",
                ));
            }
            block.rules.push(OperatorRule {
                action,
                prefix,
                line,
                origin: None,
            });
        }
        "WRITE_ALLOW" | "WRITE_ASK" | "WRITE_DENY" => {
            let action = match key {
                "WRITE_ALLOW" => RuleAction::Allow,
                "WRITE_ASK" => RuleAction::Ask,
                _ => RuleAction::Deny,
            };
            let glob = crate::glob::check(value).map_err(|why| invalid(line, key, value, &why))?;
            block.write_rules.push(WriteRule {
                action,
                glob,
                tool: None,
                line,
                origin: None,
            });
        }
        "NETWORK_ALLOW" => {
            for item in value.split(',') {
                let entry = sysward_ipc::net::NetAllow::parse(item)
                    .map_err(|why| invalid(line, key, item.trim(), &why))?;
                if !block.network_allow.contains(&entry) {
                    block.network_allow.push(entry);
                }
            }
        }
        "NETWORK_EXTRA_ROOTS" => {
            if !value.starts_with('/')
                || value.contains('\0')
                || value.split('/').any(|c| c == "..")
                || value.len() > 4096
            {
                return Err(invalid(
                    line,
                    key,
                    value,
                    "an absolute path to a PEM file of CA certificates",
                ));
            }
            block.network_extra_roots = Some(value.to_string());
        }
        _ => warnings.push(format!(
            "agent.md line {line}: unknown policy directive {key} ignored"
        )),
    }
    Ok(())
}

/// true/false, yes/no, 1/0, on/off (any case).
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" | "on" => Some(true),
        "false" | "no" | "0" | "off" => Some(false),
        _ => None,
    }
}

/// Bytes with an optional K, M or G suffix (powers of 1024); must be > 0.
pub fn parse_size(v: &str) -> Option<u64> {
    let (digits, shift) = match v.chars().last()? {
        'K' | 'k' => (&v[..v.len() - 1], 10),
        'M' | 'm' => (&v[..v.len() - 1], 20),
        'G' | 'g' => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let n = n.checked_mul(1u64 << shift)?;
    (n > 0).then_some(n)
}
