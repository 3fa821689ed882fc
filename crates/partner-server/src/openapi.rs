//! `partner-server openapi --out DIR`: writes the OpenAPI documents the server serves at
//! `/api/v1/openapi.json` and `/internal/v1/openapi.json`, as committed under `docs/openapi/`.

use std::path::Path;

use anyhow::Context;
use partner_http::openapi;

/// The committed files and the documents they hold: `(file name, JSON text)`.
pub fn documents() -> anyhow::Result<[(&'static str, String); 2]> {
    Ok([
        ("partner.json", openapi::to_json(&openapi::partner())?),
        ("internal.json", openapi::to_json(&openapi::internal())?),
    ])
}

/// Writes both documents into `dir` (created when missing).
pub fn write(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, json) in documents()? {
        let path = dir.join(name);
        std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
