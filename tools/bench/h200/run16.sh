#!/bin/bash
# H200 run 16: the 27B qwen35 decode after this round's kernels (fused DeltaNet inputs, deltanet_step,
# f32 decode split), old (main at 8387971) and new (f0b3dfe) alternating, beside llama.cpp CUDA built
# here from the oracle's source (sm_90, f16 KV, flash attention); 8B and 1.7B re-checked beside it.
# Carried: .gl/, .carry/gpu16/g16.tar.xz (old, new, new.test), .carry/llama/llama-src.tgz.
# Results in $OUT/run16.log.
S=$(date +%s)
C=$PWD/.carry/gpu16
R=$PWD
exec > >(tee "${OUT:-/tmp}/run16.log") 2>&1
. "$PWD/tools/bench/h200/lib.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
unxz $C/g16.tar.xz | tar x -C /tmp
cd /tmp
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
	-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
mkdir -p /tmp/llama && tar xzf $R/.carry/llama/llama-src.tgz -C /tmp/llama
( cd /tmp/llama && cmake -B build "${common[@]}" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA_QUANTS=f16-f16 \
	-DGGML_CUDA_NCCL=OFF >/tmp/cmake.log 2>&1 && nice -n 19 timeout 480 cmake --build build -j14 --target llama-bench >/tmp/build.log 2>&1
  echo "llama.cpp CUDA build rc=$?"; tail -2 /tmp/build.log ) & bc=$!
/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s8=$!
/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s17=$!
t "synth 27b"; /tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf 2>&1 | tail -1
t "numerics on the H200"
( cd $R/infer/gpu && timeout 150 /tmp/new.test -test.run 'FuseDeltaNet|TestDeltaNet|Qwen35|Hybrid|TestMatMul|TestGreedy|TestFusedDecode' 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|differ|panic|_test.go" | head -20 )
t "bonsai gpu 27 new"; timeout 120 /tmp/new gpu --model 27.gguf -p 16 -n 64 2>&1 | f | grep -E "dispatches|^ +[a-z].*µs|chained" | sed -n '1p;/decode phases/,$p' | head -14
for k in deltanet_step f32_matmul; do echo "repeat $k=2: $(timeout 60 /tmp/new gpu --model 27.gguf -p 16 -n 128 --plain=false --repeat $k=2 2>&1 | f | grep -E '^chained')"; done
echo "no repeat: $(timeout 60 /tmp/new gpu --model 27.gguf -p 16 -n 128 --plain=false 2>&1 | f | grep -E '^chained')"
t "27B old/new"
for r in 1 2; do
	for b in old new; do echo "$b:"; timeout 120 /tmp/$b bench --model 27.gguf --backend gpu -p 512 -n 128 -r 3 2>&1 | grep -E "pp512|tg128"; done
done
for b in old new; do echo "$b sampled: $(timeout 60 /tmp/$b run --model 27.gguf --backend gpu --max-tokens 128 --format jsonl 'Tell me a long story about the sea, and then another one.' 2>/dev/null | tail -1 | grep -o '"decode_tps":[0-9.]*')"; done
wait $s8 $s17
t "waiting for the llama.cpp build"; wait $bc # never a bare wait: it would also wait for tee's process substitution
lb() { timeout 200 /tmp/llama/build/bin/llama-bench -m $1.gguf -ngl 99 -fa 1 -p ${2:-512} -n 128 -r 3 2>&1 | grep -E "^\| [a-z]"; }
t "llama.cpp 27"; lb 27
t "new 27 again"; timeout 120 /tmp/new bench --model 27.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep -E "tg128"
for m in 8 17; do
	t "model $m"; timeout 100 /tmp/new bench --model $m.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep -E "tg128"; lb $m 0
done
t done
