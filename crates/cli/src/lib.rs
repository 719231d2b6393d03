//! `autoplan`'s library half: the command implementations behind the binary, and re-exports of
//! the workspace crates so top-level tests and benches can reach them as `autoplan::...`.

pub mod cmd;
pub mod emit;
pub mod exit;
mod fmt;
pub mod outfile;

pub use autoplan_cluster as cluster;
pub use autoplan_cost as cost;
pub use autoplan_evaluate as evaluate;
pub use autoplan_graph as graph;
pub use autoplan_input as input;
pub use autoplan_memory as memory;
pub use autoplan_placement as placement;
pub use autoplan_plan as plan;
pub use autoplan_search as search;
pub use autoplan_sweep as sweep;
