//! Command-line parsing and the text `check`, `discover` and `read` print. Kept out of
//! `main.rs` so that tests can call it.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::config::Config;
use crate::destination::WritePolicy;
use crate::read::{self, ReadError, ReadMode, ReadOptions, ReadProgress};
use crate::rows::{METADATA_COLUMNS, TRANSPORT_COLUMNS};

pub const USAGE: &str = "usage:
  sluice check    --config FILE
  sluice discover --config FILE [--json]
  sluice read     --config FILE --dest DIR --mode bounded|continuous
                  [--topics a,b] [--write-policy append|replace]

check     connects, authenticates and loads metadata; prints the cluster id and brokers
discover  lists the readable topics with partitions, topic ids and the columns each row has
read      reads topics into DIR: bounded reads [log start, last stable offset) and finishes;
          continuous reads until SIGINT/SIGTERM, certifying each epoch after writing it";

/// A parsed command line.
#[derive(Debug, Clone)]
pub enum Command {
    Help,
    Check { config: PathBuf },
    Discover { config: PathBuf, json: bool },
    Read { config: PathBuf, options: ReadOptions },
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, String> {
    let Some((command, rest)) = args.split_first() else { return Err("no command given".to_string()) };
    let mut config = None;
    let mut json = false;
    let mut destination = None;
    let mut mode = None;
    let mut topics = None;
    let mut write_policy = WritePolicy::Append;
    let mut iter = rest.iter();
    while let Some(flag) = iter.next() {
        let mut value = |name: &str| iter.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--config" => config = Some(PathBuf::from(value("--config")?)),
            "--json" => json = true,
            "--dest" => destination = Some(PathBuf::from(value("--dest")?)),
            "--mode" => {
                mode = Some(match value("--mode")?.as_str() {
                    "bounded" => ReadMode::Bounded,
                    "continuous" => ReadMode::Continuous,
                    other => return Err(format!("--mode is bounded or continuous, not {other:?}")),
                })
            }
            "--topics" => {
                let list: Vec<String> =
                    value("--topics")?.split(',').map(str::trim).filter(|t| !t.is_empty()).map(String::from).collect();
                if list.is_empty() {
                    return Err("--topics needs at least one topic name".to_string());
                }
                topics = Some(list);
            }
            "--write-policy" => {
                write_policy = match value("--write-policy")?.as_str() {
                    "append" => WritePolicy::Append,
                    "replace" => WritePolicy::Replace,
                    other => return Err(format!("--write-policy is append or replace, not {other:?}")),
                }
            }
            "-h" | "--help" => return Ok(Command::Help),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let need_config = || config.clone().ok_or_else(|| format!("`sluice {command}` needs --config FILE"));
    match command.as_str() {
        "help" | "-h" | "--help" => Ok(Command::Help),
        "check" => Ok(Command::Check { config: need_config()? }),
        "discover" => Ok(Command::Discover { config: need_config()?, json }),
        "read" => {
            let config = need_config()?;
            let destination = destination.ok_or("`sluice read` needs --dest DIR")?;
            let mode = mode.ok_or("`sluice read` needs --mode bounded or --mode continuous")?;
            if mode == ReadMode::Continuous && write_policy == WritePolicy::Replace {
                return Err("--write-policy replace applies to bounded reads only".to_string());
            }
            Ok(Command::Read { config, options: ReadOptions { mode, topics, write_policy, destination } })
        }
        other => Err(format!("unknown command {other:?}")),
    }
}

/// `sluice check`: connect, load metadata, describe the cluster.
pub async fn check(config: &Config) -> Result<String, ReadError> {
    let client = read::connect(config).await?;
    let metadata = client.refresh_metadata(None).await?;
    let cluster_id = read::cluster_id(&metadata)?;
    let mut out = format!("cluster id: {cluster_id}\nbrokers:\n");
    for broker in metadata.brokers.values() {
        let controller = if broker.node_id == metadata.controller_id { " (controller)" } else { "" };
        out.push_str(&format!("  {} {}{controller}\n", broker.node_id, broker.address()));
    }
    Ok(out)
}

/// `sluice discover`: the readable, non-internal topics.
pub async fn discover(config: &Config, as_json: bool) -> Result<String, ReadError> {
    let client = read::connect(config).await?;
    let metadata = client.refresh_metadata(None).await?;
    let cluster_id = read::cluster_id(&metadata)?;
    let mut topics: Vec<_> = metadata.topics.values().filter(|t| !t.is_internal && t.error_code.is_ok()).collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    let columns: Vec<&str> = TRANSPORT_COLUMNS.iter().chain(METADATA_COLUMNS.iter()).copied().collect();
    if as_json {
        let list: Vec<_> = topics
            .iter()
            .map(|t| {
                json!({
                    "topic": t.name,
                    "topic_id": t.topic_id.to_string(),
                    "partitions": t.partitions.len(),
                    "columns": columns,
                })
            })
            .collect();
        let value = json!({ "cluster_id": cluster_id, "topics": list });
        return Ok(format!("{}\n", serde_json::to_string_pretty(&value).unwrap_or_default()));
    }
    let width = topics.iter().map(|t| t.name.len()).max().unwrap_or(5).max(5);
    let mut out = format!("{:width$}  {:>10}  {:22}  columns\n", "topic", "partitions", "topic id");
    for topic in topics {
        out.push_str(&format!(
            "{:width$}  {:>10}  {:22}  {} + payload columns\n",
            topic.name,
            topic.partitions.len(),
            topic.topic_id.to_string(),
            columns.join(", ")
        ));
    }
    Ok(out)
}

/// One line of progress: rows, bytes, and each partition's position against its window end.
pub fn progress_line(progress: &ReadProgress) -> String {
    let mut line = format!("{} rows, {}", progress.rows(), human_bytes(progress.bytes()));
    for topic in &progress.topics {
        let (done, total): (i64, i64) = topic.partitions.values().fold((0, 0), |(d, t), p| match p.end {
            Some(end) => (d + p.position.min(end), t + end),
            None => (d + p.position, t + p.position),
        });
        let percent = if total > 0 { done as f64 * 100.0 / total as f64 } else { 100.0 };
        line.push_str(&format!(" | {} {:.0}%", topic.topic, percent));
        for (partition, p) in &topic.partitions {
            match p.end {
                Some(end) => line.push_str(&format!(" p{partition} {}/{end}", p.position)),
                None => line.push_str(&format!(" p{partition} @{}", p.position)),
            }
        }
    }
    line
}

/// The one-line summary printed at the end of a read.
pub fn summary_line(progress: &ReadProgress, elapsed: Duration) -> String {
    let topics: Vec<&str> = progress.topics.iter().map(|t| t.topic.as_str()).collect();
    let epochs: u64 = progress.topics.iter().map(|t| t.epochs).sum();
    let mut line = format!(
        "{} {} rows ({}) from {} topic(s) [{}] in {:.1}s, {} epochs certified",
        if progress.stopped { "stopped after" } else { "read" },
        progress.rows(),
        human_bytes(progress.bytes()),
        topics.len(),
        topics.join(", "),
        elapsed.as_secs_f64(),
        epochs
    );
    if progress.dead_letters() > 0 {
        line.push_str(&format!(", {} dead letters", progress.dead_letters()));
    }
    line
}

fn human_bytes(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn read_needs_dest_and_mode() {
        assert_eq!(parse(&args("read --config c.json --mode bounded")).unwrap_err(), "`sluice read` needs --dest DIR");
        assert_eq!(
            parse(&args("read --config c.json --dest out")).unwrap_err(),
            "`sluice read` needs --mode bounded or --mode continuous"
        );
        let Command::Read { options, .. } =
            parse(&args("read --config c.json --dest out --mode bounded --topics a,b --write-policy replace")).unwrap()
        else {
            panic!("read expected");
        };
        assert_eq!(options.topics, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(options.write_policy, WritePolicy::Replace);
    }

    #[test]
    fn bad_arguments_are_named() {
        assert_eq!(parse(&args("check")).unwrap_err(), "`sluice check` needs --config FILE");
        assert_eq!(parse(&args("frobnicate --config c")).unwrap_err(), "unknown command \"frobnicate\"");
        assert_eq!(
            parse(&args("read --config c --dest d --mode sometimes")).unwrap_err(),
            "--mode is bounded or continuous, not \"sometimes\""
        );
        assert_eq!(
            parse(&args("read --config c --dest d --mode continuous --write-policy replace")).unwrap_err(),
            "--write-policy replace applies to bounded reads only"
        );
    }
}
