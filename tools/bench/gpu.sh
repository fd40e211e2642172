#!/usr/bin/env bash
# gpu.sh: the GPU benchmark of BENCHMARKS.md. bonsai's GPU backend (WebGPU on Vulkan) on synthetic
# Bonsai-shaped Q1_0 models made on the machine (same tensor shapes and bytes as the real files, so the
# same speed), optionally an older bonsai alternating with it, and optionally llama.cpp's llama-bench
# built with CUDA on the same files and card. Run it from the repository root on a Linux host with an
# NVIDIA GPU; it needs nothing from the network.
#
#   bash tools/bench/gpu.sh [options]
#
#   --new BIN          the bonsai to measure (default: go build ./cmd/bonsai into the work folder)
#   --old BIN          a second bonsai, run alternately with --new in every round
#   --models LIST      of 8b, 1.7b, 27b (the qwen35 hybrid, Bonsai-27B's shape); default "8b 1.7b 27b"
#   --tests LIST       tg: tg128 as `bonsai bench --backend gpu -p 0 -n 128` runs it (greedy, chained:
#                      each pass's token stays on the GPU, as `bonsai run --temp 0` decodes);
#                      pp: pp512 (-p 512 -n 0). Default "tg pp"
#   --depth N          give both programs -d N (tokens already in the KV cache); bonsai bench must
#                      have -d
#   --rounds N         rounds, each running every program once per model and test (default 2)
#   --reps N           repetitions per measurement, -r (default 3)
#   --llama SRC        build llama-bench with CUDA (sm of the card, f16 KV, flash attention) from SRC and
#                      run it beside bonsai: "bundle" (the oracle's llama.cpp v0.5.0,
#                      tools/oracle/node_modules/node-llama-cpp/llama/gitRelease.bundle) or a source .tgz
#   --llama-bench BIN  a llama-bench already built (instead of --llama)
#   --numerics BIN     a test binary of infer/gpu (`go test -c -o gpu.test ./infer/gpu`): run it on the
#                      card first, the GPU's results against the CPU's
#   --numerics-run RE  its -test.run pattern (default: every test)
#   --work DIR         models, builds and unpacked binaries (default /tmp/bonsai-gpu-bench)
#
# Any BIN may be xz-compressed (NAME.xz), for hosts that take a size-limited upload: the ignored
# .carry/ folder is the place for such files. Where the host lacks the Vulkan loader, Debian's
# libvulkan1 package (and what it depends on) in the ignored .gl/ folder is unpacked into /; an
# NVIDIA ICD at /usr/local/nvidia/share/vulkan/icd.d/ (as in NVIDIA's containers) is used when present.
# The llama.cpp build takes several minutes on 16 cores: on a host with a time limit per command run
# the script in the background (nohup bash tools/bench/gpu.sh ... &) and read its log.
#
# Output: a timestamped log on stdout (and in $OUT/gpu-bench.log when OUT is set): the card, the
# numerics' verdict, and per round, model and test each program's line (llama-bench's table row;
# bonsai bench's pp512/tg128 row in the same format).
set -uo pipefail

new="" old="" models="8b 1.7b 27b" tests="tg pp" depth="" rounds=2 reps=3
llama_src="" llama_bench="" numerics="" numerics_run="." work=/tmp/bonsai-gpu-bench
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
abs() { if [[ $1 == /* ]]; then echo "$1"; else echo "$PWD/$1"; fi; }
while [[ $# -gt 0 ]]; do
	[[ $1 == -h || $1 == --help ]] && usage 0
	[[ $# -ge 2 ]] || { echo "gpu.sh: $1 needs a value" >&2; usage; }
	case $1 in
	--new) new=$(abs "$2") ;;
	--old) old=$(abs "$2") ;;
	--models) models=$2 ;;
	--tests) tests=$2 ;;
	--depth) depth=$2 ;;
	--rounds) rounds=$2 ;;
	--reps) reps=$2 ;;
	--llama) llama_src=$2 && [[ $2 != bundle ]] && llama_src=$(abs "$2") ;;
	--llama-bench) llama_bench=$(abs "$2") ;;
	--numerics) numerics=$(abs "$2") ;;
	--numerics-run) numerics_run=$2 ;;
	--work) work=$(abs "$2") ;;
	*) echo "gpu.sh: unknown option $1" >&2; usage ;;
	esac
	shift 2
done
cd "$(dirname "$0")/../.." || exit 1
mkdir -p "$work"
[[ -n ${OUT:-} ]] && exec > >(tee -a "$OUT/gpu-bench.log") 2>&1
start=$(date +%s)
say() { echo "== [$(($(date +%s) - start))s] $*"; }

# unpack BIN NAME: BIN (plain or .xz) as the executable $work/NAME; prints its path.
unpack() {
	local dst=$work/$2
	case $1 in
	*.xz) xz -dc "$1" >"$dst" 2>/dev/null ||
		python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1" >"$dst" ;;
	*) cp "$1" "$dst" ;;
	esac || { echo "gpu.sh: cannot unpack $1" >&2; exit 1; }
	chmod +x "$dst"
	echo "$dst"
}

# The Vulkan loader and NVIDIA's ICD.
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then
	for deb in .gl/*.deb; do [[ -f $deb ]] && dpkg -x "$deb" /; done
	ldconfig 2>/dev/null
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[[ -f $icd && -z ${VK_DRIVER_FILES:-} ]] && export VK_DRIVER_FILES=$icd
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null || say "no nvidia-smi"

if [[ -n $new ]]; then
	new=$(unpack "$new" new)
else
	say "building bonsai at $(git rev-parse --short HEAD 2>/dev/null)"
	go build -o "$work/new" ./cmd/bonsai || exit 1
	new=$work/new
fi
progs=(new)
[[ -n $old ]] && old=$(unpack "$old" old) && progs+=(old)
"$new" --version 2>/dev/null | head -1

# llama.cpp CUDA, built in the background while the models are made and the numerics run.
build_pid=""
if [[ -n $llama_src ]]; then
	src=$work/llama
	if [[ ! -f $src/CMakeLists.txt ]]; then
		rm -rf "$src"
		if [[ $llama_src == bundle ]]; then
			git clone -q tools/oracle/node_modules/node-llama-cpp/llama/gitRelease.bundle "$src"
		else
			mkdir -p "$src" && tar xzf "$llama_src" -C "$src"
		fi || { echo "gpu.sh: no llama.cpp source from $llama_src" >&2; exit 1; }
	fi
	# A tarball may hold the tree in one top folder.
	[[ -f $src/CMakeLists.txt ]] || src=$(dirname "$(ls "$src"/*/CMakeLists.txt 2>/dev/null | head -1)")
	arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
	say "building llama-bench with CUDA (sm_${arch:-native}) in the background"
	(cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=ON \
		-DCMAKE_CUDA_ARCHITECTURES="${arch:-native}" -DGGML_CUDA_FA_QUANTS=f16-f16 -DGGML_CUDA_NCCL=OFF \
		-DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
		-DLLAMA_BUILD_EXAMPLES=OFF >"$work/llama-cmake.log" 2>&1 &&
		nice -n 19 cmake --build "$src/build" -j"$(nproc)" --target llama-bench >"$work/llama-build.log" 2>&1
	echo "llama-bench build rc=$? (logs in $work)") &
	build_pid=$!
	llama_bench=$src/build/bin/llama-bench
fi

# The models, made by the new binary.
declare -A synth=([8b]="--shape 8b" [1.7b]="--shape 1.7b" [27b]="--arch qwen35 --shape 27b")
for m in $models; do
	[[ -n ${synth[$m]:-} ]] || { echo "gpu.sh: unknown model $m (8b, 1.7b, 27b)" >&2; exit 2; }
	f=$work/$m-q1_0.gguf
	[[ -f $f ]] && continue
	say "synth $m"
	# shellcheck disable=SC2086
	"$new" synth ${synth[$m]} --type q1_0 -o "$f.partial" >/dev/null && mv "$f.partial" "$f" || exit 1
done

if [[ -n $numerics ]]; then
	tb=$(unpack "$numerics" gpu.test)
	say "numerics on the card: infer/gpu tests -run '$numerics_run'"
	(cd infer/gpu && CI=true timeout 900 "$tb" -test.run "$numerics_run" -test.count=1 2>&1 |
		grep -E '^(--- FAIL|FAIL|ok|PASS)|panic' | head -40)
fi

if [[ -n $build_pid ]]; then
	say "waiting for the llama-bench build"
	wait "$build_pid"
fi
[[ -n $llama_bench && -x $llama_bench ]] && progs+=(llama) || { [[ -n $llama_bench ]] && say "no llama-bench at $llama_bench"; }

# one PROG MODEL TEST: one measurement, its table row.
one() {
	local args=()
	case $3 in
	tg) args=(-p 0 -n 128) ;;
	pp) args=(-p 512 -n 0) ;;
	*) echo "gpu.sh: unknown test $3 (tg, pp)" >&2; return ;;
	esac
	[[ -n $depth ]] && args+=(-d "$depth")
	local f=$work/$2-q1_0.gguf
	if [[ $1 == llama ]]; then
		timeout 600 "$llama_bench" -m "$f" -ngl 99 -fa 1 "${args[@]}" -r "$reps" 2>&1 | grep -E '^\| [a-z]' | grep -v '^| model'
	else
		timeout 600 "$work/$1" bench --model "$f" --backend gpu "${args[@]}" -r "$reps" 2>&1 | grep -E '(pp|tg)[0-9]+'
	fi
}

for r in $(seq 1 "$rounds"); do
	for m in $models; do
		for t in $tests; do
			say "round $r, $m, $t"
			for p in "${progs[@]}"; do echo "$p: $(one "$p" "$m" "$t" | tr '\n' ' ')"; done
		done
	done
done
say done
