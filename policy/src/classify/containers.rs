//! Container engines and cluster clients.

use super::net::download;
use super::Effect;
use crate::paths::Target;
use crate::shell::Arg;
use crate::types::{Category, Risk};

pub fn container(name: &str, args: &[Arg]) -> Effect {
    let mut i = 0;
    while i < args.len() && args[i].text.starts_with('-') {
        let t = args[i].text.as_str();
        if matches!(
            t,
            "-H" | "--host"
                | "-c"
                | "--context"
                | "--config"
                | "--log-level"
                | "-l"
                | "--connection"
                | "--url"
                | "--root"
                | "--runroot"
        ) {
            return Effect::unknown(format!("{name} talks to another engine"));
        }
        i += 1;
    }
    let sub = args.get(i).and_then(Arg::plain).unwrap_or("help");
    let sub2 = args.get(i + 1).and_then(Arg::plain).unwrap_or("");
    let ro = |w: &str| Effect::ro(format!("{name} {w} shows"));
    let admin_high = |w: &str| {
        Effect::new(
            Category::Admin,
            Risk::High,
            format!("{name} {w} (the container engine acts as root)"),
        )
        .wide()
    };
    match sub {
        "ps" | "images" | "inspect" | "logs" | "version" | "info" | "stats" | "top" | "port"
        | "diff" | "history" | "events" | "search" | "help" | "--version" | "healthcheck" => {
            ro(sub)
        }
        "network" | "volume" | "image" | "container" | "system" | "compose" | "context"
        | "secret" | "config" | "node" | "service" | "stack" | "pod" | "buildx" | "plugin"
        | "machine" => {
            let s2 = if sub == "compose" {
                args.iter()
                    .skip(i + 1)
                    .find(|a| !a.text.starts_with('-'))
                    .and_then(Arg::plain)
                    .unwrap_or("")
            } else {
                sub2
            };
            match s2 {
                "ls" | "list" | "inspect" | "ps" | "logs" | "df" | "info" | "images" | "config"
                | "version" | "top" | "events" | "port" | "" => ro(&format!("{sub} {s2}")),
                "rm" | "remove" | "prune" | "down" | "kill" => {
                    let mut e = Effect::new(
                        Category::Delete,
                        Risk::High,
                        format!("{name} {sub} {s2} deletes"),
                    )
                    .wide();
                    e.deletes.push(Target::Unresolved);
                    e
                }
                "pull" => download(format!("{name} {sub} pull fetches images")).wide(),
                "exec" | "run" => {
                    Effect::unknown(format!("{name} {sub} {s2} runs a command as root"))
                }
                _ => admin_high(&format!("{sub} {s2}")),
            }
        }
        "rm" | "rmi" | "prune" | "kill" => {
            let mut e = Effect::new(
                Category::Delete,
                Risk::High,
                format!("{name} {sub} deletes containers or images"),
            )
            .wide();
            e.deletes.push(Target::Unresolved);
            e
        }
        "pull" => download(format!("{name} pull fetches an image")).wide(),
        "push" | "login" | "logout" => {
            Effect::new(Category::Network, Risk::Medium, format!("{name} {sub}")).net()
        }
        "exec" | "run" | "create" | "build" | "cp" | "commit" | "import" | "load" | "save"
        | "attach" => admin_high(sub),
        "start" | "stop" | "restart" | "pause" | "unpause" | "update" | "rename" | "tag"
        | "wait" => Effect::new(
            Category::Service,
            Risk::High,
            format!("{name} {sub} changes containers"),
        )
        .wide(),
        _ => Effect::unknown(format!("{name} {sub} is not in the catalog")),
    }
}

pub fn cluster(name: &str, args: &[Arg]) -> Effect {
    for a in args {
        if a.text.starts_with("--kubeconfig")
            || a.text == "--token"
            || a.text.starts_with("--token=")
            || a.text.starts_with("--server")
            || a.text.starts_with("--exec")
        {
            return Effect::unknown(format!("{name} with another cluster or credentials"));
        }
    }
    let ops: Vec<&str> = args
        .iter()
        .filter(|a| !a.text.starts_with('-'))
        .map(|a| a.text.as_str())
        .collect();
    let sub = ops.first().copied().unwrap_or("help");
    let sub2 = ops.get(1).copied().unwrap_or("");
    let ro = matches!(
        sub,
        "get"
            | "describe"
            | "logs"
            | "explain"
            | "version"
            | "api-resources"
            | "api-versions"
            | "top"
            | "cluster-info"
            | "diff"
            | "list"
            | "ls"
            | "status"
            | "show"
            | "template"
            | "history"
            | "search"
            | "help"
            | "dominfo"
            | "domstate"
            | "nodeinfo"
            | "info"
            | "inspect"
            | "ps"
            | "images"
            | "lint"
            | "env"
    ) || (sub == "config"
        && matches!(
            sub2,
            "view" | "get-contexts" | "current-context" | "get-clusters"
        ))
        || (sub == "auth" && sub2 == "can-i")
        || (sub == "rollout" && matches!(sub2, "status" | "history"));
    let mut e = if ro {
        Effect::ro(format!("{name} {sub} reads cluster state"))
    } else if matches!(
        sub,
        "delete" | "destroy" | "undefine" | "uninstall" | "rmi" | "rm" | "drain"
    ) {
        Effect::new(
            Category::Delete,
            Risk::High,
            format!("{name} {sub} deletes"),
        )
    } else if matches!(
        sub,
        "exec"
            | "run"
            | "attach"
            | "cp"
            | "port-forward"
            | "proxy"
            | "debug"
            | "plugin"
            | "console"
            | "ssh"
    ) {
        Effect::unknown(format!("{name} {sub} runs commands or opens channels"))
    } else {
        Effect::new(
            Category::Admin,
            Risk::High,
            format!("{name} {sub} changes the cluster"),
        )
    };
    if matches!(name, "kubectl" | "oc" | "helm") {
        e.network = true;
        if e.category == Category::ReadOnly {
            e.category = Category::Network;
            e.risk = Risk::Low;
        }
    }
    e
}
