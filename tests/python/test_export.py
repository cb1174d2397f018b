"""kiln.export (issue 12): export with dynamic batch and sequence, the archive, the standalone runtime.

The oracle for an exported program is eager execution: kiln eager on the same module and torch eager
on the same weights, at sizes never seen at export (1, 3, 257). Corrupt archives must raise, never load.
"""
import io
import json
import os
import struct
import zlib

import pytest
import torch

import kiln
from kiln.export import Dim, export
from helpers import load_quickstart, to_kiln, to_torch
from layer_helpers import sync


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    kn, tn = kiln.get_num_threads(), torch.get_num_threads()
    kiln.set_num_threads(1), torch.set_num_threads(1)
    yield
    kiln.set_num_threads(kn), torch.set_num_threads(tn)


def close(k, t, tol=1e-5, msg=""):
    got = to_torch(k)
    assert tuple(got.shape) == tuple(t.shape), f"{msg}: shape {tuple(got.shape)} != {tuple(t.shape)}"
    torch.testing.assert_close(got.to(t.dtype), t.detach(), rtol=tol, atol=tol, msg=msg or None)


def leaves(res):
    if isinstance(res, (tuple, list)):
        return [x for r in res for x in leaves(r)]
    return [res]


def roundtrip(ep, tmp_path):
    path = tmp_path / "m.kiln"
    kiln.export.save(ep, path)
    return kiln.export.load(path)


SIZES = [(1, 1), (3, 5), (3, 257)]

# ---- recurrent layers -------------------------------------------------------------------------------

RNN_CASES = [
    ("LSTM", dict(num_layers=1)),
    ("LSTM", dict(num_layers=2, bidirectional=True)),
    ("LSTM", dict(num_layers=2, batch_first=True)),
    ("LSTM", dict(num_layers=2, proj_size=4, bidirectional=True, batch_first=True)),
    ("GRU", dict(num_layers=1)),
    ("GRU", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("RNN", dict(num_layers=2, nonlinearity="relu")),
]


@pytest.mark.parametrize("kind,kw", RNN_CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(RNN_CASES)])
def test_recurrent_dynamic_batch_and_sequence(kind, kw, tmp_path):
    torch.manual_seed(0)
    tm = getattr(torch.nn, kind)(8, 16, **kw).eval()
    km = getattr(kiln.nn, kind)(8, 16, **kw).eval()
    sync(km, tm)
    bf = kw.get("batch_first", False)
    example = kiln.randn(*((2, 7, 8) if bf else (7, 2, 8)))
    spec = {0: Dim("batch"), 1: Dim("seq")} if bf else {0: Dim("seq"), 1: Dim("batch")}
    ep = export(km, (example,), dynamic_shapes={"input": spec})
    # one op per layer and direction, never unrolled over time
    ops = [n.op for n in ep.graph.nodes]
    layer_op = {"LSTM": "lstm_layer", "GRU": "gru_layer", "RNN": "rnn_layer"}[kind]
    assert ops.count(layer_op) == kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    assert set(ep.range_constraints) == {"batch", "seq"} and ep.guards == []
    loaded = roundtrip(ep, tmp_path)
    for b, t in SIZES:
        x = torch.randn(*((b, t, 8) if bf else (t, b, 8)))
        ref = leaves(tm(x))
        eager = leaves(km(to_kiln(x)))
        for prog in (ep, loaded):
            got = leaves(prog.module()(to_kiln(x)))
            assert len(got) == len(ref)
            for g, e, r in zip(got, eager, ref):
                assert torch.equal(to_torch(g), to_torch(e)), f"{kind} {b}x{t}: runtime differs from kiln eager"
                close(g, r, 1e-5, f"{kind} {b}x{t} vs torch")


def test_lstm_with_initial_state(tmp_path):
    torch.manual_seed(1)
    tm, km = torch.nn.LSTM(6, 5, num_layers=2).eval(), kiln.nn.LSTM(6, 5, num_layers=2).eval()
    sync(km, tm)
    B = Dim("batch")
    args = (kiln.randn(4, 3, 6), (kiln.randn(2, 3, 5), kiln.randn(2, 3, 5)))
    ep = roundtrip(export(km, args, dynamic_shapes={"input": {0: Dim("seq"), 1: B}, "hx": ({1: B}, {1: B})}), tmp_path)
    for b, t in SIZES:
        x, h, c = torch.randn(t, b, 6), torch.randn(2, b, 5), torch.randn(2, b, 5)
        out, (hn, cn) = ep.module()(to_kiln(x), (to_kiln(h), to_kiln(c)))
        rout, (rh, rc) = tm(x, (h, c))
        close(out, rout), close(hn, rh), close(cn, rc)
    with pytest.raises(RuntimeError, match="batch"):  # the shared Dim must agree
        ep.module()(kiln.randn(4, 3, 6), (kiln.randn(2, 2, 5), kiln.randn(2, 2, 5)))


# ---- a transformer, a conv net, the quickstart ------------------------------------------------------

def test_transformer_encoder_layer(tmp_path):
    torch.manual_seed(0)
    tm = torch.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True).eval()
    km = kiln.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True).eval()
    sync(km, tm)
    ep = roundtrip(export(km, (kiln.randn(2, 6, 16),), dynamic_shapes={"src": {0: Dim("batch"), 1: Dim("seq")}}), tmp_path)
    assert "kiln.ops._sdpa" in str(ep)  # attention is one op
    for b, t in SIZES:
        x = torch.randn(b, t, 16)
        with torch.no_grad():
            close(ep.module()(to_kiln(x)), tm(x), 1e-4, f"{b}x{t}")


class ConvNet(kiln.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.conv = m.Conv1d(4, 8, 3, padding=1)
        self.norm = m.BatchNorm1d(8)
        self.conv2 = m.Conv1d(8, 8, 3)
        self.head = m.Linear(8, 2)

    def forward(self, x):
        y = self.conv2(self.norm(self.conv(x)).relu())
        return self.head(y.mean(-1))


def test_conv_net(tmp_path):
    torch.manual_seed(0)

    class T(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.norm = torch.nn.Conv1d(4, 8, 3, padding=1), torch.nn.BatchNorm1d(8)
            self.conv2, self.head = torch.nn.Conv1d(8, 8, 3), torch.nn.Linear(8, 2)

        forward = ConvNet.forward

    tm = T()
    with torch.no_grad():
        tm.norm.running_mean.uniform_(-1, 1), tm.norm.running_var.uniform_(0.5, 2)
    tm.eval()
    km = ConvNet(kiln.nn).eval()
    sync(km, tm)
    ep = roundtrip(export(km, (kiln.randn(2, 4, 9),), dynamic_shapes={"x": {0: Dim("batch"), 2: Dim("seq", min=3)}}),
                   tmp_path)
    assert ep.range_constraints["seq"] == (3, None)
    for b, t in [(1, 3), (3, 5), (3, 257)]:
        x = torch.randn(b, 4, t)
        with torch.no_grad():
            close(ep.module()(to_kiln(x)), tm(x), 1e-5, f"{b}x{t}")
    with pytest.raises(RuntimeError, match=r"seq.*to be in \[3"):
        ep.module()(kiln.randn(2, 4, 2))


def test_quickstart_transformer(tmp_path):
    qs = load_quickstart()
    kiln.manual_seed(0)
    model = qs.CharTransformer(13, 32, d_model=32, n_layers=2, n_heads=4).eval()
    ep = export(model, (kiln.randint(0, 13, (2, 7)),), dynamic_shapes=({0: Dim("batch"), 1: Dim("seq", max=32)},))
    assert ep.range_constraints == {"batch": (0, None), "seq": (0, 32)}
    loaded = roundtrip(ep, tmp_path)
    for b, t in [(1, 1), (3, 32), (5, 17)]:
        idx = kiln.randint(0, 13, (b, t))
        want = model(idx)
        for prog in (ep, loaded):
            assert torch.equal(to_torch(prog.module()(idx)), to_torch(want))
    m = loaded.module()
    m(kiln.randint(0, 13, (2, 9))), m(kiln.randint(0, 13, (2, 9)))
    stats = loaded.runtime_stats()
    assert stats["plans"] == 4 and 0 < stats["arena_bytes"] < stats["planned_bytes"]  # buffers shared
    with pytest.raises(RuntimeError, match=r"seq\) to be in \[0, 32\]"):
        m(kiln.randint(0, 13, (2, 33)))


# ---- constraints and guards ---------------------------------------------------------------------------

class Pins(kiln.nn.Module):
    def forward(self, x):
        n = int(x.shape[1])  # pins the sequence length
        return x.reshape(x.shape[0], n * 4)


class Bounded(kiln.nn.Module):
    def forward(self, x):
        if x.shape[1] > 16:
            raise ValueError("too long")
        return x * 2


def test_constraint_violation_names_the_dimension_and_the_line():
    with pytest.raises(RuntimeError, match=r"Constraints violated \((batch, )?seq\)") as e:
        export(Pins(), (kiln.randn(2, 5, 4),), dynamic_shapes={"x": {0: Dim("batch"), 1: Dim("seq")}})
    msg = str(e.value)
    assert "inferred to be a constant (5)" in msg and "test_export.py" in msg and "Suggested fixes" in msg
    assert "x.shape[1]" in msg
    with pytest.raises(RuntimeError, match=r"Dim\('seq', max=16\)"):
        export(Bounded(), (kiln.randn(2, 5),), dynamic_shapes={"x": {1: Dim("seq")}})
    ep = export(Bounded(), (kiln.randn(2, 5),), dynamic_shapes={"x": {1: Dim("seq", max=16)}})
    assert ep.guards == []
    # a lower bound the model needs: the declared range is scanned for the values that satisfy it
    convs = kiln.nn.Sequential(kiln.nn.Conv1d(2, 2, 3), kiln.nn.MaxPool1d(2), kiln.nn.Conv1d(2, 2, 3, dilation=2))
    with pytest.raises(RuntimeError, match=r"(?s)\(\(seq - 4\)//2\).*Dim\('seq', min=12\)") as e:
        export(convs, (kiln.randn(1, 2, 16),), dynamic_shapes=({2: Dim("seq", min=6)},))
    assert "input.shape[2]" in str(e.value)
    export(convs, (kiln.randn(1, 2, 16),), dynamic_shapes=({2: Dim("seq", min=12)},))
    with pytest.raises(RuntimeError, match=r"Constraints violated"):  # DYNAMIC may not be pinned
        export(Pins(), (kiln.randn(2, 5, 4),), dynamic_shapes={"x": {1: Dim.DYNAMIC}})


class ReadsData(kiln.nn.Module):
    def forward(self, x):
        return x if x.sum() > 0 else -x


class MasksByData(kiln.nn.Module):
    def forward(self, x):
        return x[x > 0] * 2


def test_data_dependent_models():
    with pytest.raises(RuntimeError, match=r"(?s)meta tensors.*reads a tensor's value.*kiln.where"):
        export(ReadsData(), (kiln.randn(3, 4),))
    # a data-dependent size is an unbacked symbol: the runtime runs the kernel that decides it
    ep = export(MasksByData(), (kiln.randn(3, 4),), dynamic_shapes=({0: Dim("batch")},))
    x = kiln.randn(5, 4)
    assert torch.equal(to_torch(ep.module()(x)), to_torch(x[x > 0] * 2))
    assert torch.equal(to_torch(roundtrip_bytes(ep).module()(x)), to_torch(x[x > 0] * 2))


def roundtrip_bytes(ep):
    b = io.BytesIO()
    kiln.export.save(ep, b)
    return kiln.export.load(io.BytesIO(b.getvalue()))


def test_auto_specialises_silently_and_the_runtime_checks_it():
    ep = export(Pins(), (kiln.randn(2, 5, 4),), dynamic_shapes={"x": {0: Dim.AUTO, 1: Dim.AUTO}})
    assert any("== 5" in g for g in ep.guards)
    assert tuple(ep.module()(kiln.randn(3, 5, 4)).shape) == (3, 20)
    with pytest.raises(RuntimeError, match="to be in \\[5, 5\\]|Guard failed"):
        ep.module()(kiln.randn(3, 6, 4))
    ep = export(Bounded(), (kiln.randn(2, 5),), dynamic_shapes={"x": {1: Dim.AUTO}})  # a guard, no error
    assert ep.guards == ["s0 <= 16"]
    with pytest.raises(RuntimeError, match=r"Guard failed: s0 <= 16"):
        ep.module()(kiln.randn(2, 17))


def test_runtime_checks_inputs():
    m = kiln.nn.Linear(4, 3)
    ep = export(m, (kiln.randn(2, 4),), dynamic_shapes=({0: Dim("batch", max=8)},))
    run = ep.module()
    with pytest.raises(RuntimeError, match="dtype float32, but got float64"):
        run(kiln.randn(2, 4, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match=r"shape\[1\] to be equal to 4, but got 5"):
        run(kiln.randn(2, 5))
    with pytest.raises(RuntimeError, match=r"to have 2 dimensions"):
        run(kiln.randn(2, 4, 1))
    with pytest.raises(RuntimeError, match=r"batch\) to be in \[0, 8\], but got 9"):
        run(kiln.randn(9, 4))
    with pytest.raises(TypeError):
        run(kiln.randn(2, 4), kiln.randn(2, 4))
    assert tuple(run(kiln.randn(0, 4)).shape) == (0, 3)  # the range includes 0


def test_dim_declarations():
    with pytest.raises(ValueError, match="identifier"):
        Dim("not a name")
    with pytest.raises(ValueError, match="range"):
        Dim("x", min=5, max=2)
    a, b = kiln.export.dims("a", "b", max=9)
    assert (a.__name__, b.max) == ("a", 9) and repr(a) == "Dim('a', max=9)"
    with pytest.raises(ValueError, match=r"to be in \[4, inf\]"):
        export(kiln.nn.Linear(4, 3), (kiln.randn(2, 4),), dynamic_shapes=({0: Dim("batch", min=4)},))
    with pytest.raises(ValueError, match="not arguments of forward"):
        export(kiln.nn.Linear(4, 3), (kiln.randn(2, 4),), dynamic_shapes={"x": {0: Dim("b")}})


def test_program_text_and_signature():
    m = kiln.nn.Sequential(kiln.nn.Linear(4, 8), kiln.nn.ReLU(), kiln.nn.Linear(8, 2))
    ep = export(m, (kiln.randn(3, 4),), dynamic_shapes=({0: Dim("batch")},))
    text = str(ep)
    assert 'f32[batch, 4]' in text and "Range constraints: {batch: VR[0, int_oo]}" in text
    assert "PARAMETER target='0.weight'" in text
    sig = ep.graph_signature
    assert sig.parameters == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert sig.user_inputs == ["input"] and len(sig.user_outputs) == 1
    assert set(ep.state_dict) == set(dict(m.named_parameters()))
    assert ep.state_dict["0.weight"] is not None and ep.run_decompositions() is not ep
    assert len(ep.graph) == len(ep.graph.nodes) > 0


# ---- the archive: corruption never loads ----------------------------------------------------------------

def _archive_bytes():
    m = kiln.nn.LSTM(3, 4)
    ep = export(m, (kiln.randn(5, 2, 3),), dynamic_shapes={"input": {0: Dim("seq"), 1: Dim("batch")}})
    b = io.BytesIO()
    kiln.export.save(ep, b)
    return b.getvalue()


def _members(data):
    """(name, bytes) of each member of an archive, in order (read with Python's zipfile)."""
    import zipfile
    z = zipfile.ZipFile(io.BytesIO(data))
    return [(i.filename, z.read(i.filename)) for i in z.infolist()]


def _write(members):
    """An archive in kiln's layout (stored members, data 64-byte aligned, CRC-32) from (name, bytes)."""
    out, central = bytearray(), bytearray()
    for name, data in members:
        nb = name.encode()
        off = len(out)
        pad = (64 - (off + 30 + len(nb) + 4) % 64) % 64
        crc = zlib.crc32(data) & 0xffffffff
        out += struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, 0, 0, 0x21, crc, len(data), len(data), len(nb), 4 + pad)
        out += nb + struct.pack("<HH", 0x4b4c, pad) + b"\0" * pad + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 20, 20, 0, 0, 0, 0x21, crc, len(data), len(data),
                               len(nb), 0, 0, 0, 0, 0, off) + nb
    cd = len(out)
    out += central + struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, len(members), len(members), len(central), cd, 0)
    return bytes(out)


def _load(data):
    return kiln.export.load(io.BytesIO(data))


def test_archive_is_a_zip_and_our_writer_matches(tmp_path):
    data = _archive_bytes()
    m = kiln.nn.LSTM(3, 4)
    ep = export(m, (kiln.randn(5, 2, 3),))
    b = io.BytesIO()
    kiln.export.save(ep, b)
    kiln.export.save(ep, tmp_path / "a.kiln")  # streamed to the file: the same bytes
    assert (tmp_path / "a.kiln").read_bytes() == b.getvalue()
    names = [n for n, _ in _members(data)]
    assert names[:2] == ["kiln_program/version", "kiln_program/model.json"]
    assert _write(_members(data)) == data  # the layout the test helper writes is kiln's
    _load(data)


def test_truncated_and_flipped_archives_raise():
    data = _archive_bytes()
    cuts = sorted(set(list(range(0, len(data), max(1, len(data) // 97))) + [len(data) - 1, len(data) - 22, 10, 30]))
    for cut in cuts:
        with pytest.raises(RuntimeError, match="not a valid kiln archive"):
            _load(data[:cut])
    for pos in range(0, len(data), max(1, len(data) // 211)):
        bad = bytearray(data)
        bad[pos] ^= 0x20
        with pytest.raises(RuntimeError):
            _load(bytes(bad))
    with pytest.raises(RuntimeError):
        _load(data + b"\0")
    with pytest.raises(RuntimeError, match="cannot open"):
        kiln.export.load("/nonexistent/model.kiln")


def _rewrite(data, edit):
    members = _members(data)
    j = json.loads(dict(members)["kiln_program/model.json"])
    edit(j)
    return _write([(n, json.dumps(j).encode() if n.endswith("model.json") else b) for n, b in members])


def _first_with_inputs(j):
    return next(n for n in j["nodes"] if n["in"])


def _set(path, value):
    def edit(j):
        obj = j
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value
    return edit


JSON_ATTACKS = {
    "schema major": (_set(["schema_version", 0], 2), "schema major version 2"),
    "unknown op": (_set(["nodes", 0, "op"], "os.system"), "unknown op"),
    "input index out of range": (lambda j: _first_with_inputs(j)["in"].__setitem__(0, 10 ** 6), "out of range"),
    "negative index": (lambda j: _first_with_inputs(j)["in"].__setitem__(0, -5), "out of range"),
    "use before definition": (lambda j: _first_with_inputs(j)["in"].__setitem__(0, j["nodes"][-1]["out"][0]),
                              "before it is defined"),
    "huge sizes": (_set(["state", 0, "sizes"], [2 ** 62, 2 ** 62]), "overflow|nbytes"),
    "wrong nbytes": (lambda j: j["state"][0].__setitem__("nbytes", j["state"][0]["nbytes"] + 4), "nbytes"),
    "unknown dtype": (_set(["values", 0, "dtype"], "float128"), "unknown dtype"),
    "member traversal": (_set(["state", 0, "member"], "../../etc/passwd"), "missing member"),
    "bad expression": (_set(["values", 0, "sizes", 0], "seq +* 2"), "malformed size expression"),
    "unknown symbol": (_set(["values", 0, "sizes", 0], "evil"), "unknown symbol"),
    "huge list": (_set(["nodes", 0, "in"], [0] * 5000), "entries"),
    "deep nesting": (lambda j: j.__setitem__("x", json.loads("[" * 200 + "]" * 200)), "nested too deeply"),
    "attribute type": (lambda j: j["nodes"][0]["attrs"].__setitem__(0, {"t": "pickle", "v": "x"}), "unknown attribute type|should be"),
    "schema mismatch": (lambda j: j["nodes"][0]["attrs"].append({"t": "str", "v": "x"}), "attribute|expected"),
    "redefinition": (lambda j: j["nodes"][1]["out"].__setitem__(0, j["nodes"][0]["out"][0]), "redefines"),
    "state mismatch": (_set(["state", 0, "dtype"], "float64"), "nbytes|differ"),
    "symbol range": (_set(["symbols", 0, "min"], -3), "range"),
    "guard": (lambda j: j["guards"].append({"text": "seq <=> 3", "where": ""}), "malformed"),
    "result structure": (_set(["out_spec"], '{"t": "tensor"} x'), "result structure is malformed"),
    "argument structure": (_set(["in_spec"], '{"t": "tuple", "c": []}'), "argument structure is malformed"),
    "result count": (_set(["out_spec"], '{"t": "tensor"}'), "result structure is malformed"),
}


@pytest.mark.parametrize("attack", sorted(JSON_ATTACKS))
def test_crafted_graph_json_raises(attack):
    data = _archive_bytes()
    edit, msg = JSON_ATTACKS[attack]
    with pytest.raises(RuntimeError, match=msg):
        _load(_rewrite(data, edit))


def test_zip64_layout(monkeypatch):
    # archives over 4 GiB use zip64 records; KILN_ARCHIVE_ZIP64=1 makes every entry zip64 so that the
    # same path runs on a small model: Python's zipfile reads it, it loads and runs, corruption raises
    import zipfile
    monkeypatch.setenv("KILN_ARCHIVE_ZIP64", "1")
    data = _archive_bytes()
    monkeypatch.delenv("KILN_ARCHIVE_ZIP64")
    z = zipfile.ZipFile(io.BytesIO(data))
    assert z.testzip() is None and z.infolist()[0].filename == "kiln_program/version"
    assert data[-22 - 20 - 56:][:4] == struct.pack("<I", 0x06064b50)  # the zip64 end record
    ep = _load(data)
    x = kiln.randn(9, 3, 3)
    assert tuple(ep.module()(x)[0].shape) == (9, 3, 4)
    assert len(data) != len(_archive_bytes())  # the classic layout without the variable
    for pos in range(0, len(data), max(1, len(data) // 181)):
        bad = bytearray(data)
        bad[pos] ^= 0x04
        with pytest.raises(RuntimeError):
            _load(bytes(bad))
    for cut in range(0, len(data), max(1, len(data) // 61)):
        with pytest.raises(RuntimeError, match="not a valid kiln archive"):
            _load(data[:cut])


def test_crafted_member_names_raise():
    data = _archive_bytes()
    members = _members(data)
    for evil in ["kiln_program/../a/0", "/kiln_program/x", "kiln_program//x", "kiln_program/data/0"]:
        bad = members + [(evil, b"x")]
        with pytest.raises(RuntimeError, match="plain relative path|duplicate member|members that no entry uses"):
            _load(_write(bad))
    with pytest.raises(RuntimeError, match="missing member"):
        _load(_write([m for m in members if not m[0].endswith("data/0")]))


# ---- kiln-run: the CLI on a Python-exported LSTM -----------------------------------------------------

def test_kiln_run_cli(tmp_path):
    import subprocess
    exe = os.path.join(os.path.dirname(__file__), "..", "..", os.environ.get("BUILD", "build"), "kiln-run")
    assert os.path.exists(exe), f"{exe} is built by `make build`"
    torch.manual_seed(3)
    tm, km = torch.nn.LSTM(5, 7, num_layers=2, batch_first=True).eval(), kiln.nn.LSTM(5, 7, num_layers=2, batch_first=True).eval()
    sync(km, tm)
    ep = export(km, (kiln.randn(2, 4, 5),), dynamic_shapes={"input": {0: Dim("batch"), 1: Dim("seq")}})
    kiln.export.save(ep, tmp_path / "lstm.kiln")
    x = torch.randn(3, 257, 5)
    kiln.save_file({"input": to_kiln(x)}, str(tmp_path / "in.safetensors"))
    r = subprocess.run([exe, str(tmp_path / "lstm.kiln"), "--input", str(tmp_path / "in.safetensors"),
                        "--output", str(tmp_path / "out.safetensors")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = kiln.load_file(str(tmp_path / "out.safetensors"))
    ref = leaves(tm(x))
    assert sorted(out) == ["output_0", "output_1", "output_2"]
    for i, t in enumerate(ref):
        close(out[f"output_{i}"], t, 1e-5, f"output {i}")
    bad = tmp_path / "bad.kiln"
    bad.write_bytes((tmp_path / "lstm.kiln").read_bytes()[:-5])
    r = subprocess.run([exe, str(bad), "--info"], capture_output=True, text=True)
    assert r.returncode == 1 and "not a valid kiln archive" in r.stderr


def test_archive_from_before_lstm_train_attribute_loads_and_runs():
    """Archives written before lstm_layer had its train attribute (one attribute: reverse) still load:
    the attribute takes its schema default (True: the reserve is kept, the outputs are the same)."""
    m = kiln.nn.LSTM(3, 16, num_layers=2, bidirectional=True)
    with kiln.no_grad():
        ep = export(m, (kiln.randn(5, 2, 3),), dynamic_shapes={"input": {0: Dim("seq"), 1: Dim("batch")}})
    b = io.BytesIO()
    kiln.export.save(ep, b)

    def drop_train(j):
        layers = [n for n in j["nodes"] if n["op"] == "lstm_layer"]
        assert len(layers) == 4 and all(len(n["attrs"]) == 2 for n in layers)
        for n in layers:
            n["attrs"].pop()

    old = _load(_rewrite(b.getvalue(), drop_train))
    x = kiln.randn(7, 3, 3)
    with kiln.no_grad():
        want = m(x)
    got_new, got_old = ep.module()(x), old.module()(x)

    def leaves(r):  # (out, (h, c))
        return [r[0], r[1][0], r[1][1]]

    for a, b_, c in zip(leaves(want), leaves(got_new), leaves(got_old)):
        assert torch.equal(to_torch(b_), to_torch(c))
        torch.testing.assert_close(to_torch(c), to_torch(a), rtol=1e-6, atol=1e-6)
    # the old program keeps its reserves (7 * 3 * (5 * 16) floats per layer and direction), the new none
    assert old.runtime_stats()["planned_bytes"] >= ep.runtime_stats()["planned_bytes"] + 4 * 7 * 3 * 80 * 4
