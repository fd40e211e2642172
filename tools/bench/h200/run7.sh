#!/bin/bash
# H200 run 7: activations rounded to Q8_0 once by their producer (q1_xq on every Q1_0 decode matvec,
# SwiGLU in gate/up's epilogue) and the attention prologue folded into pass 1 (attn_qk), before (old: main
# at 88bc6fe, the branch point) and after (new: branch gpu3) in the same run, beside llama.cpp CUDA built
# on the machine. Stage "probe": numerics on the card, per-phase GPU times and tg128 of both; stage
# "probe2": q1_xq's shapes (--matvec xq*) side by side; "final": the same plus pp512, the 27B qwen35 shape and llama-bench on the same files.
# Carried: .gl/ (Vulkan loader debs), .carry/gpu3/g3.tar.xz (new, old: bonsai built with -ldflags="-s -w"
# and an empty embedded default model, which no benchmark uses, to fit the transfer; new.test, old.test:
# go test -c ./infer/gpu), .carry/llama/llama-src.tgz (llama.cpp v0.5.0, trimmed to CPU+CUDA).
# Results go to $OUT/run7-STAGE.log.
stage=${1:-probe}
S=$(date +%s)
C=$PWD/.carry/gpu3
exec > >(tee "${OUT:-/tmp}/run7-$stage.log") 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
build=
if [ "$stage" = final ] && [ ! -x /tmp/llama/build/bin/llama-bench ]; then
	mkdir -p /tmp/llama && tar xzf .carry/llama/llama-src.tgz -C /tmp/llama
	( cd /tmp/llama && cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF \
		-DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF \
		-DLLAMA_BUILD_EXAMPLES=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA_QUANTS=f16-f16 \
		-DGGML_CUDA_NCCL=OFF >/tmp/cmake.log 2>&1 && nice -n 19 cmake --build build -j14 --target llama-bench >/tmp/build.log 2>&1
	  echo "llama.cpp build rc=$?" ) &
	build=$!
fi
unxz() { xz -dc "$1" 2>/dev/null || python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)" "$1"; }
unxz $C/g3.tar.xz | tar x -C /tmp; ls -la /tmp/new /tmp/old /tmp/*.test 2>/dev/null
cd /tmp
f() { grep -v "XDG\|wgpu\]\|^error: XDG" ; }
lb() { timeout 200 /tmp/llama/build/bin/llama-bench -m $1.gguf -ngl 99 -fa 1 -p 512 -n 128 -r 3 2>&1 | grep -E "^\|"; }
numerics() {
	t "numerics on the H200: new"
	timeout 120 /tmp/new.test -test.run 'TestMatMulMatchesCPU|TestF16RoundingMatchesCPU|TestFusedMatVec|TestQuantizedOnce|TestAttnQKMatchesUnfused|TestAttentionMatchesReference|TestOneLayerLogitsMatchCPU|TestFusedDecodeMatchesUnfused|TestGreedyMatchesCPU|TestPassInPiecesKeepsOrder' -test.v 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|error|differ|off by" | head -40
}
phases() { t "phases $1 $2"; timeout 90 /tmp/$2 gpu --model $1.gguf -p 16 -n ${3:-128} 2>&1 | f | grep -E "tok/s|dispatches|µs" | tail -22; }
if [ "$stage" = probe2 ]; then
	/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s2=$!
	/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s3=$!
	t "numerics on the H200: new"
	timeout 60 /tmp/new.test -test.run 'TestMatMulMatchesCPU|TestQuantizedOnce|TestAttnQKMatchesUnfused|TestFusedDecodeMatchesUnfused' -test.v 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|error|differ|off by" | head -30
	wait $s2 $s3
	for v in auto xq8 xq32 xqs xqe1024; do t "matvec $v"; timeout 60 /tmp/new gpu --model 8.gguf -p 16 -n 64 --matvec $v 2>&1 | f | grep -E "^plain|µs" | sed -n '1p;10,17p'; done
	for v in auto xq8; do t "17 matvec $v"; timeout 60 /tmp/new gpu --model 17.gguf -p 16 -n 64 --matvec $v 2>&1 | f | grep -E "^plain|µs" | sed -n '1p;10,17p'; done
elif [ "$stage" = probe ]; then
	/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s2=$!
	/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s3=$!
	numerics
	wait $s2 $s3
	for b in old new; do phases 8 $b; done
	for m in 8 17; do for b in old new; do
		t "bonsai $b bench $m"; timeout 60 /tmp/$b bench --model $m.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | f | grep -E "tg"
	done; done
	phases 17 new
else
	/tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf >/dev/null 2>&1 & s1=$!
	/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s2=$!
	/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s3=$!
	wait $s2 $s3
	for m in 8 17; do for b in old new; do
		t "bonsai $b bench $m"; timeout 80 /tmp/$b bench --model $m.gguf --backend gpu -p 512 -n 128 -r 3 2>&1 | f | grep -E "pp|tg"
	done; done
	for b in old new; do phases 8 $b; done
	[ -n "$build" ] && { t "waiting for llama.cpp"; wait $build; tail -1 /tmp/build.log; }
	for m in 8 17; do t "llama.cpp cuda $m"; lb $m; done
	for b in old new; do phases 17 $b; done
	wait $s1; ls -la /tmp/27.gguf
	t "bonsai new bench 27"; timeout 90 /tmp/new bench --model 27.gguf --backend gpu -p 512 -n 128 -r 3 2>&1 | f | grep -E "pp|tg"
	t "llama.cpp cuda 27"; lb 27
fi
t done
