#!/bin/bash
# H200 run 12: the RMSNorm+Q8_0 fusion into q1_xq, A/B in one session: old = main at 69c8bc8 (run 11's
# binary), new = main at 530f1cc, the same command alternating; no llama.cpp build (its figures beside
# old are run 11's). Numerics first: the fusion's exactness test and the decode tests on the card.
# Carried: .gl/, .carry/gpu12/g12.tar.xz (old, new, new.test). Results in $OUT/run12.log.
S=$(date +%s)
C=$PWD/.carry/gpu12
R=$PWD
exec > >(tee "${OUT:-/tmp}/run12.log") 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
unxz() { xz -dc "$1" 2>/dev/null || python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)" "$1"; }
[ -x /tmp/new ] || unxz $C/g12.tar.xz | tar x -C /tmp
cd /tmp
f() { grep -v "XDG\|wgpu\]\|^error: XDG" ; }
/tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s8=$!
/tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s17=$!
t "numerics on the H200"
( cd $R/infer/gpu && timeout 150 /tmp/new.test -test.run 'TestNormQ8FusionIsExact|TestFusedDecode|TestGreedy|TestMatMul|TestAttnLat|TestChainPick' 2>&1 | f | grep -E "^ *(--- FAIL|ok|FAIL|PASS)|differ|panic" | head -20 )
wait $s8 $s17 # never a bare wait: it would also wait for tee's process substitution
for m in 8 17; do
	t "bonsai gpu $m new"; timeout 60 /tmp/new gpu --model $m.gguf -p 16 -n 128 --plain=false 2>&1 | f | grep -E "dispatches|chained"
	for r in 1 2 3; do
		for b in old new; do echo "$b: $(timeout 60 /tmp/$b bench --model $m.gguf --backend gpu -p 0 -n 128 -r 5 2>&1 | grep tg128)"; done
	done
	for b in old new old new; do echo "$b sampled: $(timeout 60 /tmp/$b run --model $m.gguf --backend gpu --max-tokens 128 --format jsonl 'Tell me a long story about the sea, and then another one.' 2>/dev/null | tail -1 | grep -o '"decode_tps":[0-9.]*')"; done
done
t done
