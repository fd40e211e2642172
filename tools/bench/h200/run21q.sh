#!/bin/bash
# H200 run 21, short form (for a session with under five minutes of device time left): run 21's first
# priorities without the llama.cpp build: numerics on the card, 8B pp512 with q1_gemm2 (auto) and each
# q1_lutgemm shape, the 27B decode before and after this session (census, tg128), the per-matrix GEMM times.
# Carried: .gl/, .carry/gpu21/g21.tar.xz. One call: `bash tools/bench/h200/run21q.sh 2>&1 | tee $OUT/run21q.log`.
S=$(date +%s)
C=$PWD/.carry/gpu21
R=$PWD
. "$PWD/tools/bench/h200/lib.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
unxz $C/g21.tar.xz | tar x -C /tmp
cd /tmp
/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s8=$!
/tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf >/dev/null 2>&1 & s27=$!
t "numerics on the H200"
( cd $R/infer/gpu && timeout 60 /tmp/new.test -test.run 'TestGemmTilesMatchCPU|TestLutGemmSharesPacking|TestFuseDeltaNetInputsIsTheOps|TestHeadNormGLUIsTheOps|TestSigmoidGateRounds' -test.v 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|max error|fused" | head -20 )
wait $s8
t "pp512 8"
for g in auto lut8 lut4 lut8s lut4s; do echo "$g: $(BONSAI_GPU_GEMM=$g timeout 40 /tmp/new bench --model 8.gguf --backend gpu -p 512 -n 0 -r 3 2>&1 | grep pp512)"; done
wait $s27
t "27B old and new"
echo "old tg: $(timeout 60 /tmp/oldb bench --model 27.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"
echo "new tg: $(timeout 60 /tmp/new bench --model 27.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"
t "per matrix, 512 tokens"
( cd $R/infer/gpu && BONSAI_GEMM_BENCH=512 BONSAI_GEMM_REPS=10 BONSAI_GEMM_KERNELS=r2x1,lut8,lut4,lut8s,lut4s timeout 100 /tmp/new.test -test.run TestGemmBench -test.v 2>&1 | f | grep -E "^gemm|FAIL|panic" )
t done
