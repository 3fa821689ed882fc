//! `partner-domain` stays pure: no web framework, database, async runtime or HTTP client in
//! its dependency tree (normal and build dependencies, with every feature on).

#![allow(clippy::expect_used, clippy::indexing_slicing)]

/// `cargo tree -p partner-domain` with `args`, one crate (or feature) a line, no prefix.
fn cargo_tree(args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "-p",
            "partner-domain",
            "--prefix",
            "none",
            "--offline",
        ])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn no_io_crates_in_the_dependency_tree() {
    let tree = cargo_tree(&["-e", "normal,build", "--all-features"]);
    assert!(
        tree.lines().any(|l| l.starts_with("partner-domain ")),
        "unexpected output: {tree}"
    );
    let forbidden = [
        "actix", "diesel", "tokio", "reqwest", "deadpool", "hyper", "mio",
    ];
    let hits: Vec<&str> = tree
        .lines()
        .filter(|l| forbidden.iter().any(|f| l.starts_with(f)))
        .collect();
    assert!(
        hits.is_empty(),
        "partner-domain depends on I/O crates: {hits:?}"
    );
}

/// The domain inherits none of the server's features: `uuid` without `v4` or `fast-rng` (every id
/// is drawn from the injected `Random`), so `rand` is not in its tree.
#[test]
fn no_server_only_features() {
    let tree = cargo_tree(&["-e", "normal,build,features"]);
    assert!(
        tree.lines()
            .any(|l| l.starts_with("uuid feature \"serde\"")),
        "unexpected output: {tree}"
    );
    let inherited: Vec<&str> = tree
        .lines()
        .filter(|l| {
            l.starts_with("rand ")
                || l.starts_with("uuid feature \"fast-rng\"")
                || l.starts_with("uuid feature \"v4\"")
        })
        .collect();
    assert!(
        inherited.is_empty(),
        "partner-domain inherits server-only features: {inherited:?}"
    );
}
