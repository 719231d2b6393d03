//! The bundled model library (`models/*.toml`, embedded in the binary) and the resolution of a
//! `--model` argument: a bundled name, a model TOML path, or a Hugging Face `config.json` path.

use std::path::Path;

use autoplan_input::{InputError, Source};

use crate::ModelSpec;

/// Every file of `models/`, by name (file stem), sorted.
static BUNDLED: &[(&str, &str)] = &[
    (
        "bloom-176b",
        include_str!("../../../models/bloom-176b.toml"),
    ),
    (
        "deepseek-v2",
        include_str!("../../../models/deepseek-v2.toml"),
    ),
    (
        "deepseek-v2-lite",
        include_str!("../../../models/deepseek-v2-lite.toml"),
    ),
    (
        "deepseek-v3",
        include_str!("../../../models/deepseek-v3.toml"),
    ),
    ("gpt-1.7b", include_str!("../../../models/gpt-1.7b.toml")),
    ("gpt-145b", include_str!("../../../models/gpt-145b.toml")),
    ("gpt-18b", include_str!("../../../models/gpt-18b.toml")),
    ("gpt-1t", include_str!("../../../models/gpt-1t.toml")),
    ("gpt-22b", include_str!("../../../models/gpt-22b.toml")),
    ("gpt-3.6b", include_str!("../../../models/gpt-3.6b.toml")),
    ("gpt-310b", include_str!("../../../models/gpt-310b.toml")),
    ("gpt-39b", include_str!("../../../models/gpt-39b.toml")),
    ("gpt-530b", include_str!("../../../models/gpt-530b.toml")),
    ("gpt-7.5b", include_str!("../../../models/gpt-7.5b.toml")),
    ("gpt-76b", include_str!("../../../models/gpt-76b.toml")),
    (
        "gpt-neox-20b",
        include_str!("../../../models/gpt-neox-20b.toml"),
    ),
    (
        "gpt-oss-120b",
        include_str!("../../../models/gpt-oss-120b.toml"),
    ),
    (
        "gpt-oss-20b",
        include_str!("../../../models/gpt-oss-20b.toml"),
    ),
    ("gpt2-1b", include_str!("../../../models/gpt2-1b.toml")),
    ("gpt2-2b", include_str!("../../../models/gpt2-2b.toml")),
    ("gpt2-4b", include_str!("../../../models/gpt2-4b.toml")),
    ("gpt2-8b", include_str!("../../../models/gpt2-8b.toml")),
    ("gpt3-175b", include_str!("../../../models/gpt3-175b.toml")),
    ("gpt3-20b", include_str!("../../../models/gpt3-20b.toml")),
    ("gpt3-5b", include_str!("../../../models/gpt3-5b.toml")),
    ("grok-1", include_str!("../../../models/grok-1.toml")),
    (
        "llama2-13b",
        include_str!("../../../models/llama2-13b.toml"),
    ),
    (
        "llama2-70b",
        include_str!("../../../models/llama2-70b.toml"),
    ),
    ("llama2-7b", include_str!("../../../models/llama2-7b.toml")),
    (
        "llama3-70b",
        include_str!("../../../models/llama3-70b.toml"),
    ),
    ("llama3-8b", include_str!("../../../models/llama3-8b.toml")),
    (
        "llama3.1-405b",
        include_str!("../../../models/llama3.1-405b.toml"),
    ),
    (
        "mixtral-8x22b",
        include_str!("../../../models/mixtral-8x22b.toml"),
    ),
    (
        "mixtral-8x7b",
        include_str!("../../../models/mixtral-8x7b.toml"),
    ),
    ("mpt-30b", include_str!("../../../models/mpt-30b.toml")),
    ("mpt-70b", include_str!("../../../models/mpt-70b.toml")),
    ("mpt-7b", include_str!("../../../models/mpt-7b.toml")),
    (
        "mt-nlg-530b",
        include_str!("../../../models/mt-nlg-530b.toml"),
    ),
    (
        "nemotron-22b",
        include_str!("../../../models/nemotron-22b.toml"),
    ),
    (
        "nemotron-340b",
        include_str!("../../../models/nemotron-340b.toml"),
    ),
    (
        "nemotron-4-15b",
        include_str!("../../../models/nemotron-4-15b.toml"),
    ),
    (
        "nemotron-8b",
        include_str!("../../../models/nemotron-8b.toml"),
    ),
    ("opt-175b", include_str!("../../../models/opt-175b.toml")),
    (
        "qwen3-235b-a22b",
        include_str!("../../../models/qwen3-235b-a22b.toml"),
    ),
    (
        "qwen3-30b-a3b",
        include_str!("../../../models/qwen3-30b-a3b.toml"),
    ),
    (
        "thesis-txl-12l-4e",
        include_str!("../../../models/thesis-txl-12l-4e.toml"),
    ),
    (
        "thesis-txl-145m",
        include_str!("../../../models/thesis-txl-145m.toml"),
    ),
    (
        "thesis-txl-24l-4e",
        include_str!("../../../models/thesis-txl-24l-4e.toml"),
    ),
    (
        "thesis-txl-45m",
        include_str!("../../../models/thesis-txl-45m.toml"),
    ),
    (
        "thesis-txl-8l-4e",
        include_str!("../../../models/thesis-txl-8l-4e.toml"),
    ),
    (
        "thesis-txl-94m",
        include_str!("../../../models/thesis-txl-94m.toml"),
    ),
];

/// The bundled models as `(name, TOML text)`, sorted by name.
pub fn bundled_models() -> &'static [(&'static str, &'static str)] {
    BUNDLED
}

/// The TOML text of a bundled model.
pub fn bundled_model_text(name: &str) -> Option<&'static str> {
    BUNDLED.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Why a `--model` argument did not resolve.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Neither a bundled name nor an existing file.
    #[error("unknown model `{name}`: not a file, and not a bundled model (bundled: {})", known.join(", "))]
    Unknown {
        name: String,
        known: Vec<&'static str>,
    },
    /// The file (or bundled text) is invalid.
    #[error(transparent)]
    Input(#[from] InputError),
}

/// Resolve a bundled name (`deepseek-v3`), a model TOML path, or a Hugging Face `config.json`
/// path (any `.json` file). Files take precedence over bundled names.
///
/// ```
/// let m = autoplan_graph::resolve_model("mixtral-8x7b").unwrap();
/// assert_eq!(m.moe.unwrap().top_k, 2);
/// assert!(autoplan_graph::resolve_model("no-such-model").is_err());
/// ```
pub fn resolve_model(name_or_path: &str) -> Result<ModelSpec, ResolveError> {
    let path = Path::new(name_or_path);
    if path.is_file() {
        let src = Source::read(path)?;
        let is_json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        return Ok(if is_json {
            ModelSpec::from_hf_config(&src, crate::Training::IMPORT_DEFAULT)?
        } else {
            ModelSpec::from_toml(&src)?
        });
    }
    match bundled_model_text(name_or_path) {
        Some(text) => {
            let src = Source::new(format!("models/{name_or_path}.toml"), text);
            Ok(ModelSpec::from_toml(&src)?)
        }
        None => Err(ResolveError::Unknown {
            name: name_or_path.to_string(),
            known: BUNDLED.iter().map(|(n, _)| *n).collect(),
        }),
    }
}
