//! The space file's lists checked as they are read: degrees, enumerated names, booleans, and
//! the ZeRO constraints (each error located at its key).

use autoplan_input::{InputError, Source};
use autoplan_plan::knob::{Knob, Names};
use autoplan_plan::Plan;

use super::{canon, lookup, parse_knob, RawSpaceFile};

/// A list of degrees or sizes: not empty, each ≥ 1; sorted and deduplicated.
pub(super) fn degrees(
    src: &Source,
    sect: &str,
    name: &str,
    v: &[u32],
) -> Result<Vec<u32>, InputError> {
    if v.is_empty() {
        return Err(src.invalid(&[sect, name], "[]", "the list is empty"));
    }
    if let Some(z) = v.iter().find(|&&x| x == 0) {
        return Err(src.invalid(&[sect, name], z, "a degree or size must be ≥ 1"));
    }
    Ok(canon(v.to_vec(), |x| *x))
}

/// A list of names: not empty, each accepted by `parse`.
pub(super) fn enums(
    src: &Source,
    sect: &str,
    name: &str,
    v: &[String],
    parse: &dyn Fn(&str) -> Result<(), String>,
) -> Result<(), InputError> {
    if v.is_empty() {
        return Err(src.invalid(&[sect, name], "[]", "the list is empty"));
    }
    for s in v {
        parse(s).map_err(|r| src.invalid(&[sect, name], format!("\"{s}\""), r))?;
    }
    Ok(())
}

/// A list of booleans: not empty; sorted and deduplicated.
pub(super) fn bools(
    src: &Source,
    sect: &str,
    name: &str,
    v: &[bool],
) -> Result<Vec<bool>, InputError> {
    if v.is_empty() {
        return Err(src.invalid(&[sect, name], "[]", "the list is empty"));
    }
    Ok(canon(v.to_vec(), |x| *x))
}

/// A list of the file names of `names`' values, read with it.
pub(super) fn table<T: Copy + PartialEq>(
    src: &Source,
    sect: &str,
    name: &str,
    v: &[String],
    names: Names<T>,
) -> Result<Vec<T>, InputError> {
    enums(src, sect, name, v, &|s| lookup(names, s).map(|_| ()))?;
    Ok(v.iter().filter_map(|s| lookup(names, s).ok()).collect())
}

/// A list of plan-string values of `knob`, each read with `get`.
pub(super) fn values(
    src: &Source,
    sect: &str,
    name: &str,
    v: &[String],
    knob: Knob,
) -> Result<Vec<Plan>, InputError> {
    enums(src, sect, name, v, &|s| parse_knob(knob, s).map(|_| ()))?;
    Ok(v.iter().filter_map(|s| parse_knob(knob, s).ok()).collect())
}

/// `[memory] zero` and the `[constraints]` that have a lower bound.
pub(super) fn check_zero_constraints(src: &Source, raw: &RawSpaceFile) -> Result<(), InputError> {
    if raw.memory.zero.is_empty() {
        return Err(src.invalid(&["memory", "zero"], "[]", "the list is empty"));
    }
    if let Some(z) = raw.memory.zero.iter().find(|z| z.zero().is_none()) {
        return Err(src.invalid(&["memory", "zero"], z, autoplan_plan::zero::ZERO_EXPECTED));
    }
    let c = &raw.constraints;
    if c.max_pp == Some(0) {
        return Err(src.invalid(&["constraints", "max_pp"], 0, "must be ≥ 1"));
    }
    if c.min_microbatches_per_stage == Some(0) {
        return Err(src.invalid(
            &["constraints", "min_microbatches_per_stage"],
            0,
            "must be ≥ 1",
        ));
    }
    Ok(())
}
