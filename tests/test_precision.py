"""utils.precision: which 16-bit type to train with, and what a CPU's bf16 units are."""
from __future__ import annotations

import torch

from utils import precision as P


def test_cpu_bf16_units_reads_torch_capabilities(monkeypatch):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx512_bf16": True, "amx_bf16": False, "avx2": True})
    assert P.cpu_bf16_units() == {"avx512_bf16": True, "amx_bf16": False}
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {})
    assert P.cpu_bf16_units() == {"avx512_bf16": False, "amx_bf16": False}


def test_cpu_bf16_units_without_the_probe(monkeypatch):
    monkeypatch.delattr(torch.cpu, "get_capabilities")
    assert P.cpu_bf16_units() == {"avx512_bf16": False, "amx_bf16": False}


def test_bf16_is_the_cpu_choice_whatever_its_units(monkeypatch):
    # has_native_bf16 answers "which 16-bit type", not "is it fast": the CPU's units do not change it.
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {})
    assert P.has_native_bf16("cpu") and P.resolve_amp("auto", "cpu") == torch.bfloat16
    assert P.make_grad_scaler(torch.bfloat16, "cpu") is None


def test_emulated_bf16_gpu_gets_fp16(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    monkeypatch.setattr(torch.version, "hip", None)
    assert not P.has_native_bf16("cuda") and P.resolve_amp("auto", "cuda") == torch.float16
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    assert P.has_native_bf16("cuda") and P.resolve_amp("auto", "cuda") == torch.bfloat16
