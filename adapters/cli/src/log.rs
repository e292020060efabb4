//! `mcpwire serve`'s log: lines go to stderr through a bounded queue and a thread of
//! their own, so that serving never waits for stderr. With stderr a pipe nobody reads (a
//! stalled log driver: Docker's default log mode blocks the writer), a direct write would
//! block the task that logs, and with it every connection that task serves; here the
//! queue fills instead, the lines beyond it are dropped, and the next line that gets out
//! says how many.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};

/// Lines queued for stderr at most; a line beyond is dropped and counted.
pub(crate) const QUEUED: usize = 1024;

struct Logger {
    lines: SyncSender<String>,
    dropped: Arc<AtomicU64>,
}

static LOGGER: OnceLock<Logger> = OnceLock::new();

/// Queues `line` for stderr (the writer adds the newline); never blocks. The writer
/// thread starts with the first line.
pub(crate) fn line(line: String) {
    LOGGER
        .get_or_init(|| {
            let (lines, queue) = mpsc::sync_channel::<String>(QUEUED);
            let dropped = Arc::new(AtomicU64::new(0));
            let counted = Arc::clone(&dropped);
            // Without a thread the queue has no reader: every line is dropped and counted
            // rather than written on the serving path.
            let _ = std::thread::Builder::new()
                .name("mcpwire-log".into())
                .spawn(move || {
                    let stderr = std::io::stderr();
                    for line in queue {
                        let mut out = stderr.lock();
                        let lost = counted.swap(0, Ordering::Relaxed);
                        if lost > 0 {
                            let _ = writeln!(
                                out,
                                "mcpwire: {lost} log lines dropped: stderr was not read fast \
                                 enough"
                            );
                        }
                        let _ = writeln!(out, "{line}");
                    }
                });
            Logger { lines, dropped }
        })
        .send(line);
}

impl Logger {
    /// Queues `line`, or counts it dropped when the queue is full.
    fn send(&self, line: String) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.lines.try_send(line)
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_beyond_the_queue_are_dropped_and_counted_never_waited_for() {
        // A queue of two that nobody reads, as a stderr nobody reads leaves it.
        let (lines, queue) = mpsc::sync_channel::<String>(2);
        let logger = Logger {
            lines,
            dropped: Arc::new(AtomicU64::new(0)),
        };
        for n in 0..5 {
            logger.send(n.to_string());
        }
        assert_eq!(logger.dropped.load(Ordering::Relaxed), 3);
        assert_eq!(queue.try_iter().collect::<Vec<_>>(), ["0", "1"]);
        drop(queue);
        logger.send("after".into());
        assert_eq!(
            logger.dropped.load(Ordering::Relaxed),
            4,
            "no reader: dropped"
        );
    }
}
