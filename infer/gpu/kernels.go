package gpu

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/bonsai-chat/bonsai/shaders"
	"github.com/cogentcore/webgpu/wgpu"
)

// kernel is a compiled, specialised compute pipeline and its bind group
// layout (auto layout: exactly the bindings the shader declares).
type kernel struct {
	name   string
	pipe   *wgpu.ComputePipeline
	layout *wgpu.BindGroupLayout
	// dispatches in the pass being encoded (the Backend's census)
	passDispatches int
	// context is the KV cache context its constants specialise it on
	// (CTX, SCTX), or 0: its ops must not outlive a cache of that size
	context int
}

// kernel compiles (once) the WGSL kernel name specialised by defs.
func (d *Device) kernel(name string, defs map[string]shaders.Const) (*kernel, error) {
	key := kernelKey(name, defs)
	if k, ok := d.kernels[key]; ok {
		return k, nil
	}
	src, err := shaders.Source(name, defs)
	if err != nil {
		return nil, err
	}
	mod, err := d.dev.CreateShaderModule(&wgpu.ShaderModuleDescriptor{
		Label:          name,
		WGSLDescriptor: &wgpu.ShaderModuleWGSLDescriptor{Code: src},
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: compiling %s: %w", key, err)
	}
	defer mod.Release()
	pipe, err := d.dev.CreateComputePipeline(&wgpu.ComputePipelineDescriptor{
		Label:   name,
		Compute: wgpu.ProgrammableStageDescriptor{Module: mod, EntryPoint: "main"},
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: creating pipeline %s: %w", key, err)
	}
	k := &kernel{name: name, pipe: pipe, layout: pipe.GetBindGroupLayout(0), context: contextOf(defs)}
	d.kernels[key] = k
	d.created.Pipelines++
	d.created.note("pipeline", key)
	return k, nil
}

// contextOf is the cache context defs specialise a kernel on: their CTX
// or SCTX (the same where both are given), or 0.
func contextOf(defs map[string]shaders.Const) int {
	for _, name := range []string{"CTX", "SCTX"} {
		if c, ok := defs[name]; ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(c.Value, "u"))
			return n
		}
	}
	return 0
}

func (c *Created) note(kind, label string) {
	if c.Labels != nil {
		c.Labels = append(c.Labels, kind+" "+label)
	}
}

func kernelKey(name string, defs map[string]shaders.Const) string {
	keys := make([]string, 0, len(defs))
	for k := range defs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, defs[k].Value)
	}
	return b.String()
}

// binding is one buffer range of a bind group.
type binding struct {
	buf    *wgpu.Buffer
	offset uint64
	size   uint64
	// slot, when > 0, is the binding number + 1 (for a shader whose
	// optional bindings leave gaps); 0 means the binding's position.
	slot uint32
}

// at places b at binding number n.
func at(n uint32, b binding) binding {
	b.slot = n + 1
	return b
}

func whole(b *wgpu.Buffer) binding { return binding{buf: b, size: b.GetSize()} }

// bindGroup creates a bind group of k over bufs (binding i = bufs[i]).
func (d *Device) bindGroup(k *kernel, bufs ...binding) (*wgpu.BindGroup, error) {
	entries := make([]wgpu.BindGroupEntry, len(bufs))
	for i, b := range bufs {
		n := uint32(i)
		if b.slot > 0 {
			n = b.slot - 1
		}
		entries[i] = wgpu.BindGroupEntry{Binding: n, Buffer: b.buf, Offset: b.offset, Size: b.size}
	}
	bg, err := d.dev.CreateBindGroup(&wgpu.BindGroupDescriptor{Label: k.name, Layout: k.layout, Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("gpu: binding %s: %w", k.name, err)
	}
	d.created.BindGroups++
	d.created.note("bindgroup", k.name)
	return bg, nil
}

// Buffer usages.
const (
	storageUsage = wgpu.BufferUsageStorage | wgpu.BufferUsageCopyDst | wgpu.BufferUsageCopySrc
	readUsage    = wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst
)

// newBuffer allocates a zeroed device buffer (size rounded up to 16 bytes).
func (d *Device) newBuffer(label string, size uint64, usage wgpu.BufferUsage) (*wgpu.Buffer, error) {
	size = (max(size, 16) + 15) &^ 15
	if size > d.Limits.MaxBufferSize {
		return nil, fmt.Errorf("gpu: buffer %s of %d MiB exceeds the device's %d MiB limit: %w",
			label, size>>20, d.Limits.MaxBufferSize>>20, ErrOutOfMemory)
	}
	b, err := d.dev.CreateBuffer(&wgpu.BufferDescriptor{Label: label, Size: size, Usage: usage})
	if err != nil {
		return nil, fmt.Errorf("gpu: allocating %s (%d bytes): %v: %w", label, size, err, ErrOutOfMemory)
	}
	d.created.Buffers++
	d.created.BufferBytes += size
	if d.created.Labels != nil {
		d.created.note("buffer", fmt.Sprintf("%s (%d bytes)", label, size))
	}
	return b, nil
}

// upload allocates a storage buffer holding data.
func (d *Device) upload(label string, data []byte) (*wgpu.Buffer, error) {
	b, err := d.newBuffer(label, uint64(len(data)), storageUsage)
	if err != nil {
		return nil, err
	}
	if len(data) > 0 {
		padded := data
		if len(data)%4 != 0 {
			padded = make([]byte, (len(data)+3)&^3)
			copy(padded, data)
		}
		if err := d.queue.WriteBuffer(b, 0, padded); err != nil {
			b.Release()
			return nil, fmt.Errorf("gpu: uploading %s: %w", label, err)
		}
	}
	return b, nil
}
