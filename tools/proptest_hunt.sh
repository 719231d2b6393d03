#!/usr/bin/env bash
# Runs every property-test binary of the workspace N times (default 10), each run with a fresh
# random seed (proptest's default: PROPTEST_RNG_SEED unset), and lists the runs that failed.
# CI runs the same tests under one fixed seed (.ci/run), so that a random draw cannot turn a
# commit's CI red; this is where fresh draws are made. A failing draw writes its minimal case
# to the test's `.proptest-regressions` file (commit it with the fix).
# Usage: tools/proptest_hunt.sh [N]   (after `cargo test --release --no-run`; logs in $OUT)
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-10}"
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
unset PROPTEST_RNG_SEED
cargo test --release --workspace --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    t = m["target"]
    if "test" in t["kind"] and "/tests/" in t["src_path"]:
        src = open(t["src_path"]).read()
        if "proptest!" in src:
            print(t["src_path"].split("/tests/")[0], m["executable"])
' >"$out/bins.txt"
fails=0
for i in $(seq 1 "$n"); do
    while read -r crate bin; do
        name="$(basename "$crate")-$(basename "$bin" | sed 's/-[0-9a-f]*$//')"
        if ! (cd "$crate" && "$bin" -q >"$out/$name.$i.log" 2>&1); then
            echo "FAIL $name (run $i): $out/$name.$i.log"
            fails=$((fails + 1))
        fi
    done <"$out/bins.txt"
done
echo "$(wc -l <"$out/bins.txt") property-test binaries x $n runs: $fails failed (logs in $out)"
[ "$fails" -eq 0 ]
