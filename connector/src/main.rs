#![forbid(unsafe_code)]
//! The `sluice` command line: `check`, `discover` and `read`.

use std::io::{IsTerminal, Write};

use std::process::ExitCode;
use std::time::Instant;

use sluice::cli::{self, Command};
use sluice::config::Config;
use sluice::read::{self, ReadProgress, StopSignal};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match cli::parse(&args) {
        Ok(command) => command,
        Err(message) => {
            eprintln!("sluice: {message}\n\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    if let Command::Help = command {
        println!("{}", cli::USAGE);
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("sluice: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(command))
}

fn load(path: &std::path::Path) -> Result<Config, ExitCode> {
    Config::load(path).map_err(|error| {
        eprintln!("sluice: {error}");
        ExitCode::from(2)
    })
}

async fn run(command: Command) -> ExitCode {
    match command {
        Command::Help => ExitCode::SUCCESS,
        Command::Check { config } => {
            let config = match load(&config) {
                Ok(config) => config,
                Err(code) => return code,
            };
            match cli::check(&config).await {
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
        Command::Read { config, options } => {
            let config = match load(&config) {
                Ok(config) => config,
                Err(code) => return code,
            };
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
            match read::read(&config, &options, &stop, &mut draw).await {
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

fn fail(error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("sluice: {error}");
    ExitCode::FAILURE
}

/// SIGINT and SIGTERM end a continuous run after its current epoch, and a bounded run at once
/// (unfinished: the next bounded run discards it); a second signal exits at once.
fn spawn_signal_handler(stop: StopSignal) {
    tokio::spawn(async move {
        let Ok(mut terminate) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
            return;
        };
        for _ in 0..2 {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            if stop.is_stopped() {
                eprintln!("sluice: second signal, exiting without finishing the epoch (nothing uncertified is lost)");
                std::process::exit(130);
            }
            eprintln!("sluice: stopping after the current epoch");
            stop.stop();
        }
    });
}
