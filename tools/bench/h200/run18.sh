#!/bin/bash
# H200 run 18: qwen35's DeltaNet output gate through act_q8 + q1_xq (not q1_matvec's folded x load) and the
# shared β/α rounding, on the 27B shape: mid (f0b3dfe, run 16's new) against new, alternating; numerics first.
# Carried: .gl/, .carry/gpu18/g18.tar.xz (mid, new, new.test). Results in $OUT/run18.log.
S=$(date +%s)
C=$PWD/.carry/gpu18
R=$PWD
exec > >(tee "${OUT:-/tmp}/run18.log") 2>&1
. "$PWD/tools/bench/h200/lib.sh"
cd /tmp
unxz $C/g18.tar.xz | tar x -C /tmp
t "synth 27b"; /tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf 2>&1 | tail -1
t "numerics"
( cd $R/infer/gpu && timeout 120 /tmp/new.test -test.run 'Qwen35|SwiGLU|Fuse' 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|differ|panic|_test.go" | head -20 )
t "bonsai gpu 27 new"; timeout 120 /tmp/new gpu --model 27.gguf -p 16 -n 64 2>&1 | f | grep -E "dispatches|^ +[a-z].*µs|chained" | sed -n '1p;/decode phases/,$p' | head -14
for r in 1 2; do
	for b in mid new; do echo "$b: $(timeout 90 /tmp/$b bench --model 27.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"; done
done

t done
