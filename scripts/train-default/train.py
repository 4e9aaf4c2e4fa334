#!/usr/bin/env python3
"""Train the default model: a small Qwen3.5 (Gated DeltaNet 3:1 gated full attention, zero-centred
norms, partial rotary, SwiGLU, tied embeddings) with one MTP layer, on the CPU.

Run on a developer machine (never in CI), from the repository root, after prepare.py:

    python3 scripts/train-default/train.py --work build/train-default --steps 2400
    python3 scripts/train-default/train.py --work build/train-default --export models/shakespeare-tiny

Training is seeded and resumable: a checkpoint (model, MTP head, optimiser, step, log) is written
atomically to WORK/ckpt.pt every --ckpt-every steps and on SIGINT/SIGTERM, and a re-run continues
from it. Every --eval-every steps the held-out loss of the main model and of the MTP head is logged
(WORK/log.jsonl, one JSON object per line).

The MTP head is trained jointly: loss = CE(next token) + MTP_WEIGHT · CE(next-next token through the
MTP layer), the MTP computed exactly as pkg/engine and shared/reference/qwen35.md §4 define it and
scripts/golden/make_golden.py's mtp_reference checks it:
    e_t = embed(x[t+1]);  h_t = last hidden state at t after model.norm
    u_t = mtp.fc(cat([mtp.pre_fc_norm_embedding(e_t), mtp.pre_fc_norm_hidden(h_t)]))
    y   = one full-attention decoder layer (mtp.layers.0.*), causal over the MTP rows, RoPE position t
    logits_t = lm_head(mtp.norm(y_t))   → predicts x[t+2]

--export writes the Hugging Face directory: config.json (Qwen3_5ForCausalLM, mtp_num_hidden_layers 1),
model.safetensors (float32, with mtp.*), tokenizer.json, tokenizer_config.json,
generation_config.json, and train.json (the run's facts for the model card).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import signal
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
from transformers.models.qwen3_5 import modeling_qwen3_5 as mq

SEED = 20261202
SEQ = 256
BATCH = 16
LR = 2e-3
WARMUP = 100
MTP_WEIGHT = 0.5
FULL, LINEAR = "full_attention", "linear_attention"


def make_config() -> Qwen3_5TextConfig:
    cfg = Qwen3_5TextConfig(
        vocab_size=4096, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
        layer_types=[LINEAR, LINEAR, LINEAR, FULL],
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, hidden_act="silu",
        max_position_embeddings=4096, rms_norm_eps=1e-6, linear_conv_kernel_dim=4,
        linear_key_head_dim=32, linear_value_head_dim=32, linear_num_key_heads=4, linear_num_value_heads=4,
        tie_word_embeddings=True, attention_bias=False, use_cache=True,
        bos_token_id=None, eos_token_id=0, pad_token_id=0,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25,
                             mrope_section=[2, 1, 1], mrope_interleaved=True),
    )
    cfg._attn_implementation = "eager"
    return cfg


class MTP(nn.Module):
    """The MTP head; its state_dict keys prefixed with "mtp." are the checkpoint's names."""

    def __init__(self, cfg: Qwen3_5TextConfig):
        super().__init__()
        H = cfg.hidden_size
        self.fc = nn.Linear(2 * H, H, bias=False)
        self.pre_fc_norm_embedding = mq.Qwen3_5RMSNorm(H, eps=cfg.rms_norm_eps)
        self.pre_fc_norm_hidden = mq.Qwen3_5RMSNorm(H, eps=cfg.rms_norm_eps)
        self.norm = mq.Qwen3_5RMSNorm(H, eps=cfg.rms_norm_eps)
        lcfg = copy.deepcopy(cfg)
        lcfg.num_hidden_layers = 1
        lcfg.layer_types = [FULL]
        lcfg._attn_implementation = "eager"
        self.layers = nn.ModuleList([mq.Qwen3_5DecoderLayer(lcfg, 0)])
        nn.init.normal_(self.fc.weight, std=0.02)
        for name, p in self.layers.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, model: Qwen3_5ForCausalLM, ids: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """MTP logits [B, T-1, V] for ids [B, T] and the main model's last hidden states h [B, T, H]."""
        B, T = ids.shape
        n = T - 1
        e = model.model.embed_tokens(ids[:, 1:])
        u = self.fc(torch.cat([self.pre_fc_norm_embedding(e), self.pre_fc_norm_hidden(h[:, :n])], -1))
        pos = torch.arange(n)
        cos, sin = model.model.rotary_emb(u, pos.view(1, 1, n).expand(3, B, n))
        mask = torch.full((n, n), torch.finfo(torch.float32).min).triu(1)[None, None]
        y = self.layers[0](u, position_embeddings=(cos, sin), attention_mask=mask, position_ids=pos[None].expand(B, n))
        y = y[0] if isinstance(y, tuple) else y
        return model.lm_head(self.norm(y))


def losses(model, mtp, ids):
    out = model.model(input_ids=ids, use_cache=False)
    h = out.last_hidden_state
    logits = model.lm_head(h)
    V = logits.shape[-1]
    main = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
    ml = mtp(model, ids, h)
    aux = F.cross_entropy(ml[:, :-1].reshape(-1, V), ids[:, 2:].reshape(-1))
    return main, aux


def batch(data: np.ndarray, step: int, n: int, seed: int) -> torch.Tensor:
    g = np.random.default_rng([seed, step])
    starts = g.integers(0, len(data) - SEQ - 1, size=n)
    return torch.from_numpy(np.stack([data[s:s + SEQ].astype(np.int64) for s in starts]))


def lr_at(step: int, steps: int, frac_time: float = 0.0) -> float:
    """Warm-up, then a cosine decay to 10 % over whichever runs out first: the planned steps or
    the wall-time budget (frac_time = wall / budget), so a busy machine still ends annealed."""
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    p = min(1.0, max((step - WARMUP) / max(1, steps - WARMUP), frac_time))
    return LR * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


@torch.no_grad()
def evaluate(model, mtp, held: np.ndarray, windows: int = 24) -> tuple[float, float]:
    model.eval(), mtp.eval()
    stride = (len(held) - SEQ - 1) // windows
    ids = torch.from_numpy(np.stack([held[i * stride:i * stride + SEQ].astype(np.int64) for i in range(windows)]))
    m, a = 0.0, 0.0
    for i in range(0, windows, 8):
        lm, la = losses(model, mtp, ids[i:i + 8])
        m, a = m + float(lm) * len(ids[i:i + 8]), a + float(la) * len(ids[i:i + 8])
    model.train(), mtp.train()
    return m / windows, a / windows


def save_atomic(obj, path):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def export(args, model, mtp, ck):
    out = args.export
    os.makedirs(out, exist_ok=True)
    from safetensors.torch import save_file
    tensors = {k: v.detach().float().contiguous().clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    tensors.update({"mtp." + k: v.detach().float().contiguous().clone() for k, v in mtp.state_dict().items()})
    save_file(tensors, os.path.join(out, "model.safetensors.tmp"), metadata={"format": "pt"})
    os.replace(os.path.join(out, "model.safetensors.tmp"), os.path.join(out, "model.safetensors"))
    d = model.config.to_dict()
    for k in ("_attn_implementation", "_attn_implementation_autoset", "transformers_version", "output_attentions",
              "output_hidden_states", "return_dict"):
        d.pop(k, None)
    d.update(architectures=["Qwen3_5ForCausalLM"], model_type="qwen3_5_text", dtype="float32",
             mtp_num_hidden_layers=1, mtp_use_dedicated_embeddings=False)
    write_json(os.path.join(out, "config.json"), dict(sorted(d.items())))
    tok = json.load(open(os.path.join(args.work, "tokenizer.json"), encoding="utf-8"))
    write_json(os.path.join(out, "tokenizer.json"), tok, indent=None)
    specials = {t["content"]: t["id"] for t in tok["added_tokens"]}
    write_json(os.path.join(out, "tokenizer_config.json"), dict(
        tokenizer_class="PreTrainedTokenizerFast", model_max_length=4096, eos_token="<|endoftext|>",
        pad_token="<|endoftext|>", bos_token=None, unk_token=None, add_bos_token=False,
        added_tokens_decoder={str(i): dict(content=c, special=True, lstrip=False, rstrip=False, normalized=False,
                                           single_word=False) for c, i in specials.items()}))
    write_json(os.path.join(out, "generation_config.json"), dict(eos_token_id=specials["<|endoftext|>"],
                                                                  pad_token_id=specials["<|endoftext|>"], do_sample=False))
    params = sum(v.numel() for v in tensors.values())
    write_json(os.path.join(out, "train.json"), dict(
        seed=SEED, seq=SEQ, batch=BATCH, lr=LR, warmup=WARMUP, mtp_weight=MTP_WEIGHT, steps=ck["step"],
        planned_steps=ck["steps"], tokens_seen=ck["step"] * SEQ * BATCH, wall_seconds=round(ck["wall"], 1),
        parameters=params, torch=torch.__version__, threads=torch.get_num_threads(), log=ck["log"],
        split=json.load(open(os.path.join(args.work, "split.json")))))
    print(f"export: {out}: {params} parameters, step {ck['step']}", file=sys.stderr)


def write_json(path, obj, indent=2):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=indent, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--steps", type=int, default=2400, help="planned optimiser steps (the LR schedule)")
    ap.add_argument("--minutes", type=float, default=60, help="stop (and checkpoint) after this much wall time")
    ap.add_argument("--ckpt-every", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--export", help="write the HF directory from the checkpoint and exit")
    args = ap.parse_args()
    torch.manual_seed(SEED)
    cfg = make_config()
    model = Qwen3_5ForCausalLM(cfg).float()
    mtp = MTP(cfg).float()
    decay = [p for n, p in list(model.named_parameters()) + list(mtp.named_parameters()) if p.dim() == 2]
    rest = [p for n, p in list(model.named_parameters()) + list(mtp.named_parameters()) if p.dim() != 2]
    opt = torch.optim.AdamW([dict(params=decay, weight_decay=0.1), dict(params=rest, weight_decay=0.0)],
                            lr=LR, betas=(0.9, 0.95))
    path = os.path.join(args.work, "ckpt.pt")
    ck = dict(step=0, steps=args.steps, wall=0.0, log=[])
    if os.path.exists(path):
        ck = torch.load(path, weights_only=False)
        model.load_state_dict(ck.pop("model"))
        mtp.load_state_dict(ck.pop("mtp"))
        opt.load_state_dict(ck.pop("opt"))
        print(f"train: resumed at step {ck['step']} of {ck['steps']}", file=sys.stderr)
    if args.export:
        export(args, model.eval(), mtp.eval(), ck)
        return
    train = np.fromfile(os.path.join(args.work, "train.u16"), dtype="<u2")
    held = np.fromfile(os.path.join(args.work, "heldout.u16"), dtype="<u2")
    logf = open(os.path.join(args.work, "log.jsonl"), "a")

    def checkpoint():
        save_atomic(dict(model=model.state_dict(), mtp=mtp.state_dict(), opt=opt.state_dict(), **ck), path)

    stop = {"now": False}
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *_: stop.__setitem__("now", True))
    t0, wall0, steps = time.time(), ck["wall"], ck["steps"]
    model.train(), mtp.train()
    ck["minutes"] = args.minutes
    while ck["step"] < steps and not stop["now"] and (time.time() - t0) / 60 + wall0 / 60 < args.minutes:
        step = ck["step"]
        lr = lr_at(step, steps, (wall0 + time.time() - t0) / (60 * args.minutes))
        for g in opt.param_groups:
            g["lr"] = lr
        main, aux = losses(model, mtp, batch(train, step, BATCH, SEED))
        loss = main + MTP_WEIGHT * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(decay + rest, 1.0)
        opt.step()
        ck["step"] = step + 1
        ck["wall"] = wall0 + time.time() - t0
        rec = dict(step=ck["step"], loss=round(main.item(), 4), mtp_loss=round(aux.item(), 4), lr=lr,
                   wall=round(ck["wall"], 1))
        if ck["step"] % args.eval_every == 0 or ck["step"] == steps:
            hm, ha = evaluate(model, mtp, held)
            rec.update(heldout_loss=round(hm, 4), heldout_mtp_loss=round(ha, 4), heldout_ppl=round(math.exp(hm), 2))
            ck["log"].append(rec)
        if ck["step"] % 10 == 0 or "heldout_loss" in rec:
            logf.write(json.dumps(rec) + "\n")
            logf.flush()
            print(json.dumps(rec), file=sys.stderr, flush=True)
        if ck["step"] % args.ckpt_every == 0:
            checkpoint()
    checkpoint()
    print(f"train: stopped at step {ck['step']} of {steps} after {ck['wall'] / 60:.1f} min", file=sys.stderr)


if __name__ == "__main__":
    main()
