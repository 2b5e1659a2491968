//! The names every elector derives the same way when none is configured: contenders of one
//! application meet under the name of their binary, and each member is told apart by host,
//! process and start time (goNELI's defaults).

/// Replaces every character outside `[a-zA-Z0-9._-]` with `_` (goNELI's `Sanitise`).
pub fn sanitise(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The running binary's file name, sanitised: the default name of an election.
pub(crate) fn binary_name() -> String {
    let exe = std::env::current_exe().ok();
    let name = exe
        .as_ref()
        .and_then(|p| p.file_stem())
        .and_then(|s| s.to_str())
        .unwrap_or("harvester");
    sanitise(name)
}

/// `<host>_<pid>_<unix secs>`: the default member name.
pub(crate) fn member_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into());
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("{host}_{}_{secs}", std::process::id())
}
