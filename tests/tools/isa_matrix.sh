#!/usr/bin/env bash
# Runs the Python conformance suite once per combination of the kernels torch and kiln may pick on
# other x86-64 machines, all on this one: torch's ATen capability (ATEN_CPU_CAPABILITY), oneDNN's and
# MKL's instruction sets (ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS), OpenBLAS's core type and kiln's
# table (KILN_CPU_ISA). A test that passes natively but fails here depends on the oracle's ISA.
#   bash tests/tools/isa_matrix.sh [extra pytest args]
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" OMP_WAIT_POLICY=PASSIVE
combos=(
  "KILN_CPU_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 OPENBLAS_CORETYPE=Haswell"
  "KILN_CPU_ISA=base ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 MKL_ENABLE_INSTRUCTIONS=SSE4_2 OPENBLAS_CORETYPE=Nehalem"
  "ATEN_CPU_CAPABILITY=default"
  "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2"
  "ONEDNN_MAX_CPU_ISA=AVX512_CORE MKL_ENABLE_INSTRUCTIONS=AVX512"
  "KILN_CPU_ISA=base"
)
status=0
for c in "${combos[@]}"; do
  out=$(env $c python3 -m pytest -q -n "$(nproc)" -p no:cacheprovider -W ignore tests/python "$@" 2>&1 | grep -E '^FAILED|passed|failed')
  printf '%s\n  %s\n' "$c" "$(echo "$out" | tail -n 1)"
  echo "$out" | grep '^FAILED' | sed 's/^/  /'
  echo "$out" | grep -q '^FAILED' && status=1
done
exit $status
