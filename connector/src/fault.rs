//! Crash points for the reliability tests: named places in the write path where a test can make
//! the process die as abruptly as `kill -9` (no destructors, no flushing), deterministically.
//!
//! Compiled in only with the `fault-points` feature. The connector's integration tests enable it
//! (a dev-dependency of the crate on itself), so `cargo test` builds a `sluice` binary that has
//! them; `cargo build -p sluice` and the release scripts build one where [`point`] is an empty
//! inline function. `scripts/check-deps.sh` checks that the shipped static binary has none.
//!
//! A test sets `SLUICE_FAULT_POINT=<name>:<n>`: the `n`-th time (counting from 1) the process
//! reaches the point `name`, it aborts. With `<name>:<n>:stop` it stops itself instead
//! (`SIGSTOP`, as a frozen VM or a debugger would), and goes on where it was when it gets
//! `SIGCONT`: the zombie tests use it to freeze a worker at an exact step. The points:
//!
//! | name | where |
//! | - | - |
//! | `file.written` | a destination file's temporary copy is written, not yet fsynced |
//! | `file.synced` | ... fsynced, not yet renamed into place |
//! | `file.renamed` | ... renamed into place, directory not yet fsynced |
//! | `epoch.written` | an epoch's segment is in place, its checkpoint not yet certified |
//! | `epoch.certified` | the checkpoint is certified (of one epoch, or of the epochs of different partitions written before it), the writer has not yet reported it to the read loop |
//! | `run.begun` | a topic's run is recorded (bounded: earlier output cleared), nothing read yet |
//! | `run.finishing` | a bounded run read everything, `finish_run` not yet called |
//! | `pg.checkpoint.moved` | Postgres: the epoch's transaction moved the checkpoint, rows not yet copied |
//! | `pg.copy.started` | Postgres: a `COPY ... FROM STDIN` was accepted by the server, no data sent yet |
//! | `pg.rows.copied` | Postgres: ... rows and dead letters copied, not yet committed |
//! | `pg.committed` | Postgres: ... committed, not yet reported to the writer |
//! | `pg.run.moved` | Postgres: a bounded run's staged tables moved into place, not yet committed |
//! | `write.begun` | `sluice write`: producer started (exactly once: transactions initialised), position loaded, nothing sent |
//! | `write.records.sent` | ... a chunk's records handed to the producer, nothing committed |
//! | `write.dead_letters.written` | ... the chunk's dead letters appended and fsynced, position not yet sent |
//! | `write.position.sent` | ... the chunk's position record handed to the producer (at least once: before it is acknowledged), not committed |
//! | `write.committed` | ... the chunk's transaction committed (at least once: its position acknowledged), not yet counted |
//! | `mirror.begun` | `sluice mirror`: producer started (exactly once: transactions initialised), positions loaded and checked, nothing fetched |
//! | `mirror.records.sent` | ... a chunk's records handed to the producer, positions not yet sent |
//! | `mirror.position.sent` | ... the chunk's positions handed to the producer (at least once: its records acknowledged), not committed |
//! | `mirror.flushed` | ... exactly once, one process: the chunk's records and positions acknowledged, the commit not yet sent |
//! | `mirror.committed` | ... the chunk's transaction committed (at least once: its positions acknowledged), not yet counted |

/// The environment variable that arms one point.
pub const ENV: &str = "SLUICE_FAULT_POINT";

/// The environment variable that makes one point stall instead (`<name>:<n>`): the `n`-th time
/// a thread reaches it, that thread sleeps for good, as a writer stuck on a hung disk or a
/// locked table would. The signal tests use it to hold a graceful stop open.
pub const STALL_ENV: &str = "SLUICE_FAULT_STALL";

#[cfg(feature = "fault-points")]
mod armed {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;

    /// The armed point: its name, the count at which it fires, and whether it stops the
    /// process instead of aborting it.
    static ARMED: OnceLock<Option<(String, u64, bool)>> = OnceLock::new();
    static REACHED: AtomicU64 = AtomicU64::new(0);
    static STALL: OnceLock<Option<(String, u64, bool)>> = OnceLock::new();
    static STALL_REACHED: AtomicU64 = AtomicU64::new(0);

    /// `<name>:<n>[:stop]` from `variable`.
    fn parse(variable: &str) -> Option<(String, u64, bool)> {
        let value = std::env::var(variable).ok()?;
        let (value, stop) = match value.strip_suffix(":stop") {
            Some(rest) => (rest.to_string(), true),
            None => (value, false),
        };
        let (name, count) = value.rsplit_once(':').unwrap_or((value.as_str(), "1"));
        let count = count.parse().ok().filter(|n| *n >= 1)?;
        Some((name.to_string(), count, stop))
    }

    fn armed() -> &'static Option<(String, u64, bool)> {
        ARMED.get_or_init(|| parse(super::ENV))
    }

    /// The calling thread's id (`/proc/thread-self` links to `<pid>/task/<tid>`), else the
    /// process id.
    fn this_thread_id() -> String {
        std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|link| link.file_name().and_then(|tid| tid.to_str()).map(str::to_string))
            .unwrap_or_else(|| std::process::id().to_string())
    }

    pub fn point(name: &'static str) {
        if let Some((armed, count, stop)) = armed() {
            if armed == name && REACHED.fetch_add(1, Ordering::SeqCst) + 1 == *count {
                if *stop {
                    eprintln!("sluice: fault point {name} reached ({count}); stopping (SIGSTOP)");
                    // Every thread stops until SIGCONT. The signal names this thread's id, not
                    // the process id: a stop sent to the process is taken by a thread the kernel
                    // picks (the main one, usually), and on a loaded machine this thread ran on
                    // past the point (finishing the COPY it was to freeze in, committing it)
                    // before that one was scheduled and stopped the process. The thread a signal
                    // names takes it itself, before it returns from waiting for `kill`, as
                    // `raise(3)` does. `kill` exits at once, and is reaped then.
                    let stopped = std::process::Command::new("kill").args(["-STOP", &this_thread_id()]).status();
                    eprintln!("sluice: fault point {name}: continued ({stopped:?})");
                    return;
                }
                eprintln!("sluice: fault point {name} reached ({count}); aborting");
                std::process::abort();
            }
        }
        if let Some((stalled, count, _)) = STALL.get_or_init(|| parse(super::STALL_ENV)) {
            if stalled == name && STALL_REACHED.fetch_add(1, Ordering::SeqCst) + 1 == *count {
                eprintln!("sluice: fault point {name} reached ({count}); stalling this thread");
                loop {
                    std::thread::park();
                }
            }
        }
    }
}

/// Marks a crash point (see the module docs). Does nothing unless built with `fault-points` and
/// armed through [`ENV`]. The `file.*` and `epoch.*` points are reached on the read loop's
/// writer thread (`read.rs`); the count is per process, so `<name>:<n>` means the same step
/// whichever thread reaches it, and `abort` ends every thread at once, as `kill -9` does.
#[inline(always)]
pub fn point(name: &'static str) {
    #[cfg(feature = "fault-points")]
    armed::point(name);
    #[cfg(not(feature = "fault-points"))]
    let _ = name;
}
