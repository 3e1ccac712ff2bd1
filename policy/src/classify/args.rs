//! Option parsing for catalogued programs: which words are options, which
//! take a value, which are operands.

use crate::shell::Arg;

/// One program's arguments split into options and operands.
#[derive(Debug, Default)]
pub struct Opts<'a> {
    /// Short flags seen (each char of a cluster), without values.
    pub short: Vec<char>,
    /// Long flags seen, without `--` and without `=value`.
    pub long: Vec<String>,
    /// Options that took a value: (name as written: `-o` / `--output`, value).
    pub values: Vec<(String, &'a Arg)>,
    /// Everything else, in order.
    pub operands: Vec<&'a Arg>,
}

impl<'a> Opts<'a> {
    /// `with_value`: the options taking a value, e.g. `["-o", "--output"]`.
    /// Long options also accept `--name=value`. After `--` all are operands.
    pub fn parse(args: &'a [Arg], with_value: &[&str]) -> Opts<'a> {
        let mut o = Opts::default();
        let mut i = 0;
        let mut only_operands = false;
        while i < args.len() {
            let a = &args[i];
            i += 1;
            let t = a.text.as_str();
            if only_operands || !a.literal || !t.starts_with('-') || t == "-" {
                o.operands.push(a);
                continue;
            }
            if t == "--" {
                only_operands = true;
                continue;
            }
            if let Some(long) = t.strip_prefix("--") {
                let (name, inline) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (long, None),
                };
                let key = format!("--{name}");
                if with_value.contains(&key.as_str()) {
                    if inline.is_some() {
                        o.values.push((key, a));
                        // The value is inside `a`: callers use value_text.
                    } else if i < args.len() {
                        o.values.push((key, &args[i]));
                        i += 1;
                    }
                } else {
                    o.long.push(name.to_string());
                }
                continue;
            }
            // Short cluster.
            let chars: Vec<char> = t[1..].chars().collect();
            let mut j = 0;
            while j < chars.len() {
                let c = chars[j];
                let key = format!("-{c}");
                if with_value.contains(&key.as_str()) {
                    if j + 1 < chars.len() {
                        o.values.push((key, a));
                    } else if i < args.len() {
                        o.values.push((key, &args[i]));
                        i += 1;
                    }
                    break;
                }
                o.short.push(c);
                j += 1;
            }
        }
        o
    }

    pub fn has(&self, c: char) -> bool {
        self.short.contains(&c)
    }

    pub fn has_long(&self, name: &str) -> bool {
        self.long.iter().any(|l| l == name)
    }

    pub fn has_any(&self, shorts: &str, longs: &[&str]) -> bool {
        shorts.chars().any(|c| self.has(c)) || longs.iter().any(|l| self.has_long(l))
    }

    /// Values given to any of `names`, as arguments (inline values are split out).
    pub fn values_of(&self, names: &[&str]) -> Vec<Arg> {
        self.values
            .iter()
            .filter(|(k, _)| names.contains(&k.as_str()))
            .map(|(k, a)| value_arg(k, a))
            .collect()
    }

    pub fn has_value(&self, names: &[&str]) -> bool {
        self.values.iter().any(|(k, _)| names.contains(&k.as_str()))
    }
}

/// The value of an option from the word that carried it: `--out=F` → `F`,
/// `-oF` → `F`, or the separate word.
fn value_arg(key: &str, a: &Arg) -> Arg {
    let t = a.text.as_str();
    if a.literal {
        if let Some(rest) = t.strip_prefix(key) {
            if key.starts_with("--") {
                if let Some(v) = rest.strip_prefix('=') {
                    return Arg {
                        text: v.to_string(),
                        literal: true,
                        glob: a.glob,
                        under: None,
                    };
                }
            } else if !rest.is_empty() {
                return Arg {
                    text: rest.to_string(),
                    literal: true,
                    glob: a.glob,
                    under: None,
                };
            }
        }
        // A short option inside a cluster (`-xvfFILE`): the value follows the key char.
        if !key.starts_with("--") && t.starts_with('-') && !t.starts_with("--") {
            if let Some(c) = key.chars().nth(1) {
                if let Some(pos) = t[1..].find(c) {
                    let rest = &t[1 + pos + c.len_utf8()..];
                    if !rest.is_empty() {
                        return Arg {
                            text: rest.to_string(),
                            literal: true,
                            glob: a.glob,
                            under: None,
                        };
                    }
                }
            }
        }
    }
    a.clone()
}
