//! What the elector and assignor contracts share: one test per clause and implementation, and a
//! namespace of its own per test on the shared servers. Included with `#[path]` by the binaries
//! that hold a contract, so they compile nothing else of `common`.

/// One module per implementation (`(module, Variant)` of the enum `$kind`), holding one test
/// per clause: `module::clause` calls `super::run($kind::Variant, "clause", super::clause)`.
#[macro_export]
macro_rules! contract_cells {
    ($kind:ident; $(($module:ident, $variant:ident)),+ $(,)?; $clauses:tt) => {
        $( $crate::contract_cells!(@module $kind, $module, $variant, $clauses); )+
    };
    (@module $kind:ident, $module:ident, $variant:ident, [$($clause:ident),+ $(,)?]) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $clause() {
                    super::run(super::$kind::$variant, stringify!($clause), super::$clause).await
                }
            )+
        }
    };
}

/// A name no other test uses, for a group, path, bucket or prefix (`.` replaced: NATS bucket
/// names refuse it).
pub fn namespace(prefix: &str, test: &str) -> String {
    testkit::names::unique(&format!("{prefix}-{test}")).replace('.', "_")
}
