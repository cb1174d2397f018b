"""Property-based abuse of the export archive loader (issues 12 and 14), seeded and bounded.

(1) Byte-level: Hypothesis flips, overwrites, inserts and cuts bytes of a valid archive (classic and
zip64 layouts); the CRCs and the strict zip reader must turn every real change into RuntimeError.
(2) Graph-level: a value anywhere in the graph JSON is replaced by another JSON value (huge and negative
ints, strings, lists, objects, null) and the archive is re-packed with valid CRCs; loading must raise
RuntimeError or give a program whose run on a valid input returns or raises one of kiln's error classes.
Neither may crash the process."""
import copy
import io
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kiln
from kiln.export import Dim, export
from test_export import _members, _write

SETTINGS = settings(max_examples=150, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))
ERRORS = (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError)


def _archive(zip64):
    kiln.manual_seed(0)
    m = kiln.nn.Sequential(kiln.nn.Linear(3, 4), kiln.nn.ReLU())
    ep = export(m, (kiln.randn(2, 3),), dynamic_shapes=({0: Dim("batch", max=64)},))
    old = os.environ.get("KILN_ARCHIVE_ZIP64")
    os.environ["KILN_ARCHIVE_ZIP64"] = "1" if zip64 else "0"
    try:
        b = io.BytesIO()
        kiln.export.save(ep, b)
    finally:
        if old is None:
            del os.environ["KILN_ARCHIVE_ZIP64"]
        else:
            os.environ["KILN_ARCHIVE_ZIP64"] = old
    return b.getvalue()


CLASSIC, ZIP64 = _archive(False), _archive(True)

edit = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("set"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 64)),
    st.tuples(st.just("cut"), st.integers(0, 10**6), st.just(0)),
)


def apply(data, edits):
    d = bytearray(data)
    for kind, pos, arg in edits:
        if not d:
            break
        pos %= len(d)
        if kind == "flip":
            d[pos] ^= arg
        elif kind == "set":
            d[pos] = arg
        elif kind == "insert":
            d[pos:pos] = arg
        elif kind == "delete":
            del d[pos:pos + arg]
        else:
            del d[pos:]
    return bytes(d)


@pytest.mark.parametrize("layout", ["classic", "zip64"])
def test_byte_mutations_never_load(layout):
    base = CLASSIC if layout == "classic" else ZIP64

    @SETTINGS
    @given(st.lists(edit, min_size=1, max_size=4))
    def prop(edits):
        data = apply(base, edits)
        if data == base:
            return
        with pytest.raises(RuntimeError):
            kiln.export.load(io.BytesIO(data))

    prop()


json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64), st.sampled_from([-1, 0, 1, 2, 3, 2**31, 2**62]),
              st.floats(allow_nan=False), st.text(max_size=12), st.sampled_from(["batch", "2*batch", "float64", "-1"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)


def paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from paths(v, prefix + (i,))


MEMBERS = _members(CLASSIC)
GRAPH = json.loads(dict(MEMBERS)["kiln_program/model.json"])
PATHS = [p for p in paths(GRAPH) if p]
PATHS += [("in_spec",), ("out_spec",)] * 20  # strings holding JSON: their own structure is checked too


@SETTINGS
@given(st.integers(0, len(PATHS) - 1), json_value)
def test_graph_mutations_raise_or_run(which, value):
    g = copy.deepcopy(GRAPH)
    path = PATHS[which]
    obj = g
    for k in path[:-1]:
        obj = obj[k]
    if path[-1] in ("in_spec", "out_spec") and isinstance(value, (list, dict)):
        value = json.dumps(value)  # a well-formed JSON text of the wrong structure
    obj[path[-1]] = value
    data = _write([(n, json.dumps(g).encode() if n.endswith("model.json") else b) for n, b in MEMBERS])
    try:
        ep = kiln.export.load(io.BytesIO(data))
    except RuntimeError:
        return
    try:
        out = ep.module()(kiln.randn(5, 3))
    except ERRORS:
        return
    assert out is None or isinstance(out, (kiln.Tensor, tuple, list))
