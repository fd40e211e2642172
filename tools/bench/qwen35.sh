#!/bin/bash
# qwen35.sh: the CPU side of BENCHMARKS.md's Bonsai-27B table. Builds bonsai,
# writes the 27B-shaped hybrid models it lacks into DIR (default
# ./bench-models, ~25 GB: Q1_0, Q2_0, PQ2_0, PTQ1_0), then runs compare.mjs
# on each. llama.cpp has no PQ2_0 or PTQ1_0, so those two run against its
# Q2_0 file of the same shape (--peer-model).
#
#   bash tools/bench/qwen35.sh [DIR] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-bench-models}
threads=${2:-2}
mkdir -p "$dir"
go build -o "$dir/bonsai" ./cmd/bonsai
for t in q1_0 q2_0 pq2_0 ptq1_0; do
	f="$dir/27b-qwen35-$t.gguf"
	[ -f "$f" ] || "$dir/bonsai" synth --arch qwen35 --shape 27b --type "$t" -o "$f"
done
for t in q1_0 q2_0 pq2_0 ptq1_0; do
	peer=()
	case $t in pq2_0 | ptq1_0) peer=(--peer-model "$dir/27b-qwen35-q2_0.gguf") ;; esac
	echo "=== 27b qwen35 $t  $(date -u +%H:%M:%S)  load $(cut -d' ' -f1-3 /proc/loadavg)"
	node tools/bench/compare.mjs --model "$dir/27b-qwen35-$t.gguf" "${peer[@]}" --bonsai "$dir/bonsai" \
		--threads "$threads" -p 512 -n 128 -r 2 | tail -4
done
