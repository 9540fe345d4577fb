//! A `sluice read` running in the background, for tests that signal, kill or wait on it while
//! they do something else (produce, kill a broker, cut the network, fill the disk).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::sluice_binary;

/// How a `sluice` process ended.
#[derive(Debug)]
pub struct Outcome {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// A running `sluice read`. Its stdout and stderr go to files in `logs`. Dropping it kills the
/// process (SIGKILL) if it still runs, so no test path leaves one behind.
pub struct RunningSluice {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl RunningSluice {
    /// `sluice read --config <config> --dest <dest> --mode <mode>`, with extra environment.
    pub fn start(logs: &Path, config: &Path, dest: &Path, mode: &str, env: &[(&str, &str)]) -> RunningSluice {
        RunningSluice::start_with(logs, config, Some(dest), mode, env)
    }

    /// [`RunningSluice::start`] without `--dest` when `dest` is `None` (the configuration's
    /// `destination` is used).
    pub fn start_with(
        logs: &Path,
        config: &Path,
        dest: Option<&Path>,
        mode: &str,
        env: &[(&str, &str)],
    ) -> RunningSluice {
        let mut args: Vec<std::ffi::OsString> = vec!["read".into(), "--config".into(), config.into()];
        if let Some(dest) = dest {
            args.extend(["--dest".into(), dest.into()]);
        }
        args.extend(["--mode".into(), mode.into()]);
        RunningSluice::start_args(logs, &args, env)
    }

    /// `sluice <args>` (any command and flags), with extra environment.
    pub fn start_args(logs: &Path, args: &[impl AsRef<std::ffi::OsStr>], env: &[(&str, &str)]) -> RunningSluice {
        static RUN: AtomicU32 = AtomicU32::new(0);
        let run = RUN.fetch_add(1, Ordering::Relaxed);
        fs::create_dir_all(logs).expect("create log directory");
        let stdout = logs.join(format!("run-{run}.stdout"));
        let stderr = logs.join(format!("run-{run}.stderr"));
        let mut command = Command::new(sluice_binary());
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(File::create(&stdout).expect("create stdout log"))
            .stderr(File::create(&stderr).expect("create stderr log"));
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn().expect("start sluice");
        RunningSluice { child, stdout, stderr }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr_text(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn outcome(&self, status: ExitStatus) -> Outcome {
        Outcome { status, stdout: fs::read_to_string(&self.stdout).unwrap_or_default(), stderr: self.stderr_text() }
    }

    /// The exit status if the process has ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait on sluice")
    }

    /// Panics (naming the status and stderr) when the process ended on its own.
    pub fn assert_running(&mut self, context: &str) {
        if let Some(status) = self.exited() {
            panic!("sluice ended unexpectedly ({context}) with {status:?}; stderr:\n{}", self.stderr_text());
        }
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status().expect("run `kill`");
        assert!(status.success(), "kill {signal} {} failed: {status:?}", self.child.id());
    }

    /// Waits (bounded) for the process to end on its own.
    pub fn wait(&mut self, timeout: Duration) -> Outcome {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return self.outcome(status);
            }
            assert!(
                Instant::now() < deadline,
                "sluice did not exit within {timeout:?}; stderr so far:\n{}",
                self.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then the clean exit (status 0) within `timeout`.
    pub fn terminate(mut self, timeout: Duration) -> Outcome {
        self.assert_running("before SIGTERM");
        self.signal("-TERM");
        let outcome = self.wait(timeout);
        assert_eq!(outcome.status.code(), Some(0), "SIGTERM must end a run cleanly; stderr:\n{}", outcome.stderr);
        outcome
    }

    /// SIGKILL, and reap it.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RunningSluice {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
