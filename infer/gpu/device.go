// Package gpu runs Qwen3-architecture models on a GPU through WebGPU
// (cogentcore/webgpu v0.23.0, wgpu-native 0.19): weights, KV cache and
// activations stay on the device, each decoded token is one command buffer,
// and greedy decoding reads back only the token id. It registers itself as
// the "gpu" backend; importing it pulls in cgo and wgpu-native, so the CPU
// path never depends on it.
package gpu

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cogentcore/webgpu/wgpu"
)

// Device is an opened WebGPU device with the limits this backend asked for.
type Device struct {
	instance *wgpu.Instance
	adapter  *wgpu.Adapter
	dev      *wgpu.Device
	queue    *wgpu.Queue

	Info       wgpu.AdapterInfo
	Limits     wgpu.Limits // what was granted
	Timestamps bool        // timestamp queries available

	kernels map[string]*kernel
	// created counts what the device made (kernels.go), so that tests can
	// pin that decoding after the load's warm-up creates nothing
	created Created
}

// Created counts the pipelines, bind groups and buffers a Device made.
type Created struct {
	Pipelines, BindGroups, Buffers int
	BufferBytes                    uint64
	// Labels, when not nil, collects "kind label" of each (tests turn it
	// on to tell what was made)
	Labels []string
}

// DeviceOptions choose and size the device.
type DeviceOptions struct {
	// Adapter, when not empty, keeps only adapters whose name, driver or
	// backend contains it (case-insensitive).
	Adapter string
	// AllowSoftware admits CPU-emulated adapters (Mesa llvmpipe/lavapipe):
	// slower than the CPU backend, but they run the real shaders in tests.
	// Naming one with Adapter also admits it.
	AllowSoftware bool
	// Debug brings back wgpu-native's warnings and debug log.
	Debug bool
	// MaxBinding is the largest single buffer binding the caller will need
	// (bytes); Open fails with ErrOutOfMemory when the adapter's limit is
	// lower.
	MaxBinding uint64
}

// AdapterDescription is one line about an adapter, for listings and errors.
func AdapterDescription(info wgpu.AdapterInfo) string {
	// wgpu-native 0.19 puts a hex device id in Name and the product name
	// in DriverDescription.
	name := info.DriverDescription
	if name == "" {
		name = info.Name
	}
	s := fmt.Sprintf("%s (%s, %s", name, backendName(info.BackendType), adapterTypeName(info.AdapterType))
	if info.VendorName != "" {
		s += ", " + info.VendorName
	}
	return s + ")"
}

func backendName(b wgpu.BackendType) string {
	switch b {
	case wgpu.BackendTypeVulkan:
		return "Vulkan"
	case wgpu.BackendTypeMetal:
		return "Metal"
	case wgpu.BackendTypeD3D12:
		return "D3D12"
	case wgpu.BackendTypeOpenGL, wgpu.BackendTypeOpenGLES:
		return "GL"
	}
	return "other"
}

func adapterTypeName(t wgpu.AdapterType) string {
	switch t {
	case wgpu.AdapterTypeDiscreteGPU:
		return "discrete"
	case wgpu.AdapterTypeIntegratedGPU:
		return "integrated"
	case wgpu.AdapterTypeCPU:
		return "cpu"
	}
	return "unknown"
}

// adapterRank orders adapters: discrete first, then integrated, then
// software; within a kind Vulkan/Metal/D3D12 before GL, whose compute path
// lacks timestamp queries.
func adapterRank(info wgpu.AdapterInfo) int {
	r := 0
	switch info.AdapterType {
	case wgpu.AdapterTypeDiscreteGPU:
		r = 0
	case wgpu.AdapterTypeIntegratedGPU:
		r = 10
	case wgpu.AdapterTypeCPU:
		r = 30
	default:
		r = 20
	}
	if info.BackendType == wgpu.BackendTypeOpenGL || info.BackendType == wgpu.BackendTypeOpenGLES {
		r += 5
	}
	return r
}

// createInstance wraps wgpu.CreateInstance, which panics when wgpu-native
// cannot start (no loader at all): that is "no adapter", not a crash.
func createInstance(debug bool) (inst *wgpu.Instance, err error) {
	defer func() {
		if r := recover(); r != nil {
			inst, err = nil, fmt.Errorf("gpu: creating a WebGPU instance: %v: %w", r, ErrNoAdapter)
		}
	}()
	// wgpu-native's warnings (missing swapchain extensions, surfaceless
	// platform) concern windowing, which a compute-only engine never uses,
	// and would land on the user's terminal; errors still show.
	// debug brings them all back.
	level := wgpu.LogLevelError
	if debug {
		level = wgpu.LogLevelDebug
	}
	wgpu.SetLogLevel(level)
	return wgpu.CreateInstance(nil), nil
}

// ListAdapters describes every adapter WebGPU sees, best first (debug as
// DeviceOptions.Debug).
func ListAdapters(debug bool) ([]string, error) {
	inst, err := createInstance(debug)
	if err != nil {
		return nil, err
	}
	defer inst.Release()
	adapters := inst.EnumerateAdapters(nil)
	sortAdapters(adapters)
	var out []string
	for _, a := range adapters {
		out = append(out, AdapterDescription(a.GetInfo()))
		a.Release()
	}
	return out, nil
}

func sortAdapters(adapters []*wgpu.Adapter) {
	infos := make(map[*wgpu.Adapter]wgpu.AdapterInfo, len(adapters))
	for _, a := range adapters {
		infos[a] = a.GetInfo()
	}
	sort.SliceStable(adapters, func(i, j int) bool {
		return adapterRank(infos[adapters[i]]) < adapterRank(infos[adapters[j]])
	})
}

// OpenDevice picks an adapter and opens a device with the limits a model
// needs.
func OpenDevice(opts DeviceOptions) (*Device, error) {
	inst, err := createInstance(opts.Debug)
	if err != nil {
		return nil, err
	}
	adapters := inst.EnumerateAdapters(nil)
	sortAdapters(adapters)
	var chosen *wgpu.Adapter
	var seen []string
	filter := strings.ToLower(opts.Adapter)
	for _, a := range adapters {
		info := a.GetInfo()
		desc := AdapterDescription(info)
		seen = append(seen, desc)
		software := info.AdapterType == wgpu.AdapterTypeCPU
		if chosen == nil && (!software || opts.AllowSoftware) && (filter == "" || strings.Contains(strings.ToLower(desc), filter)) {
			chosen = a
			continue
		}
		a.Release()
	}
	if chosen == nil {
		inst.Release()
		if len(seen) == 0 {
			return nil, fmt.Errorf("gpu: WebGPU found no adapter (install a Vulkan driver, e.g. mesa-vulkan-drivers): %w", ErrNoAdapter)
		}
		if filter == "" {
			return nil, fmt.Errorf("gpu: only software adapters (%s); they are used only when allowed or named: %w", strings.Join(seen, "; "), ErrNoAdapter)
		}
		return nil, fmt.Errorf("gpu: no adapter matches %q (have: %s): %w", opts.Adapter, strings.Join(seen, "; "), ErrNoAdapter)
	}

	supported := chosen.GetLimits().Limits
	if opts.MaxBinding > supported.MaxStorageBufferBindingSize {
		chosen.Release()
		inst.Release()
		return nil, fmt.Errorf("gpu: a %d MiB buffer exceeds the adapter's %d MiB storage binding limit: %w",
			opts.MaxBinding>>20, supported.MaxStorageBufferBindingSize>>20, ErrOutOfMemory)
	}

	// Start from the "undefined" sentinels so wgpu-native keeps its base
	// limits for everything not named here. Never copy the adapter's
	// MaxBufferSize (u64::MAX equals the sentinel) or MaxPushConstantSize
	// (garbage in this binding).
	limits := wgpu.DefaultLimits()
	limits.MaxStorageBufferBindingSize = supported.MaxStorageBufferBindingSize
	limits.MaxBufferSize = min(supported.MaxBufferSize, 1<<40)
	if limits.MaxBufferSize < limits.MaxStorageBufferBindingSize {
		limits.MaxBufferSize = limits.MaxStorageBufferBindingSize
	}
	// attn_lat with its Q8_0 epilogue and lookup table binds 12
	limits.MaxStorageBuffersPerShaderStage = min(supported.MaxStorageBuffersPerShaderStage, 16)
	limits.MaxComputeWorkgroupStorageSize = supported.MaxComputeWorkgroupStorageSize
	limits.MaxComputeInvocationsPerWorkgroup = min(supported.MaxComputeInvocationsPerWorkgroup, 1024)
	limits.MaxComputeWorkgroupSizeX = min(supported.MaxComputeWorkgroupSizeX, 1024)
	limits.MaxComputeWorkgroupsPerDimension = supported.MaxComputeWorkgroupsPerDimension

	var features []wgpu.FeatureName
	timestamps := chosen.HasFeature(wgpu.FeatureNameTimestampQuery)
	if timestamps {
		features = append(features, wgpu.FeatureNameTimestampQuery)
	}
	dev, err := chosen.RequestDevice(&wgpu.DeviceDescriptor{
		Label:            "bonsai",
		RequiredFeatures: features,
		RequiredLimits:   &wgpu.RequiredLimits{Limits: limits},
	})
	if err != nil {
		info := chosen.GetInfo()
		chosen.Release()
		inst.Release()
		return nil, fmt.Errorf("gpu: opening %s: %v: %w", AdapterDescription(info), err, ErrNoAdapter)
	}
	d := &Device{
		instance:   inst,
		adapter:    chosen,
		dev:        dev,
		queue:      dev.GetQueue(),
		Info:       chosen.GetInfo(),
		Limits:     dev.GetLimits().Limits,
		Timestamps: timestamps,
		kernels:    map[string]*kernel{},
	}
	return d, nil
}

// Name describes the adapter.
func (d *Device) Name() string { return AdapterDescription(d.Info) }

// Close releases the device and everything it owns.
func (d *Device) Close() {
	if d == nil || d.dev == nil {
		return
	}
	for _, k := range d.kernels {
		k.layout.Release()
		k.pipe.Release()
	}
	d.kernels = nil
	d.queue.Release()
	d.dev.Release()
	d.adapter.Release()
	d.instance.Release()
	d.dev = nil
}
