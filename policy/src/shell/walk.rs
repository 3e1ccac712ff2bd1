//! The AST walk.

use super::words::{self, arg_of, Arg, Nested};
use super::{Analyzer, Cmd, Item, Redir, Stdin};
use brush_parser::ast;
use std::path::PathBuf;

pub struct Walker<'a> {
    pub an: &'a mut Analyzer,
    /// The script being walked (for source spans).
    pub text: &'a str,
    pub depth: usize,
}

type Cwd = Option<PathBuf>;

impl Walker<'_> {
    pub fn program(&mut self, p: &ast::Program, cwd: &mut Cwd) {
        for list in &p.complete_commands {
            self.list(list, cwd);
        }
    }

    fn list(&mut self, list: &ast::CompoundList, cwd: &mut Cwd) {
        for item in &list.0 {
            self.and_or(&item.0, cwd);
        }
    }

    fn and_or(&mut self, ao: &ast::AndOrList, cwd: &mut Cwd) {
        self.pipeline(&ao.first, cwd);
        for next in &ao.additional {
            match next {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p, cwd),
            }
        }
    }

    fn pipeline(&mut self, p: &ast::Pipeline, cwd: &mut Cwd) {
        if p.seq.len() == 1 {
            if let Some(c) = p.seq.first() {
                self.command(c, cwd, Stdin::Inherit);
            }
            return;
        }
        // Every element of a multi-command pipeline runs in a subshell.
        for (i, c) in p.seq.iter().enumerate() {
            let mut sub = cwd.clone();
            let stdin = if i == 0 { Stdin::Inherit } else { Stdin::Pipe };
            self.command(c, &mut sub, stdin);
        }
    }

    fn word(&mut self, raw: &str, cwd: &Cwd) -> Arg {
        let mut nested = Vec::new();
        let arg = arg_of(raw, &mut nested);
        self.an.nested(nested, cwd, self.depth);
        arg
    }

    fn command(&mut self, c: &ast::Command, cwd: &mut Cwd, stdin: Stdin) {
        match c {
            ast::Command::Simple(sc) => self.simple(sc, cwd, stdin),
            ast::Command::Compound(cc, redirs) => {
                if let Some(r) = redirs {
                    let mut sink = Vec::new();
                    let mut st = stdin.clone();
                    for io in &r.0 {
                        self.redirect(io, cwd, &mut sink, &mut st);
                    }
                    self.redirect_items(sink, cwd);
                }
                self.compound(cc, cwd);
            }
            ast::Command::Function(f) => {
                // Analysed as if called: a function named `ls` that runs `rm`
                // still shows the `rm`. One that calls itself (`:(){ :|:& };:`)
                // is a fork bomb shape.
                let name = words::arg_of(&f.fname.value, &mut Vec::new()).text;
                let body = format!("{}", f.body.0);
                if calls_itself(&name, &body) {
                    self.an.items.push(Item::Critical(format!(
                        "function {name} calls itself (fork bomb shape)"
                    )));
                }
                self.an.functions.insert(name.clone());
                let mut sub = cwd.clone();
                self.compound(&f.body.0, &mut sub);
                if let Some(r) = &f.body.1 {
                    let mut sink = Vec::new();
                    let mut st = Stdin::Inherit;
                    for io in &r.0 {
                        self.redirect(io, cwd, &mut sink, &mut st);
                    }
                    self.redirect_items(sink, cwd);
                }
            }
            ast::Command::ExtendedTest(t, redirs) => {
                self.test_expr(&t.expr, cwd, 0);
                if let Some(r) = redirs {
                    let mut sink = Vec::new();
                    let mut st = stdin;
                    for io in &r.0 {
                        self.redirect(io, cwd, &mut sink, &mut st);
                    }
                    self.redirect_items(sink, cwd);
                }
            }
        }
    }

    /// Redirections on a compound command apply to everything in it: recorded
    /// as a command of their own with no argv.
    fn redirect_items(&mut self, redirs: Vec<Redir>, cwd: &Cwd) {
        if !redirs.is_empty() {
            self.an.items.push(Item::Cmd(Cmd {
                assigns: Vec::new(),
                argv: Vec::new(),
                redirs,
                cwd: cwd.clone(),
                stdin: Stdin::Inherit,
                depth: self.depth,
            }));
        }
    }

    fn test_expr(&mut self, e: &ast::ExtendedTestExpr, cwd: &Cwd, depth: usize) {
        if depth > 256 {
            self.an.items.push(Item::Unanalysable(
                "test expression nested too deeply".into(),
            ));
            return;
        }
        match e {
            ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
                self.test_expr(a, cwd, depth + 1);
                self.test_expr(b, cwd, depth + 1);
            }
            ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
                self.test_expr(a, cwd, depth + 1)
            }
            ast::ExtendedTestExpr::UnaryTest(_, w) => {
                self.word(&w.value, cwd);
            }
            ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
                self.word(&a.value, cwd);
                self.word(&b.value, cwd);
            }
        }
    }

    fn compound(&mut self, cc: &ast::CompoundCommand, cwd: &mut Cwd) {
        match cc {
            ast::CompoundCommand::Arithmetic(a) => {
                // brush-parser reads `( ( rm x ) )` as arithmetic: accept it only
                // when the source really is `(( … ))`.
                let src = self.span_text(&a.loc);
                let genuine = src
                    .as_deref()
                    .is_some_and(|s| s.starts_with("((") && s.ends_with("))"));
                if genuine {
                    let mut nested = Vec::new();
                    words::arith_nested(&a.expr.value, &mut nested);
                    self.an.nested(nested, cwd, self.depth);
                } else {
                    self.an.items.push(Item::Opaque(
                        "nested subshells the parser reads as arithmetic".to_string(),
                    ));
                }
            }
            ast::CompoundCommand::ArithmeticForClause(f) => {
                let mut nested = Vec::new();
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    words::arith_nested(&e.value, &mut nested);
                }
                self.an.nested(nested, cwd, self.depth);
                self.list(&f.body.list, cwd);
            }
            ast::CompoundCommand::BraceGroup(b) => self.list(&b.list, cwd),
            ast::CompoundCommand::Subshell(s) => {
                let mut sub = cwd.clone();
                self.list(&s.list, &mut sub);
            }
            ast::CompoundCommand::ForClause(f) => {
                if let Some(values) = &f.values {
                    for v in values {
                        self.word(&v.value, cwd);
                    }
                }
                self.list(&f.body.list, cwd);
            }
            ast::CompoundCommand::CaseClause(c) => {
                self.word(&c.value.value, cwd);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(&p.value, cwd);
                    }
                    if let Some(body) = &item.cmd {
                        self.list(body, cwd);
                    }
                }
            }
            ast::CompoundCommand::IfClause(i) => {
                self.list(&i.condition, cwd);
                self.list(&i.then, cwd);
                if let Some(elses) = &i.elses {
                    for e in elses {
                        if let Some(c) = &e.condition {
                            self.list(c, cwd);
                        }
                        self.list(&e.body, cwd);
                    }
                }
            }
            ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
                self.list(&w.0, cwd);
                self.list(&w.1.list, cwd);
            }
            ast::CompoundCommand::Coprocess(c) => {
                let mut sub = cwd.clone();
                self.command(&c.body, &mut sub, Stdin::Pipe);
            }
        }
    }

    fn span_text(&self, loc: &brush_parser::SourceSpan) -> Option<String> {
        let start = loc.start.index;
        let len = loc.end.index.checked_sub(start)?;
        if self.text.is_ascii() {
            self.text.get(start..start + len).map(str::to_string)
        } else {
            Some(self.text.chars().skip(start).take(len).collect())
        }
    }

    fn simple(&mut self, sc: &ast::SimpleCommand, cwd: &mut Cwd, stdin: Stdin) {
        let mut cmd = Cmd {
            assigns: Vec::new(),
            argv: Vec::new(),
            redirs: Vec::new(),
            cwd: cwd.clone(),
            stdin,
            depth: self.depth,
        };
        let mut items: Vec<(bool, &ast::CommandPrefixOrSuffixItem)> = Vec::new();
        if let Some(p) = &sc.prefix {
            items.extend(p.0.iter().map(|i| (false, i)));
        }
        if let Some(s) = &sc.suffix {
            items.extend(s.0.iter().map(|i| (true, i)));
        }
        if let Some(w) = &sc.word_or_name {
            let arg = self.word(&w.value, cwd);
            cmd.argv.push(arg);
        }
        for (name_seen, item) in items {
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(io) => {
                    let mut redirs = std::mem::take(&mut cmd.redirs);
                    self.redirect(io, cwd, &mut redirs, &mut cmd.stdin);
                    cmd.redirs = redirs;
                }
                ast::CommandPrefixOrSuffixItem::Word(w) => {
                    let arg = self.word(&w.value, cwd);
                    cmd.argv.push(arg);
                }
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                    if name_seen {
                        // `declare X=…` / `export X=…`: an argument.
                        let arg = self.word(&w.value, cwd);
                        self.assignment_value(a, cwd);
                        cmd.argv.push(arg);
                    } else {
                        let name = match &a.name {
                            ast::AssignmentName::VariableName(n) => n.clone(),
                            ast::AssignmentName::ArrayElementName(n, idx) => {
                                let mut nested = Vec::new();
                                words::arith_nested(idx, &mut nested);
                                self.an.nested(nested, cwd, self.depth);
                                n.clone()
                            }
                        };
                        let value = self.assignment_value(a, cwd);
                        cmd.assigns.push((name, value));
                    }
                }
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => {
                    let mut s = cwd.clone();
                    self.list(&sub.list, &mut s);
                    cmd.argv.push(Arg::lit("/dev/fd/63"));
                }
            }
        }
        // A call of a function defined in this script: its body was analysed
        // at the definition; the call itself only keeps its redirections.
        let calls_function = cmd
            .argv
            .first()
            .and_then(Arg::plain)
            .is_some_and(|n| self.an.functions.contains(n));
        if calls_function {
            cmd.argv = vec![Arg::lit(":")];
        }
        // `cd DIR` moves the cwd used to resolve later relative paths.
        let is_cd = cmd
            .argv
            .first()
            .and_then(Arg::plain)
            .is_some_and(|n| matches!(n, "cd" | "pushd" | "popd"));
        if is_cd {
            *cwd = cd_target(&cmd.argv, cwd);
        }
        self.an.items.push(Item::Cmd(cmd));
    }

    fn assignment_value(&mut self, a: &ast::Assignment, cwd: &Cwd) -> Arg {
        let value = match &a.value {
            ast::AssignmentValue::Scalar(w) => self.word(&w.value, cwd),
            ast::AssignmentValue::Array(elems) => {
                let mut all = Arg::lit("");
                all.literal = false;
                for (k, v) in elems {
                    if let Some(k) = k {
                        self.word(&k.value, cwd);
                    }
                    let e = self.word(&v.value, cwd);
                    all.text.push_str(&e.text);
                    all.text.push(' ');
                }
                all
            }
        };
        if value.literal && (value.text.contains("$(") || value.text.contains('`')) {
            // Stored code runs later through arithmetic or eval.
            self.an.items.push(Item::Opaque(format!(
                "a variable holding code ({})",
                words::clip(&value.text)
            )));
        }
        value
    }

    fn redirect(
        &mut self,
        io: &ast::IoRedirect,
        cwd: &Cwd,
        out: &mut Vec<Redir>,
        stdin: &mut Stdin,
    ) {
        match io {
            ast::IoRedirect::File(fd, kind, target) => match target {
                ast::IoFileRedirectTarget::Filename(w) => {
                    let arg = self.word(&w.value, cwd);
                    match kind {
                        ast::IoFileRedirectKind::Read => out.push(Redir::Read(arg)),
                        ast::IoFileRedirectKind::DuplicateInput => out.push(Redir::Read(arg)),
                        ast::IoFileRedirectKind::ReadAndWrite => {
                            out.push(Redir::Write(arg));
                        }
                        _ => out.push(Redir::Write(arg)),
                    }
                    let _ = fd;
                }
                ast::IoFileRedirectTarget::Fd(_) => {}
                ast::IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                    let mut s = cwd.clone();
                    self.list(&sub.list, &mut s);
                }
                ast::IoFileRedirectTarget::Duplicate(w) => {
                    let arg = self.word(&w.value, cwd);
                    let is_fd = arg.literal
                        && (arg.text == "-"
                            || arg
                                .text
                                .trim_end_matches('-')
                                .bytes()
                                .all(|b| b.is_ascii_digit()));
                    if !is_fd {
                        match kind {
                            ast::IoFileRedirectKind::DuplicateInput => out.push(Redir::Read(arg)),
                            _ => out.push(Redir::Write(arg)),
                        }
                    }
                }
            },
            ast::IoRedirect::HereDocument(fd, doc) => {
                let body = doc.doc.value.clone();
                let mut literal = true;
                if doc.requires_expansion {
                    let mut nested: Vec<Nested> = Vec::new();
                    literal = words::heredoc_nested(&body, &mut nested)
                        && !body.contains('$')
                        && !body.contains('`');
                    self.an.nested(nested, cwd, self.depth);
                }
                if fd.is_none_or(|f| f == 0) {
                    *stdin = Stdin::Here { body, literal };
                }
            }
            ast::IoRedirect::HereString(fd, w) => {
                let arg = self.word(&w.value, cwd);
                if fd.is_none_or(|f| f == 0) {
                    *stdin = Stdin::Here {
                        body: arg.text.clone(),
                        literal: arg.literal,
                    };
                }
            }
            ast::IoRedirect::OutputAndError(w, _) => {
                let arg = self.word(&w.value, cwd);
                out.push(Redir::Write(arg));
            }
        }
    }
}

fn cd_target(argv: &[Arg], cwd: &Cwd) -> Cwd {
    let name = argv.first().and_then(Arg::plain).unwrap_or("");
    if name == "popd" {
        return None;
    }
    let operands: Vec<&Arg> = argv[1..]
        .iter()
        .filter(|a| !(a.literal && a.text.starts_with('-') && a.text != "-"))
        .collect();
    match operands.as_slice() {
        [one] => {
            let t = one.plain()?;
            if t == "-" {
                return None;
            }
            let p = std::path::Path::new(t);
            if p.is_absolute() {
                Some(crate::paths::normalize(p))
            } else {
                cwd.as_ref().map(|c| crate::paths::normalize(&c.join(p)))
            }
        }
        _ => None,
    }
}

/// Whether a function body mentions its own name as a command word.
fn calls_itself(name: &str, body: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let bytes = body.as_bytes();
    let mut start = 0;
    while let Some(pos) = body[start..].find(name) {
        let at = start + pos;
        let end = at + name.len();
        let before_ok = at == 0
            || matches!(
                bytes[at - 1],
                b' ' | b'\t' | b'\n' | b';' | b'|' | b'&' | b'(' | b'{' | b'`'
            );
        let after_ok = end >= bytes.len()
            || matches!(
                bytes[end],
                b' ' | b'\t' | b'\n' | b';' | b'|' | b'&' | b')' | b'}' | b'`'
            );
        if before_ok && after_ok {
            return true;
        }
        start = end;
        if start >= body.len() {
            break;
        }
    }
    false
}
