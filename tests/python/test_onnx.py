"""kiln.onnx (issue 12): ONNX export checked in onnxruntime, which must give kiln eager's outputs at sizes
never seen at export (batch and sequence 1, 3, 257), for the recurrent layers (ONNX LSTM / GRU / RNN),
Linear stacks, conv nets with norms and pooling, a TransformerEncoderLayer and the quickstart model."""
import io

import numpy as np
import pytest

import kiln
from kiln.export import Dim
from helpers import load_quickstart

onnx = pytest.importorskip("onnx", reason="make test installs onnx")  # noqa: F841 (always present in make test)
ort = pytest.importorskip("onnxruntime", reason="make test installs onnxruntime")


def flat(res):
    if isinstance(res, (tuple, list)):
        return [x for r in res for x in flat(r)]
    return [res]


def run_onnx(proto, inputs):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # quiet
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, {n: x.numpy() for n, x in zip(names, flat(list(inputs)))})


def check(model, args, dynamic_shapes, new_inputs, tol=2e-5):
    model.eval()
    proto = kiln.onnx.export(model, args, None, dynamic_shapes=dynamic_shapes)
    for inputs in new_inputs:
        with kiln.no_grad():
            want = flat(model(*inputs))
        got = run_onnx(proto, inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape), (g.shape, tuple(w.shape))
            np.testing.assert_allclose(g, w.numpy(), rtol=tol, atol=tol)
    return proto


SIZES = [(1, 1), (3, 5), (3, 257)]


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("layers", [1, 2])
def test_recurrent_layers_map_to_onnx_rnn_ops(kind, batch_first, bidirectional, layers):
    kiln.manual_seed(0)
    m = getattr(kiln.nn, kind)(6, 8, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    spec = {0: Dim("batch"), 1: Dim("seq")} if batch_first else {0: Dim("seq"), 1: Dim("batch")}
    shape = (lambda b, t: (b, t, 6)) if batch_first else (lambda b, t: (t, b, 6))
    proto = check(m, (kiln.randn(*shape(2, 4)),), {"input": spec}, [(kiln.randn(*shape(b, t)),) for b, t in SIZES])
    ops = [n.op_type for n in proto.graph.node]
    assert ops.count(kind) == layers * (2 if bidirectional else 1)  # one ONNX op per layer and direction
    dims = [d.dim_param or d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    assert dims == (["batch", "seq", 6] if batch_first else ["seq", "batch", 6])


def test_lstm_with_given_state():
    kiln.manual_seed(1)
    m = kiln.nn.LSTM(4, 5, num_layers=2)
    B = Dim("batch")
    args = (kiln.randn(3, 2, 4), (kiln.randn(2, 2, 5), kiln.randn(2, 2, 5)))
    check(m, args, {"input": {0: Dim("seq"), 1: B}, "hx": ({1: B}, {1: B})},
          [(kiln.randn(t, b, 4), (kiln.randn(2, b, 5), kiln.randn(2, b, 5))) for b, t in SIZES])


def test_lstm_projection_has_no_onnx_equivalent():
    with pytest.raises(kiln.onnx.UnsupportedOperatorError, match="proj_size"):
        kiln.onnx.export(kiln.nn.LSTM(4, 6, proj_size=3).eval(), (kiln.randn(3, 2, 4),), None)


def test_linear_stack_and_activations():
    kiln.manual_seed(2)
    m = kiln.nn.Sequential(kiln.nn.Linear(8, 16), kiln.nn.GELU(), kiln.nn.LayerNorm(16), kiln.nn.Linear(16, 16),
                           kiln.nn.GELU(approximate="tanh"), kiln.nn.Tanh(), kiln.nn.SiLU(), kiln.nn.Sigmoid(),
                           kiln.nn.LeakyReLU(0.2), kiln.nn.Hardtanh(-0.5, 0.5), kiln.nn.Linear(16, 4),
                           kiln.nn.Softmax(-1))
    check(m, (kiln.randn(2, 8),), ({0: Dim("batch")},), [(kiln.randn(b, 8),) for b in (1, 3, 257)])


def test_float16_linear_stack():
    """float16 Linear layers on a rank-3 input export through _fused_baddbmm (the bias added before the
    one rounding) as MatMul and Add, which onnxruntime runs to the same values."""
    kiln.manual_seed(4)
    m = kiln.nn.Sequential(kiln.nn.Linear(8, 16), kiln.nn.ReLU(), kiln.nn.Linear(16, 4)).to(kiln.float16)
    proto = check(m, (kiln.randn(3, 5, 8).to(kiln.float16),), ({0: Dim("batch")},),
                  [(kiln.randn(b, 5, 8).to(kiln.float16),) for b in (1, 3)], tol=2e-3)
    assert {"MatMul", "Add"} <= {n.op_type for n in proto.graph.node}


def test_conv_nets():
    kiln.manual_seed(3)
    m1 = kiln.nn.Sequential(kiln.nn.Conv1d(4, 8, 3, padding=1), kiln.nn.BatchNorm1d(8), kiln.nn.ReLU(),
                            kiln.nn.MaxPool1d(2), kiln.nn.Conv1d(8, 4, 3, dilation=2))
    with kiln.no_grad():
        m1[1].running_mean.uniform_(-1, 1), m1[1].running_var.uniform_(0.5, 2)
    check(m1, (kiln.randn(2, 4, 16),), ({0: Dim("batch"), 2: Dim("seq", min=10)},),  # the dilated conv needs 10
          [(kiln.randn(b, 4, t),) for b, t in [(1, 10), (3, 11), (3, 257)]])
    m2 = kiln.nn.Sequential(kiln.nn.Conv2d(3, 8, 3, stride=2, padding=1), kiln.nn.BatchNorm2d(8),
                            kiln.nn.LeakyReLU(), kiln.nn.AvgPool2d(2), kiln.nn.Flatten(), kiln.nn.Linear(32, 5))
    check(m2, (kiln.randn(2, 3, 8, 8),), ({0: Dim("batch")},), [(kiln.randn(b, 3, 8, 8),) for b in (1, 3, 257)])


def test_embedding_and_transformer_encoder_layer():
    kiln.manual_seed(4)
    check(kiln.nn.Embedding(10, 4), (kiln.randint(0, 10, (2, 3)),), ({0: Dim("batch"), 1: Dim("seq")},),
          [(kiln.randint(0, 10, (b, t)),) for b, t in SIZES])
    m = kiln.nn.TransformerEncoderLayer(16, 4, 32, 0.0, batch_first=True)
    check(m, (kiln.randn(2, 5, 16),), {"src": {0: Dim("batch"), 1: Dim("seq")}},
          [(kiln.randn(b, t, 16),) for b, t in SIZES], tol=1e-4)


def test_quickstart_model():
    qs = load_quickstart()
    kiln.manual_seed(5)
    m = qs.CharTransformer(13, 32, d_model=32, n_layers=2, n_heads=4)
    proto = check(m, (kiln.randint(0, 13, (2, 7)),), ({0: Dim("batch"), 1: Dim("seq", max=32)},),
                  [(kiln.randint(0, 13, (b, t)),) for b, t in [(1, 1), (3, 32), (5, 17)]], tol=1e-4)
    assert "Trilu" in [n.op_type for n in proto.graph.node]  # causal attention as plain ops


def test_file_names_and_legacy_dynamic_axes(tmp_path):
    m = kiln.nn.Linear(3, 2).eval()
    path = tmp_path / "m.onnx"
    kiln.onnx.export(m, (kiln.randn(4, 3),), path, input_names=["x"], output_names=["y"],
                     dynamic_axes={"x": {0: "n"}})
    proto = onnx.load(str(path))
    assert [i.name for i in proto.graph.input] == ["x"] and [o.name for o in proto.graph.output] == ["y"]
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "n"
    x = kiln.randn(7, 3)
    with kiln.no_grad():
        np.testing.assert_allclose(run_onnx(proto, [x])[0], m(x).numpy(), rtol=1e-6, atol=1e-6)
    b = io.BytesIO()
    kiln.onnx.export(kiln.export.export(m, (kiln.randn(4, 3),)), None, b)  # an ExportedProgram, to a file object
    assert onnx.load_from_string(b.getvalue()).graph.node
