#!/bin/bash
# H200 run 4: bit planes written by the decode RMSNorm (A/B with BONSAI_GPU_PLANES=off).
S=$(date +%s)
for f in .gl/*.deb .carry/gpu/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
gunzip -c .carry/gpu/bonsai.gz >/tmp/b; chmod +x /tmp/b; cd /tmp
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
f() { grep -v "XDG\|wgpu\]\|^error: XDG" ; }
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
t synth
timeout 170 /tmp/b synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & timeout 170 /tmp/b synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & wait
for m in 8 17; do
  t "bench $m planes (default)"; timeout 60 /tmp/b bench --model $m.gguf --backend gpu -r 3 2>&1 | f | grep -E "tg|pp"
  t "bench $m planes off"; BONSAI_GPU_PLANES=off timeout 40 /tmp/b bench --model $m.gguf --backend gpu -r 3 -p 0 2>&1 | f | grep -E "tg|pp"
done
t "phases 8b"; timeout 60 /tmp/b gpu --model 8.gguf -p 16 -n 128 2>&1 | f | tail -25
t "phases 8b planes off"; BONSAI_GPU_PLANES=off timeout 60 /tmp/b gpu --model 8.gguf -p 16 -n 128 2>&1 | f | tail -25
t done
