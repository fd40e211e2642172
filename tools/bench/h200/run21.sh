#!/bin/bash
# H200 run 21: the table-lookup prompt GEMM (q1_lutgemm: lut4/lut8 double-buffered, lut4s/lut8s with two
# barriers per slice) against q1_gemm2 (auto): its numerics on the card, per matrix at 512 tokens
# (TestGemmBench), pp512 end to end on the 8B and 1.7B shapes, kernels alternating; the 27B qwen35 decode's
# census and each kernel's marginal cost (--repeat K=2); then everything side by side with llama.cpp CUDA built
# here from the oracle's source in the same run.
# Carried: .gl/, .carry/gpu21/g21.tar.xz (new, new.test, and oldb: bonsai at 4accce4, this session's start), .carry/llama/llama-src.tgz. Longer than one device
# call: `nohup bash tools/bench/h200/run21.sh >/dev/null 2>&1 &`, then collect /tmp/run21.log (it ends with "done").
S=$(date +%s)
C=$PWD/.carry/gpu21
R=$PWD
exec > /tmp/run21.log 2>&1
. "$PWD/tools/bench/h200/lib.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
unxz $C/g21.tar.xz | tar x -C /tmp
cd /tmp
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
	-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
mkdir -p /tmp/llama && tar xzf $R/.carry/llama/llama-src.tgz -C /tmp/llama
( cd /tmp/llama && cmake -B build "${common[@]}" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA_QUANTS=f16-f16 \
	-DGGML_CUDA_NCCL=OFF >/tmp/cmake.log 2>&1 && nice -n 19 timeout 600 cmake --build build -j12 --target llama-bench >/tmp/build.log 2>&1
  echo "llama.cpp CUDA build rc=$?"; tail -2 /tmp/build.log; tail -3 /tmp/cmake.log ) & bc=$!
/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s8=$!
/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s17=$!
/tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf >/dev/null 2>&1 & s27=$!
t "numerics on the H200"
( cd $R/infer/gpu && timeout 120 /tmp/new.test -test.run 'TestGemmTilesMatchCPU|TestLutGemmSharesPacking|TestFuseDeltaNetInputsIsTheOps|TestHeadNormGLUIsTheOps|TestSigmoidGateRounds|TestEvenSlicesMatchCPU|Qwen35' -test.v 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|max error|dispatches|fused" | head -30 )
wait $s8
pp() { BONSAI_GPU_GEMM=$2 timeout 60 /tmp/$3 bench --model $1.gguf --backend gpu -p 512 -n 0 -r 3 2>&1 | grep pp512; }
t "pp512 8"
for g in auto lut8 lut4 lut8s lut4s; do echo "$g: $(pp 8 $g new)"; done
wait $s27
t "27B old and new"
timeout 60 /tmp/oldb gpu --model 27.gguf -p 16 -n 128 --plain=false 2>&1 | f | grep -E "dispatches" | head -1
timeout 60 /tmp/new gpu --model 27.gguf -p 16 -n 128 --plain=false 2>&1 | f | grep -E "dispatches" | head -1
for r in 1; do
	echo "old tg: $(timeout 90 /tmp/oldb bench --model 27.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"
	echo "new tg: $(timeout 90 /tmp/new bench --model 27.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"
	echo "tabbal tg: $(BONSAI_GPU_MATVEC=tabbal timeout 90 /tmp/new bench --model 27.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"
done
for b in oldb new; do t "27B decode phases, $b"; timeout 90 /tmp/$b gpu --model 27.gguf -p 16 -n 64 --chained=false 2>&1 | f | grep -A9 "decode phases" | tail -9; done
t "waiting for the llama.cpp build"; wait $bc # never a bare wait
lb() { timeout 200 /tmp/llama/build/bin/llama-bench -m $1.gguf -ngl 99 -fa 1 -p $2 -n $3 -r 3 2>&1 | grep -E "^\| [a-z]"; }
for m in 8 27 17; do
	t "side by side $m"
	lb $m 512 128
	for g in auto lut8 lut4 lut8s; do echo "$g: $(pp $m $g new)"; done
	echo "new tg: $(timeout 90 /tmp/new bench --model $m.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"
	[ $m != 8 ] && echo "tabbal tg: $(BONSAI_GPU_MATVEC=tabbal timeout 90 /tmp/new bench --model $m.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"
	echo "old tg: $(timeout 90 /tmp/oldb bench --model $m.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | grep tg128)"
done
t "8B prefill phases, 512 tokens"; timeout 60 /tmp/new gpu --model 8.gguf -p 512 -n 8 --chained=false 2>&1 | f | grep -A9 "prefill phases" | tail -9
t done
