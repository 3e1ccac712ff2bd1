//! `sysward secrets list`: names, origins, scopes and sizes of the stored
//! secrets, never a value (read by the console itself, as root, from the
//! root-only secrets directory, through the broker's own loader and its checks).

use sysward_broker::project::Layout;
use sysward_broker::{sanitize, secrets};

/// `sysward secrets list [--json]`: names, origins, scopes and sizes of the
/// stored secrets, and the warnings; never a value.
pub fn cmd_list(layout: &Layout, json: bool) -> anyhow::Result<i32> {
    let store = secrets::SecretStore::load(layout)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&secrets::list_json(layout, &store))?
        );
        return Ok(0);
    }
    let list = store.list();
    if list.is_empty() {
        println!("no stored secrets in {}", layout.secrets_dir.display());
    }
    for i in list {
        println!("{}", sanitize::one_line(&i.line(), 2000));
    }
    for w in store.warnings() {
        eprintln!("warning: {}", sanitize::one_line(w, 500));
    }
    Ok(0)
}
