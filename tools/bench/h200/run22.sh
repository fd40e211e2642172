#!/bin/bash
# H200 run 22: run 21's figures with the final binary's defaults (lut4s the prompt GEMM without an option):
# 8B and 1.7B pp512 and tg128 as `bonsai bench` runs them by default, q1_gemm2 (gemm2) beside them.
# No llama.cpp build (run 21 measured it on the same card type the same day).
# Carried: .gl/, .carry/gpu22/g22.tar.xz (new: bonsai built as run 21's header says). One call:
# `bash tools/bench/h200/run22.sh 2>&1 | tee $OUT/run22.log`.
S=$(date +%s)
C=$PWD/.carry/gpu22
. "$PWD/tools/bench/h200/lib.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
unxz $C/g22.tar.xz | tar x -C /tmp
cd /tmp
/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s8=$!
/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1
wait $s8
b() { timeout 60 /tmp/new bench --model $1.gguf --backend gpu "${@:2}" -r 3 2>&1 | grep -E "pp512|tg128"; }
for r in 1 2; do
	for m in 8 17; do
		t "$m, round $r"
		echo "default: $(b $m -p 512 -n 128)"
		echo "gemm2: $(BONSAI_GPU_GEMM=gemm2 b $m -p 512 -n 0)"
	done
done
t done
