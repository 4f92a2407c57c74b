//! SIGINT and SIGTERM: the command asks its run to stop (the run's `Stop`), what was written so
//! far is flushed (stdout, replay storage), and the process exits with 128 + the signal's number.

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
