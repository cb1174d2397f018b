"""safetensors checkpoints: kiln <-> kiln, kiln <-> the `safetensors` package (bit-exact, byte-identical
files), metadata, layouts, the mmap loader's guarantees, corrupt files and a seeded fuzz of the loader
checked against the reference implementation."""
import json
import os
import random
import struct

import pytest
import torch

import kiln
import kiln.io as kio
from helpers import ALL_DTYPES, dname, kdt, tdt, to_kiln, to_torch

st = pytest.importorskip("safetensors.torch")
import safetensors  # noqa: E402

DTYPES = [d for d in ALL_DTYPES if d != "complex128"]  # complex128 has no safetensors code
_INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits(t):
    """A torch tensor's raw bits as an integer tensor (NaN payloads and -0.0 compare exactly)."""
    t = t.contiguous()
    if t.dtype == torch.bool:
        return t.to(torch.uint8)
    return t.view(_INT_VIEW[t.element_size()])


def assert_bits(k, t, msg=""):
    assert isinstance(k, kiln.Tensor), msg
    assert dname(k.dtype) == dname(t.dtype), f"{msg}: {k.dtype} != {t.dtype}"
    assert tuple(k.shape) == tuple(t.shape), f"{msg}: {tuple(k.shape)} != {tuple(t.shape)}"
    assert torch.equal(bits(to_torch(k)), bits(t)), f"{msg}: bits differ"


def random_bits(shape, dtype, seed):
    """Every bit pattern of the dtype (NaNs, infinities, subnormals), booleans as 0/1."""
    g = torch.Generator().manual_seed(seed)
    if dtype == "bool":
        return torch.randint(0, 2, shape, generator=g).bool()
    n = 1
    for s in shape:
        n *= s
    size = torch.empty(0, dtype=tdt(dtype)).element_size()
    raw = torch.randint(0, 256, (n * size,), generator=g, dtype=torch.uint8)
    return raw.view(tdt(dtype)).reshape(shape)


def sample(seed=0):
    """A dict of torch tensors of every storable dtype and a few shapes (0-dim and empty included)."""
    out = {}
    for i, d in enumerate(DTYPES):
        out[f"t_{d}"] = random_bits((3, 5), d, seed + i)
        out[f"s_{d}"] = random_bits((), d, seed + 100 + i)
        out[f"e_{d}"] = random_bits((0, 4), d, seed + 200 + i)
    return out


def to_kiln_dict(d):
    return {k: to_kiln(v) for k, v in d.items()}


# ---- round trips --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_roundtrip_kiln_every_dtype(tmp_path, dtype):
    tensors = {"x": random_bits((4, 7), dtype, 1), "scalar": random_bits((), dtype, 2),
               "empty": random_bits((2, 0, 3), dtype, 3), "vec": random_bits((33,), dtype, 4)}
    path = tmp_path / "a.safetensors"
    kio.save_file(to_kiln_dict(tensors), path)
    for loaded in (kio.load_file(path), kio.load(kio.save(to_kiln_dict(tensors))),
                   kio.load(path.read_bytes())):
        assert sorted(loaded) == sorted(tensors)
        for name, t in tensors.items():
            assert_bits(loaded[name], t, f"{dtype} {name}")


def test_kiln_file_loads_in_safetensors_bit_exact(tmp_path):
    tensors = sample(10)
    path = tmp_path / "k.safetensors"
    kio.save_file(to_kiln_dict(tensors), str(path))
    back = st.load_file(str(path))
    assert sorted(back) == sorted(tensors)
    for name, t in tensors.items():
        assert back[name].dtype == t.dtype and back[name].shape == t.shape, name
        assert torch.equal(bits(back[name]), bits(t)), name


def test_bytes_identical_to_reference_writer():
    tensors = sample(20)
    assert kio.save(to_kiln_dict(tensors)) == st.save(tensors)
    one = {"w": random_bits((2, 3), "float32", 1), "b": random_bits((3,), "bfloat16", 2)}
    assert kio.save(to_kiln_dict(one), {"format": "pt"}) == st.save(one, metadata={"format": "pt"})
    assert kio.save({}) == st.save({})


def test_torch_file_loads_in_kiln_bit_exact(tmp_path):
    tensors = sample(30)
    path = tmp_path / "t.safetensors"
    st.save_file(tensors, str(path), metadata={"a": "1", "b": "two"})
    back = kiln.io.load_file(path)
    assert sorted(back) == sorted(tensors)
    for name, t in tensors.items():
        assert_bits(back[name], t, name)
    assert kio.load_metadata(path) == {"a": "1", "b": "two"}
    back = kio.load(st.save(tensors))
    for name, t in tensors.items():
        assert_bits(back[name], t, name)


def test_metadata_both_ways(tmp_path):
    meta = {"format": "pt", "unicode": "h\u00e9llo \U0001F600 \u4e2d", "quotes": 'a"b\\c/d',
            "control": "tab\tnl\ncr\r\x01\x1f\x7f", "empty": "", "": "empty key", "json": '{"x": [1, 2]}'}
    t = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}
    p1, p2 = tmp_path / "k.safetensors", tmp_path / "t.safetensors"
    kio.save_file(to_kiln_dict(t), p1, metadata=meta)
    with safetensors.safe_open(str(p1), framework="pt") as f:
        assert f.metadata() == meta
    st.save_file(t, str(p2), metadata=meta)
    assert kio.load_metadata(p2) == meta
    with kio.safe_open(p2) as f:
        assert f.metadata() == meta
        assert f.keys() == ["w"]
        assert_bits(f.get_tensor("w"), t["w"])
        with pytest.raises(KeyError):
            f.get_tensor("nope")
    assert kio.load_metadata(tmp_path / "k.safetensors") == meta
    with kio.safe_open(p1) as f:
        assert f.metadata() == meta
    kio.save_file(to_kiln_dict(t), p1)
    assert kio.load_metadata(p1) == {}


def test_non_contiguous_and_views(tmp_path):
    base = random_bits((6, 8), "float32", 5)
    tensors = {"transposed": base.t(), "stepped": base[::2, 1::3], "expanded": base[:1].expand(4, 8),
               "offset": base[3:, 2:], "permuted": random_bits((2, 3, 4), "int16", 6).permute(2, 0, 1),
               "same": base, "alias": base}  # shared storage: each tensor is written in full
    k = {n: to_kiln(t) for n, t in tensors.items()}
    k["alias"] = k["same"]
    path = tmp_path / "v.safetensors"
    kio.save_file(k, path)
    for loaded in (kio.load_file(path), st.load_file(str(path))):
        for name, t in tensors.items():
            got = loaded[name]
            if isinstance(got, torch.Tensor):
                assert torch.equal(bits(got), bits(t)), name
            else:
                assert_bits(got, t, name)
                assert got.is_contiguous()


def test_shapes_match_reference():
    tensors = {"zero_dim": torch.tensor(3.5), "empty_1d": torch.zeros(0), "empty_mid": torch.ones(2, 0, 3),
               "ones": torch.ones(1, 1, 1, 1), "long": torch.arange(1000, dtype=torch.int64)}
    data = kio.save(to_kiln_dict(tensors))
    assert data == st.save(tensors)
    for name, t in kio.load(data).items():
        assert_bits(t, tensors[name], name)


# ---- the loader's memory guarantees --------------------------------------------------------------------
def test_load_file_is_zero_copy_and_private(tmp_path):
    t = {"a": torch.arange(1 << 18, dtype=torch.float32), "b": torch.arange(1 << 16, dtype=torch.int64),
         "c": torch.zeros(3, dtype=torch.uint8)}
    path = tmp_path / "m.safetensors"
    st.save_file(t, str(path))
    before = path.read_bytes()
    alloc = kiln.memory_stats()["allocated_bytes.all.current"]
    loaded = kio.load_file(path)
    assert kiln.memory_stats()["allocated_bytes.all.current"] - alloc < 4096  # views, not copies
    # one mapping: the tensors sit at their file offsets relative to each other
    assert loaded["b"].data_ptr() - loaded["a"].data_ptr() == -(1 << 19)
    loaded["a"].fill_(7.0)
    loaded["b"][5] = -1
    assert path.read_bytes() == before  # writes land in private copy-on-write pages
    assert float(loaded["a"][123]) == 7.0 and int(loaded["b"][5]) == -1
    fresh = kio.load_file(path)
    assert float(fresh["a"][123]) == 123.0 and int(fresh["b"][5]) == 5


def test_loaded_tensors_outlive_file_and_overwrite(tmp_path):
    t = {"a": torch.arange(100000, dtype=torch.float64), "b": torch.arange(10, dtype=torch.int32)}
    path = tmp_path / "o.safetensors"
    st.save_file(t, str(path))
    loaded = kio.load_file(path)
    a = loaded.pop("a")
    del loaded
    # re-saving over the mapped file (a load-modify-save cycle) must not pull the pages from under `a`
    kio.save_file({"a": a * 2, "b": a[:3]}, path)
    assert float(a.sum()) == float(t["a"].sum())
    again = kio.load_file(path)
    assert_bits(again["a"], t["a"] * 2)
    kio.save_file(again, path)  # saving tensors mapped from the very file being replaced
    assert_bits(kio.load_file(path)["a"], t["a"] * 2)
    os.remove(path)
    assert float(again["a"][99999]) == 199998.0
    assert not [f for f in os.listdir(tmp_path) if f != "o.safetensors"]  # no temporary files left


def test_misaligned_offsets_are_copied():
    # U8 first pushes the F32 tensor to an odd offset; the reference loader accepts such files
    header = json.dumps({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                         "b": {"dtype": "F32", "shape": [3], "data_offsets": [1, 13]},
                         "c": {"dtype": "I64", "shape": [2], "data_offsets": [13, 29]}}).encode()
    header += b" " * ((8 - len(header) % 8) % 8)
    data = struct.pack("<Q", len(header)) + header + bytes([9]) + struct.pack("<3f", 1.5, -2, 3) + \
        struct.pack("<2q", -7, 1 << 40)
    ref = st.load(data)
    for loaded in (kio.load(data),):
        for n in "abc":
            assert_bits(loaded[n], ref[n], n)


def test_misaligned_file_loads(tmp_path):
    header = json.dumps({"a": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]},
                         "b": {"dtype": "F64", "shape": [2], "data_offsets": [3, 19]}}).encode()
    data = struct.pack("<Q", len(header)) + header + bytes([1, 2, 3]) + struct.pack("<2d", 0.25, -1e300)
    path = tmp_path / "mis.safetensors"
    path.write_bytes(data)
    ref = st.load(data)
    loaded = kio.load_file(path)
    for n in "ab":
        assert_bits(loaded[n], ref[n], n)
    assert loaded["b"].data_ptr() % 8 == 0


def test_bool_bytes_are_normalised(tmp_path):
    header = b'{"m":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}}'
    data = struct.pack("<Q", len(header)) + header + bytes([0, 1, 2, 255])
    path = tmp_path / "b.safetensors"
    path.write_bytes(data)
    for loaded in (kio.load(data), kio.load_file(path)):
        assert loaded["m"].tolist() == [False, True, True, True]
        assert to_torch(loaded["m"]).view(torch.uint8).tolist() == [0, 1, 1, 1]


# ---- errors --------------------------------------------------------------------------------------------
def test_complex128_is_refused(tmp_path):
    path = tmp_path / "c.safetensors"
    with pytest.raises(KeyError):  # the reference has no code for it either
        st.save({"z": torch.zeros(2, dtype=torch.complex128)})
    with pytest.raises(ValueError, match=r"^\[safetensors\] tensor 'z' has dtype complex128"):
        kio.save_file({"z": kiln.zeros(2, dtype=kiln.complex128)}, path)
    assert not path.exists()
    with pytest.raises(ValueError, match="complex128"):
        kio.save({"ok": kiln.zeros(2), "z": kiln.zeros(2, dtype=kiln.complex128)})


def test_bad_arguments(tmp_path):
    path = tmp_path / "x.safetensors"
    with pytest.raises(TypeError):
        kio.save_file({"a": 1}, path)
    with pytest.raises(TypeError):
        kio.save_file({1: kiln.zeros(1)}, path)
    with pytest.raises(TypeError):
        kio.save_file({"a": kiln.zeros(1)}, path, metadata={"k": 1})
    with pytest.raises(ValueError, match=r"^\[safetensors\] '__metadata__' is reserved"):
        kio.save({"__metadata__": kiln.zeros(1)})
    with pytest.raises(FileNotFoundError):
        kio.load_file(tmp_path / "missing.safetensors")
    with pytest.raises(FileNotFoundError):
        st.load_file(str(tmp_path / "missing.safetensors"))
    with pytest.raises(RuntimeError, match=r"^\[safetensors\] file '.*': not a regular file"):
        kio.load_file(tmp_path)
    with pytest.raises(RuntimeError, match=r"^\[safetensors\] file '.*nodir.*': cannot open for writing"):
        kio.save_file({"a": kiln.zeros(1)}, tmp_path / "nodir" / "x.safetensors")
    with pytest.raises(ValueError, match="device"):
        kio.load_file(path, device="cuda")


def _file(header, data=b"", n=None):
    header = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(header) if n is None else n) + header + data


T = '"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}'
CORRUPT = [
    ("too short", b"\x10\x00\x00", "too short"),
    ("empty", b"", "too short"),
    ("header too large", _file("{}", n=100_000_001), "100 MB"),
    ("header past end", _file("{}", n=64), "larger than the file"),
    ("huge length", b"\xff" * 8 + b"{}", "100 MB"),
    ("zero header", _file(""), "invalid header JSON"),
    ("invalid utf-8", _file(b'{"__metadata__":{"a":"\xff"}}'), "not valid UTF-8"),
    ("overlong utf-8", _file(b'{"__metadata__":{"a":"\xc0\xaf"}}'), "not valid UTF-8"),
    ("surrogate utf-8", _file(b'{"__metadata__":{"a":"\xed\xa0\x80"}}'), "not valid UTF-8"),
    ("truncated utf-8", _file(b'{"__metadata__":{"a":"\xe4\xb8"}}'), "not valid UTF-8"),
    ("not json", _file("hello"), "must be a JSON object"),
    ("array", _file("[]"), "must be a JSON object"),
    ("trailing", _file("{} x"), "trailing characters"),
    ("trailing comma", _file('{' + T + ',}', b"\0" * 8), "expected a string"),
    ("unterminated", _file('{"t":{"dtype":"F32'), "unterminated string"),
    ("control char", _file('{"__metadata__":{"a":"\x01"}}'), "control character"),
    ("bad escape", _file('{"__metadata__":{"a":"\\x"}}'), "invalid escape"),
    ("lone surrogate", _file('{"__metadata__":{"a":"\\ud800"}}'), "surrogate"),
    ("unknown dtype", _file(T.replace("F32", "F31").join("{}"), b"\0" * 8), "unknown dtype 'F31'"),
    ("unsupported dtype", _file('{"t":{"dtype":"F8_E8M0","shape":[1],"data_offsets":[0,1]}}', b"\0"),
     "not supported by kiln"),
    ("negative", _file(T.replace("[2]", "[-2]").join("{}"), b"\0" * 8), "non-negative"),
    ("float", _file(T.replace("[2]", "[2.0]").join("{}"), b"\0" * 8), "must be an integer"),
    ("exponent", _file(T.replace("[2]", "[2e0]").join("{}"), b"\0" * 8), "must be an integer"),
    ("leading zero", _file(T.replace("[2]", "[02]").join("{}"), b"\0" * 8), "leading zero"),
    ("string number", _file(T.replace("[2]", '["2"]').join("{}"), b"\0" * 8), "non-negative integer"),
    ("too big number", _file(T.replace("[2]", "[18446744073709551616]").join("{}"), b"\0" * 8), "too large"),
    ("huge dim", _file(T.replace("[2]", "[9223372036854775808]").join("{}"), b"\0" * 8), "too large"),
    ("overflow", _file(T.replace("[2]", "[4611686018427387904,4]").join("{}"), b"\0" * 8), "overflows"),
    ("size mismatch", _file(T.replace("[2]", "[3]").join("{}"), b"\0" * 8), "needs 12 bytes"),
    ("gap", _file(T.replace("[0,8]", "[4,12]").join("{}"), b"\0" * 12), "invalid data_offsets"),
    ("end before begin", _file('{"t":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}', b"\0" * 4),
     "invalid data_offsets"),
    ("overlap", _file('{' + T + ',' + T.replace('"t"', '"u"') + '}', b"\0" * 8), "invalid data_offsets"),
    ("not covering", _file(T.join("{}"), b"\0" * 12), "data section holds 12"),
    ("data missing", _file(T.join("{}"), b"\0" * 4), "data section holds 4"),
    ("three offsets", _file(T.replace("[0,8]", "[0,8,8]").join("{}"), b"\0" * 8), "must hold 2"),
    ("missing dtype", _file('{"t":{"shape":[2],"data_offsets":[0,8]}}', b"\0" * 8), "missing field 'dtype'"),
    ("missing shape", _file('{"t":{"dtype":"F32","data_offsets":[0,8]}}', b"\0" * 8), "missing field 'shape'"),
    ("missing offsets", _file('{"t":{"dtype":"F32","shape":[2]}}', b"\0" * 8), "missing field 'data_offsets'"),
    ("duplicate field", _file('{"t":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
                              b"\0" * 8), "duplicate field 'dtype'"),
    ("tensor not object", _file('{"t":[1]}'), "expected an object"),
    ("shape null", _file(T.replace("[2]", "null").join("{}"), b"\0" * 8), "expected '['"),
    ("metadata not strings", _file('{"__metadata__":{"a":1}}'), "must be a string"),
    ("metadata twice", _file('{"__metadata__":{},"__metadata__":{}}'), "duplicate key '__metadata__'"),
    ("deep nesting", _file('{"t":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":' + "[" * 200 +
                           "]" * 200 + "}}"), "nesting too deep"),
]
# every case above is refused by the reference implementation too, except kiln's missing dtypes
REFERENCE_ACCEPTS = {"unsupported dtype"}


@pytest.mark.parametrize("label,data,message", CORRUPT, ids=[c[0] for c in CORRUPT])
def test_corrupt_files(tmp_path, label, data, message):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(data)
    with pytest.raises(ValueError) as e:
        kio.load(data)
    assert str(e.value).startswith("[safetensors] bytes: ") and message in str(e.value), str(e.value)
    with pytest.raises(ValueError) as e:
        kio.load_file(path)
    assert str(e.value).startswith(f"[safetensors] file '{path}': ") and message in str(e.value), str(e.value)
    if label in REFERENCE_ACCEPTS:
        safetensors.deserialize(data)
    else:
        with pytest.raises(Exception):  # noqa: B017 (the reference raises its own SafetensorError)
            safetensors.deserialize(data)


def test_duplicate_tensor_names_refused():
    # the reference keeps the last of two equal keys silently; kiln refuses the ambiguous file
    data = _file('{' + T + ',' + T + '}', b"\0" * 8)
    assert list(st.load(data)) == ["t"]
    with pytest.raises(ValueError, match="duplicate tensor name 't'"):
        kio.load(data)
    with pytest.raises(ValueError, match="duplicate __metadata__ key 'k'"):
        kio.load(_file('{"__metadata__":{"k":"a","k":"b"}}'))


def test_lenient_where_the_reference_is():
    # unknown fields, null metadata, surrounding whitespace and escapes are accepted, as by the reference
    data = _file(' {"__metadata__":null,"t":{"dtype":"F32","x":{"y":[true,false,null,-1.5e3,"s"]},'
                 '"shape":[2],"data_offsets":[0,8]}} \n\t', struct.pack("<2f", 1, 2))
    ref = st.load(data)
    assert_bits(kio.load(data)["t"], ref["t"])
    data = _file('{"\\u0074\\/":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                 '"__metadata__":{"\\ud83d\\ude00":"\\"\\\\\\b\\f\\n\\r\\t\\u00e9"}}', b"\0" * 8)
    ref = safetensors.deserialize(data)
    assert list(kio.load(data)) == [n for n, _ in ref] == ["t/"]
    assert kio._C._safetensors_load(data)[1] == {"\U0001F600": '"\\\b\f\n\r\t\u00e9'}


# ---- fuzz: mutated files against the reference implementation ------------------------------------------
CODES = ["BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64", "F16", "BF16", "F32", "F64", "C64",
         "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "C128", "f32", "", "F32 ", "F\u00e932"]


def _valid_file(rng):
    tensors = {
        "w": random_bits((rng.randint(0, 3), 2), "float32", rng.randint(0, 99)),
        "b": random_bits((3,), "bfloat16", 1), "m": random_bits((2, 2), "bool", 2),
        "i": random_bits((), "int64", 3), "u": random_bits((5,), "uint8", 4),
        "e": random_bits((0,), "float16", 5), "c": random_bits((1,), "complex64", 6),
    }
    for name in rng.sample(sorted(tensors), rng.randint(0, 3)):
        del tensors[name]
    return st.save(tensors, metadata={"k": "v\u00e9"} if rng.random() < 0.5 else None)


def _split(data):
    if len(data) < 8:
        return b"", b""
    n = struct.unpack("<Q", data[:8])[0]
    return data[8:8 + n], data[8 + n:]


def _mutate(rng, data):
    header, body = _split(data)
    kind = rng.randrange(12)
    if kind == 11:  # benign: untouched, or whitespace around the header object
        if rng.random() < 0.5:
            return data
        b = rng.choice([b" ", b"\n", b"\t\r"]) + header + b" " * rng.randrange(9)
        return struct.pack("<Q", len(b)) + b + body
    if kind == 0:  # random bytes, sometimes behind a plausible length
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        return junk if rng.random() < 0.5 else struct.pack("<Q", len(junk)) + junk
    if kind == 1:  # truncation
        return data[:rng.randrange(len(data) + 1)]
    if kind == 2:  # byte flips anywhere in the header (and sometimes the length)
        b = bytearray(data or b"\0")
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(min(len(b), 8 + len(header)))] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 3:  # wrong length prefix
        n = rng.choice([0, 1, len(header) - 1, len(header) + 1, len(header) + 8, 2**63, 2**64 - 1,
                        100_000_000, rng.randrange(2**32)])
        return struct.pack("<Q", max(0, n)) + data[8:]
    text = header.decode("utf-8", "surrogateescape")  # earlier mutations may have broken the UTF-8
    if not text:
        return data + b"{}"
    if kind == 4:  # changed offsets / shape numbers
        nums = [i for i, c in enumerate(text) if c.isdigit() and not text[i - 1].isdigit()]
        if nums:
            i = rng.choice(nums)
            j = i
            while j < len(text) and text[j].isdigit():
                j += 1
            new = str(rng.choice([0, 1, 2, 3, 4, 7, 8, 16, 2**31, 2**62, 2**63 - 1, 2**64 - 1, 2**64,
                                  int(text[i:j]) + rng.choice([-1, 1]) if int(text[i:j]) > 0 else 1]))
            new = rng.choice([new, new, "-" + new, new + ".0", new + "e0", "0" + new, '"' + new + '"'])
            text = text[:i] + new + text[j:]
    elif kind == 5:  # bad dtypes
        start = text.find('"dtype":"')
        if start >= 0:
            start += 9
            end = text.find('"', start) % (len(text) + 1)  # -1 (none) -> the end
            text = text[:start] + rng.choice(CODES) + text[end:]
    elif kind == 6:  # invalid UTF-8 inside a string
        b = header
        i = rng.choice([i for i, c in enumerate(b) if c == ord('"')] or [0])
        bad = rng.choice([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe4\xb8", b"\xf4\x90\x80\x80", b"\x80"])
        b = b[:i + 1] + bad + b[i + 1:]
        return struct.pack("<Q", len(b)) + b + body
    elif kind == 7:  # delete / duplicate a span of the header
        i = rng.randrange(len(text))
        j = min(len(text), i + rng.randint(1, 12))
        text = text[:i] + text[j:] if rng.random() < 0.5 else text[:j] + text[i:j] + text[j:]
    elif kind == 8:  # insert JSON-ish tokens
        i = rng.randrange(len(text) + 1)
        text = text[:i] + rng.choice(['"', "{", "}", "[", "]", ",", ":", "null", "\\", "\\u", '"x":1,',
                                      "\x00", "\\ud800", " ", "-", "1e999", "[[[[[[[["]) + text[i:]
    elif kind == 9:  # body changes (truncate or extend the data section)
        body = body[:rng.randrange(len(body) + 1)] if rng.random() < 0.5 else body + b"\0" * rng.randint(1, 9)
    else:  # several mutations at once
        for _ in range(rng.randint(2, 4)):
            data = _mutate(rng, data)
        return data
    b = text.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(b)) + b + body


def _reference(data):
    try:
        return {n: v for n, v in safetensors.deserialize(data)}
    except Exception:  # noqa: BLE001
        return None


def _check_case(data, loader, where):
    ref = _reference(data)
    try:
        got = loader(data)
    except ValueError as e:
        msg = str(e)
        assert msg.startswith(f"[safetensors] {where}: "), msg
        if ref is not None:  # refused only where kiln is stricter than the reference, by design
            assert "duplicate" in msg or "not supported by kiln" in msg, (msg, data)
        return False
    assert ref is not None, f"kiln accepted a file the reference refuses: {data!r}"
    assert sorted(got) == sorted(ref)
    for name, t in got.items():
        info = ref[name]
        assert tuple(t.shape) == tuple(info["shape"]), name
        assert kio._C._safetensors_save({"x": t})  # the tensor is usable
        flat = to_torch(t).reshape(-1)
        raw = bytes(flat.view(torch.uint8).tolist()) if flat.numel() else b""
        want = bytes(info["data"])
        if info["dtype"] == "BOOL":
            want = bytes(int(c != 0) for c in want)
        assert raw == want, name
    return True


def test_fuzz_loader_against_reference(tmp_path):
    rng = random.Random(1234)
    loaded = 0
    path = tmp_path / "f.safetensors"

    def from_file(data):
        path.write_bytes(data)
        return kio.load_file(path)

    for case in range(3000):
        data = _mutate(rng, _valid_file(rng))
        if case % 8 == 0:
            loaded += _check_case(data, from_file, f"file '{path}'")
        else:
            loaded += _check_case(data, kio.load, "bytes")
    assert 300 < loaded < 2700  # both outcomes are exercised
