#!/bin/bash
# H200 run 14: the fused DeltaNet input stage on the 27B qwen35 shape, old (main at 8387971) against new
# (.carry/gpu14/g14.tar.xz: old, new, new.test), alternating; numerics on the card first.
# Results in $OUT/run14.log.
S=$(date +%s)
C=$PWD/.carry/gpu14
R=$PWD
exec > >(tee "${OUT:-/tmp}/run14.log") 2>&1
. "$PWD/tools/bench/h200/lib.sh"
cd /tmp
unxz $C/g14.tar.xz | tar x -C /tmp
t "synth 27b"; /tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf 2>&1 | tail -1
t "numerics"
( cd $R/infer/gpu && timeout 120 /tmp/new.test -test.run 'FuseDeltaNet|Qwen35|DeltaNet|Hybrid' 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|differ|panic|_test.go" | head -20 )
t "bonsai gpu 27 new"; timeout 150 /tmp/new gpu --model 27.gguf -p 16 -n 64 2>&1 | f | grep -E "dispatches|^ +[a-z].*µs|chained" | head -24
for r in 1 2; do
	for b in old new; do echo "$b: $(timeout 90 /tmp/$b bench --model 27.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"; done
done
for b in old new; do echo "$b sampled: $(timeout 60 /tmp/$b run --model 27.gguf --backend gpu --max-tokens 128 --format jsonl 'Tell me a long story about the sea, and then another one.' 2>/dev/null | tail -1 | grep -o '"decode_tps":[0-9.]*')"; done
t done
