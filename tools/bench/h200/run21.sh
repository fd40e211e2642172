#!/bin/bash
# H200 run 21: the table-lookup prompt GEMM (q1_lutgemm: lut4/lut8 double-buffered, lut4s/lut8s with two
# barriers per slice) against q1_gemm2 (auto): its numerics on the card, per matrix at 512 tokens
# (TestGemmBench), and pp512 end to end on the 8B and 1.7B shapes, kernels alternating; then the 27B qwen35
# decode's census and each kernel's marginal cost (--repeat K=2), for the next 27B change.
# Carried: .gl/, .carry/gpu21/g21.tar.xz (new, new.test). One device call:
# `set -o pipefail; bash tools/bench/h200/run21.sh 2>&1 | tee $OUT/run21.log`.
S=$(date +%s)
C=$PWD/.carry/gpu21
R=$PWD
. "$PWD/tools/bench/h200/lib.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
unxz $C/g21.tar.xz | tar x -C /tmp
cd /tmp
/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s8=$!
/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s17=$!
/tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf >/dev/null 2>&1 & s27=$!
t "numerics on the H200"
( cd $R/infer/gpu && timeout 150 /tmp/new.test -test.run 'TestGemmTilesMatchCPU|TestGreedy' -test.v 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|max error|dispatches" | head -30 )
t "per matrix, 512 tokens"
( cd $R/infer/gpu && BONSAI_GEMM_BENCH=512 timeout 240 /tmp/new.test -test.run TestGemmBench -test.v 2>&1 | f | grep -E "^gemm|FAIL|panic" )
wait $s8 $s17
for m in 8 17; do
	t "pp512 $m"
	for r in 1 2; do
		for g in auto lut8 lut4 lut8s lut4s; do
			echo "$g: $(BONSAI_GPU_GEMM=$g timeout 60 /tmp/new bench --model $m.gguf --backend gpu -p 512 -n 0 -r 3 2>&1 | grep pp512)"
		done
	done
done
for g in auto lut8 lut8s; do t "8B prefill phases, 512 tokens, $g"; BONSAI_GPU_GEMM=$g timeout 60 /tmp/new gpu --model 8.gguf -p 512 -n 8 2>&1 | f | grep -A9 "prefill phases"; done
wait $s27
g() { timeout 40 /tmp/new gpu --model 27.gguf -p 16 -n 128 --plain=false "$@" 2>&1 | f | grep -E "^chained"; }
t "27B census"; timeout 60 /tmp/new gpu --model 27.gguf -p 16 -n 128 --plain=false 2>&1 | f | grep -E "dispatches|chained" | head -3
for k in q1_xq act_q8 f32_matmul quantize q1_w1 unary rmsnorm deltanet_step deltanet_in copy_cols norm_rope attn_pv attn_qk attn_sum; do
	echo "repeat $k=2: $(g --repeat $k=2)"
done
echo "again: $(g)"
t done
