#!/bin/bash
# H200 run 5: bonsai's WebGPU backend beside llama.cpp CUDA built on the machine in the same run, on
# the Bonsai-27B shape (qwen35 hybrid, Q1_0) and the dense 8B and 1.7B Q1_0 shapes.
# Carried: .gl/ (Vulkan loader debs), .carry/gpu/bonsai.gz (bonsai built here),
# .carry/llama/llama-src.tgz (the oracle's llama.cpp v0.5.0 source, trimmed to CPU+CUDA).
# Results go to $OUT/run5.log.
S=$(date +%s)
exec > >(tee "${OUT:-/tmp}/run5.log") 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/llama && tar xzf .carry/llama/llama-src.tgz -C /tmp/llama
( cd /tmp/llama && cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF \
	-DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF \
	-DLLAMA_BUILD_EXAMPLES=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA_QUANTS=f16-f16 \
	-DGGML_CUDA_NCCL=OFF >/tmp/cmake.log 2>&1 && cmake --build build -j12 --target llama-bench >/tmp/build.log 2>&1
  echo "llama.cpp build rc=$?" ) &
build=$!
gunzip -c .carry/gpu/bonsai.gz >/tmp/b; chmod +x /tmp/b; cd /tmp
f() { grep -v "XDG\|wgpu\]\|^error: XDG" ; }
t synth
/tmp/b synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf >/dev/null 2>&1 & s1=$!
/tmp/b synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s2=$!
/tmp/b synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s3=$!
wait $s1 $s2 $s3
ls -la /tmp/*.gguf
for m in 27 8 17; do
	t "bonsai gpu $m"; timeout 150 /tmp/b bench --model $m.gguf --backend gpu -p 512 -n 128 -r 3 2>&1 | f | tail -6
done
t "phases 27b"; timeout 90 /tmp/b gpu --model 27.gguf -p 16 -n 64 2>&1 | f | tail -25
t "waiting for llama.cpp"; wait $build; tail -3 /tmp/build.log
for m in 27 8 17; do
	t "llama.cpp cuda $m"; timeout 150 /tmp/llama/build/bin/llama-bench -m $m.gguf -ngl 99 -fa 1 -p 512 -n 128 -r 3 2>&1 | grep -E "^\|"
done
t done
