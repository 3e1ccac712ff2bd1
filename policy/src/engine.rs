//! The engine: a request → a decision.

use crate::block::PolicyBlock;
use crate::catalog;
use crate::classify::{self, Effect};
use crate::decide::{self, Judged, PathSets};
use crate::decision::{Decision, EngineSetup, Part};
use crate::facts::{HostFacts, PathFacts};
use crate::profile;
use crate::request::Request;
use crate::shell::{limits, Analyzer, Arg, Cmd, Item, Stdin};
use crate::tools;
use crate::types::{Category, Risk, Verdict};
use std::path::{Path, PathBuf};

/// The policy engine for one loaded policy on one host.
#[derive(Debug, Clone)]
pub struct Engine {
    block: PolicyBlock,
    facts: HostFacts,
    sets: PathSets,
}

/// The longest request text a person can be shown in full (a script is at
/// most 1 MiB); a longer one is never asked about, only refused.
const MAX_NORMALIZED: usize = 1 << 20;

impl Engine {
    pub fn new(block: PolicyBlock, facts: HostFacts) -> Engine {
        let sets = PathSets::new(&facts);
        Engine { block, facts, sets }
    }

    pub fn from_setup(setup: EngineSetup) -> Engine {
        Engine::new(setup.block, setup.facts)
    }

    pub fn block(&self) -> &PolicyBlock {
        &self.block
    }

    pub fn facts(&self) -> &HostFacts {
        &self.facts
    }

    /// Decides a request. Never panics and never overflows the stack on any
    /// input: scripts are bounded before parsing, small ones are parsed on
    /// the calling thread (which needs 1 MiB of free stack), larger ones on a
    /// thread of their own sized for them.
    pub fn decide(&self, req: &Request<'_>, paths: &dyn PathFacts) -> Decision {
        let run = std::panic::AssertUnwindSafe(|| self.decide_inner(req, paths));
        match std::panic::catch_unwind(run) {
            Ok(d) => d,
            Err(_) => self.refuse(
                Category::Unknown,
                "internal error while analysing the request",
                "analysis limits",
                "",
            ),
        }
    }

    fn refuse(&self, category: Category, reason: &str, source: &str, normalized: &str) -> Decision {
        Decision {
            verdict: Verdict::Deny {
                reason: reason.to_string(),
            },
            category,
            risk: Risk::High,
            reason: reason.to_string(),
            // A refusal is never asked about: its text is for the record.
            normalized: one_line_within(normalized, REFUSED_SHOWN),
            source: source.to_string(),
            profile: None,
            parts: Vec::new(),
        }
    }

    fn decide_inner(&self, req: &Request<'_>, paths: &dyn PathFacts) -> Decision {
        match req {
            Request::Tool { name, paths: tp } => {
                let Some(spec) = catalog::spec(name) else {
                    return self.refuse(
                        Category::Unknown,
                        &format!("unknown tool {}", crate::shell::words::clip(name)),
                        "tool catalog",
                        name,
                    );
                };
                self.conclude(vec![tools::effect(spec, tp, paths)], paths)
            }
            Request::Skill {
                name,
                category,
                risk,
            } => {
                let name = crate::shell::words::clip(name);
                if !matches!(category, Category::ReadOnly | Category::Network) {
                    return self.refuse(
                        *category,
                        &format!("skill pack {name}: a pack is read-only or network"),
                        "skill pack",
                        &name,
                    );
                }
                let mut e = Effect::new(
                    *category,
                    *risk,
                    format!("skill pack {name} ({})", category.as_str()),
                );
                e.network = *category == Category::Network;
                e.argv = vec![name.clone()];
                e.text = name;
                self.conclude(vec![e], paths)
            }
            Request::Exec {
                argv,
                env,
                stdin,
                cwd,
            } => {
                if argv.is_empty() {
                    return self.refuse(Category::Unknown, "empty command", "analysis limits", "");
                }
                let size: usize = argv.iter().map(|a| a.len() + 1).sum::<usize>()
                    + env
                        .iter()
                        .map(|(k, v)| k.len() + v.len() + 2)
                        .sum::<usize>()
                    + stdin.map_or(0, str::len);
                let text = argv.join(" ");
                if size > limits::MAX_SCRIPT_BYTES {
                    return self.refuse(
                        Category::Unknown,
                        "command larger than 1 MiB: refused unanalysed",
                        "analysis limits",
                        &text,
                    );
                }
                let seps: usize = argv.iter().map(|a| limits::separators(a)).sum();
                if seps > limits::MAX_SEPARATORS {
                    return self.refuse(
                        Category::Unknown,
                        "command too long to analyse: refused",
                        "analysis limits",
                        &text,
                    );
                }
                let openers: usize = argv.iter().map(|a| limits::openers(a)).sum();
                if openers > limits::MAX_OPENERS {
                    return self.refuse(
                        Category::Unknown,
                        "command too deeply nested to analyse: refused",
                        "analysis limits",
                        &text,
                    );
                }
                let cwd = abs(cwd);
                let cmd = Cmd {
                    assigns: env.iter().map(|(k, v)| (k.clone(), Arg::lit(v))).collect(),
                    argv: argv.iter().map(|a| Arg::lit(a)).collect(),
                    redirs: Vec::new(),
                    cwd,
                    stdin: match stdin {
                        Some(body) => Stdin::Here {
                            body: body.to_string(),
                            literal: true,
                        },
                        None => Stdin::Inherit,
                    },
                    depth: 0,
                };
                let mut d = self.bounded(openers, &text, paths, move |an| {
                    an.items.push(Item::Cmd(cmd))
                });
                // The stdin is part of what was decided (and approved).
                if let Some(body) = stdin {
                    d.normalized
                        .push_str(&format!(" <<< '{}'", body.replace('\'', "'\\''")));
                    if d.normalized.len() > MAX_NORMALIZED {
                        let mut cut = MAX_NORMALIZED;
                        while !d.normalized.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        d.normalized.truncate(cut);
                    }
                }
                d
            }
            Request::Shell { script, cwd } => {
                if script.len() > limits::MAX_SCRIPT_BYTES {
                    return self.refuse(
                        Category::Unknown,
                        "script larger than 1 MiB: refused unanalysed",
                        "analysis limits",
                        script,
                    );
                }
                let seps = limits::separators(script);
                if seps > limits::MAX_SEPARATORS {
                    return self.refuse(
                        Category::Unknown,
                        &format!("script too long to analyse ({seps} possible commands, at most {}): refused; write long scripts to a file with write_file", limits::MAX_SEPARATORS),
                        "analysis limits",
                        script,
                    );
                }
                let openers = limits::openers(script);
                if openers > limits::MAX_OPENERS {
                    return self.refuse(
                        Category::Unknown,
                        &format!("script too deeply nested to analyse ({openers} possible nesting levels, at most {}): refused", limits::MAX_OPENERS),
                        "analysis limits",
                        script,
                    );
                }
                let cwd = abs(cwd);
                let text: &str = script;
                self.bounded(openers, script, paths, move |an| an.script(text, cwd, 0))
            }
        }
    }

    /// Runs the analysis where its stack use is bounded: inline when small,
    /// else on a scoped thread sized from the opener count.
    fn bounded(
        &self,
        openers: usize,
        text: &str,
        paths: &dyn PathFacts,
        seed: impl FnOnce(&mut Analyzer) + Send,
    ) -> Decision {
        let work = move || -> Vec<Effect> {
            let mut an = Analyzer::new();
            seed(&mut an);
            classify::classify_items(&mut an, paths)
        };
        let effects = if openers <= limits::INLINE_OPENERS {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).ok()
        } else {
            let stack =
                limits::STACK_BASE.saturating_add(openers.saturating_mul(limits::STACK_PER_OPENER));
            std::thread::scope(|scope| {
                match std::thread::Builder::new()
                    .name("sysward-policy-parse".into())
                    .stack_size(stack)
                    .spawn_scoped(scope, work)
                {
                    Ok(h) => h.join().ok(),
                    Err(_) => None,
                }
            })
        };
        match effects {
            Some(e) => self.conclude(e, paths),
            None => self.refuse(
                Category::Unknown,
                "the analysis failed: refused",
                "analysis limits",
                text,
            ),
        }
    }

    /// Judges every effect and aggregates.
    fn conclude(&self, effects: Vec<Effect>, paths: &dyn PathFacts) -> Decision {
        if effects.is_empty() {
            let mut d = Decision {
                verdict: Verdict::Allow,
                category: Category::ReadOnly,
                risk: Risk::Safe,
                reason: "nothing to run".to_string(),
                normalized: String::new(),
                source: "empty script".to_string(),
                profile: None,
                parts: Vec::new(),
            };
            d.profile = profile::build(
                &[],
                Category::ReadOnly,
                &self.block,
                &self.facts,
                &self.sets,
                paths,
            )
            .ok();
            return d;
        }
        let judged: Vec<Judged> = effects
            .iter()
            .map(|e| decide::judge(e, &self.block, &self.facts, &self.sets))
            .collect();
        let mut best = 0usize;
        for i in 1..effects.len() {
            let (a, b) = (&judged[i], &judged[best]);
            let key = |j: &Judged, e: &Effect| (j.verdict.rank(), j.risk, e.category.weight());
            if key(a, &effects[i]) > key(b, &effects[best]) {
                best = i;
            }
        }
        let risk = judged.iter().map(|j| j.risk).max().unwrap_or(Risk::Safe);
        let mut normalized = String::new();
        for e in &effects {
            if !normalized.is_empty() {
                normalized.push_str(" ; ");
            }
            normalized.push_str(&e.text);
            if normalized.len() > MAX_NORMALIZED {
                break;
            }
        }
        let j = &judged[best];
        let category = effects[best].category;
        let parts = effects
            .iter()
            .zip(&judged)
            .map(|(e, j)| Part {
                text: one_line(&e.text),
                category: e.category,
                risk: j.risk,
            })
            .collect();
        let mut d = Decision {
            verdict: j.verdict.clone(),
            category,
            risk,
            reason: j.reason.clone(),
            normalized: one_line(&normalized),
            source: j.source.clone(),
            profile: None,
            parts,
        };
        if normalized.len() > MAX_NORMALIZED && !d.verdict.is_deny() {
            let why = "the request is too long to show a person in full: refused".to_string();
            d.verdict = Verdict::Deny {
                reason: why.clone(),
            };
            d.reason = why;
            d.source = "analysis limits".to_string();
        }
        if !d.verdict.is_deny() {
            let refs: Vec<&Effect> = effects.iter().collect();
            match profile::build(&refs, category, &self.block, &self.facts, &self.sets, paths) {
                Ok(p) => d.profile = Some(p),
                Err(why) => {
                    d.verdict = Verdict::Deny {
                        reason: why.clone(),
                    };
                    d.reason = why;
                    d.source = "profile invariant".to_string();
                }
            }
        }
        d
    }
}

fn abs(cwd: &Path) -> Option<PathBuf> {
    cwd.is_absolute().then(|| crate::paths::normalize(cwd))
}

fn one_line(s: &str) -> String {
    one_line_within(s, MAX_NORMALIZED)
}

/// How much of a refused request's text a decision keeps.
const REFUSED_SHOWN: usize = 4096;

fn one_line_within(s: &str, max: usize) -> String {
    let mut cut = s.len().min(max);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out: String = s[..cut].replace(['\n', '\r'], " ");
    if cut < s.len() {
        out.push('…');
    }
    out
}
