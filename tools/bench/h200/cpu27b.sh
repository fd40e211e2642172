#!/bin/bash
# cpu27b.sh PHASE: the CPU side of the Bonsai-27B table on the device machine's host CPU, 2 threads,
# bonsai beside llama-bench built natively there from the oracle's llama.cpp v0.5.0 source
# (.carry/llama/llama-src.tgz), on the same synthetic 27B-shaped qwen35 files.
#   phase "a": build llama-bench (CPU), synthesize the models, bonsai's figures;
#   phase "b" (same warm machine): llama.cpp's figures.
S=$(date +%s)
exec > >(tee -a "${OUT:-/tmp}/cpu27b-$1.log") 2>&1
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
R=$(pwd); cd /tmp
case $1 in
a)
	lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200
	mkdir -p /tmp/llama && tar xzf $R/.carry/llama/llama-src.tgz -C /tmp/llama
	gunzip -c $R/.carry/gpu/bonsai.gz >/tmp/b; chmod +x /tmp/b
	( cd /tmp/llama && cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF \
		-DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF \
		-DLLAMA_BUILD_EXAMPLES=OFF >/tmp/cmake.log 2>&1 && nice cmake --build build -j8 --target llama-bench >/tmp/build.log 2>&1
	  echo "llama.cpp build rc=$?" ) &
	build=$!
	t synth
	/tmp/b synth --arch qwen35 --shape 27b --type q1_0 -o 27-q1_0.gguf >/dev/null 2>&1
	t "bonsai cpu 27b q1_0, 2 threads"
	/tmp/b bench --model 27-q1_0.gguf --backend cpu --threads 2 -p 512 -n 128 -r 1 2>&1 | tail -4
	wait $build # a bare wait would also wait for tee's process substitution
	t done ;;
b)
	t "llama.cpp cpu 27b q1_0, 2 threads"
	timeout 560 /tmp/llama/build/bin/llama-bench -m 27-q1_0.gguf -t 2 -p 512 -n 128 -r 1 2>&1 | grep -E "^\|"
	t done ;;
esac
