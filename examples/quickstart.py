"""kiln quickstart: a character-level transformer language model, trained in about three minutes.

Trains a small decoder-only transformer (token + position embedding, pre-norm blocks with causal
attention and an MLP, tied output head) with AdamW and a warmup + cosine schedule on the plain-text
licences every Debian machine has in /usr/share/common-licenses. Prints a live progress bar and the
validation loss, saves a safetensors checkpoint, reloads it into a fresh model and samples text.

    python examples/quickstart.py [--steps N] [--threads N] [--bf16]

--bf16 runs forward under kiln.autocast("cpu", dtype=kiln.bfloat16): the matrix products and
attention in bfloat16 (native on AVX512-BF16 CPUs), losses and normalisation in float32, float32
master weights and optimiser state.
"""
import argparse
import json
import math
import os
import sys
import time

import kiln
import kiln.nn as nn
import kiln.nn.functional as F

CORPUS_DIR = "/usr/share/common-licenses"


# ---- data -----------------------------------------------------------------------------------------
def load_corpus():
    seen, parts = set(), []
    for name in sorted(os.listdir(CORPUS_DIR)):
        path = os.path.realpath(os.path.join(CORPUS_DIR, name))
        if path in seen or not os.path.isfile(path):
            continue
        seen.add(path)
        with open(path, encoding="utf-8", errors="replace") as f:
            parts.append(f.read())
    text = "\n\n".join(parts)
    if len(text) < 50_000:
        sys.exit(f"quickstart: expected the licence texts in {CORPUS_DIR}, found {len(text)} characters")
    return text


class CharData:
    def __init__(self, text, val_fraction=0.1):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        ids = kiln.tensor([self.stoi[c] for c in text], dtype=kiln.int64)
        n = int(len(text) * (1 - val_fraction))
        self.train, self.val = ids[:n], ids[n:]
        counts = kiln.bincount(self.train, minlength=len(self.chars)).double()
        p = counts / counts.sum()
        p = p[p > 0]
        self.unigram_entropy = float(-(p * p.log()).sum())  # nats per character

    def batch(self, split, batch_size, context, generator=None):
        data = self.train if split == "train" else self.val
        starts = kiln.randint(0, data.shape[0] - context - 1, (batch_size,), generator=generator) \
            if generator is not None else kiln.randint(0, data.shape[0] - context - 1, (batch_size,))
        idx = starts.unsqueeze(1) + kiln.arange(context + 1).unsqueeze(0)
        chunk = data[idx]
        return chunk[:, :-1], chunk[:, 1:]

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)


# ---- model ----------------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self, d_model, n_heads, dropout):
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.out = nn.Linear(4 * d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        H = self.n_heads
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).reshape(B, T, C)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.out(self.act(self.fc(self.ln2(x)))))


class CharTransformer(nn.Module):
    def __init__(self, vocab, context, d_model=192, n_layers=4, n_heads=6, dropout=0.0):
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_heads, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        for name, p in self.named_parameters():  # GPT-2 style initialisation
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(kiln.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.tok.weight)  # tied output head


def loss_fn(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


@kiln.no_grad()
def evaluate(model, data, batches, batch_size, context):
    model.eval()
    g = kiln.Generator().manual_seed(1234) if hasattr(kiln, "Generator") else None
    losses = [float(loss_fn(model, *data.batch("val", batch_size, context, g))) for _ in range(batches)]
    model.train()
    return sum(losses) / len(losses)


@kiln.no_grad()
def sample(model, data, prompt, n, temperature=0.8, top_k=10):
    model.eval()
    ids = [data.stoi[c] for c in prompt if c in data.stoi]
    for _ in range(n):
        ctx = kiln.tensor([ids[-model.context:]], dtype=kiln.int64)
        logits = model(ctx)[0, -1] / temperature
        vals, idx = kiln.topk(logits, top_k)
        probs = F.softmax(vals, dim=-1)
        ids.append(int(idx[int(kiln.multinomial(probs, 1))]))
    return data.decode(ids)


# ---- training -------------------------------------------------------------------------------------
def progress(step, total, loss, tok_s, elapsed):
    width = 28
    done = int(width * step / total)
    eta = elapsed / max(step, 1) * (total - step)
    bar = "#" * done + "-" * (width - done)
    line = (f"\r  step {step:4d}/{total} [{bar}] loss {loss:6.3f} | {tok_s / 1000:5.1f}k tok/s | "
            f"ETA {int(eta) // 60}:{int(eta) % 60:02d}")
    sys.stdout.write(line)
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=int(os.environ.get("KILN_QUICKSTART_STEPS", 300)))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--checkpoint", default="build/quickstart.safetensors")
    ap.add_argument("--ddp", action="store_true",
                    help="data-parallel over the ranks of an MPI job: mpirun -np 2 python examples/quickstart.py --ddp "
                         "(each rank takes batch/ranks sequences of every step; gradients are averaged)")
    ap.add_argument("--bf16", action="store_true",
                    help="mixed precision: forward under kiln.autocast('cpu', dtype=kiln.bfloat16)")
    args = ap.parse_args()
    rank, world = 0, 1
    if args.ddp:
        import kiln.distributed as dist
        dist.init_process_group("mpi")
        rank, world = dist.get_rank(), dist.get_world_size()
        if args.batch % world:
            sys.exit(f"quickstart: --batch {args.batch} does not divide among {world} ranks")
        if "--threads" not in sys.argv:
            args.threads = max(1, (os.cpu_count() or 1) // world)
    global print
    if rank != 0:  # one rank reports
        print = lambda *a, **k: None  # noqa: E731
    kiln.set_num_threads(args.threads)
    kiln.manual_seed(0)

    data = CharData(load_corpus())
    model = CharTransformer(len(data.chars), args.context)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"kiln quickstart: character-level transformer, {n_params / 1e6:.2f} M parameters, "
          f"vocabulary {len(data.chars)}, {data.train.shape[0]:,} training characters")
    print(f"  unigram entropy of the text: {data.unigram_entropy:.3f} nats/char "
          f"(what a model that ignores context would score)")

    train_model = nn.parallel.DistributedDataParallel(model) if args.ddp else model
    if args.ddp:
        print(f"  data-parallel on {world} ranks (Open MPI), {args.batch // world} sequences per rank per step, "
              f"{args.threads} thread(s) each")
    opt = kiln.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, args.steps // 20)
    sched = kiln.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warmup if s < warmup else
        0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (s - warmup) / max(1, args.steps - warmup))))

    val0 = evaluate(model, data, 4, args.batch, args.context)
    print(f"  validation loss before training: {val0:.3f}")
    if args.bf16:
        print("  mixed precision: bfloat16 matrix products under kiln.autocast, float32 weights")
    t0 = time.time()
    tokens = 0
    kiln.manual_seed(1 + rank)  # each rank draws its own sequences
    for step in range(1, args.steps + 1):
        x, y = data.batch("train", args.batch // world, args.context)
        with kiln.autocast("cpu", dtype=kiln.bfloat16, enabled=args.bf16):
            loss = loss_fn(train_model, x, y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        tokens += x.numel() * world
        if rank == 0 and (step % 5 == 0 or step == args.steps):
            elapsed = time.time() - t0
            progress(step, args.steps, float(loss), tokens / elapsed, elapsed)
        if rank == 0 and step % 100 == 0 and step != args.steps:
            sys.stdout.write(f"\n  step {step}: validation loss {evaluate(model, data, 4, args.batch, args.context):.3f}\n")
    train_time = time.time() - t0
    if rank != 0:
        dist.destroy_process_group()
        return
    val = evaluate(model, data, 8, args.batch, args.context)
    print(f"\n  trained {args.steps} steps in {train_time:.0f} s; validation loss {val:.3f} nats/char "
          f"(unigram entropy {data.unigram_entropy:.3f})")

    os.makedirs(os.path.dirname(args.checkpoint) or ".", exist_ok=True)
    kiln.save_file(model.state_dict(), args.checkpoint,
                   metadata={"vocab": json.dumps(data.chars), "context": str(args.context)})
    print(f"  saved {args.checkpoint} ({os.path.getsize(args.checkpoint) / 1e6:.1f} MB)")

    fresh = CharTransformer(len(data.chars), args.context)
    fresh.load_state_dict(kiln.load_file(args.checkpoint))
    reloaded = evaluate(fresh, data, 8, args.batch, args.context)
    print(f"  reloaded into a fresh model: validation loss {reloaded:.3f}")
    print("  sample (temperature 0.8, top-k 10):\n")
    kiln.manual_seed(7)
    text = sample(fresh, data, "This License", 300)
    print("    " + text.replace("\n", "\n    "))
    if args.ddp:
        dist.destroy_process_group()
    if args.steps >= 200 and not val < data.unigram_entropy - 0.5:  # short runs (tests) only smoke-test
        sys.exit(f"quickstart: validation loss {val:.3f} did not fall clearly below the unigram entropy")


if __name__ == "__main__":
    main()
