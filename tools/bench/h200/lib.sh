# Sourced by the H200 run scripts after they set S (start time) and send their output to the log: the
# Vulkan loader from .gl/, NVIDIA's ICD, and the helpers t (a timestamped heading), unxz (xz, or Python's
# lzma where the machine has no xz) and f (drops the loader's and wgpu's noise).
for deb in .gl/*.deb; do dpkg -x "$deb" /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
unxz() { xz -dc "$1" 2>/dev/null || python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)" "$1"; }
f() { grep -v "XDG\|wgpu\]\|^error: XDG" ; }
