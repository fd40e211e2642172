#!/bin/bash
# H200 run 8: decode attention in one dispatch per query head (attn_head, --attn head, the default while
# the sequence is at most 1024 positions) against the split path (--attn split: attn_qk, attn_pv, attn_sum;
# qk_rope_store and attn_one over one split) and attn_head at every length the workgroup memory holds
# (--attn headlong), from one binary (branch gpu4); and `bonsai gpu`'s "chained:" line, greedy decoding with
# the host off the critical path (Model.GreedyChained: argmax and the next token's embedding on the GPU, the
# token read back one pass late), beside its "plain:" line. llama.cpp is not built here; it runs beside.
# Carried: .gl/ (Vulkan loader debs) and .carry/gpu4/g4.tar.xz holding new (bonsai built with
# -ldflags="-s -w" and an empty embedded default model, as run 7's) and new.test (go test -c ./infer/gpu).
# Build (in a scratch copy with `: > infer/defaultmodel/bonsai-tiny.gguf`): go build -ldflags="-s -w" -o new ./cmd/bonsai &&
# go test -c -o new.test ./infer/gpu && tar cf - new new.test | xz --lzma2=preset=6,dict=64MiB -T1 > .carry/gpu4/g4.tar.xz
# Device call: run with carry [".gl", ".carry/gpu4"], command `bash .carry/gpu4/run8.sh` (copy this script there too,
# as run 7's was) or `bash tools/bench/h200/run8.sh` once merged.
# Numerics on the card (the new attention tests included), per-phase GPU times at -p 16 and at a medium
# context and past 1024 positions, then pp512/tg128 for 8B and 1.7B per variant. Under 8 minutes on a warm machine.
# Stages (one device call each on a warm machine; what they build and write stays under /tmp):
#   build  unpack, synthesize the 8B, 1.7B and 27B qwen35 files, build llama.cpp v0.5.0 twice from
#          .carry/llama/llama-src.tgz (CUDA sm_90 into /tmp/llama, CPU-only into /tmp/llama-cpu, for
#          cpu16.sh) while the numerics tests run on the card
#   bench  per-phase GPU times and benches per variant on a quiet machine, then llama-bench CUDA on the
#          same files and the 27B figures
# Results go to $OUT/run8-STAGE.log.
stage=${1:-bench}
S=$(date +%s)
C=$PWD/.carry/gpu4
R=$PWD
exec > >(tee "${OUT:-/tmp}/run8-$stage.log") 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
unxz() { xz -dc "$1" 2>/dev/null || python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)" "$1"; }
[ -x /tmp/new ] || { unxz $C/g4.tar.xz | tar x -C /tmp; ls -la /tmp/new /tmp/new.test; }
cd /tmp
f() { grep -v "XDG\|wgpu\]\|^error: XDG" ; }
lb() { timeout 200 /tmp/llama/build/bin/llama-bench -m $1.gguf -ngl 99 -fa 1 -p 512 -n 128 -r 3 2>&1 | grep -E "^\|"; }
if [ "$stage" = build ]; then
	/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s8=$!
	/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s17=$!
	/tmp/new synth --arch qwen35 --shape 27b --type q1_0 -o 27.gguf >/dev/null 2>&1 & s27=$!
	common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
		-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
	mkdir -p /tmp/llama /tmp/llama-cpu && tar xzf $R/.carry/llama/llama-src.tgz -C /tmp/llama && tar xzf $R/.carry/llama/llama-src.tgz -C /tmp/llama-cpu
	( cd /tmp/llama && cmake -B build "${common[@]}" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA_QUANTS=f16-f16 \
		-DGGML_CUDA_NCCL=OFF >/tmp/cmake.log 2>&1 && nice -n 19 timeout 480 cmake --build build -j10 --target llama-bench >/tmp/build.log 2>&1
	  echo "llama.cpp CUDA build rc=$?" ) & bc=$!
	( cd /tmp/llama-cpu && cmake -B build "${common[@]}" -DGGML_CUDA=OFF >/tmp/cmake-cpu.log 2>&1 &&
	  nice -n 19 timeout 480 cmake --build build -j4 --target llama-bench >/tmp/build-cpu.log 2>&1
	  echo "llama.cpp CPU build rc=$?" ) & bp=$!
	t "numerics on the H200"
	timeout 150 /tmp/new.test -test.run 'TestMatMulMatchesCPU|TestF16RoundingMatchesCPU|TestAttnQKMatchesUnfused|TestAttentionMatchesReference|TestNewKVCacheDropsBoundOps|TestOneLayerLogitsMatchCPU|TestFusedDecodeMatchesUnfused|TestGreedyMatchesCPU|TestAttnKindsMatchCPU|TestGreedyChainedMatchesGreedy|TestPassInPiecesKeepsOrder|TestProfilingSamplesDecoding' -test.v 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|error|differ|off by" | head -40
	wait $s8 $s17 $s27
	ls -la /tmp/*.gguf
	t "waiting for the llama.cpp builds"
	wait $bc $bp # never a bare wait: it would also wait for tee's process substitution
	ls -la /tmp/llama/build/bin/llama-bench /tmp/llama-cpu/build/bin/llama-bench
	t done
	exit 0
fi
phases() { t "phases $1 -p $2 --attn $3"; timeout 90 /tmp/new gpu --model $1.gguf -p $2 -n 128 --attn $3 2>&1 | f | grep -E "tok/s|dispatches|µs" | tail -24; }
# below 1024 positions headlong is head; past it head is split
for a in head split; do phases 8 16 $a; done
for a in head split; do phases 8 768 $a; done
for a in headlong split; do phases 8 1536 $a; done
for a in head split; do phases 17 16 $a; done
for m in 8 17; do for a in head split; do
	t "bench $m --attn $a"; BONSAI_GPU_ATTN=$a timeout 80 /tmp/new bench --model $m.gguf --backend gpu -p 512 -n 128 -r 3 2>&1 | f | grep -E "pp|tg"
done; done
for m in 8 17; do t "llama.cpp cuda $m"; lb $m; done
for a in head split; do t "bench 27 --attn $a"; BONSAI_GPU_ATTN=$a timeout 90 /tmp/new bench --model 27.gguf --backend gpu -p 512 -n 128 -r 3 2>&1 | f | grep -E "pp|tg"; done
t "llama.cpp cuda 27"; lb 27
t done
