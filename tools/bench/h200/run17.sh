#!/bin/bash
# H200 run 17: the DeltaNet output gate rounded for its out projection and the shared β/α rounding, on the
# 27B qwen35 shape: mid (f0b3dfe, run 16's new) against new, alternating; numerics first.
# Carried: .gl/, .carry/gpu17/g17.tar.xz (mid, new, new.test). Results in $OUT/run17.log.
S=$(date +%s)
C=$PWD/.carry/gpu17
R=$PWD
exec > >(tee "${OUT:-/tmp}/run17.log") 2>&1
. "$PWD/tools/bench/h200/lib.sh"
cd /tmp
unxz $C/g17.tar.xz | tar x -C /tmp
t "synth 27b"; /tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf 2>&1 | tail -1
t "numerics"
( cd $R/infer/gpu && timeout 120 /tmp/new.test -test.run 'Qwen35|Hybrid|MatMul|DeltaNet|Fuse|Greedy' 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|differ|panic|_test.go" | head -20 )
t "bonsai gpu 27 new"; timeout 120 /tmp/new gpu --model 27.gguf -p 16 -n 64 2>&1 | f | grep -E "dispatches|^ +[a-z].*µs|chained" | sed -n '1p;/decode phases/,$p' | head -14
for r in 1 2; do
	for b in mid new; do echo "$b: $(timeout 90 /tmp/$b bench --model 27.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"; done
done
for b in mid new; do echo "$b sampled: $(timeout 60 /tmp/$b run --model 27.gguf --backend gpu --max-tokens 128 --format jsonl 'Tell me a long story about the sea, and then another one.' 2>/dev/null | tail -1 | grep -o '"decode_tps":[0-9.]*')"; done
t done
