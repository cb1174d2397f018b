"""Every op in kiln's op table must be exercised by the conformance suite (DESIGN.md §2)."""
import pathlib
import re

import kiln

# Table entries reached through a public function of another name.
PUBLIC = {
    "div_trunc": "div", "clamp_min_tensor": "clamp", "clamp_max_tensor": "clamp", "clamp_min": "clamp",
    "clamp_max": "clamp", "norm_l1": "vector_norm", "norm_l2sq": "vector_norm", "max_dim": "max",
    "min_dim": "min", "median_dim": "median", "nanmedian_dim": "nanmedian", "round_decimals": "round",
    "gelu_tanh": "gelu", "to": "to", "copy_": "copy_", "index": "t[[", "index_put_": "__setitem__",
    "slice": "::2", "select": "select", "view_dtype": "view(kdt", "conj_physical": "conj_physical",
    "empty": "empty", "full": "full", "elu": "elu", "gelu_backward": "gelu", "gelu_tanh_backward": "gelu",
    "native_layer_norm_backward": "layer_norm", "random_fill_": "randn", "_fused_optimizer_update": "AdamW",
}


def test_every_table_op_has_a_conformance_test():
    here = pathlib.Path(__file__).parent
    source = "\n".join(p.read_text() for p in here.glob("test_*.py") if p.name != "test_coverage.py")
    missing = []
    for op in kiln.registered_ops():
        name = PUBLIC.get(op, op)
        if not re.search(re.escape(name), source):
            missing.append(op)
    assert not missing, f"ops without a conformance test: {missing}"
