//! Whether the database server has room for a scenario's backlog, checked before it is written
//! (a full disk mid-run loses the run and can take the server down).

use workloads::Backend;

/// Free bytes on the file system holding `dir` (`df`), if it can be read.
fn free_bytes(dir: &str) -> Option<f64> {
    let out = std::process::Command::new("df")
        .args(["-Pk", dir])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let free_kb: f64 = text
        .lines()
        .nth(1)?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()?;
    Some(free_kb * 1024.0)
}

/// Why a backlog of `rows` cannot be written to the server behind `url` now, if it cannot: the
/// free space where the server keeps its data against about three times the rows' size (the
/// table, the mark's new row versions, WAL or redo) plus 2 GB.
pub(super) async fn disk_shortfall(
    url: &str,
    backend: Backend,
    rows: u64,
    value_bytes: usize,
) -> Option<String> {
    let need = rows as f64 * (value_bytes as f64 + 150.0) * 3.0 + 2e9;
    let dir = crate::ground::server(backend).data_directory(url).await?;
    let free = free_bytes(&dir)?;
    (free < need).then(|| {
        format!(
            "{rows} rows need about {:.1} GB free for {} ({dir}); {:.1} GB are",
            need / 1e9,
            backend.name(),
            free / 1e9
        )
    })
}
