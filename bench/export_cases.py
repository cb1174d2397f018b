"""Export benchmarks for `make bench` (issue 12): kiln's standalone runtime (ep.module(): the exported
program with planned memory, no autograd) against torch eager on the same weights, for an LSTM 2x256
(input 256) at batch 1 and 32, sequence 1 and 128. The note gives kiln eager and torch's exported
ep.module() (exported for that exact shape: torch 2.13 cannot keep an LSTM's sequence dynamic) on the
same call. Then the quickstart transformer at batch 1 (kiln runtime vs kiln eager: the model has no
torch twin), and the load time of a 10M-parameter archive (mapped, every member CRC-checked)."""
import io
import os
import sys
import tempfile

import torch

import kiln
from kiln.export import Dim, export


def _median_ms(fn, repeats=20):
    from gemm_cases import _kiln_seconds  # the runner's median timer
    return _kiln_seconds(fn, repeats) * 1e3


def _lstm_pair():
    torch.manual_seed(0)
    tm = torch.nn.LSTM(256, 256, num_layers=2).eval()
    km = kiln.nn.LSTM(256, 256, num_layers=2).eval()
    with kiln.no_grad():
        for (n, p), (_, q) in zip(km.named_parameters(), tm.named_parameters()):
            p.copy_(kiln.from_numpy(q.detach().numpy().copy()))
    return km, tm


def _lstm_case(Case, batch, seq):
    def setup():
        km, tm = _lstm_pair()
        ep = export(km, (kiln.randn(5, 3, 256),), dynamic_shapes={"input": {0: Dim("seq"), 1: Dim("batch")}})
        run = ep.module()
        x = torch.randn(seq, batch, 256)
        kx = kiln.from_numpy(x.numpy().copy())
        def peer():
            with torch.no_grad():
                return tm(x)
        return (lambda: run(kx)), peer

    def note():
        km, tm = _lstm_pair()
        x = torch.randn(seq, batch, 256)
        kx = kiln.from_numpy(x.numpy().copy())
        # the runtime again, timed as the peers below are (alone, not between torch's calls, which
        # evict its weights from the caches): the like-for-like figure against onnxruntime
        run = export(km, (kiln.randn(5, 3, 256),), dynamic_shapes={"input": {0: Dim("seq"), 1: Dim("batch")}}).module()
        alone = _median_ms(lambda: run(kx))
        with kiln.no_grad():
            eager = _median_ms(lambda: km(kx))
        try:
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tep = torch.export.export(tm, (x,)).module()
            with torch.no_grad():
                tex = f"{_median_ms(lambda: tep(x)):.3f} ms"
        except Exception as e:  # noqa: BLE001
            tex = f"fails ({type(e).__name__})"
        return (f"runtime alone {alone:.3f} ms; kiln eager {eager:.3f} ms; torch export ep.module() {tex}; "
                f"onnxruntime {_ort_ms(km, kx):.3f} ms")
    return Case(f"export LSTM 2x256 batch={batch} seq={seq} runtime (torch: eager)", setup, note=note)


def _ort_ms(km, kx, dynamic_shapes=None):
    """The same model through kiln.onnx.export in onnxruntime (kiln's thread count), median ms."""
    try:
        import onnxruntime as ort
    except ImportError:
        return float("nan")
    ds = dynamic_shapes or {"input": {0: Dim("seq"), 1: Dim("batch")}}
    proto = kiln.onnx.export(km, (kx,), None, dynamic_shapes=ds)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = kiln.get_num_threads()
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    x = kx.numpy()
    return _median_ms(lambda: sess.run(None, {name: x}))


def _quickstart_case(Case):
    def setup():
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
        import quickstart as qs
        kiln.manual_seed(0)
        model = qs.CharTransformer(65, 128, d_model=128, n_layers=4, n_heads=4).eval()
        ep = export(model, (kiln.randint(0, 65, (1, 16)),), dynamic_shapes=({0: Dim("batch"), 1: Dim("seq", max=128)},))
        run = ep.module()
        idx = kiln.randint(0, 65, (1, 128))

        def eager():
            with kiln.no_grad():
                return model(idx)
        return (lambda: run(idx)), eager

    def note():
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
        import quickstart as qs
        kiln.manual_seed(0)
        model = qs.CharTransformer(65, 128, d_model=128, n_layers=4, n_heads=4).eval()
        idx = kiln.randint(0, 65, (1, 128))
        ort_ms = _ort_ms(model, idx, ({0: Dim("batch"), 1: Dim("seq", max=128)},))
        return f"onnxruntime {ort_ms:.3f} ms"
    return Case("export quickstart transformer batch=1 seq=128 runtime (peer: kiln eager)", setup, note=note)


def _load_case(Case):
    def note():
        m = kiln.nn.Sequential(*[kiln.nn.Linear(1414, 1414) for _ in range(5)])
        n = sum(p.numel() for p in m.parameters())
        ep = export(m, (kiln.randn(2, 1414),), dynamic_shapes=({0: Dim("batch")},))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.kiln")
            kiln.export.save(ep, path)
            ms = _median_ms(lambda: kiln.export.load(path), repeats=9)
        return f"load of a {n / 1e6:.1f}M-parameter archive: {ms:.1f} ms (target < 100 ms)"

    def setup():
        m = kiln.nn.Linear(4, 4)
        ep = export(m, (kiln.randn(2, 4),))
        b = io.BytesIO()
        kiln.export.save(ep, b)
        data = b.getvalue()
        return (lambda: kiln.export.load(io.BytesIO(data))), (lambda: torch.load(io.BytesIO(_torch_bytes()), weights_only=True))
    return Case("export archive load, small (torch: torch.load of its state dict)", setup, note=note)


_TB = None


def _torch_bytes():
    global _TB
    if _TB is None:
        b = io.BytesIO()
        torch.save(torch.nn.Linear(4, 4).state_dict(), b)
        _TB = b.getvalue()
    return _TB


def export_cases(Case, quick):
    cases = [_lstm_case(Case, b, t) for b in (1, 32) for t in (1, 128)]
    cases.append(_quickstart_case(Case))
    cases.append(_load_case(Case))
    return cases
