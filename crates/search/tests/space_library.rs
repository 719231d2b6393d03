//! A space's collective `library` (docs/search.md): `cheapest` becomes `nccl-tuner` or `any`.

use autoplan_input::Source;
use autoplan_plan::AlgoMode;
use autoplan_search::Space;

fn quick_with(line: &str) -> Result<Space, String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../search_spaces/quick.toml"
    );
    let text = std::fs::read_to_string(path).expect("bundled quick space");
    let text = text.replace(
        "algo = [\"cheapest\"]",
        &format!("algo = [\"cheapest\"]\n{line}"),
    );
    Space::from_source(&Source::new("quick.toml", text)).map_err(|e| e.to_string())
}

#[test]
fn library_rewrites_cheapest() {
    assert_eq!(quick_with("").unwrap().algo, [AlgoMode::Cheapest]);
    assert_eq!(
        quick_with("library = \"any\"").unwrap().algo,
        [AlgoMode::Any]
    );
    assert_eq!(
        quick_with("library = \"nccl\"").unwrap().algo,
        [AlgoMode::NcclTuner]
    );
    let e = quick_with("library = \"mpi\"").unwrap_err();
    assert!(e.contains("knobs.library") && e.contains("mpi"), "{e}");
}
