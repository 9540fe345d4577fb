#![forbid(unsafe_code)]
//! The `sluice` command line: `check`, `discover`, `read`, `status`, `write` and `completions`.
//!
//! stdout carries the command's output (the check and discover text, the JSON of `--json`, the
//! progress line and summary of a read); stderr carries log lines (through `tracing`, as text or
//! JSON lines) and the final error report, `sluice: <error>: <cause>: ...`.

use std::io::{IsTerminal, Write};

use std::process::ExitCode;
use std::time::Instant;

use sluice::cli::{self, Command, LogFormat};
use sluice::config::Config;
use sluice::read::{self, ReadProgress, StopSignal};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

fn main() -> ExitCode {
    let invocation = match cli::parse(std::env::args_os().skip(1)) {
        Ok(invocation) => invocation,
        Err(error) => {
            // Help and version go to stdout with 0; usage errors to stderr with 2.
            let _ = error.print();
            return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2));
        }
    };
    let _ = LOG_FORMAT.set(invocation.log_format);
    if let Err(message) = install_logging(invocation.log_format) {
        eprintln!("sluice: {message}");
        return ExitCode::from(2);
    }
    if let Command::Completions { shell } = invocation.command {
        cli::write_completions(shell, &mut std::io::stdout().lock());
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("sluice: cannot start the async runtime: {}", cli::error_report(&error));
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(invocation.command))
}

/// `--log-format`, for the error report: with `json` the report is also an `error` event, so
/// that a log shipper gets it as JSON (the plain `sluice: ...` line still ends stderr).
static LOG_FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

/// The default filter: Sluice's own events from `info`, everything else from `warn`.
fn default_filter() -> Targets {
    Targets::new()
        .with_target("sluice", LevelFilter::INFO)
        .with_target("sluice_wire", LevelFilter::INFO)
        .with_default(LevelFilter::WARN)
}

/// Installs the subscriber: log lines on stderr, filtered by SLUICE_LOG (else RUST_LOG), a
/// `target=level,...` list as `tracing_subscriber::filter::Targets` reads it.
fn install_logging(format: LogFormat) -> Result<(), String> {
    let from_env = ["SLUICE_LOG", "RUST_LOG"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|value| !value.trim().is_empty()).map(|value| (name, value)));
    let filter = match from_env {
        None => default_filter(),
        Some((name, value)) => value.parse::<Targets>().map_err(|error| {
            format!("{name}={value:?} is not a log filter ({error}): write e.g. `info`, or `sluice=debug,warn`")
        })?,
    };
    let registry = tracing_subscriber::registry().with(filter);
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => registry.with(layer).try_init(),
        LogFormat::Json => {
            registry.with(layer.json().flatten_event(true).with_current_span(false).with_span_list(false)).try_init()
        }
    };
    installed.map_err(|error| format!("cannot install the log subscriber: {error}"))
}

fn load(path: &std::path::Path) -> Result<Config, ExitCode> {
    Config::load(path).map_err(|error| {
        report(&error);
        ExitCode::from(2)
    })
}

/// Prints the error report (and, with `--log-format json`, logs it as an `error` event first).
fn report(error: &(dyn std::error::Error + 'static)) {
    let text = cli::error_report(error);
    if LOG_FORMAT.get() == Some(&LogFormat::Json) {
        tracing::error!(error = %text, "{text}");
    }
    eprintln!("sluice: {text}");
}

async fn run(command: Command) -> ExitCode {
    match command {
        Command::Completions { .. } => ExitCode::SUCCESS,
        Command::Check { config, wait } => {
            let config = match load(&config) {
                Ok(config) => config,
                Err(code) => return code,
            };
            match cli::check(&config, wait).await {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(error) => fail(&error),
            }
        }
        Command::Discover { config, json } => {
            let config = match load(&config) {
                Ok(config) => config,
                Err(code) => return code,
            };
            match cli::discover(&config, json).await {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(error) => fail(&error),
            }
        }
        Command::Status { config, dest, json } => {
            let config = match load(&config) {
                Ok(config) => config,
                Err(code) => return code,
            };
            let target = match config.destination_target(dest.as_deref(), |name| std::env::var(name).ok()) {
                Ok(target) => target,
                Err(error) => {
                    report(&error);
                    return ExitCode::from(2);
                }
            };
            match sluice::status::status(&config, &target, json).await {
                Ok((text, reached)) => {
                    print!("{text}");
                    if reached {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(error) => fail(&error),
            }
        }
        Command::Write { config, options } => {
            let config = match load(&config) {
                Ok(config) => config,
                Err(code) => return code,
            };
            let stop = StopSignal::new();
            spawn_signal_handler(stop.clone());
            let started = Instant::now();
            let mut progress = |summary: &sluice::write::WriteSummary| {
                tracing::debug!(lines = summary.lines, records = summary.records, "chunk committed");
            };
            match sluice::write::write(&config, &options, &stop, &mut progress).await {
                Ok(summary) => {
                    println!("{}", cli::write_summary_line(&summary, started.elapsed()));
                    ExitCode::SUCCESS
                }
                Err(error) => fail(&error),
            }
        }
        Command::Mirror { config, mode } => {
            let config = match sluice::mirror::MirrorConfig::load(&config) {
                Ok(config) => config,
                Err(error) => {
                    report(&error);
                    return ExitCode::from(2);
                }
            };
            let stop = StopSignal::new();
            spawn_signal_handler(stop.clone());
            let started = Instant::now();
            let mut progress = |summary: &sluice::mirror::MirrorSummary| {
                tracing::debug!(records = summary.records, chunks = summary.chunks, "chunk committed");
            };
            match sluice::mirror::mirror(&config, mode, &stop, &mut progress).await {
                Ok(summary) => {
                    println!("{}", cli::mirror_summary_line(&summary, started.elapsed()));
                    ExitCode::SUCCESS
                }
                Err(error) => fail(&error),
            }
        }
        Command::Read { config, options } => {
            let config = match load(&config) {
                Ok(config) => config,
                Err(code) => return code,
            };
            let target =
                match config.destination_target(options.destination.as_deref(), |name| std::env::var(name).ok()) {
                    Ok(target) => target,
                    Err(error) => {
                        report(&error);
                        return ExitCode::from(2);
                    }
                };
            let mode = match options.mode {
                read::ReadMode::Bounded => "bounded",
                read::ReadMode::Continuous => "continuous",
            };
            let version = env!("CARGO_PKG_VERSION");
            tracing::info!(version, mode, destination = %target, "sluice {version}: read --mode {mode} into {target}");
            let stop = StopSignal::new();
            spawn_signal_handler(stop.clone());
            let terminal = std::io::stdout().is_terminal();
            let started = Instant::now();
            let mut last_draw: Option<Instant> = None;
            let mut draw = |progress: &ReadProgress| {
                // At most ten redraws a second; the first one right away.
                if terminal && last_draw.is_none_or(|at| at.elapsed().as_millis() >= 100) {
                    last_draw = Some(Instant::now());
                    let mut out = std::io::stdout().lock();
                    let _ = write!(out, "\r\x1b[K{}", cli::progress_line(progress));
                    let _ = out.flush();
                }
            };
            match read::read(&config, &options, &target, &stop, &mut draw).await {
                Ok(progress) => {
                    if terminal {
                        // Replace the progress line with the summary.
                        print!("\r\x1b[K");
                    }
                    println!("{}", cli::summary_line(&progress, started.elapsed()));
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    if terminal {
                        // Keep the last progress line: it shows where the run stopped.
                        println!();
                    }
                    fail(&error)
                }
            }
        }
    }
}

/// Reports `error` with its causes on stderr; exit code 1.
fn fail(error: &(dyn std::error::Error + 'static)) -> ExitCode {
    report(error);
    ExitCode::FAILURE
}

/// SIGINT, SIGTERM and SIGHUP ask for a clean stop: a continuous run writes and certifies the
/// epochs in progress and exits 0; a bounded run ends at once, unfinished (exit 1; the next
/// bounded run discards it). SIGHUP is a stop too (a closed terminal or session), not a reload:
/// to change the configuration, stop and start again.
///
/// A second signal while the stop is under way (the writer may be waiting on a slow disk or a
/// locked table) exits at once with 128 + its number (130 for SIGINT, 143 SIGTERM, 129 SIGHUP),
/// without waiting for anything to be certified: the destination is left as a crash at that
/// moment leaves it, which it is built to survive (the next run resumes from the last certified
/// position and rewrites what was not certified; nothing certified is lost or duplicated).
fn spawn_signal_handler(stop: StopSignal) {
    use tokio::signal::unix::{signal, SignalKind};
    tokio::spawn(async move {
        let (Ok(mut interrupt), Ok(mut terminate), Ok(mut hangup)) =
            (signal(SignalKind::interrupt()), signal(SignalKind::terminate()), signal(SignalKind::hangup()))
        else {
            tracing::warn!("cannot install the signal handlers: SIGINT, SIGTERM and SIGHUP end the process at once");
            return;
        };
        loop {
            let (signal, number) = tokio::select! {
                _ = interrupt.recv() => ("SIGINT", 2),
                _ = terminate.recv() => ("SIGTERM", 15),
                _ = hangup.recv() => ("SIGHUP", 1),
            };
            if stop.is_stopped() {
                tracing::warn!(
                    signal,
                    "second signal ({signal}): exiting at once without certifying the epochs in progress; the \
                     destination stays as a crash would leave it, and the next run resumes from the last certified \
                     position"
                );
                std::process::exit(128 + number);
            }
            tracing::info!(
                signal,
                "{signal}: stopping after the current epoch (a second signal exits at once, without certifying it)"
            );
            stop.stop();
        }
    });
}
