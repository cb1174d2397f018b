"""Op schemas (kiln/dispatch/schema.h): every table op declares its signature in torch's schema
language; the suite checks every call it makes against it (conftest.py), and here the schemas
themselves are checked: complete, well formed, named like the op, and typed like torch where kiln's
argument is torch's argument."""
import re

import pytest
import torch

import kiln

OPS = kiln.registered_ops()


def _schema(op):
    s = kiln._C._op_schema(op)
    assert s is not None, f"op {op} has no schema"
    return s


@pytest.mark.parametrize("op", OPS)
def test_every_op_has_a_well_formed_schema(op):
    name, overload, args, returns, text = _schema(op)
    # the op's table name is the schema's name, with its overload after a dot or an underscore
    assert op in (name, f"{name}.{overload}", f"{name}_{overload}"), f"schema {text} does not name op {op}"
    assert kiln._C._parse_schema(text) == text  # normalised text parses to itself
    names = [a[0] for a in args]
    assert len(names) == len(set(names))
    kw = [a[3] for a in args]
    assert kw == sorted(kw), f"{text}: a positional argument after a keyword-only one"


def _split_args(text):
    """(name, type) per argument of a schema string, types as written, int[N] read as int[]."""
    inner = text[text.index("(") + 1:text.rindex(") ->")]
    parts, depth, cur = [], 0, ""
    for c in inner:
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    parts.append(cur)
    out = {}
    for p in (p.strip() for p in parts):
        if not p or p == "*":
            continue
        decl = p.split("=")[0].split()
        typ = decl[0].split("(")[0] + ("?" if decl[0].endswith("?") and "(" in decl[0] else "")
        for n in range(1, 10):
            typ = typ.replace(f"[{n}]", "[]")
        out[decl[-1]] = typ.replace("SymInt", "int")
    return out


def _torch_schema(name, overload):
    try:
        return getattr(getattr(torch.ops.aten, name), overload or "default")._schema
    except (AttributeError, RuntimeError):
        return None


def test_arguments_shared_with_torch_have_torch_types():
    """Where an op exists in torch under the same qualified name, an argument kiln names like torch
    has torch's type (kiln's table ops may order tensors first and add flags of their own)."""
    compared, bad = 0, []
    for op in OPS:
        name, overload, args, _, text = _schema(op)
        ts = _torch_schema(name, overload)
        if ts is None:
            continue
        theirs = _split_args(str(ts))
        for arg_name, typ, _, _ in args:
            if arg_name not in theirs:
                continue
            compared += 1
            mine, other = typ.rstrip("?"), theirs[arg_name].rstrip("?")
            if mine != other:
                bad.append(f"{text}: {arg_name} is {typ}, torch has {theirs[arg_name]}")
    assert compared > 300
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("text,why", [
    ("add(Tensor self, Tensor other -> Tensor", "expected ')'"),
    ("add(Tensor self, Tensor self) -> Tensor", "appears twice"),
    ("add(Tensr self) -> Tensor", "unknown type"),
    ("cat(Tensor[] a, Tensor[] b) -> Tensor", "more than one Tensor[]"),
    ("add(Tensor self) -> Tensor junk", "unexpected text"),
])
def test_malformed_schemas_raise_value_error(text, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        kiln._C._parse_schema(text)


def test_schema_language():
    s = "index_put_(Tensor(a!) self, Tensor values, Tensor?[] indices, *, bool accumulate=False) -> Tensor(a!)"
    assert kiln._C._parse_schema(s) == \
        "index_put_(Tensor self, Tensor values, Tensor?[] indices, *, bool accumulate=False) -> Tensor"
    assert kiln._C._parse_schema("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)") \
        == "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"  # names kept
    assert kiln._C._parse_schema("f(Tensor a) -> (Tensor, Tensor)") == "f(Tensor a) -> (Tensor, Tensor)"
    assert kiln._C._parse_schema("f(int[2] k=[1, 1], str mode=\"a,b\") -> ()") == \
        "f(int[] k=[1, 1], str mode=\"a,b\") -> ()"
