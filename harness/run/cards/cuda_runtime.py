"""The few CUDA runtime calls a GPU card makes itself: a stream, page-locking host memory, async copies.

They are called through `ctypes` on libcudart.so.13, the CUDA runtime onnxruntime-gpu itself loads
(`onnxruntime.preload_dlls` from NVIDIA's `nvidia-cuda-runtime` wheel, pinned in requirements-gpu.lock),
so the card's stream, registrations and copies live in the same CUDA context as onnxruntime's kernels and
no further package is needed. (cuda-python's `cuda-bindings` 13.x would do the same through Cython; it
adds a wheel to the GPU image for five functions.)

Page-locking is per process (cudaHostRegisterPortable: for every device and context), so host memory that
several cards copy from (a NUMA node's sample replica, read by every card on that node) is registered once and
unregistered when the last card lets go of it (`_REGISTERED`).

`HostCopies` is the same interface on the CPU: the device is host memory, a copy is a memmove and nothing
is pinned, so the IO-binding card runs the same code path on onnxruntime's CPU provider (the tests).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Protocol

from harness.core.errors import ApplianceError

H2D, D2H = 1, 2  # cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost
NON_BLOCKING = 1  # cudaStreamNonBlocking: no implicit sync with the legacy default stream
PORTABLE = 1      # cudaHostRegisterPortable: pinned for every context
_REGISTERED: dict[int, int] = {}  # page-locked address -> the CudaCopies holding it (registered once per process)
_REGISTRY = threading.Lock()


class Copies(Protocol):
    """What the IO-binding card needs of its device: copies in order on its stream, and a way to wait."""

    device: str   # onnxruntime's device name for OrtValues: "cpu" | "cuda"
    stream: int   # the cudaStream_t the card's session computes on; 0 on the CPU
    needs_pinning: bool  # a copy from pageable host memory is no DMA: what the card copies from is page-locked first

    def to_device(self, dst: int, src: int, nbytes: int) -> None: ...

    def to_host(self, dst: int, src: int, nbytes: int) -> None: ...

    def sync(self) -> None: ...

    def pin(self, ptr: int, nbytes: int) -> str | None:
        """Page-lock host memory for DMA until `unpin` (or `close`): None once it is, else why not (one line)."""

    def unpin(self, ptr: int) -> None:
        """Let go of memory `pin` page-locked (nothing if it did not)."""

    def unpin_all(self) -> None:
        """Let go of everything `pin` page-locked, the stream kept (a session tune keeps computes on it)."""

    def close(self) -> None: ...


class HostCopies:
    """The CPU provider's "device" is host memory: the copies are memmoves, synchronous; nothing to pin."""

    device = "cpu"
    stream = 0
    needs_pinning = False

    def to_device(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def to_host(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def sync(self) -> None:
        pass

    def pin(self, ptr: int, nbytes: int) -> str | None:
        return "host memory: nothing to page-lock"

    def unpin(self, ptr: int) -> None:
        pass

    def unpin_all(self) -> None:
        pass

    def close(self) -> None:
        pass


def _cudart() -> ctypes.CDLL:
    """libcudart.so.13 as onnxruntime loads it: already loaded (by soname), else after onnxruntime.preload_dlls."""
    try:
        return ctypes.CDLL("libcudart.so.13")
    except OSError:
        import contextlib
        import io

        import onnxruntime as ort

        with contextlib.redirect_stdout(io.StringIO()):  # it prints each library it cannot find
            ort.preload_dlls()
        return ctypes.CDLL("libcudart.so.13")


class CudaCopies:
    """A non-blocking CUDA stream on GPU `ordinal`; copies are cudaMemcpyAsync on it (a DMA from page-locked
    memory), `sync` waits for the stream. Use on one thread (the card's), which it makes current on the GPU."""

    device = "cuda"
    needs_pinning = True

    def __init__(self, ordinal: int, label: str) -> None:
        self.label = label
        self.ordinal = ordinal
        try:
            self.rt = _cudart()
        except OSError as exc:
            raise ApplianceError(f"{label}: the CUDA runtime libcudart.so.13 does not load ({exc}); install NVIDIA's "
                                 f"wheels from requirements-gpu.lock") from None
        for name in ("cudaMemcpyAsync",):
            getattr(self.rt, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                               ctypes.c_void_p]
        self.rt.cudaHostRegister.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
        self.rt.cudaHostUnregister.argtypes = [ctypes.c_void_p]
        self.rt.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
        self.rt.cudaStreamDestroy.argtypes = [ctypes.c_void_p]
        self.rt.cudaGetErrorString.restype = ctypes.c_char_p
        self._check(self.rt.cudaSetDevice(ordinal), f"cudaSetDevice({ordinal})")
        handle = ctypes.c_void_p()
        self._check(self.rt.cudaStreamCreateWithFlags(ctypes.byref(handle), NON_BLOCKING), "cudaStreamCreateWithFlags")
        self.stream = int(handle.value or 0)
        self._pinned: list[int] = []

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            text = self.rt.cudaGetErrorString(status)
            raise ApplianceError(f"{self.label}: {what} failed: CUDA error {status} "
                                 f"({text.decode() if text else '?'})")

    def to_device(self, dst: int, src: int, nbytes: int) -> None:
        self._check(self.rt.cudaMemcpyAsync(dst, src, nbytes, H2D, self.stream), "cudaMemcpyAsync host to device")

    def to_host(self, dst: int, src: int, nbytes: int) -> None:
        self._check(self.rt.cudaMemcpyAsync(dst, src, nbytes, D2H, self.stream), "cudaMemcpyAsync device to host")

    def sync(self) -> None:
        self._check(self.rt.cudaStreamSynchronize(self.stream), "cudaStreamSynchronize")

    def pin(self, ptr: int, nbytes: int) -> str | None:
        """Page-lock host memory for DMA (cudaHostRegister, once per process however many cards pin it); None once
        it is, else the driver's refusal (a limit, no memory): copies from it then are no DMA. Any thread (the
        samples' loading thread pins the replica): it makes this card's GPU current there first."""
        with _REGISTRY:
            if ptr not in _REGISTERED:
                self.rt.cudaSetDevice(self.ordinal)
                status = self.rt.cudaHostRegister(ptr, nbytes, PORTABLE)
                if status != 0:
                    self.rt.cudaGetLastError()  # clear it: the card's later calls must not see it
                    text = self.rt.cudaGetErrorString(status)
                    return f"cudaHostRegister of {nbytes} bytes failed: CUDA error {status} " \
                           f"({text.decode() if text else '?'})"
            _REGISTERED[ptr] = _REGISTERED.get(ptr, 0) + 1
        self._pinned.append(ptr)
        return None

    def unpin(self, ptr: int) -> None:
        """cudaHostUnregister once the last card holding `ptr` lets go of it."""
        if ptr not in self._pinned:
            return
        self._pinned.remove(ptr)
        with _REGISTRY:
            _REGISTERED[ptr] -= 1
            if not _REGISTERED[ptr]:
                del _REGISTERED[ptr]
                self.rt.cudaSetDevice(self.ordinal)
                self.rt.cudaHostUnregister(ptr)

    def unpin_all(self) -> None:
        for ptr in list(self._pinned):
            self.unpin(ptr)

    def close(self) -> None:
        self.unpin_all()
        if self.stream:
            self.rt.cudaStreamSynchronize(self.stream)
            self.rt.cudaStreamDestroy(self.stream)
            self.stream = 0
