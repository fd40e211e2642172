#!/bin/bash
# H200 run 9: this round's GPU work beside llama.cpp CUDA built there from the oracle's v0.5.0 source, in one
# warm device session. Two binaries: old (main before this round) and new, both `go build -ldflags="-s -w"` with
# the embedded default model emptied, packed with new.test (`go test -c ./infer/gpu`) as
# .carry/gpu9/g9.tar.xz (`tar cf - old new new.test | xz --lzma2=preset=6,dict=128MiB -T1`). Carried: .gl/
# (Vulkan loader debs), .carry/gpu9/, .carry/llama/llama-src.tgz (llama.cpp v0.5.0 trimmed to CPU+CUDA).
# Stages, one device call each (each under 10 minutes), results in $OUT/run9-STAGE.log:
#   build  unpack, synthesize the 8B, 1.7B and 27B qwen35 Q1_0 files, build llama.cpp CUDA (sm_90, f16 KV,
#          flash attention) while the numerics tests run on the card
#   bench  per-phase GPU times (bonsai gpu) old against new and per attention kind, bonsai bench pp512/tg128,
#          the chat's path (bonsai run: sampled and greedy replies, chained against plain), llama-bench CUDA
#   big    the 27B qwen35 shape, bonsai against llama.cpp CUDA
# ATTN (default "lat") names the attention kind compared with "split"; GEMM, if set, is the BONSAI_GPU_GEMM
# value of the old prefill kernel for an A/B of the new one.
stage=${1:-bench}
ATTN=${ATTN:-lat}
S=$(date +%s)
C=$PWD/.carry/gpu9
R=$PWD
exec > >(tee "${OUT:-/tmp}/run9-$stage.log") 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
unxz() { xz -dc "$1" 2>/dev/null || python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)" "$1"; }
[ -x /tmp/new ] || { unxz $C/g9.tar.xz | tar x -C /tmp; ls -la /tmp/old /tmp/new /tmp/new.test; }
cd /tmp
f() { grep -v "XDG\|wgpu\]\|^error: XDG" ; }
lb() { timeout 200 /tmp/llama/build/bin/llama-bench -m $1.gguf -ngl 99 -fa 1 -p 512 -n 128 -r 3 2>&1 | grep -E "^\|"; }
if [ "$stage" = build ]; then
	/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s8=$!
	/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s17=$!
	/tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf >/dev/null 2>&1 & s27=$!
	common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
		-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
	mkdir -p /tmp/llama && tar xzf $R/.carry/llama/llama-src.tgz -C /tmp/llama
	( cd /tmp/llama && cmake -B build "${common[@]}" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA_QUANTS=f16-f16 \
		-DGGML_CUDA_NCCL=OFF >/tmp/cmake.log 2>&1 && nice -n 19 timeout 500 cmake --build build -j14 --target llama-bench >/tmp/build.log 2>&1
	  echo "llama.cpp CUDA build rc=$?"; tail -3 /tmp/build.log ) & bc=$!
	t "numerics on the H200"
	timeout 200 /tmp/new.test -test.run 'TestMatMul|TestF16Rounding|TestAttn|TestAttention|TestNewKVCache|TestOneLayerLogits|TestFusedDecode|TestGreedy|TestPassInPieces|TestProfilingSamples|TestTopK|TestChainPick|TestGemmTiles' -test.v 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|error|differ|off by|panic" | head -40
	wait $s8 $s17 $s27
	ls -la /tmp/*.gguf
	t "waiting for the llama.cpp build"
	wait $bc # never a bare wait: it would also wait for tee's process substitution
	ls -la /tmp/llama/build/bin/llama-bench
	t done
	exit 0
fi
phases() { t "phases $1 -p $2 $3 --attn $4"; timeout 90 /tmp/$1 gpu --model $2.gguf -p $3 -n 128 --attn $4 2>&1 | f | grep -E "tok/s|dispatches|µs|chained|plain" | tail -24; }
bench() { t "bench $1 $2 ${3:-}"; env ${3:-X=1} timeout 90 /tmp/$1 bench --model $2.gguf --backend gpu -p 512 -n 128 -r 3 2>&1 | f | grep -E "pp|tg"; }
chat() { # chat's path: $1 binary $2 model $3 extra flags; decode tok/s from --format jsonl's last object
	line=$(timeout 60 /tmp/$1 run --model $2.gguf --backend gpu --max-tokens 128 --format jsonl $3 \
		"Tell me a long story about the sea, and then another one." 2>/dev/null | tail -1)
	echo "$1 $2 [$3]: $(echo "$line" | grep -o '"generated_tokens":[0-9]*,"prefill_tps":[0-9.]*,"decode_tps":[0-9.]*')"
}
if [ "$stage" = bench ]; then
	t "prompt GEMMs (µs, TFLOP/s per kernel and tile)"
	( cd $R/infer/gpu && BONSAI_GEMM_BENCH=512 timeout 120 /tmp/new.test -test.run TestGemmBench -test.v 2>&1 | f | grep -iE "gemm|tflop|µs" | head -40 )
	phases old 8 16 split; for a in split lat latlong; do phases new 8 16 $a; done
	phases old 17 16 split; for a in split lat latlong; do phases new 17 16 $a; done
	for m in 8 17; do
		bench old $m; bench new $m; for a in lat latlong; do bench new $m BONSAI_GPU_ATTN=$a; done
		for g in auto r2x2; do bench new $m BONSAI_GPU_GEMM=$g; done
	done
	for m in 8 17; do for r in 1 2; do
		t "chat's path $m round $r"
		chat new $m ""; chat new $m "--top-logits 1"; chat old $m ""
		chat new $m "--temp 0 --spec off"; chat new $m "--temp 0 --spec off --top-logits 1"
	done; done
	for m in 8 17; do t "llama.cpp cuda $m"; lb $m; done
	t done
	exit 0
fi
if [ "$stage" = big ]; then
	bench old 27; bench new 27; bench new 27 BONSAI_GPU_ATTN=$ATTN
	t "llama.cpp cuda 27"; lb 27
	t done
fi
