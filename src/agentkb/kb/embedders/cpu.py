"""What this CPU computes in hardware, from Linux's /proc/cpuinfo flags (none elsewhere): bfloat16 (the torch
engine's precision) and int8 dot products (VNNI, the ONNX engine's int8 kernels)."""

from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
# int8 dot products in one instruction: AVX512-VNNI (Cascade Lake, Zen 4 on), AVX-VNNI (Alder Lake on), AMX
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The first processor's flags (empty where the file cannot be read or has none)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "flags:")
    return frozenset(line.split(":", 1)[1].split())


def has_bf16(cpuinfo: Path = CPUINFO) -> bool:
    """Whether this CPU computes bfloat16 in hardware (AVX512-BF16 or AMX)."""
    return not BF16_FLAGS.isdisjoint(cpu_flags(cpuinfo))


def has_vnni(cpuinfo: Path = CPUINFO) -> bool:
    """Whether this CPU has int8 dot-product instructions (AVX512-VNNI, AVX-VNNI or AMX-INT8)."""
    return not VNNI_FLAGS.isdisjoint(cpu_flags(cpuinfo))
