#!/usr/bin/env python3
"""Trains bonsai's default model: a tiny Qwen3 whose every 2-D weight is Q1_0.

Quantization-aware training: each 2-D weight is used in the forward pass as
its Q1_0 value (per block of 128 inputs, d = mean|w| rounded to fp16, w = +d
where w >= 0 else -d), with a straight-through estimator passing gradients to
the latent fp32 weights. The exported weights are exactly the ones the last
forward pass used, so the 1-bit model is what was trained and evaluated.

The architecture is Qwen3 as llama.cpp runs it: RMSNorm, per-head QK-RMSNorm
before NEOX RoPE, grouped-query attention, SwiGLU, tied embeddings, no biases.

Inputs (--data): train.bin and val.bin (little-endian uint32 token ids; either
may be xz-compressed as NAME.bin.xz), prompts.json and copyeval.json, as
tools/train-default/corpus writes them.
Outputs (--out): model.bin (config and tensors for tools/train-default/export),
reference.json (held-out perplexity and greedy continuations to check
bonsai's engine against), copyeval.json (the greedy replies to the held-out
copying tasks) and train.log.
"""

import argparse
import json
import lzma
import math
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

QK = 128  # Q1_0 block size


def q1_0(w: torch.Tensor) -> torch.Tensor:
    """The Q1_0 value of w (rows of a multiple of 128), in w's dtype."""
    rows, cols = w.shape
    blocks = w.float().reshape(rows, cols // QK, QK)
    d = blocks.abs().mean(dim=-1, keepdim=True).half().float()
    q = torch.where(blocks >= 0, d, -d)
    return q.reshape(rows, cols).to(w.dtype)


def ste(w: torch.Tensor) -> torch.Tensor:
    """Q1_0 forward, identity backward."""
    return w + (q1_0(w) - w).detach()


class QLinear(nn.Module):
    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in) * 0.02)

    def forward(self, x):
        return F.linear(x, ste(self.weight))


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight).to(x.dtype)


def rope_neox(x, cos, sin):
    """NEOX RoPE: dimension i pairs with i + head_dim/2. x: [B, H, T, D]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        hd = c["head_dim"]
        self.attn_norm = RMSNorm(c["n_embd"], c["eps"])
        self.attn_q = QLinear(c["n_embd"], c["n_head"] * hd)
        self.attn_k = QLinear(c["n_embd"], c["n_head_kv"] * hd)
        self.attn_v = QLinear(c["n_embd"], c["n_head_kv"] * hd)
        self.attn_output = QLinear(c["n_head"] * hd, c["n_embd"])
        self.attn_q_norm = RMSNorm(hd, c["eps"])
        self.attn_k_norm = RMSNorm(hd, c["eps"])
        self.ffn_norm = RMSNorm(c["n_embd"], c["eps"])
        self.ffn_gate = QLinear(c["n_embd"], c["n_ff"])
        self.ffn_up = QLinear(c["n_embd"], c["n_ff"])
        self.ffn_down = QLinear(c["n_ff"], c["n_embd"])

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        c, hd = self.c, self.c["head_dim"]
        h = self.attn_norm(x)
        q = self.attn_q(h).view(B, T, c["n_head"], hd)
        k = self.attn_k(h).view(B, T, c["n_head_kv"], hd)
        v = self.attn_v(h).view(B, T, c["n_head_kv"], hd)
        q = self.attn_q_norm(q).transpose(1, 2)
        k = self.attn_k_norm(k).transpose(1, 2)
        v = v.transpose(1, 2)
        q, k = rope_neox(q, cos, sin), rope_neox(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.attn_output(a.transpose(1, 2).reshape(B, T, -1))
        h = self.ffn_norm(x)
        return x + self.ffn_down(F.silu(self.ffn_gate(h)) * self.ffn_up(h))


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.token_embd = nn.Parameter(torch.randn(c["n_vocab"], c["n_embd"]) * 0.02)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layer"]))
        self.output_norm = RMSNorm(c["n_embd"], c["eps"])
        hd = c["head_dim"]
        inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        ang = torch.arange(c["n_ctx_train"], dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)

    def forward(self, ids):
        T = ids.shape[1]
        emb = ste(self.token_embd)  # tied: the same Q1_0 matrix embeds and projects
        x = F.embedding(ids, emb)
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        for b in self.blocks:
            x = b(x, cos, sin)
        return F.linear(self.output_norm(x), emb)


def load_tokens(path):
    if not os.path.exists(path) and os.path.exists(path + ".xz"):
        with lzma.open(path + ".xz") as fh:
            return torch.from_numpy(np.frombuffer(fh.read(), dtype="<u4").astype(np.int64))
    return torch.from_numpy(np.fromfile(path, dtype="<u4").astype(np.int64))


def windows(tokens, ctx):
    """Consecutive non-overlapping windows of ctx tokens (the rest dropped)."""
    n = len(tokens) // ctx
    return tokens[: n * ctx].view(n, ctx)


@torch.no_grad()
def heldout_nll(model, val, ctx, batch, max_windows=None):
    """Mean NLL of tokens 1..ctx-1 of each window given the tokens before them
    in the window, and the per-window means."""
    w = windows(val, ctx)
    if max_windows:
        w = w[:max_windows]
    per = []
    for i in range(0, len(w), batch):
        x = w[i : i + batch].cuda()
        logits = model(x[:, :-1]).float()
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="none")
        per.append(nll.view(x.shape[0], -1).mean(dim=1).double().cpu())
    per = torch.cat(per)
    return per.mean().item(), per.tolist()


@torch.no_grad()
def greedy(model, ids, n, ctx):
    """Greedy continuation of ids, with each step's gap between the best and
    second-best logit (a runtime with other rounding may only be expected to
    agree while that gap is clear)."""
    out, margins = list(ids), []
    for _ in range(n):
        x = torch.tensor([out[-ctx:]], device="cuda")
        top = model(x)[0, -1].float().topk(2)
        nxt = int(top.indices[0])
        out.append(nxt)
        margins.append(float(top.values[0] - top.values[1]))
        if nxt in (151643, 151645):  # <|endoftext|>, <|im_end|>
            break
    return out[len(ids):], margins


@torch.no_grad()
def greedy_batch(model, prompts, n):
    """Greedy continuations of several prompts at once, each to its end of
    turn or n tokens. Rows are right-padded: causal attention keeps a row's
    padding out of its earlier positions, so each row decodes as it would
    alone."""
    eos = (151643, 151645)
    rows = [list(p) for p in prompts]
    out = [[] for _ in prompts]
    live = list(range(len(prompts)))
    for _ in range(n):
        if not live:
            break
        width = max(len(rows[i]) for i in live)
        x = torch.zeros(len(live), width, dtype=torch.long)
        for r, i in enumerate(live):
            x[r, : len(rows[i])] = torch.tensor(rows[i])
        x = x.cuda()
        emb = q1_0(model.token_embd)
        h = F.embedding(x, emb)
        cos, sin = model.cos[:width], model.sin[:width]
        for b in model.blocks:
            h = b(h, cos, sin)
        last = torch.tensor([len(rows[i]) - 1 for i in live], device="cuda")
        h = model.output_norm(h[torch.arange(len(live), device="cuda"), last])
        nxt = F.linear(h, emb).argmax(-1).tolist()
        still = []
        for r, i in enumerate(live):
            rows[i].append(nxt[r])
            out[i].append(nxt[r])
            if nxt[r] not in eos:
                still.append(i)
        live = still
    return out


def q1_0_bytes(w: torch.Tensor) -> bytes:
    """ggml Q1_0 blocks of w: fp16 d, then 16 bytes of signs, LSB first."""
    rows, cols = w.shape
    blocks = w.detach().float().reshape(rows * cols // QK, QK)
    d = blocks.abs().mean(dim=-1).half().cpu().numpy()
    bits = (blocks >= 0).cpu().numpy().astype(np.uint8)
    packed = np.packbits(bits, axis=-1, bitorder="little")  # [n, 16]
    out = np.empty((len(d), 18), dtype=np.uint8)
    out[:, :2] = d.view(np.uint8).reshape(-1, 2)
    out[:, 2:] = packed
    return out.tobytes()


@torch.no_grad()
def load_init(model, path):
    """Sets model's weights to those of a model.bin that export wrote: each
    Q1_0 matrix as its ±d values (a fixed point of q1_0, so training resumes
    from exactly the 1-bit model that was exported), norms as they were."""
    with open(path, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        header = json.loads(fh.read(n))
        data = fh.read()
    params = {"token_embd.weight": model.token_embd, "output_norm.weight": model.output_norm.weight}
    for i, b in enumerate(model.blocks):
        for name, p in b.named_parameters():
            params[f"blk.{i}.{name}"] = p
    for t in header["tensors"]:
        p = params[t["name"]]
        raw = np.frombuffer(data, dtype=np.uint8, count=t["size"], offset=t["offset"])
        if t["type"] == "F32":
            w = torch.from_numpy(raw.view("<f4").copy())
        else:
            blocks = raw.reshape(-1, 18)
            d = torch.from_numpy(blocks[:, :2].copy().view(np.float16).astype(np.float32))
            bits = torch.from_numpy(np.unpackbits(blocks[:, 2:], axis=-1, bitorder="little").astype(np.float32))
            w = d * (2 * bits - 1)
        p.copy_(w.reshape(p.shape))


def export(model, c, path):
    """model.bin: u64 header length, JSON header, then tensor data. Names and
    shapes (ne0 first) are GGUF's; 2-D weights are Q1_0 blocks, norms F32."""
    tensors, blobs, off = [], [], 0

    def add(name, kind, shape, data):
        nonlocal off
        tensors.append({"name": name, "type": kind, "shape": shape, "offset": off, "size": len(data)})
        blobs.append(data)
        off += len(data)

    def q(name, w):
        add(name, "Q1_0", [w.shape[1], w.shape[0]], q1_0_bytes(w))

    def f(name, w):
        add(name, "F32", list(w.shape[::-1]), w.detach().float().cpu().numpy().astype("<f4").tobytes())

    q("token_embd.weight", model.token_embd)
    for i, b in enumerate(model.blocks):
        p = f"blk.{i}."
        f(p + "attn_norm.weight", b.attn_norm.weight)
        q(p + "attn_q.weight", b.attn_q.weight)
        q(p + "attn_k.weight", b.attn_k.weight)
        q(p + "attn_v.weight", b.attn_v.weight)
        q(p + "attn_output.weight", b.attn_output.weight)
        f(p + "attn_q_norm.weight", b.attn_q_norm.weight)
        f(p + "attn_k_norm.weight", b.attn_k_norm.weight)
        f(p + "ffn_norm.weight", b.ffn_norm.weight)
        q(p + "ffn_gate.weight", b.ffn_gate.weight)
        q(p + "ffn_up.weight", b.ffn_up.weight)
        q(p + "ffn_down.weight", b.ffn_down.weight)
    f("output_norm.weight", model.output_norm.weight)
    header = json.dumps({"config": c, "tensors": tensors}).encode()
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(header)))
        fh.write(header)
        for blob in blobs:
            fh.write(blob)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=".carry/train-default")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--steps", type=int, default=3800)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--init", default="", help="start from this model.bin instead of random weights")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=500, help="held-out loss every N steps (0: only at the end)")
    ap.add_argument("--n-embd", type=int, default=384)
    ap.add_argument("--n-layer", type=int, default=6)
    ap.add_argument("--n-head", type=int, default=6)
    ap.add_argument("--n-head-kv", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--n-ff", type=int, default=1024)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "train.log"), "w")

    def log(*a):
        line = " ".join(str(x) for x in a)
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    c = {
        "n_vocab": 151936, "n_embd": args.n_embd, "n_layer": args.n_layer, "n_head": args.n_head,
        "n_head_kv": args.n_head_kv, "head_dim": args.head_dim, "n_ff": args.n_ff, "eps": 1e-6,
        "rope_theta": 10000.0, "n_ctx_train": args.ctx,
    }
    train = load_tokens(os.path.join(args.data, "train.bin")).cuda()
    val = load_tokens(os.path.join(args.data, "val.bin"))
    prompts = json.load(open(os.path.join(args.data, "prompts.json")))
    log(f"torch {torch.__version__} on {torch.cuda.get_device_name()}; train {len(train)} tokens, val {len(val)}")
    log("config", json.dumps(c), "args", json.dumps(vars(args)))

    model = Model(c).cuda()
    if args.init:
        load_init(model, args.init)
        log(f"initialised from {args.init}")
    n_params = sum(p.numel() for p in model.parameters())
    log(f"parameters {n_params} ({model.token_embd.numel()} in the tied embedding)")
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), fused=True)
    warmup = min(args.warmup, args.steps // 10)

    def lr_at(step):
        if step < warmup:
            return args.lr * (step + 1) / warmup
        t = (step - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))

    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    offsets = torch.arange(args.ctx + 1, device="cuda")
    t0 = time.time()
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        start = torch.randint(0, len(train) - args.ctx - 1, (args.batch,), device="cuda", generator=gen)
        chunk = train[start[:, None] + offsets]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(chunk[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, c["n_vocab"]), chunk[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            torch.cuda.synchronize()
            el = time.time() - t0
            log(f"step {step} loss {loss.item():.4f} lr {lr_at(step):.2e} elapsed {el:.1f}s "
                f"tok/s {(step + 1) * args.batch * args.ctx / el:.0f}")
        if args.eval_every and step > 0 and step % args.eval_every == 0:
            model.eval()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                nll, _ = heldout_nll(model, val, args.ctx, 16, max_windows=32)
            model.train()
            log(f"step {step} heldout_loss {nll:.4f} ppl {math.exp(nll):.2f} (bf16, 32 windows)")

    # The weights first, so that a run stopped during the evaluations keeps them.
    export(model, c, os.path.join(args.out, "model.bin"))
    log(f"wrote model.bin ({os.path.getsize(os.path.join(args.out, 'model.bin'))} bytes) after {time.time() - t0:.1f}s")

    # Final evaluation in fp32 with exactly the exported 1-bit weights.
    model.eval()
    nll, per = heldout_nll(model, val, args.ctx, 8)
    n_windows = len(per)
    log(f"final heldout_loss {nll:.6f} ppl {math.exp(nll):.4f} (fp32, {n_windows} windows of {args.ctx})")
    samples = []
    for p in prompts:
        ids, margins = greedy(model, p["ids"], 48, args.ctx)
        samples.append({"prompt_ids": p["ids"], "greedy_ids": ids, "margins": margins})
        log("greedy", json.dumps(p["text"]), "->", ids)
    ref = {"heldout_nll": nll, "heldout_ppl": math.exp(nll), "ctx": args.ctx, "windows": n_windows,
           "window_nll": per[:16], "greedy": samples, "steps": args.steps, "init": args.init,
           "train_seconds": time.time() - t0}
    json.dump(ref, open(os.path.join(args.out, "reference.json"), "w"), indent=1)

    # Held-out copying: passages of verses and sayings training never saw.
    copy_path = os.path.join(args.data, "copyeval.json")
    if os.path.exists(copy_path):
        tasks = json.load(open(copy_path))
        longest = max(len(a) for t in tasks for a in t["answer_ids"])
        got = greedy_batch(model, [t["prompt_ids"] for t in tasks], longest + 8)
        exact, total = {}, {}
        for t, g in zip(tasks, got):
            total[t["kind"]] = total.get(t["kind"], 0) + 1
            exact[t["kind"]] = exact.get(t["kind"], 0) + (g in t["answer_ids"])
            t["greedy_ids"] = g
        n_exact = sum(exact.values())
        log(f"held-out copying: exact {n_exact}/{len(tasks)} ({100 * n_exact / len(tasks):.1f}%); "
            + ", ".join(f"{k} {exact[k]}/{total[k]}" for k in sorted(total)))
        json.dump(tasks, open(os.path.join(args.out, "copyeval.json"), "w"))
    log(f"done after {time.time() - t0:.1f}s")

if __name__ == "__main__":
    main()
