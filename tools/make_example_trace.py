#!/usr/bin/env python3
"""Write the *synthetic* GPU trace that Day 22 shows to learners without a GPU (results/examples/).

    python tools/make_example_trace.py          # rewrites results/examples/day22_synthetic_resnet50_step.json.gz

Not a measurement. It is a Chrome trace in the layout ``torch.profiler``'s ``export_chrome_trace`` writes on a CUDA
machine (host ranges ``user_annotation``, their GPU mirrors ``gpu_user_annotation``, ``kernel``, ``gpu_memcpy`` and
``gpu_memset`` events on stream 7, the runtime calls that copy and synchronise), built from a model of three
ResNet50 training steps at batch 64 under bf16 autocast (channels_last, SGD with momentum, foreach):

- one kernel per operator of the real network, in its real order (53 convolutions with their BatchNorm, ReLU and
  residual adds, the autocast weight casts, the loss; the backward in reverse with data and weight gradients; the
  optimizer's multi-tensor kernels), with kernel names of the kind cuDNN, cuBLAS and ATen give them on Hopper;
- kernel durations from each operator's FLOPs or bytes (convolutions at 40 % of an H100's dense bf16 peak,
  element-wise kernels at 2 TB/s, at least 2.5 us each), so the step takes about 18 ms of GPU time;
- the host launching each kernel after a few microseconds of Python and dispatch, the GPU starting it once it is
  launched and the previous kernel has ended, and a ``loss.item()`` (``cudaStreamSynchronize``) at the end of each
  step;
- step 2 waits 14 ms for its batch (a slow DataLoader worker), so its GPU idles at the start.

The GPU check kit records a real trace of the same step (``results/day22/<gpu>_trace.json.gz``); Day 22 shows both,
each labelled. Deterministic: the same file every time.
"""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "examples" / "day22_synthetic_resnet50_step.json.gz"

BATCH = 64
PEAK_FLOPS = 990e12 * 0.40          # H100 SXM dense bf16 peak, at 40 % efficiency
BANDWIDTH = 2.0e12                  # bytes/s reached by element-wise kernels (HBM3 peak is 3.35 TB/s)
MIN_KERNEL_US = 2.5
PCIE_BYTES_PER_S = 24e9             # pinned host-to-device copies
PID_HOST, TID_HOST, PID_GPU, STREAM = 1, 1, 0, 7

CONV_FWD = ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_"
            "execute_segment_k_off_kernel__5x_cudnn")
CONV_DGRAD = CONV_FWD.replace("fprop", "dgrad")
CONV_WGRAD = CONV_FWD.replace("fprop", "wgrad")
BN_FWD = "void cudnn::bn_fw_tr_1C11_singleread_spec_kernel<__nv_bfloat16, float, float, 512, true, 1, true>(...)"
BN_BWD = "void cudnn::bn_bw_1C11_singleread_specialized<__nv_bfloat16, float, 512, 1, 2, 0>(...)"
RELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar"
        "(...)::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(...)")
RELU_BWD = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::threshold_kernel_impl"
            "<c10::BFloat16>(...)::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(...)")
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(...)"
CAST = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
        "{lambda(float)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, ...>(...)")
MAXPOOL = "void at::native::(anonymous namespace)::max_pool_forward_nhwc<c10::BFloat16, float>(...)"
MAXPOOL_BWD = "void at::native::(anonymous namespace)::max_pool_backward_nhwc<c10::BFloat16, float>(...)"
AVGPOOL = "void at::native::(anonymous namespace)::adaptive_average_pool_nhwc<c10::BFloat16>(...)"
AVGPOOL_BWD = "void at::native::(anonymous namespace)::adaptive_average_gradinput_nhwc<c10::BFloat16>(...)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
SOFTMAX = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::"
           "(anonymous namespace)::LogSoftMaxForwardEpilogue>(...)")
NLL = "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(...)"
NLL_BWD = "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, long>(...)"
SOFTMAX_BWD = ("void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, at::native::"
               "(anonymous namespace)::LogSoftMaxBackwardEpilogue>(...)")
FOREACH = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
           "TensorListMetadata<{depth}>, at::native::(anonymous namespace)::{functor}<float, {depth}, {r}, {w}>, "
           "{op}, float>(...)")


def resnet50_layers() -> list[dict]:
    """Every convolution of ResNet50 at 224 px with its output size: (cin, cout, kernel, stride, out_hw)."""
    convs = [dict(cin=3, cout=64, k=7, hw=112, block=None)]
    hw, cin = 56, 64
    for stage, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for b in range(blocks):
            out_hw = hw // 2 if (b == 0 and stage > 0) else hw
            convs.append(dict(cin=cin, cout=width, k=1, hw=hw, block=(stage, b, "a")))
            convs.append(dict(cin=width, cout=width, k=3, hw=out_hw, block=(stage, b, "b")))
            convs.append(dict(cin=width, cout=width * 4, k=1, hw=out_hw, block=(stage, b, "c")))
            if b == 0:
                convs.append(dict(cin=cin, cout=width * 4, k=1, hw=out_hw, block=(stage, b, "down")))
            cin, hw = width * 4, out_hw
    return convs


def conv_us(c: dict) -> float:
    flops = 2 * BATCH * c["hw"] ** 2 * c["cout"] * c["cin"] * c["k"] ** 2
    return max(MIN_KERNEL_US, flops / PEAK_FLOPS * 1e6)


def pointwise_us(numel: int, passes: float = 2.0) -> float:
    return max(MIN_KERNEL_US, numel * 2 * passes / BANDWIDTH * 1e6)        # bf16: 2 bytes per element


def forward_kernels() -> list[tuple[str, float]]:
    convs = resnet50_layers()
    out = [(CAST, pointwise_us(c["cin"] * c["cout"] * c["k"] ** 2, 3)) for c in convs]   # autocast weight casts
    out.append((CAST, pointwise_us(2048 * 1000, 3)))
    out.append((CAST, pointwise_us(BATCH * 3 * 224 * 224, 3)))                           # the input batch
    for c in convs:
        numel = BATCH * c["cout"] * c["hw"] ** 2
        out += [(CONV_FWD, conv_us(c)), (BN_FWD, pointwise_us(numel, 3))]
        if c["block"] is None:
            out += [(RELU, pointwise_us(numel)), (MAXPOOL, pointwise_us(numel, 1.25))]
        elif c["block"][2] in ("a", "b"):
            out.append((RELU, pointwise_us(numel)))
        elif c["block"][2] == "down" or (c["block"][2] == "c" and c["block"][1] > 0):
            out += [(ADD, pointwise_us(numel, 3)), (RELU, pointwise_us(numel))]
    out += [(AVGPOOL, pointwise_us(BATCH * 2048 * 49, 1)), (GEMM, 6.0), (SOFTMAX, 3.0), (NLL, 3.0)]
    return out


def backward_kernels() -> list[tuple[str, float]]:
    out = [(NLL_BWD, 3.0), (SOFTMAX_BWD, 3.0), (GEMM, 6.0), (GEMM, 5.0), (AVGPOOL_BWD, pointwise_us(BATCH * 2048 * 49))]
    for c in reversed(resnet50_layers()):
        numel = BATCH * c["cout"] * c["hw"] ** 2
        if c["block"] is not None and c["block"][2] in ("c", "down"):
            out.append((ADD, pointwise_us(numel, 3)))                  # gradient of the residual sum
        out += [(RELU_BWD, pointwise_us(numel, 3)), (BN_BWD, pointwise_us(numel, 5))]
        out.append((CONV_WGRAD, conv_us(c) * 1.1))
        if c["cin"] != 3:
            out.append((CONV_DGRAD, conv_us(c)))
        if c["block"] is None:
            out.insert(len(out) - 3, (MAXPOOL_BWD, pointwise_us(numel, 2.5)))
    return out


def optimizer_kernels() -> list[tuple[str, float]]:
    # SGD with momentum, foreach: weight decay off; buf.mul_(m).add_(g); p.add_(buf, alpha=-lr). 25.6 M fp32 params:
    # a CUDA 12 build splits each multi-tensor op into 3 launches (320 chunks of 65,536 elements each at depth 2); the
    # lock's CUDA 13 build fits it in one (2,240 chunks). The trace models 2, between the two.
    params = 25_557_032
    launches = 2
    per = params * 4 * 3 / BANDWIDTH * 1e6 / launches
    out = []
    for functor, depth, op in [("ScalarFunctor", 1, "std::multiplies<float>"),
                               ("BinaryOpListAlphaFunctor", 2, "std::plus<float>"),
                               ("BinaryOpListAlphaFunctor", 2, "std::plus<float>")]:
        out += [(FOREACH.format(depth=depth, functor=functor, r=depth, w=1, op=op), per)] * launches
    return out


def build() -> dict:
    rng = random.Random(22)
    events: list[dict] = []
    host = 0.0          # the host's clock (us)
    gpu_free = 0.0      # when the GPU's stream 7 finishes its last queued item

    def host_range(name, start, end):
        events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": PID_HOST, "tid": TID_HOST,
                       "ts": round(start, 3), "dur": round(end - start, 3)})

    def gpu(name, cat, launched_at, dur):
        nonlocal gpu_free
        start = max(launched_at + 4.0 + rng.uniform(0, 1.5), gpu_free)      # launch latency, then in order
        events.append({"ph": "X", "cat": cat, "name": name, "pid": PID_GPU, "tid": STREAM, "ts": round(start, 3),
                       "dur": round(dur, 3), "args": {"device": 0, "stream": STREAM}})
        gpu_free = start + dur
        return start, start + dur

    def launch_all(kernels, host_us_per_launch):
        nonlocal host
        spans = []
        for name, dur in kernels:
            host += host_us_per_launch * rng.uniform(0.8, 1.25)
            spans.append(gpu(name, "kernel", host, dur * rng.uniform(0.97, 1.03)))
        return spans

    def mirror(name, spans):
        if spans:
            events.append({"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": PID_GPU, "tid": STREAM,
                           "ts": round(spans[0][0], 3), "dur": round(spans[-1][1] - spans[0][0], 3)})

    host = 1000.0
    for step, loader_wait_us in [(1, 350.0), (2, 14_000.0), (3, 420.0)]:
        step_start, step_spans = host, []
        # data: wait for the loader, then copy the pinned batch (float32 images, int64 labels)
        data_start = host
        host += loader_wait_us
        copies = []
        for nbytes in (BATCH * 3 * 224 * 224 * 4, BATCH * 8):
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": PID_HOST,
                           "tid": TID_HOST, "ts": round(host, 3), "dur": 6.0})
            copies.append(gpu("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", host,
                              max(1.5, nbytes / PCIE_BYTES_PER_S * 1e6)))
            host += 8.0
        host_range("data", data_start, host)
        mirror("data", copies)
        step_spans += copies
        for name, kernels, per_launch in [("forward", forward_kernels(), 9.0), ("backward", backward_kernels(), 5.5),
                                          ("optimizer", optimizer_kernels(), 12.0)]:
            start = host
            spans = []
            if name == "backward":
                spans.append(gpu("Memset (Device)", "gpu_memset", host, 1.6))       # a zeroed gradient buffer
            spans += launch_all(kernels, per_launch)
            host += 20.0
            host_range(name, start, host)
            mirror(name, spans)
            step_spans += spans
        # log: loss.item() waits for the GPU to finish everything queued (cudaStreamSynchronize)
        start = host
        copy_start, copy_end = gpu("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", host, 1.8)
        step_spans.append((copy_start, copy_end))
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": PID_HOST,
                       "tid": TID_HOST, "ts": round(host + 5.0, 3), "dur": round(copy_end - host, 3)})
        host = copy_end + 12.0
        host_range("log", start, host)
        host += 60.0                                     # the rest of the loop's Python
        host_range(f"ProfilerStep#{step}", step_start, host)
        mirror(f"ProfilerStep#{step}", step_spans)
    meta = [{"ph": "M", "name": "process_name", "pid": PID_HOST, "tid": 0, "args": {"name": "python (host)"}},
            {"ph": "M", "name": "thread_name", "pid": PID_HOST, "tid": TID_HOST, "args": {"name": "main thread"}},
            {"ph": "M", "name": "process_name", "pid": PID_GPU, "tid": 0, "args": {"name": "GPU 0 (synthetic)"}},
            {"ph": "M", "name": "thread_name", "pid": PID_GPU, "tid": STREAM, "args": {"name": "stream 7"}}]
    return {
        "synthetic": True,
        "what": ("SYNTHETIC example, not a measurement: three ResNet50 training steps at 224 px, batch 64, bf16 "
                 "autocast, channels_last, SGD+momentum (foreach), modelled on an H100 (kernel times from FLOPs and "
                 "bytes); step 2 waits 14 ms for its batch; every step ends with loss.item()"),
        "source": "python tools/make_example_trace.py",
        "schemaVersion": 1,
        "displayTimeUnit": "ms",
        "traceEvents": meta + sorted(events, key=lambda e: (e["ts"], e["pid"])),
    }


def main() -> None:
    trace = build()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(gzip.compress(json.dumps(trace, separators=(",", ":")).encode(), compresslevel=9, mtime=0))
    n = sum(e["ph"] == "X" for e in trace["traceEvents"])
    print(f"wrote {OUT.relative_to(ROOT)}: {n} events, {OUT.stat().st_size / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
