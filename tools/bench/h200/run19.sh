#!/bin/bash
# H200 run 19: q1_xq reading lookup tables (MatVec tab, tab8/16/32) against its tested adds (auto), one
# binary (53c0add, where "tab" was an option and "auto" the tested adds; now "auto" reads the tables and "xq" is the tested adds), alternating, beside llama.cpp CUDA built here from the oracle's source; numerics first.
# Carried: .gl/, .carry/gpu19/g19.tar.xz (new, new.test), .carry/llama/llama-src.tgz. Longer than one device
# call: start it with `nohup bash tools/bench/h200/run19.sh &`, then collect /tmp/run19.log (it ends with "done").
S=$(date +%s)
C=$PWD/.carry/gpu19
R=$PWD
exec > /tmp/run19.log 2>&1
. "$PWD/tools/bench/h200/lib.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
unxz $C/g19.tar.xz | tar x -C /tmp
cd /tmp
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
	-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
mkdir -p /tmp/llama && tar xzf $R/.carry/llama/llama-src.tgz -C /tmp/llama
( cd /tmp/llama && cmake -B build "${common[@]}" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA_QUANTS=f16-f16 \
	-DGGML_CUDA_NCCL=OFF >/tmp/cmake.log 2>&1 && nice -n 19 timeout 480 cmake --build build -j12 --target llama-bench >/tmp/build.log 2>&1
  echo "llama.cpp CUDA build rc=$?"; tail -2 /tmp/build.log ) & bc=$!
/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s8=$!
/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s17=$!
t "numerics on the H200"
( cd $R/infer/gpu && timeout 200 /tmp/new.test -test.run 'LookupTables|TestQuantizedOnce|TestMatMul|TestGreedy|TestFusedDecode|Qwen35|TestOneLayer' 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|differ|panic|_test.go" | head -20 )
# (a temporary, uncommitted diagnostic test ran here: one-layer prefill and decode against the CPU over seeds 1–8 of
# Q4_K, Q6_K, Q4_0 and Q8_0; its lines are the "SEED" ones in the log, and TestOneLayerLogitsMatchCPU now runs 3 seeds)
wait $s8 $s17
for m in 8 17; do
	for v in auto tab; do t "gpu $m $v"; BONSAI_GPU_MATVEC=$v timeout 60 /tmp/new gpu --model $m.gguf -p 16 -n 64 2>&1 | f | grep -E "^ +[a-z].*µs|chained" | sed -n '/decode phases/,$p' | head -8; done
	t "model $m matvec variants"
	for vs in "auto tab tab8 tab16 tab32" "auto tab"; do
		for v in $vs; do echo "$v: $(BONSAI_GPU_MATVEC=$v timeout 60 /tmp/new bench --model $m.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"; done
	done
done
t "synth 27b"; /tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf 2>&1 | tail -1
for r in 1 2; do
	for v in auto tab; do echo "27 $v: $(BONSAI_GPU_MATVEC=$v timeout 90 /tmp/new bench --model 27.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"; done
done
for v in auto tab; do echo "27 $v sampled: $(BONSAI_GPU_MATVEC=$v timeout 60 /tmp/new run --model 27.gguf --backend gpu --max-tokens 128 --format jsonl 'Tell me a long story about the sea, and then another one.' 2>/dev/null | tail -1 | grep -o '"decode_tps":[0-9.]*')"; done
t "waiting for the llama.cpp build"; wait $bc # never a bare wait: it would also wait for tee's process substitution
lb() { timeout 200 /tmp/llama/build/bin/llama-bench -m $1.gguf -ngl 99 -fa 1 -p 0 -n 128 -r 3 2>&1 | grep -E "^\| [a-z]"; }
for m in 8 17 27; do
	t "side by side $m"
	for r in 1 2; do
		lb $m
		for v in auto tab; do echo "$v: $(BONSAI_GPU_MATVEC=$v timeout 90 /tmp/new bench --model $m.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"; done
	done
done
t done
