//! SIGINT and SIGTERM: the run stops, and what was written so far is flushed (stdout, replay
//! storage) before the process exits with 128 + the signal's number.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Interrupt,
    Terminate,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }

    pub fn exit_code(self) -> u8 {
        match self {
            Signal::Interrupt => 130,
            Signal::Terminate => 143,
        }
    }
}

/// Resolves at the first SIGINT or SIGTERM; never when the handlers cannot be installed.
#[cfg(unix)]
pub async fn shutdown() -> Signal {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => Signal::Interrupt,
        _ = terminate.recv() => Signal::Terminate,
    }
}

#[cfg(not(unix))]
pub async fn shutdown() -> Signal {
    let _ = tokio::signal::ctrl_c().await;
    Signal::Interrupt
}

/// The process-wide request to stop, set once a signal arrives: long-running work (the job
/// orchestrator) watches it to clean up before the process exits.
fn stop_channel() -> &'static tokio::sync::watch::Sender<bool> {
    static STOP: std::sync::OnceLock<tokio::sync::watch::Sender<bool>> = std::sync::OnceLock::new();
    STOP.get_or_init(|| tokio::sync::watch::channel(false).0)
}

/// Asks every run in the process to stop.
pub fn request_stop() {
    stop_channel().send_replace(true);
}

/// Resolves once a stop was requested.
pub async fn stop_requested() {
    let mut requested = stop_channel().subscribe();
    let _ = requested.wait_for(|stop| *stop).await;
}
