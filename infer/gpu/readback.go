package gpu

/*
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdlib.h>
#include <sched.h>
#include <time.h>

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

// The callback only records the status in C memory that bonsai_map_read
// allocated, so no Go pointer or cgo.Handle ever crosses
// into wgpu (the binding's MapAsync passes &handle and can crash under GC).
static void bonsai_map_done(int status, void* userdata) {
	*(volatile int*)userdata = status;
}

static uint64_t bonsai_now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

// bonsai_poll_until waits for the device without ever blocking inside wgpu:
// until *flag leaves -2 (a map callback ran) or, with flag NULL, until no
// submission is in flight. It returns 0, or -1 after limit_ns.
//
// wgpuDevicePoll(wait=1) is unsafe here: wgpu-core 0.19 waits on the fence
// for at most 5 s (CLEANUP_WAIT_MS) and then treats the awaited submission
// as complete whether or not the wait timed out. A pass that runs longer
// (a long prefill on a software adapter, or any pass on a loaded machine)
// then has its command pool reset and its buffers destroyed while the
// driver still executes it, and a map "completes" before the copy into
// it. Non-blocking polls read the fence's real value, so nothing is
// released early.
//
// Spinning costs a core; a 2 ms spin with yields covers a fast GPU's
// decode step (its token reaches the host within one poll, sooner than a
// blocking wait wakes up), and then naps of 1/256 of the time already
// waited (at most 1 ms) bound the added latency to under 0.4 %.
static int bonsai_poll_until(WGPUDevice device, volatile int* flag, uint64_t limit_ns) {
	uint64_t start = bonsai_now_ns();
	for (;;) {
		uint32_t empty = wgpuDevicePoll(device, 0, NULL);
		if (flag != NULL ? *flag != -2 : empty != 0) {
			return 0;
		}
		uint64_t waited = bonsai_now_ns() - start;
		if (waited > limit_ns) {
			return -1;
		}
		if (waited < 2000000) {
			sched_yield();
			continue;
		}
		uint64_t nap = waited / 256;
		if (nap > 1000000) {
			nap = 1000000;
		}
		struct timespec ts = {0, (long)nap};
		nanosleep(&ts, NULL);
	}
}

// bonsai_map_read maps [offset, offset+size) of a MapRead buffer, waits for
// the GPU, copies the bytes into dst and unmaps. Returns the wgpu map status
// (0 on success) or -1 when the map did not complete within limit_ns.
static int bonsai_map_read(WGPUDevice device, WGPUBuffer buffer, size_t offset, size_t size, void* dst, uint64_t limit_ns) {
	// Heap, not stack: if the map never completes, a late callback must
	// still find valid memory (it is then leaked on purpose).
	volatile int* pending = (volatile int*)malloc(sizeof(int));
	if (pending == NULL) {
		return -4;
	}
	*pending = -2;
	wgpuBufferMapAsync(buffer, 1, offset, size, bonsai_map_done, (void*)pending);
	if (bonsai_poll_until(device, pending, limit_ns) != 0) {
		return -1;
	}
	int status = *pending;
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

static int bonsai_wait_idle(WGPUDevice device, uint64_t limit_ns) {
	return bonsai_poll_until(device, NULL, limit_ns);
}
*/
import "C"

import (
	"fmt"
	"time"
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

// gpuWaitLimit bounds one wait for the device. It is long because a
// software adapter may take many minutes over a large prefill batch; a
// wait that ends there reports the device lost.
const gpuWaitLimit = time.Hour

func deviceHandle(dev *wgpu.Device) C.WGPUDevice {
	return C.WGPUDevice((*deviceHandles)(unsafe.Pointer(dev)).device)
}

// waitIdle blocks until every submitted command buffer has finished.
func waitIdle(dev *wgpu.Device) error {
	if C.bonsai_wait_idle(deviceHandle(dev), C.uint64_t(gpuWaitLimit)) != 0 {
		return fmt.Errorf("gpu: the device did not finish within %v: %w", gpuWaitLimit, ErrDeviceLost)
	}
	return nil
}

// readBuffer copies size bytes at offset of a MapRead|CopyDst buffer into
// dst, blocking until all submitted work that writes it has finished.
func readBuffer(dev *wgpu.Device, buf *wgpu.Buffer, offset uint64, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	b := (*bufferHandles)(unsafe.Pointer(buf)).buffer
	// dst is Go memory passed for the duration of the call only (cgo rules allow it).
	status := C.bonsai_map_read(deviceHandle(dev), C.WGPUBuffer(b), C.size_t(offset), C.size_t(len(dst)), unsafe.Pointer(&dst[0]), C.uint64_t(gpuWaitLimit))
	switch {
	case status == 0:
		return nil
	case status == mapStatusDeviceLost:
		return fmt.Errorf("gpu: reading back results: %w", ErrDeviceLost)
	case status == -1:
		return fmt.Errorf("gpu: reading back results: map did not complete within %v: %w", gpuWaitLimit, ErrDeviceLost)
	default:
		return fmt.Errorf("gpu: reading back results: map failed with status %d", int(status))
	}
}
