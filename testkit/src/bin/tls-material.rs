//! Writes the throwaway TLS material of `testkit::tls` into a folder (for
//! `scripts/services.sh`, before it starts the secured servers); keeps a folder already written.

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: tls-material DIR");
        return ExitCode::from(2);
    };
    match testkit::tls::write_material(std::path::Path::new(&dir)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tls-material: {e}");
            ExitCode::FAILURE
        }
    }
}
