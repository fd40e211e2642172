#!/bin/bash
# H200 run 11: this round's final binary (bench tg warmed up and chained, the profiler sampling 1 step in 32
# less its measured boundary cost) beside llama.cpp CUDA built there in the same session from the oracle's
# v0.5.0 source, and the CPU parity question of the one-layer Q4_K test on the device's Xeon. Binaries:
# `go build -ldflags="-s -w"` with the embedded default model emptied, `go test -c` of infer/gpu,
# infer/quant and infer/cpu, packed as .carry/gpu11/g11.tar.xz. Carried: .gl/, .carry/gpu11/,
# .carry/llama/llama-src.tgz. Stages, one device call each, results in $OUT/run11-STAGE.log:
#   build  the 8B and 1.7B synthetic Q1_0 files; llama.cpp CUDA (sm_90, f16 KV, flash attention) built
#          while the kernel tests (quant, cpu) and the one-layer parity test run on this host's CPU and card,
#          the latter with the CPU reference on its best, AVX2 and portable kernels
#   bench  bonsai gpu (plain, profiled, chained), bonsai bench (tg chained and plain), the chat's path,
#          llama-bench CUDA
stage=${1:-bench}
S=$(date +%s)
C=$PWD/.carry/gpu11
R=$PWD
exec > >(tee "${OUT:-/tmp}/run11-$stage.log") 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
unxz() { xz -dc "$1" 2>/dev/null || python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)" "$1"; }
[ -x /tmp/new ] || { unxz $C/g11.tar.xz | tar x -C /tmp; ls -la /tmp/new /tmp/new.test /tmp/quant.test /tmp/cpu.test; }
cd /tmp
f() { grep -v "XDG\|wgpu\]\|^error: XDG" ; }
synth() { [ -f $2.gguf ] || /tmp/new synth --shape $1 --type q1_0 -o $2.gguf >/dev/null 2>&1; }
lb() { timeout 200 /tmp/llama/build/bin/llama-bench -m $1.gguf -ngl 99 -fa 1 -p 512 -n 128 -r 3 2>&1 | grep -E "^\|"; }
bench() { t "bench $1 $2 ${*:3}"; timeout 120 /tmp/$1 bench --model $2.gguf --backend gpu -p 512 -n 128 -r 3 "${@:3}" 2>&1 | f | grep -E "pp|tg"; }
chat() { # the chat's path: $1 binary $2 model $3 extra flags; decode tok/s from --format jsonl's last object
	line=$(timeout 60 /tmp/$1 run --model $2.gguf --backend gpu --max-tokens 128 --format jsonl $3 \
		"Tell me a long story about the sea, and then another one." 2>/dev/null | tail -1)
	echo "$1 $2 [$3]: $(echo "$line" | grep -o '"generated_tokens":[0-9]*,"prefill_tps":[0-9.]*,"decode_tps":[0-9.]*')"
}
if [ "$stage" = build ]; then
	synth 8b 8 & s8=$!
	synth 1.7b 17 & s17=$!
	common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
		-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
	mkdir -p /tmp/llama && tar xzf $R/.carry/llama/llama-src.tgz -C /tmp/llama
	( cd /tmp/llama && cmake -B build "${common[@]}" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA_QUANTS=f16-f16 \
		-DGGML_CUDA_NCCL=OFF >/tmp/cmake.log 2>&1 && nice -n 19 timeout 500 cmake --build build -j12 --target llama-bench >/tmp/build.log 2>&1
	  echo "llama.cpp CUDA build rc=$?"; tail -2 /tmp/build.log ) & bc=$!
	grep -m1 "model name" /proc/cpuinfo; grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E "avx512|avx2|vnni" | tr '\n' ' '; echo
	t "kernel tests on this CPU"
	( cd $R/infer/quant && timeout 200 /tmp/quant.test -test.count=1 2>&1 | tail -15 )
	( cd $R/infer/cpu && timeout 200 /tmp/cpu.test -test.count=1 2>&1 | tail -15 )
	t "one-layer parity on the card, CPU reference on all, avx2, portable kernels"
	for feat in all avx2 portable; do echo "cpu $feat:"; ( cd $R/infer/gpu && BONSAI_TEST_CPU_FEATURES=$feat timeout 120 /tmp/new.test -test.run 'TestOneLayerLogitsMatchCPU' -test.v 2>&1 | f | grep -E "^ *(--- FAIL|--- PASS|ok|FAIL|PASS)|differ" | head -14 ); done
	t "numerics on the H200"
	( cd $R/infer/gpu && timeout 200 /tmp/new.test -test.run 'TestMatMul|TestF16Rounding|TestAttn|TestAttention|TestNewKVCache|TestFusedDecode|TestGreedy|TestPassInPieces|TestProfilingSamples|TestTopK|TestChainPick|TestGemmTiles|TestRepeat' 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|error|differ|off by|panic" | head -20 )
	wait $s8 $s17 # never a bare wait: it would also wait for tee's process substitution
	ls -la /tmp/*.gguf
	t "waiting for the llama.cpp build"
	wait $bc
	ls -la /tmp/llama/build/bin/llama-bench
	t done
	exit 0
fi
if [ "$stage" = bench ]; then
	for m in 8 17; do
		t "bonsai gpu $m"
		timeout 90 /tmp/new gpu --model $m.gguf -p 16 -n 128 2>&1 | f | grep -E "tok/s|dispatches|µs|chained" | tail -26
		bench new $m; bench new $m --chained=false
		t "chat's path $m"
		for r in 1 2; do chat new $m ""; chat new $m "--temp 0 --spec off"; done
	done
	for m in 8 17; do t "llama.cpp cuda $m"; lb $m; done
	t done
	exit 0
fi
