//! A point where a store call waits for the test, so the test can act at exactly that moment.

use std::sync::Arc;

use tokio::sync::watch;

/// Held calls wait at the gate until it is opened; the test learns when one has arrived.
#[derive(Debug, Clone)]
pub struct Gate {
    reached: Arc<watch::Sender<bool>>,
    open: Arc<watch::Sender<bool>>,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// A closed gate nobody has reached yet.
    pub fn new() -> Self {
        Gate {
            reached: Arc::new(watch::channel(false).0),
            open: Arc::new(watch::channel(false).0),
        }
    }

    /// Resolves once a call is waiting at the gate (or has passed it).
    pub async fn reached(&self) {
        let _ = self.reached.subscribe().wait_for(|r| *r).await;
    }

    /// Lets every waiting and later call through.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Waits here until the gate is open.
    pub(super) async fn hold(&self) {
        let mut open = self.open.subscribe();
        self.reached.send_replace(true);
        let _ = open.wait_for(|o| *o).await;
    }
}
