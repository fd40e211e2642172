#!/bin/bash
# H200 run 10: where a decode token's time goes, kernel by kernel, inside the real chained pass, and this
# round's changes beside llama.cpp CUDA built there from the oracle's v0.5.0 source. Binaries as in run 9:
# `go build -ldflags="-s -w"` with the embedded default model emptied, packed with new.test
# (`go test -c ./infer/gpu`) as .carry/gpu10/g10.tar.xz. Carried: .gl/ (Vulkan loader debs), .carry/gpu10/,
# and for `bench` .carry/llama/llama-src.tgz (llama.cpp v0.5.0 trimmed to CPU+CUDA). Stages, one device call
# each, results in $OUT/run10-STAGE.log:
#   census  the 8B and 1.7B synthetic Q1_0 files; `bonsai gpu --plain=false -p 16 -n 128` chained greedy
#           decode as is and with each kernel of the token's census dispatched twice (--repeat KERNEL=2):
#           the slowdown over the kernel's dispatches per token is its marginal cost in the real pass
#   build   llama.cpp CUDA built there (sm_90, f16 KV, flash attention) while the numerics tests run on the card
#   bench   the census of new's attn_lat, act_q8 and q1_xq; bonsai old (main before this round) against new:
#           chained greedy (`bonsai gpu`), `bonsai bench` (new: tg as a greedy chain, and --chained=false), the
#           chat's sampled path (`bonsai run`); llama-bench CUDA
#   big     the 27B qwen35 shape, bonsai against llama.cpp CUDA
stage=${1:-census}
S=$(date +%s)
C=$PWD/.carry/gpu10
R=$PWD
exec > >(tee "${OUT:-/tmp}/run10-$stage.log") 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
unxz() { xz -dc "$1" 2>/dev/null || python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)" "$1"; }
[ -x /tmp/new ] || { unxz $C/g10.tar.xz | tar x -C /tmp; ls -la /tmp/old /tmp/new /tmp/new.test 2>&1; }
cd /tmp
f() { grep -v "XDG\|wgpu\]\|^error: XDG" ; }
synth() { [ -f $2.gguf ] || /tmp/new synth --shape $1 --type q1_0 -o $2.gguf >/dev/null 2>&1; }
chained() { # $1 binary $2 model, rest: flags; prints the chained tok/s
	timeout 60 /tmp/$1 gpu --model $2.gguf -p 16 -n 128 --plain=false "${@:3}" 2>&1 | f | grep -E "chained|dispatches per" | tail -2
}
if [ "$stage" = census ]; then
	synth 8b 8 & s8=$!
	synth 1.7b 17 & s17=$!
	wait $s8 $s17 # never a bare wait: it would also wait for tee's process substitution
	for m in 8 17; do
		t "census $m"
		base=$(chained new $m); echo "$base"
		kernels=$(echo "$base" | grep "dispatches per" | sed 's/.*layers): //' | tr ',' '\n' | awk '{print $1}')
		chained new $m | grep chained
		for k in $kernels; do echo "repeat $k=2: $(chained new $m --repeat $k=2 | grep chained)"; done
		chained new $m | grep chained
		for k in attn_lat q1_xq; do echo "repeat $k=3: $(chained new $m --repeat $k=3 | grep chained)"; done
	done
	t done
	exit 0
fi
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
		-DGGML_CUDA_NCCL=OFF >/tmp/cmake.log 2>&1 && nice -n 19 timeout 500 cmake --build build -j14 --target llama-bench >/tmp/build.log 2>&1
	  echo "llama.cpp CUDA build rc=$?"; tail -3 /tmp/build.log ) & bc=$!
	t "numerics on the H200"
	( cd $R/infer/gpu && timeout 240 /tmp/new.test -test.run 'TestMatMul|TestF16Rounding|TestAttn|TestAttention|TestNewKVCache|TestOneLayerLogits|TestFusedDecode|TestGreedy|TestPassInPieces|TestProfilingSamples|TestTopK|TestChainPick|TestGemmTiles|TestRepeat' -test.v 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|error|differ|off by|panic" | head -40 )
	wait $s8 $s17
	/tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf >/dev/null 2>&1
	ls -la /tmp/*.gguf
	t "waiting for the llama.cpp build"
	wait $bc
	ls -la /tmp/llama/build/bin/llama-bench
	t done
	exit 0
fi
if [ "$stage" = bench ]; then
	for m in 8 17; do
		t "census $m (new)"
		chained new $m | grep dispatches
		for r in 1 2; do echo "old: $(chained old $m | grep chained)"; echo "new: $(chained new $m | grep chained)"; done
		for k in attn_lat act_q8 q1_xq; do echo "repeat $k=2: $(chained new $m --repeat $k=2 | grep chained)"; done
	done
	for m in 8 17; do
		bench old $m; bench new $m; bench new $m --chained=false
		t "chat's path $m"
		for r in 1 2; do chat new $m ""; chat new $m "--temp 0 --spec off"; done
		chat old $m ""
	done
	for m in 8 17; do t "llama.cpp cuda $m"; lb $m; done
	t done
	exit 0
fi
if [ "$stage" = big ]; then
	bench old 27; bench new 27
	t "llama.cpp cuda 27"; lb 27
	t done
fi
