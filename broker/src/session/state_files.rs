//! memoria.md and contexto.mem: the state files only the broker writes.

use super::dispatch::{self, Flow};
use super::*;

impl<'a> Session<'a> {
    pub(super) fn state_path(&self, file: StateFile) -> PathBuf {
        self.ctx.layout.state_dir.join(file.file_name())
    }

    pub(super) fn load_state(&self, file: StateFile) -> Option<Vec<u8>> {
        let path = self.state_path(file);
        let f = crate::project::open_regular(&path).ok()?;
        let mut buf = Vec::new();
        f.take(STATE_FILE_MAX as u64).read_to_end(&mut buf).ok()?;
        Some(buf)
    }

    pub(super) fn save_state(&mut self, file: StateFile, content: &[u8]) -> Result<()> {
        if content.len() > STATE_FILE_MAX {
            return Err(SessionError::Ended(format!(
                "the agent tried to save {} bytes of {}",
                content.len(),
                file.file_name()
            )));
        }
        // memoria.md is part of every later session's prompt: each change is
        // recorded with its diff before it is written.
        let change = match file {
            StateFile::Memory => {
                crate::record::memory_change(&self.id, self.load_state(file).as_deref(), content)
            }
            StateFile::Context => None,
        };
        if let Some((record, diff)) = change {
            self.audit(record)?;
            let (diff, _) = self.secrets.redactor().redact_str(&diff);
            self.memory_diffs.push(diff);
        }
        Ok(self.ctx.pinned.write(&self.state_path(file), content)?)
    }
}

pub(super) fn on_load_state(s: &mut Session<'_>, request: AgentRequest) -> Result<Flow> {
    let AgentRequest::LoadState(file) = request else {
        return Err(dispatch::wrong_kind(&request));
    };
    let content = s.load_state(file);
    s.answer(AgentAnswer::State(content))?;
    Ok(Flow::Next)
}

pub(super) fn on_save_state(s: &mut Session<'_>, request: AgentRequest) -> Result<Flow> {
    let AgentRequest::SaveState { file, content } = request else {
        return Err(dispatch::wrong_kind(&request));
    };
    s.save_state(file, &content)?;
    s.answer(AgentAnswer::Ack)?;
    Ok(Flow::Next)
}
