package gpu

/*
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdlib.h>

// Only the handful of wgpu-native entry points the readback needs, declared
// with opaque handles so this file does not depend on the binding's header
// path. They resolve against the libwgpu_native.a the binding links.
typedef struct WGPUBufferImpl* WGPUBuffer;
typedef struct WGPUDeviceImpl* WGPUDevice;
typedef void (*bonsaiMapCallback)(int status, void* userdata);

void wgpuBufferMapAsync(WGPUBuffer buffer, uint32_t mode, size_t offset, size_t size, bonsaiMapCallback callback, void* userdata);
uint32_t wgpuDevicePoll(WGPUDevice device, uint32_t wait, void const* wrappedSubmissionIndex);
void const* wgpuBufferGetConstMappedRange(WGPUBuffer buffer, size_t offset, size_t size);
void wgpuBufferUnmap(WGPUBuffer buffer);

// The callback only records the status in C memory owned by the caller's
// stack frame in bonsai_map_read, so no Go pointer or cgo.Handle ever crosses
// into wgpu (the binding's MapAsync passes &handle and can crash under GC).
static void bonsai_map_done(int status, void* userdata) {
	*(volatile int*)userdata = status;
}

// bonsai_map_read maps [offset, offset+size) of a MapRead buffer, waits for
// the GPU, copies the bytes into dst and unmaps. Returns the wgpu map status
// (0 on success) or -1 when polling never completed the map.
static int bonsai_map_read(WGPUDevice device, WGPUBuffer buffer, size_t offset, size_t size, void* dst) {
	// Heap, not stack: if the map never completes, a late callback must
	// still find valid memory (it is then leaked on purpose).
	volatile int* pending = (volatile int*)malloc(sizeof(int));
	if (pending == NULL) {
		return -4;
	}
	*pending = -2;
	wgpuBufferMapAsync(buffer, 1, offset, size, bonsai_map_done, (void*)pending);
	for (int i = 0; *pending == -2 && i < 100000; i++) {
		wgpuDevicePoll(device, 1, NULL);
	}
	int status = *pending;
	if (status == -2) {
		return -1;
	}
	free((void*)pending);
	if (status != 0) {
		return status;
	}
	void const* src = wgpuBufferGetConstMappedRange(buffer, offset, size);
	if (src == NULL) {
		wgpuBufferUnmap(buffer);
		return -3;
	}
	memcpy(dst, src, size);
	wgpuBufferUnmap(buffer);
	return 0;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// bufferHandles mirrors the layout of wgpu.Buffer in cogentcore/webgpu
// v0.23.0 (device handle, then buffer handle). The binding keeps both fields
// private; the readback shim needs the raw handles.
type bufferHandles struct {
	device unsafe.Pointer
	buffer unsafe.Pointer
}

// deviceHandles mirrors wgpu.Device (one handle).
type deviceHandles struct {
	device unsafe.Pointer
}

// mapStatusDeviceLost is WGPUBufferMapAsyncStatus_DeviceLost.
const mapStatusDeviceLost = 3

// readBuffer copies size bytes at offset of a MapRead|CopyDst buffer into
// dst, blocking until all submitted work that writes it has finished.
func readBuffer(dev *wgpu.Device, buf *wgpu.Buffer, offset uint64, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	d := (*deviceHandles)(unsafe.Pointer(dev)).device
	b := (*bufferHandles)(unsafe.Pointer(buf)).buffer
	// dst is Go memory passed for the duration of the call only (cgo rules allow it).
	status := C.bonsai_map_read(C.WGPUDevice(d), C.WGPUBuffer(b), C.size_t(offset), C.size_t(len(dst)), unsafe.Pointer(&dst[0]))
	switch {
	case status == 0:
		return nil
	case status == mapStatusDeviceLost:
		return fmt.Errorf("gpu: reading back results: %w", ErrDeviceLost)
	case status == -1:
		return fmt.Errorf("gpu: reading back results: map never completed: %w", ErrDeviceLost)
	default:
		return fmt.Errorf("gpu: reading back results: map failed with status %d", int(status))
	}
}
