//! The bundled cluster library (`clusters/*.toml`, embedded in the binary) and the resolution of
//! a `--cluster` argument: a bundled name or a cluster TOML path.

use std::path::Path;

use autoplan_input::{InputError, Source};

use crate::Cluster;

/// `(name, TOML text)`, sorted by name; the name is the file stem and the file's `name`.
const BUNDLED: &[(&str, &str)] = &[
    (
        "a100x1024",
        include_str!("../../../clusters/a100x1024.toml"),
    ),
    ("a100x64", include_str!("../../../clusters/a100x64.toml")),
    ("b200x256", include_str!("../../../clusters/b200x256.toml")),
    ("b300x256", include_str!("../../../clusters/b300x256.toml")),
    (
        "dgx-a100-40gb",
        include_str!("../../../clusters/dgx-a100-40gb.toml"),
    ),
    ("dgx-h100", include_str!("../../../clusters/dgx-h100.toml")),
    (
        "dgx2-v100",
        include_str!("../../../clusters/dgx2-v100.toml"),
    ),
    (
        "gb200-nvl72x16",
        include_str!("../../../clusters/gb200-nvl72x16.toml"),
    ),
    (
        "gb200-nvl72x4",
        include_str!("../../../clusters/gb200-nvl72x4.toml"),
    ),
    (
        "gb300-nvl72x4",
        include_str!("../../../clusters/gb300-nvl72x4.toml"),
    ),
    (
        "grand-teton-h100",
        include_str!("../../../clusters/grand-teton-h100.toml"),
    ),
    (
        "h100x16384",
        include_str!("../../../clusters/h100x16384.toml"),
    ),
    ("h100x256", include_str!("../../../clusters/h100x256.toml")),
    ("h200x128", include_str!("../../../clusters/h200x128.toml")),
    (
        "h800x2048",
        include_str!("../../../clusters/h800x2048.toml"),
    ),
    (
        "jean-zay-a100",
        include_str!("../../../clusters/jean-zay-a100.toml"),
    ),
    ("l40sx64", include_str!("../../../clusters/l40sx64.toml")),
    (
        "selene-a100",
        include_str!("../../../clusters/selene-a100.toml"),
    ),
    (
        "thesis-2node",
        include_str!("../../../clusters/thesis-2node.toml"),
    ),
    (
        "thesis-4node",
        include_str!("../../../clusters/thesis-4node.toml"),
    ),
];

/// The bundled clusters as `(name, TOML text)`, sorted by name.
pub fn bundled_clusters() -> &'static [(&'static str, &'static str)] {
    BUNDLED
}

/// The TOML text of a bundled cluster.
pub fn bundled_cluster_text(name: &str) -> Option<&'static str> {
    BUNDLED.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Why a `--cluster` argument did not resolve.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Neither an existing file nor a bundled name.
    #[error("unknown cluster `{name}`: not a file, and not a bundled cluster (bundled: {})", known.join(", "))]
    Unknown {
        name: String,
        known: Vec<&'static str>,
    },
    /// The file (or bundled text) is invalid.
    #[error(transparent)]
    Input(#[from] InputError),
}

/// Resolve a bundled name (`a100x64`) or a cluster TOML path. Files take precedence over
/// bundled names; a bundled cluster's errors name `clusters/<name>.toml`.
///
/// ```
/// let c = autoplan_cluster::resolve_cluster("a100x64").unwrap();
/// assert_eq!((c.nodes, c.gpus()), (8, 64));
/// assert!(autoplan_cluster::resolve_cluster("no-such-cluster").is_err());
/// ```
pub fn resolve_cluster(name_or_path: &str) -> Result<Cluster, ResolveError> {
    let path = Path::new(name_or_path);
    if path.is_file() {
        return Ok(Cluster::from_toml(&Source::read(path)?)?);
    }
    match bundled_cluster_text(name_or_path) {
        Some(text) => {
            let src = Source::new(format!("clusters/{name_or_path}.toml"), text);
            Ok(Cluster::from_toml(&src)?)
        }
        None => Err(ResolveError::Unknown {
            name: name_or_path.to_string(),
            known: BUNDLED.iter().map(|(n, _)| *n).collect(),
        }),
    }
}
