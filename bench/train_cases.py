"""Training benchmarks for `make bench`: the quickstart model's full step, LSTM/GRU and SDPA
forward+backward. Both libraries get the same weights and inputs."""
import importlib.util
import os

import numpy as np
import torch

import kiln

HERE = os.path.dirname(os.path.abspath(__file__))


def _quickstart():
    spec = importlib.util.spec_from_file_location("quickstart", os.path.join(HERE, "..", "examples", "quickstart.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class TorchBlock(torch.nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.n_heads = h
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, 4 * d)
        self.act = torch.nn.GELU()
        self.out = torch.nn.Linear(4 * d, d)
        self.drop = torch.nn.Dropout(0.0)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(B, T, C)))
        return x + self.drop(self.out(self.act(self.fc(self.ln2(x)))))


class TorchCharTransformer(torch.nn.Module):
    def __init__(self, vocab, context, d_model=192, n_layers=4, n_heads=6):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d_model)
        self.pos = torch.nn.Embedding(context, d_model)
        self.blocks = torch.nn.ModuleList([TorchBlock(d_model, n_heads) for _ in range(n_layers)])
        self.ln_f = torch.nn.LayerNorm(d_model)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return torch.nn.functional.linear(self.ln_f(x), self.tok.weight)


def copy_weights(kmodel, tmodel):
    tsd = tmodel.state_dict()
    with torch.no_grad():
        for name, p in kmodel.state_dict().items():
            tsd[name].copy_(torch.from_numpy(p.numpy().copy()))


def lm_step_setup(vocab=96, B=32, T=128, bf16=False):
    def setup():
        qs = _quickstart()
        kiln.manual_seed(0)
        km = qs.CharTransformer(vocab, T)
        tm = TorchCharTransformer(vocab, T)
        copy_weights(km, tm)
        rng = np.random.default_rng(0)
        data = rng.integers(0, vocab, (B, T + 1))
        kx, ky = kiln.from_numpy(data[:, :-1].copy()), kiln.from_numpy(data[:, 1:].copy())
        tx, ty = torch.from_numpy(data[:, :-1].copy()), torch.from_numpy(data[:, 1:].copy())
        kopt = kiln.optim.AdamW(km.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
        topt = torch.optim.AdamW(tm.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)

        def kstep():
            with kiln.autocast("cpu", dtype=kiln.bfloat16, enabled=bf16):
                logits = km(kx)
                loss = kiln.nn.functional.cross_entropy(logits.reshape(-1, vocab), ky.reshape(-1))
            kopt.zero_grad()
            loss.backward()
            kopt.step()

        def tstep():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = tm(tx)
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), ty.reshape(-1))
            topt.zero_grad()
            loss.backward()
            topt.step()
        return kstep, tstep
    return setup


def rnn_setup(kind, T=128, B=32, I=256, H=256, layers=2):
    def setup():
        tm = getattr(torch.nn, kind)(I, H, num_layers=layers)
        km = getattr(kiln.nn, kind)(I, H, num_layers=layers)
        with kiln.no_grad():
            for name, p in km.named_parameters():
                p.copy_(kiln.from_numpy(tm.state_dict()[name].numpy().copy()))
        x = np.random.default_rng(0).standard_normal((T, B, I), dtype=np.float32)
        kx = kiln.from_numpy(x.copy()).requires_grad_()
        tx = torch.from_numpy(x.copy()).requires_grad_()

        def kstep():
            out, _ = km(kx)
            out.sum().backward()

        def tstep():
            out, _ = tm(tx)
            out.sum().backward()
        return kstep, tstep
    return setup


def packed_lstm_setup(T=128, B=32, I=256, H=256, layers=2):
    """A packed batch of lengths T, T - 3, ... (sorted by the loader, not the caller)."""
    def setup():
        tm = torch.nn.LSTM(I, H, num_layers=layers)
        km = kiln.nn.LSTM(I, H, num_layers=layers)
        with kiln.no_grad():
            for name, p in km.named_parameters():
                p.copy_(kiln.from_numpy(tm.state_dict()[name].numpy().copy()))
        x = np.random.default_rng(0).standard_normal((T, B, I), dtype=np.float32)
        lengths = [max(1, T - 3 * ((b * 7) % B)) for b in range(B)]
        kx = kiln.from_numpy(x.copy()).requires_grad_()
        tx = torch.from_numpy(x.copy()).requires_grad_()
        kpack = kiln.nn.utils.rnn.pack_padded_sequence
        tpack = torch.nn.utils.rnn.pack_padded_sequence

        def kstep():
            out, _ = km(kpack(kx, lengths, enforce_sorted=False))
            out.data.sum().backward()

        def tstep():
            out, _ = tm(tpack(tx, lengths, enforce_sorted=False))
            out.data.sum().backward()
        return kstep, tstep
    return setup


def sdpa_tensors(B, H, L, E):
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal((B, H, L, E), dtype=np.float32) for _ in range(3)]
    ks = [kiln.from_numpy(a.copy()).requires_grad_() for a in arrs]
    ts = [torch.from_numpy(a.copy()).requires_grad_() for a in arrs]
    return ks, ts


def sdpa_setup(B=4, H=8, L=1024, E=64):
    def setup():
        ks, ts = sdpa_tensors(B, H, L, E)

        def kstep():
            kiln.nn.functional.scaled_dot_product_attention(*ks, is_causal=True).sum().backward()

        def tstep():
            torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=True).sum().backward()
        return kstep, tstep
    return setup


def sdpa_peak_note(B=4, H=8, L=1024, E=64):
    """kiln's peak extra memory for one fwd+bwd, against the size of one (L, L) float32 score matrix
    per batch x head (what an unfused attention would hold)."""
    ks, _ = sdpa_tensors(B, H, L, E)
    kiln.reset_peak_memory_stats()
    before = kiln.memory_stats()["allocated_bytes.all.current"]
    kiln.nn.functional.scaled_dot_product_attention(*ks, is_causal=True).sum().backward()
    peak = kiln.memory_stats()["allocated_bytes.all.peak"] - before
    scores = B * H * L * L * 4
    return f"peak {peak / 2**20:.1f} MiB (scores {scores / 2**20:.0f} MiB)"


def train_cases(Case, quick):
    cases = [Case("train step: quickstart LM 1.8M (B=32, T=128) fwd+bwd+AdamW", lm_step_setup()),
             Case("train step: quickstart LM, autocast bf16 (kiln.autocast vs torch.autocast)",
                  lm_step_setup(bf16=True)),
             Case("LSTM fwd+bwd (T=128, B=32, 256->256, 2 layers)", rnn_setup("LSTM")),
             Case("LSTM fwd+bwd packed (T<=128, B=32, 256->256, 2 layers)", packed_lstm_setup()),
             Case("GRU fwd+bwd (T=128, B=32, 256->256, 2 layers)", rnn_setup("GRU")),
             Case("SDPA causal fwd+bwd (B=4, H=8, L=1024, E=64)", sdpa_setup(),
                  7.0 * 4 * 8 * 1024 * 1024 * 64, "GFLOP/s", note=sdpa_peak_note)]
    return cases
