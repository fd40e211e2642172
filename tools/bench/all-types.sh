#!/bin/bash
# all-types.sh: the CPU table of BENCHMARKS.md. Builds bonsai, writes the
# synthetic Bonsai-shaped models it lacks into DIR (default ./bench-models,
# ~5 GB), then runs compare.mjs on each, one after the other.
#
#   bash tools/bench/all-types.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-bench-models}
mkdir -p "$dir"
go build -o "$dir/bonsai" ./cmd/bonsai
models=("1.7b q1_0" "4b q1_0" "1.7b q2_0" "1.7b q4_0" "1.7b q8_0" "1.7b q4_k")
for m in "${models[@]}"; do
	set -- $m
	f="$dir/$1-$2.gguf"
	[ -f "$f" ] || "$dir/bonsai" synth --shape "$1" --type "$2" -o "$f"
done
for m in "${models[@]}"; do
	set -- $m
	echo "=== $1 $2  $(date -u +%H:%M:%S)  load $(cut -d' ' -f1-3 /proc/loadavg)"
	node tools/bench/compare.mjs --model "$dir/$1-$2.gguf" --bonsai "$dir/bonsai" -p 512 -n 128 -r 2 | tail -4
done
