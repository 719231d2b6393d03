#!/usr/bin/env bash
# The NeMo performance-script lines autoplan's `validate` reads a NeMo-container row by
# (crates/evaluate/src/validate/harness.rs): fetches nemo-toolkit's source distributions
# (they carry `scripts/performance`, which the wheels do not) and prints those lines.
# Needs the Python package index; not run by CI. Usage: tools/nemo_perf_scripts.sh [DIR]
set -euo pipefail
dir="${1:-$(mktemp -d)}"
for v in 2.3.0 2.4.0 2.5.0 2.6.0; do
  pip download "nemo-toolkit==$v" --no-deps --no-binary :all: -q -d "$dir/$v" >/dev/null
  tar xzf "$dir/$v/nemo_toolkit-$v.tar.gz" -C "$dir/$v" \
    "nemo_toolkit-$v/scripts/performance" "nemo_toolkit-$v/nemo/collections/llm/recipes/deepseek_v3.py" \
    "nemo_toolkit-$v/nemo/collections/llm/recipes/precision/mixed_precision.py"
  root="$dir/$v/nemo_toolkit-$v"
  echo "== nemo-toolkit $v ($(tar tvzf "$dir/$v/nemo_toolkit-$v.tar.gz" | head -1 | awk '{print $4}'))"
  grep -n "grad_reduce_in_fp32 = False\|if compute_dtype is not None and compute_dtype.lower() == \"fp8\"" \
    "$root"/scripts/performance/*.py || true
  grep -n "args.gpu.lower() in \['h100'\]\|moe_enable_deepep\|moe_token_dispatcher_type\|performance_mode=True" \
    "$root/scripts/performance/llm/pretrain_deepseek_v3.py" || true
  grep -n "tp_comm_overlap=False\|def pretrain_performance_optimizations" \
    "$root/nemo/collections/llm/recipes/deepseek_v3.py" || true
  # FP8 parameter gathers per precision plugin, and MXFP8's gather without overlap.
  grep -n "^def bf16_with\|fp8_param_gather" \
    "$root/nemo/collections/llm/recipes/precision/mixed_precision.py" || true
  grep -n "overlap_param_gather = False" "$root"/scripts/performance/*.py || true
done
