#!/usr/bin/env python3
"""For every row `autoplan validate` scores, the inter-node traffic its reading puts on one GPU
against the step the row implies: the sum of the `time` column (each collective priced alone on
the link) of the collectives whose group spans nodes, from `validate --explain ID`. A reading
whose traffic exceeds the measured step is one the run cannot have had (docs/validation.md,
Llama 3 405B's sharding). Prints the rows above a share of the step (default 0.7).

    python3 tools/inter_node_check.py data/published_runs.csv data/published_runs_2.csv
"""
import json
import re
import subprocess
import sys

AUTOPLAN = "./target/release/autoplan"
UNIT = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}
ROW = re.compile(
    r"(\d+)×(\d+) nodes\s+[\d.]+ [KMG]?i?B\s+[\d.]+\s+[\d.]+ (s|ms|µs)\s+([\d.]+) (s|ms|µs)"
)


def main(files, share=0.7):
    runs = [a for f in files for a in ("--runs", f)]
    out = subprocess.run([AUTOPLAN, "validate", *runs, "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    for row in json.loads(out)["rows"]:
        text = subprocess.run([AUTOPLAN, "validate", *runs, "--explain", row["id"]],
                              capture_output=True, text=True, check=True).stdout
        m = re.search(r"step time: measured ([\d.]+) s", text)
        if not m:
            continue
        step = float(m.group(1))
        net = sum(float(r.group(4)) * UNIT[r.group(5)]
                  for r in map(ROW.search, text.splitlines())
                  if r and int(r.group(2)) > 1)
        if net > share * step:
            print(f"{row['id']:50s} inter-node {net:8.2f} s of a {step:8.2f} s step "
                  f"({net / step:.2f})")


if __name__ == "__main__":
    main(sys.argv[1:])
