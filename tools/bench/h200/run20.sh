#!/bin/bash
# H200 run 20: main at debf334 (lookup tables the default) checked on the card, and the output head's q1_xq
# shape (MatVec tabh16 / tabh32: 16 or 32 rows per workgroup on matrices of ≥ 65,536 rows) against the default,
# alternating, beside llama.cpp CUDA built here from the oracle's source; the 27B token's phases.
# Carried: .gl/, .carry/gpu20/g20.tar.xz (new, new.test), .carry/llama/llama-src.tgz. Longer than one device
# call: start it with `nohup bash tools/bench/h200/run20.sh &`, then collect /tmp/run20.log (it ends with "done").
S=$(date +%s)
C=$PWD/.carry/gpu20
R=$PWD
exec > /tmp/run20.log 2>&1
. "$PWD/tools/bench/h200/lib.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
unxz $C/g20.tar.xz | tar x -C /tmp
cd /tmp
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
	-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
mkdir -p /tmp/llama && tar xzf $R/.carry/llama/llama-src.tgz -C /tmp/llama
( cd /tmp/llama && cmake -B build "${common[@]}" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA_QUANTS=f16-f16 \
	-DGGML_CUDA_NCCL=OFF >/tmp/cmake.log 2>&1 && nice -n 19 timeout 480 cmake --build build -j12 --target llama-bench >/tmp/build.log 2>&1
  echo "llama.cpp CUDA build rc=$?"; tail -2 /tmp/build.log ) & bc=$!
/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s8=$!
/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s17=$!
/tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf >/dev/null 2>&1 & s27=$!
t "numerics on the H200"
( cd $R/infer/gpu && timeout 200 /tmp/new.test -test.run 'LookupTables|TestQuantizedOnce|TestMatMul|TestGreedy|TestFusedDecode|Qwen35|TestOneLayer|TestAttn|TestDecoderChains' -test.v 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|differ|panic|rounding steps" | head -30 )
wait $s8 $s17
for m in 8 17; do
	t "model $m head shapes"
	for r in 1 2; do
		for v in auto tabh16 tabh32; do echo "$v: $(BONSAI_GPU_MATVEC=$v timeout 60 /tmp/new bench --model $m.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"; done
	done
	for v in auto tabh32; do t "gpu $m $v"; BONSAI_GPU_MATVEC=$v timeout 60 /tmp/new gpu --model $m.gguf -p 16 -n 64 2>&1 | f | grep -E "^ +[a-z].*µs" | head -8; done
done
wait $s27
t "27B phases"; timeout 120 /tmp/new gpu --model 27.gguf -p 16 -n 64 2>&1 | f | grep -E "dispatches|^ +[a-z].*µs|chained" | head -16
for r in 1 2; do
	for v in auto tabh32; do echo "27 $v: $(BONSAI_GPU_MATVEC=$v timeout 90 /tmp/new bench --model 27.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"; done
done
t "waiting for the llama.cpp build"; wait $bc # never a bare wait: it would also wait for tee's process substitution
lb() { timeout 200 /tmp/llama/build/bin/llama-bench -m $1.gguf -ngl 99 -fa 1 -p 0 -n 128 -r 3 2>&1 | grep -E "^\| [a-z]"; }
for m in 8 17 27; do
	t "side by side $m"
	lb $m
	for v in auto tabh32; do echo "$v: $(BONSAI_GPU_MATVEC=$v timeout 90 /tmp/new bench --model $m.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"; done
done
t done
