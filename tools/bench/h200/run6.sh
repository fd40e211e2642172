#!/bin/bash
# H200 run 6: the block-interleaved Q1_0 layout and the q1_w1 decode matvec, before (old: the branch
# point) and after (new) in the same run, beside llama.cpp CUDA built on the machine; the GPU-vs-CPU
# numerics tests run on the H200 itself. Stage "a": tests, 8B and 1.7B; stage "b": 27B qwen35 and the
# dense shapes again (the llama.cpp build is kept in /tmp between calls while the machine stays warm).
# Carried: .gl/ (Vulkan loader debs), .carry/gpu2/g2.tar.xz (new, old: bonsai built here with
# -ldflags="-s -w" and an empty embedded default model, which no benchmark uses, to fit the transfer;
# new.test, old.test: go test -c ./infer/gpu), .carry/llama/llama-src.tgz (llama.cpp v0.5.0, trimmed to
# CPU+CUDA). Results go to $OUT/run6-STAGE.log.
stage=${1:-a}
S=$(date +%s)
C=$PWD/.carry/gpu2
exec > >(tee "${OUT:-/tmp}/run6-$stage.log") 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
build=
if [ "$stage" != c ] && [ ! -x /tmp/llama/build/bin/llama-bench ]; then
	mkdir -p /tmp/llama && tar xzf .carry/llama/llama-src.tgz -C /tmp/llama
	( cd /tmp/llama && cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF \
		-DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF \
		-DLLAMA_BUILD_EXAMPLES=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA_QUANTS=f16-f16 \
		-DGGML_CUDA_NCCL=OFF >/tmp/cmake.log 2>&1 && cmake --build build -j12 --target llama-bench >/tmp/build.log 2>&1
	  echo "llama.cpp build rc=$?" ) &
	build=$!
fi
unxz() { xz -dc "$1" 2>/dev/null || python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)" "$1"; }
unxz $C/g2.tar.xz | tar x -C /tmp; ls -la /tmp/new /tmp/old /tmp/*.test 2>/dev/null
cd /tmp
f() { grep -v "XDG\|wgpu\]\|^error: XDG" ; }
lb() { timeout 200 /tmp/llama/build/bin/llama-bench -m $1.gguf -ngl 99 -fa 1 -p 512 -n 128 -r 3 2>&1 | grep -E "^\|"; }
numerics() {
	for b in old new; do
		t "numerics on the H200: $b"
		timeout 100 /tmp/$b.test -test.run 'TestMatMulMatchesCPU|TestF16RoundingMatchesCPU|TestFusedMatVec|TestOneLayerLogitsMatchCPU|TestAttentionMatchesReference|TestPassInPiecesKeepsOrder' -test.v 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|error|differ" | head -30
	done
}
if [ "$stage" = a ]; then
	/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s2=$!
	/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s3=$!
	numerics
	wait $s2 $s3
	for m in 8 17; do for b in old new; do
		t "bonsai $b bench $m"; timeout 150 /tmp/$b bench --model $m.gguf --backend gpu -p 512 -n 128 -r 3 2>&1 | f | grep -E "pp|tg"
	done; done
	for b in old new; do t "phases 8b $b"; timeout 90 /tmp/$b gpu --model 8.gguf -p 16 -n 128 2>&1 | f | tail -24; done
	[ -n "$build" ] && { t "waiting for llama.cpp"; wait $build; tail -2 /tmp/build.log; }
	for m in 8 17; do t "llama.cpp cuda $m"; lb $m; done
elif [ "$stage" = c ]; then
	# profiling without pieces (one command buffer), old and new alternating twice
	/tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf >/dev/null 2>&1 & s1=$!
	/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1
	/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1
	for r in 1 2; do for m in 8 17; do for b in old new; do
		t "bonsai $b bench $m (round $r)"; timeout 60 /tmp/$b bench --model $m.gguf --backend gpu -p 0 -n 128 -r 3 2>&1 | f | grep -E "tg"
	done; done; done
	for b in old new; do t "phases 8b $b"; timeout 60 /tmp/$b gpu --model 8.gguf -p 16 -n 128 2>&1 | f | tail -22; done
	t "phases 17 new"; timeout 60 /tmp/new gpu --model 17.gguf -p 16 -n 128 2>&1 | f | tail -11
	wait $s1
	t "phases 27 new"; timeout 60 /tmp/new gpu --model 27.gguf -p 16 -n 64 2>&1 | f | tail -11
else
	/tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf >/dev/null 2>&1 & s1=$!
	/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s2=$!
	/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s3=$!
	numerics
	wait $s2 $s3
	for m in 8 17; do for b in old new; do
		t "bonsai $b bench $m"; timeout 100 /tmp/$b bench --model $m.gguf --backend gpu -p 512 -n 128 -r 3 2>&1 | f | grep -E "pp|tg"
	done; done
	for b in old new; do t "phases 8b $b"; timeout 60 /tmp/$b gpu --model 8.gguf -p 16 -n 128 2>&1 | f | tail -22; done
	t "phases 17 new"; timeout 60 /tmp/new gpu --model 17.gguf -p 16 -n 128 2>&1 | f | tail -22
	wait $s1; ls -la /tmp/27.gguf
	for b in new old; do
		t "bonsai $b bench 27"; timeout 120 /tmp/$b bench --model 27.gguf --backend gpu -p 512 -n 128 -r 3 2>&1 | f | grep -E "pp|tg"
	done
	t "phases 27 new"; timeout 90 /tmp/new gpu --model 27.gguf -p 16 -n 64 2>&1 | f | tail -22
	[ -n "$build" ] && { t "waiting for llama.cpp"; wait $build; tail -1 /tmp/build.log; }
	for m in 8 17 27; do t "llama.cpp cuda $m"; lb $m; done
fi
t done
