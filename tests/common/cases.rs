//! The cases whose top-10 plans every framework test checks (issue 18 "Done when").
#![allow(dead_code)]

/// (model, cluster, space): the README's case, the four search goldens, the three.
pub const CASES: [(&str, &str, &str); 7] = [
    ("deepseek-v3", "h800x2048", "default"),
    ("llama3-8b", "a100x64", "default"),
    ("gpt3-175b", "a100x1024", "default"),
    ("mixtral-8x22b", "h100x256", "moe"),
    ("llama3-70b", "dgx-h100", "default"),
    ("llama3.1-405b", "h100x16384", "default"),
    ("deepseek-v2", "a100x64", "default"),
];
