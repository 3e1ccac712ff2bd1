//! What the agent asks for.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One request from the agent, as the broker decoded it.
#[derive(Debug, Clone, Copy)]
pub enum Request<'a> {
    /// `exec`: a program and its arguments, no shell; the variables it gets
    /// on top of the broker's fixed environment, and the text on its stdin
    /// (`None`: /dev/null). Both are judged as a shell command's `NAME=value`
    /// words and here-string would be (`bash` fed a script on stdin runs it).
    Exec {
        argv: &'a [String],
        env: &'a [(String, String)],
        stdin: Option<&'a str>,
        cwd: &'a Path,
    },
    /// `shell`: a script for `bash -lc`.
    Shell { script: &'a str, cwd: &'a Path },
    /// A non-command tool; its effect comes from the catalog by name.
    Tool { name: &'a str, paths: ToolPaths<'a> },
    /// A tool of the operator's skill packs: its effect is what its
    /// manifest, which the operator wrote, says (read-only or network).
    Skill {
        name: &'a str,
        category: crate::types::Category,
        risk: crate::types::Risk,
    },
}

/// The paths a tool request names, as the broker extracted them from the
/// tool's typed arguments (never trusted for the *kind* of effect, which comes
/// from the catalog).
#[derive(Debug, Clone, Copy)]
pub struct ToolPaths<'a> {
    /// Target paths in the order the tool defines: `[path]` for most tools,
    /// `[source, destination]` for copy_file, move_file and diff_files,
    /// every file a patch touches for apply_patch, the destination for download.
    pub targets: &'a [PathBuf],
    /// `recursive` (remove_file, chmod, chown, copy_file of a directory).
    pub recursive: bool,
    /// Relative targets are resolved against this directory.
    pub cwd: &'a Path,
}

impl<'a> ToolPaths<'a> {
    pub fn new(targets: &'a [PathBuf], cwd: &'a Path) -> ToolPaths<'a> {
        ToolPaths {
            targets,
            recursive: false,
            cwd,
        }
    }
}

/// A [`Request`] that owns its data, as it travels from the broker to the
/// classifier helper process (`sysward-classify`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OwnedRequest {
    Exec {
        argv: Vec<String>,
        env: Vec<(String, String)>,
        stdin: Option<String>,
        cwd: PathBuf,
    },
    Shell {
        script: String,
        cwd: PathBuf,
    },
    Tool {
        name: String,
        targets: Vec<PathBuf>,
        recursive: bool,
        cwd: PathBuf,
    },
    Skill {
        name: String,
        category: crate::types::Category,
        risk: crate::types::Risk,
        /// Not judged (a pack's effect is its manifest's); kept so that
        /// every request names where it runs.
        cwd: PathBuf,
    },
}

impl OwnedRequest {
    /// The borrowed request the engine decides.
    pub fn as_request(&self) -> Request<'_> {
        match self {
            OwnedRequest::Exec {
                argv,
                env,
                stdin,
                cwd,
            } => Request::Exec {
                argv,
                env,
                stdin: stdin.as_deref(),
                cwd,
            },
            OwnedRequest::Shell { script, cwd } => Request::Shell { script, cwd },
            OwnedRequest::Tool {
                name,
                targets,
                recursive,
                cwd,
            } => Request::Tool {
                name,
                paths: ToolPaths {
                    targets,
                    recursive: *recursive,
                    cwd,
                },
            },
            OwnedRequest::Skill {
                name,
                category,
                risk,
                ..
            } => Request::Skill {
                name,
                category: *category,
                risk: *risk,
            },
        }
    }
}
