#!/bin/bash
# H200 run 13: the 27B qwen35 shape on the GPU, where its decode token's time goes.
#   profile  main's binary (.carry/gpu13/g13.tar.xz: new, new.test): the dispatch census, the
#            per-phase GPU times, chained and plain tg128; the qwen35 numerics tests on the card
# Results in $OUT/run13-MODE.log.
MODE=${1:-profile}
S=$(date +%s)
C=$PWD/.carry/gpu13
R=$PWD
exec > >(tee "${OUT:-/tmp}/run13-$MODE.log") 2>&1
. "$PWD/tools/bench/h200/lib.sh"
cd /tmp
case $MODE in
profile)
	unxz $C/g13.tar.xz | tar x -C /tmp
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	t "synth 27b"; /tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf 2>&1 | tail -1
	t "numerics"
	( cd $R/infer/gpu && timeout 120 /tmp/new.test -test.run 'Qwen35|DeltaNet|Recurrent|Conv' 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|differ|panic" | head -20 )
	t "bonsai gpu 27"; timeout 150 /tmp/new gpu --model 27.gguf -p 16 -n 64 2>&1 | f | grep -v "^\s*$"
	t "bench 27"; timeout 120 /tmp/new bench --model 27.gguf --backend gpu -p 512 -n 128 -r 3 2>&1 | grep -E "pp512|tg128"
	timeout 120 /tmp/new bench --model 27.gguf --backend gpu -p 0 -n 128 -r 3 --chained=false 2>&1 | grep -E "tg128"
	;;
esac
t done
