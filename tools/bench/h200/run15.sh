#!/bin/bash
# H200 run 15: each kernel's marginal cost in the 27B qwen35 decode token (bonsai gpu --repeat K=2, the
# chained greedy loop), binary new of .carry/gpu14. Results in $OUT/run15.log.
S=$(date +%s)
C=$PWD/.carry/gpu14
exec > >(tee "${OUT:-/tmp}/run15.log") 2>&1
. "$PWD/tools/bench/h200/lib.sh"
cd /tmp
unxz $C/g14.tar.xz | tar x -C /tmp
t "synth 27b"; /tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf 2>&1 | tail -1
g() { timeout 60 /tmp/new gpu --model 27.gguf -p 16 -n 128 --plain=false "$@" 2>&1 | f | grep -E "^chained"; }
t "census"; timeout 60 /tmp/new gpu --model 27.gguf -p 16 -n 128 --plain=false 2>&1 | f | grep -E "dispatches|chained"
for k in q1_xq act_q8 f32_matmul quantize q1_w1 unary rmsnorm deltanet deltanet_in copy_cols norm_rope attn_pv attn_qk attn_sum; do
	echo "repeat $k=2: $(g --repeat $k=2)"
done
echo "again: $(g)"
t done
