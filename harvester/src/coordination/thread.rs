//! A thread of its own with a single-threaded runtime, for the electors (and Rink) whose
//! coordination clients are async: their keep-alives and campaigns must not wait behind an
//! application's busy or blocked runtime, or a healthy leader would lose its lease.

use crate::error::Error;
use crate::Result;

/// Spawns `name` and hands `body` the thread's runtime, or the error building it (`what`
/// names the component in it), so the caller reports either through its own channels.
pub(crate) fn spawn_with_runtime<F>(name: &str, what: &str, body: F) -> Result<()>
where
    F: FnOnce(std::result::Result<tokio::runtime::Runtime, Error>) + Send + 'static,
{
    let runtime_error = format!("start the {what}'s runtime");
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            body(
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|source| Error::Io {
                        action: runtime_error,
                        source,
                    }),
            );
        })
        .map_err(|source| Error::Io {
            action: format!("spawn the {what} thread"),
            source,
        })?;
    Ok(())
}
