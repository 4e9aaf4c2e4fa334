#!/usr/bin/env python3
"""Golden reference data for ninfer from Hugging Face transformers (Qwen3.5).

Run on a developer machine (not in CI), from the repository root:

    python3 -m venv scripts/golden/.venv
    scripts/golden/.venv/bin/pip install -r scripts/golden/requirements.txt
    scripts/golden/.venv/bin/python scripts/golden/make_golden.py --out testdata/golden

Check that a re-run reproduces the committed files (writes nothing):

    scripts/golden/.venv/bin/python scripts/golden/make_golden.py --out testdata/golden --check

Extra random cases for the Go tests (not committed; NINFER_GOLDEN_EXTRA=<dir> go test ./internal/goldentest):

    python3 scripts/golden/make_golden.py --out /tmp/golden-extra --extra-seed 6 --extra-seed 9

For each tiny random Qwen3.5 config (CONFIGS below) it writes testdata/golden/<name>/:

    config.json           HF text config (Qwen3_5ForCausalLM, model_type qwen3_5_text, mtp_num_hidden_layers 1)
    model.safetensors     all weights in float32, including the mtp.* draft-head tensors
    golden.json           manifest: ids, continuation, block shapes, versions, command, checks
    logits.f32            main-model logits, raw little-endian float32, row-major [rows, vocab]
    continuation_logits.f32  logits of the 32 greedy steps (sequence ids ++ continuation)
    mtp_logits.f32        MTP head logits (reference implemented here from the formula)

Row convention of every logits block: row r is sequence position p = first_position + r and
holds the next-token logits after seeing seq[0..p] (seq = ids, or ids ++ continuation for
continuation_logits).

MTP convention (shared/reference/qwen35.md section 4): for t = 0 .. T-2,
    e_t = embed(ids[t+1]);  h_t = main-model last hidden state at t AFTER model.norm
    u_t = mtp.fc(cat([pre_fc_norm_embedding(e_t), pre_fc_norm_hidden(h_t)]))
    u   = one full-attention decoder layer (transformers' Qwen3_5DecoderLayer loaded with
          mtp.layers.0.*), causal self-attention over the MTP rows t = 0 .. T-2 only,
          RoPE position id of row t = t
    logits_t = lm_head(mtp.norm(u_t))          (predicts ids[t+2])
mtp_logits row r is t = first_position + r.

Numerics: float32 everywhere, attn_implementation="eager", torch fallbacks of the Gated
DeltaNet (no flash-linear-attention, causal-conv1d or kernels installed; asserted). A
full-sequence forward without cache uses the chunked delta rule (chunk 64) for every position;
the cached decode path (prefill chunked, then one token at a time with the recurrent rule) is
used for model.generate and checked against the full recomputation.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import importlib.util
import json
import math
import os
import platform
import shutil
import sys
import tempfile

COMMAND = "scripts/golden/.venv/bin/python scripts/golden/make_golden.py --out testdata/golden"
FORMAT_VERSION = 1
GEN_TOKENS = 32
MIN_MARGIN = 0.02  # smallest allowed top1-top2 logit gap along the greedy path
F64_TOL = 5e-4  # HF float32 vs the float64 formula (ref_f64.py), max |logit difference|
MIN_DISTINCT = 12  # fewest distinct tokens allowed in the continuation (no degenerate echo loops)

LIN, FULL = "linear_attention", "full_attention"

# Tiny configs. Sizes keep each model near 1 MB in float32.
CONFIGS = [
    dict(
        name="a_untied_6l",
        description="6 layers [lin,lin,full,lin,lin,full], untied, nk=2 != nv=4, head_dim 64 with rotary 16, "
        "theta 1e7; logits and MTP logits for every position",
        seed=1001,
        vocab_size=384, hidden_size=64, intermediate_size=64,
        layer_types=[LIN, LIN, FULL, LIN, LIN, FULL],
        num_attention_heads=2, num_key_value_heads=1, head_dim=64,
        partial_rotary_factor=0.25, rope_theta=1e7,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
        tie_word_embeddings=False, seq_len=136, keep_rows=None,
    ),
    dict(
        name="b_tied_4l",
        description="4 layers from full_attention_interval 4 [lin,lin,lin,full], tied embeddings, nk=nv=2, "
        "head_dim 32 with rotary 8, GQA 2; last 16 positions stored",
        seed=1002,
        vocab_size=384, hidden_size=64, intermediate_size=64,
        layer_types=None,
        num_attention_heads=2, num_key_value_heads=2, head_dim=32,
        partial_rotary_factor=0.25, rope_theta=1e7,
        linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=32, linear_value_head_dim=32,
        tie_word_embeddings=True, seq_len=136, keep_rows=16,
    ),
    dict(
        name="c_untied_fullfirst",
        description="2 layers [full,lin] (full first, linear last), untied, nk=1 nv=3 (ratio 3), dk=dv=24, "
        "head_dim 64 with rotary 32 (factor 0.5), theta 1e6, vocab 448; last 16 positions stored",
        seed=1003,
        vocab_size=448, hidden_size=64, intermediate_size=64,
        layer_types=[FULL, LIN],
        num_attention_heads=2, num_key_value_heads=1, head_dim=64,
        partial_rotary_factor=0.5, rope_theta=1e6,
        linear_num_key_heads=1, linear_num_value_heads=3, linear_key_head_dim=24, linear_value_head_dim=24,
        tie_word_embeddings=False, seq_len=136, keep_rows=16,
    ),
    dict(
        name="d_trained_shakespeare",
        description="the trained default model models/tiny-shakespeare (4 layers [lin,lin,lin,full], tied, "
        "vocab 4096, MTP head trained jointly) on held-out play text (its bench corpus); 64-token greedy "
        "continuation; last 16 positions stored",
        trained="models/tiny-shakespeare", ids_file="models/tiny-shakespeare/bench_corpus.ids",
        seed=0, seq_len=136, keep_rows=16, gen_tokens=64,
    ),
]


def extra_spec(n):
    """A random config for --extra-seed n: layer layout, attention and GDN head shapes, widths, vocab,
    tying, RoPE and prompt length all drawn from n (deterministic; not a committed case). Model weights
    and ids are seeded from n like the committed cases' from their seed."""
    import random
    r = random.Random(n)
    L = r.randint(2, 6)
    while True:
        lt = [r.choice([LIN, FULL]) for _ in range(L)]
        if LIN in lt and FULL in lt:
            break
    nkv = r.choice([1, 2])
    nh = nkv * r.choice([1, 2, 4])
    hd = r.choice([16, 32, 64, 128])
    prf = r.choice([f for f in (0.25, 0.5, 1.0) if (hd * f) % 2 == 0 and hd * f >= 4])
    nk = r.choice([1, 2])
    nv = nk * r.choice([1, 2, 3])
    dk = r.choice([16, 24, 32])
    H = r.choice([64, 96, 128])
    I = r.choice([64, 128, 192, 256])
    V = r.choice([256, 320, 384, 512, 640])
    tied = r.random() < 0.5
    T = r.randint(100, 200)
    keep = r.choice([None, 16, 32])
    theta = r.choice([1e4, 1e6, 1e7])
    code = "".join("f" if t == FULL else "l" for t in lt)
    return dict(
        name=f"x{n}_{code}",
        description=f"random config from --extra-seed {n}: {L} layers {code}, {'tied' if tied else 'untied'}, "
        f"attention {nh}/{nkv}/{hd} (rotary factor {prf}, theta {theta:g}), GDN {nk}/{nv}/{dk}/{dk}, "
        f"H {H}, I {I}, V {V}, T {T}",
        seed=n, vocab_size=V, hidden_size=H, intermediate_size=I, layer_types=lt,
        num_attention_heads=nh, num_key_value_heads=nkv, head_dim=hd,
        partial_rotary_factor=prf, rope_theta=theta,
        linear_num_key_heads=nk, linear_num_value_heads=nv, linear_key_head_dim=dk, linear_value_head_dim=dk,
        tie_word_embeddings=tied, seq_len=T, keep_rows=keep,
    )


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def require(cond, msg):
    """Like assert, but also under python -O."""
    if not cond:
        raise SystemExit(f"make_golden: {msg}")


def import_stack():
    for pkg in ("fla", "causal_conv1d", "kernels"):
        if importlib.util.find_spec(pkg) is not None:
            sys.exit(f"make_golden: package {pkg!r} is installed; uninstall it so the pure-torch paths are used")
    import numpy as np
    import safetensors
    import torch
    import transformers
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq

    return np, safetensors, torch, transformers, mq


np, safetensors, torch, transformers, mq = import_stack()
from safetensors.torch import save_file  # noqa: E402
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_f64  # noqa: E402

# Count which Gated DeltaNet kernels run (module globals are looked up at call time).
CALLS = {}


def _counting(name):
    orig = getattr(mq, name)

    def wrapped(*a, **k):
        CALLS[name] = CALLS.get(name, 0) + 1
        return orig(*a, **k)

    wrapped.__name__ = orig.__name__
    setattr(mq, name, wrapped)


for _n in ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "causal_conv1d_fn",
           "causal_conv1d_update"):
    _counting(_n)


def reset_calls():
    CALLS.clear()


# ---------------------------------------------------------------- model construction


def make_config(spec):
    kw = dict(
        vocab_size=spec["vocab_size"], hidden_size=spec["hidden_size"],
        intermediate_size=spec["intermediate_size"],
        num_hidden_layers=len(spec["layer_types"]) if spec["layer_types"] else 4,
        num_attention_heads=spec["num_attention_heads"], num_key_value_heads=spec["num_key_value_heads"],
        head_dim=spec["head_dim"], hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
        linear_conv_kernel_dim=4,
        linear_key_head_dim=spec["linear_key_head_dim"], linear_value_head_dim=spec["linear_value_head_dim"],
        linear_num_key_heads=spec["linear_num_key_heads"], linear_num_value_heads=spec["linear_num_value_heads"],
        tie_word_embeddings=spec["tie_word_embeddings"],
        rope_parameters=dict(
            rope_type="default", rope_theta=spec["rope_theta"],
            partial_rotary_factor=spec["partial_rotary_factor"],
            mrope_section=[11, 11, 10], mrope_interleaved=True,
        ),
        attention_bias=False, use_cache=True,
    )
    if spec["layer_types"] is not None:
        kw["layer_types"] = list(spec["layer_types"])
    else:
        kw["full_attention_interval"] = 4
    cfg = Qwen3_5TextConfig(**kw)
    cfg._attn_implementation = "eager"
    return cfg


def is_zero_centred_norm(name):
    # Qwen3_5RMSNorm (1 + w): input/post-attention/final norms, q_norm, k_norm, all MTP norms.
    # linear_attn.norm is the gated RMSNorm with a plain weight.
    if ".linear_attn.norm." in name:
        return False
    parts = name.split(".")
    return parts[-1] == "weight" and "norm" in parts[-2]


def init_tensor(name, shape, gen, tied):
    """Random init that makes every parameter matter with healthy activations."""
    def normal(std):
        return torch.randn(shape, generator=gen, dtype=torch.float64).mul_(std).float()

    if name.endswith("A_log"):  # A in [1, 16] like real checkpoints
        a = torch.rand(shape, generator=gen, dtype=torch.float64) * 15.0 + 1.0
        return a.log().float()
    if name.endswith("dt_bias"):  # softplus(dt_bias) = dt, dt log-uniform in [1e-3, 1e-1]
        u = torch.rand(shape, generator=gen, dtype=torch.float64)
        dt = torch.exp(math.log(1e-3) + u * (math.log(1e-1) - math.log(1e-3)))
        return torch.log(torch.expm1(dt)).float()
    if ".linear_attn.norm." in name:
        return (1.0 + normal(0.1)).float()
    if is_zero_centred_norm(name):
        return normal(0.1)
    if name.endswith("conv1d.weight"):  # [C, 1, K]
        return normal(1.0 / math.sqrt(shape[-1]))
    if name == "model.embed_tokens.weight":
        return normal(0.25 if tied else 1.0)  # tied: small, or greedy decoding echoes the last token
    if name == "lm_head.weight":
        return normal(3.0 / math.sqrt(shape[1]))
    if len(shape) == 2:  # nn.Linear [out, in]
        return normal(1.0 / math.sqrt(shape[1]))
    raise ValueError(f"no init rule for {name} {tuple(shape)}")


def mtp_shapes(cfg):
    H, I = cfg.hidden_size, cfg.intermediate_size
    nh, nkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    p = "mtp.layers.0."
    return {
        "mtp.fc.weight": (H, 2 * H),
        "mtp.pre_fc_norm_embedding.weight": (H,),
        "mtp.pre_fc_norm_hidden.weight": (H,),
        "mtp.norm.weight": (H,),
        p + "input_layernorm.weight": (H,),
        p + "post_attention_layernorm.weight": (H,),
        p + "self_attn.q_proj.weight": (2 * nh * hd, H),
        p + "self_attn.k_proj.weight": (nkv * hd, H),
        p + "self_attn.v_proj.weight": (nkv * hd, H),
        p + "self_attn.o_proj.weight": (H, nh * hd),
        p + "self_attn.q_norm.weight": (hd,),
        p + "self_attn.k_norm.weight": (hd,),
        p + "mlp.gate_proj.weight": (I, H),
        p + "mlp.up_proj.weight": (I, H),
        p + "mlp.down_proj.weight": (H, I),
    }


def build(spec):
    """Returns (model, mtp tensors dict) for a spec, deterministic in spec['seed'] (a trained spec:
    the committed HF directory, main model and mtp.* tensors)."""
    if spec.get("trained"):
        from safetensors.torch import load_file
        d = spec["trained"]
        model = Qwen3_5ForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=torch.float32).eval()
        mtp = {k: v for k, v in load_file(os.path.join(d, "model.safetensors")).items() if k.startswith("mtp.")}
        require(set(mtp) == set(mtp_shapes(model.config)), f"{spec['name']}: mtp tensors {sorted(mtp)}")
        return model, mtp
    torch.manual_seed(spec["seed"])
    cfg = make_config(spec)
    model = Qwen3_5ForCausalLM(cfg).to(torch.float32).eval()
    gen = torch.Generator().manual_seed(spec["seed"])
    tied = spec["tie_word_embeddings"]
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied lm_head is not listed separately
            p.copy_(init_tensor(name, tuple(p.shape), gen, tied))
        if not tied:
            require(model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr(),
                    f"{spec['name']}: untied config but lm_head shares the embedding")
        else:
            require(model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(),
                    f"{spec['name']}: tied config but lm_head is a separate tensor")
    mtp = {n: init_tensor(n, s, gen, tied) for n, s in mtp_shapes(cfg).items()}
    return model, mtp


# ---------------------------------------------------------------- references


@torch.no_grad()
def full_logits(model, seq):
    reset_calls()
    out = model(input_ids=torch.tensor([seq]), use_cache=False)
    require(CALLS.get("torch_recurrent_gated_delta_rule", 0) == 0, f"uncached forward used the recurrent rule: {CALLS}")
    return out.logits[0].float()


@torch.no_grad()
def greedy_recompute(model, ids, n):
    """Greedy continuation recomputing the whole sequence (chunked delta rule) every step."""
    seq = list(ids)
    rows = []
    for _ in range(n):
        lg = full_logits(model, seq)[-1]
        rows.append(lg)
        seq.append(int(lg.argmax()))
    return seq[len(ids):], torch.stack(rows)


@torch.no_grad()
def greedy_cached(model, ids, n):
    """Manual cached loop: chunked prefill, then recurrent single-token decode steps."""
    reset_calls()
    out = model(input_ids=torch.tensor([ids]), use_cache=True)
    cache = out.cache
    rows = [out.logits[0, -1].float()]
    seq = list(ids) + [int(rows[-1].argmax())]
    for _ in range(n - 1):
        out = model(input_ids=torch.tensor([[seq[-1]]]), cache=cache, use_cache=True)
        cache = out.cache
        rows.append(out.logits[0, -1].float())
        seq.append(int(rows[-1].argmax()))
    calls = dict(CALLS)
    return seq[len(ids):], torch.stack(rows), calls


@torch.no_grad()
def greedy_generate(model, ids, n):
    out = model.generate(
        torch.tensor([ids]), max_new_tokens=n, min_new_tokens=n, do_sample=False, num_beams=1,
        pad_token_id=0, eos_token_id=None, use_cache=True,
    )
    return [int(x) for x in out[0, len(ids):]]


@torch.no_grad()
def hf_hidden(model, seq):
    """HF float32 hidden states [embedding, after layer 0 .. L-1, after model.norm], each [T, H]."""
    got = []
    hooks = [model.model.embed_tokens.register_forward_hook(lambda m, i, o: got.append(o[0].float()))]
    for layer in model.model.layers:
        hooks.append(layer.register_forward_hook(
            lambda m, i, o: got.append((o[0] if isinstance(o, tuple) else o)[0].float())))
    try:
        out = model.model(input_ids=torch.tensor([seq]), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    require(len(got) == 1 + len(model.model.layers), f"hooks captured {len(got)} hidden states")
    return got + [out.last_hidden_state[0].float()]


@torch.no_grad()
def mtp_reference(model, mtp, ids):
    """MTP logits [T-1, V] through transformers' own modules (Qwen3_5RMSNorm, Qwen3_5DecoderLayer
    with layer_type full_attention, the model's rotary embedding and lm_head).
    Returns (logits, [after fc, after the decoder layer, after mtp.norm]), all [T-1, ...]."""
    cfg = model.config
    eps = cfg.rms_norm_eps
    T = len(ids)
    h = hf_hidden(model, ids)[-1][: T - 1]  # h_t after model.norm, t = 0..T-2
    e = model.model.embed_tokens.weight[torch.tensor(ids[1:])]  # embed(x_{t+1})

    lcfg = copy.deepcopy(cfg)
    lcfg.num_hidden_layers = 1
    lcfg.layer_types = [FULL]
    lcfg._attn_implementation = "eager"
    layer = mq.Qwen3_5DecoderLayer(lcfg, 0).to(torch.float32).eval()
    layer.load_state_dict({k[len("mtp.layers.0."):]: v for k, v in mtp.items() if k.startswith("mtp.layers.0.")},
                          strict=True)

    def norm(name):
        n = mq.Qwen3_5RMSNorm(cfg.hidden_size, eps=eps)
        n.weight.copy_(mtp[name])
        return n

    fc = torch.nn.Linear(2 * cfg.hidden_size, cfg.hidden_size, bias=False)
    fc.weight.copy_(mtp["mtp.fc.weight"])
    u = fc(torch.cat([norm("mtp.pre_fc_norm_embedding.weight")(e), norm("mtp.pre_fc_norm_hidden.weight")(h)], -1))
    n = T - 1
    pos = torch.arange(n)
    cos, sin = model.model.rotary_emb(u[None], pos.view(1, 1, n).expand(3, 1, n))  # RoPE position of row t = t
    mask = torch.full((n, n), torch.finfo(torch.float32).min).triu(1)[None, None]  # causal over MTP rows
    y = layer(u[None], position_embeddings=(cos, sin), attention_mask=mask, position_ids=pos[None])
    y = (y[0] if isinstance(y, tuple) else y)[0]
    hn = norm("mtp.norm.weight")(y)
    return model.lm_head(hn).float(), [u.float(), y.float(), hn.float()]


def f64_weights(model, mtp):
    w = {k: v.detach().clone() for k, v in model.state_dict().items()}
    w.update(mtp)
    return w


# ---------------------------------------------------------------- output


def write_block(dirpath, fname, arr, first_position):
    a = np.ascontiguousarray(arr.detach().cpu().numpy().astype("<f4"))
    if not np.isfinite(a).all():
        raise SystemExit(f"make_golden: {fname}: non-finite values")
    raw = a.tobytes()
    with open(os.path.join(dirpath, fname), "wb") as f:
        f.write(raw)
    return dict(
        file=fname, dtype="float32", first_position=int(first_position), rows=int(a.shape[0]),
        vocab=int(a.shape[1]), sha256=hashlib.sha256(raw).hexdigest(),
        max_abs=float(np.abs(a).max()), mean=float(a.mean()), std=float(a.std()),
    )


def write_hidden(dirpath, fname, arr, names, positions):
    a = np.ascontiguousarray(arr.detach().cpu().numpy().astype("<f4"))
    require(a.shape[:2] == (len(names), len(positions)), f"{fname}: shape {a.shape}")
    if not np.isfinite(a).all():
        raise SystemExit(f"make_golden: {fname}: non-finite values")
    raw = a.tobytes()
    with open(os.path.join(dirpath, fname), "wb") as f:
        f.write(raw)
    return dict(file=fname, dtype="float32", names=names, positions=positions, hidden_size=int(a.shape[2]),
                sha256=hashlib.sha256(raw).hexdigest(), max_abs=float(np.abs(a).max()))


def hf_config_dict(model):
    d = model.config.to_dict()
    for k in ("_attn_implementation", "_attn_implementation_autoset", "transformers_version",
              "output_attentions", "output_hidden_states", "return_dict"):
        d.pop(k, None)
    d["architectures"] = ["Qwen3_5ForCausalLM"]
    d["model_type"] = "qwen3_5_text"
    d["dtype"] = "float32"
    d["mtp_num_hidden_layers"] = 1
    d["mtp_use_dedicated_embeddings"] = False
    return dict(sorted(d.items()))


def save_hf(dirpath, model, mtp):
    tensors = {}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        tensors[name] = t.detach().to(torch.float32).contiguous().clone()
    for name, t in mtp.items():
        tensors[name] = t.to(torch.float32).contiguous().clone()
    save_file(tensors, os.path.join(dirpath, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(dirpath, "config.json"), "w") as f:
        json.dump(hf_config_dict(model), f, indent=2)
        f.write("\n")
    return sorted(tensors)


def top2_margin(rows):
    t = rows.topk(2, dim=-1).values
    return float((t[:, 0] - t[:, 1]).min())


def versions():
    return dict(
        python=platform.python_version(), torch=torch.__version__, transformers=transformers.__version__,
        numpy=np.__version__, safetensors=safetensors.__version__,
    )


def make_case(spec, outdir):
    """Build one case into outdir/<name>; returns a summary dict."""
    name = spec["name"]
    model, mtp = build(spec)
    cfg = model.config
    V, T = cfg.vocab_size, spec["seq_len"]

    gen = spec.get("gen_tokens", GEN_TOKENS)
    corpus = None
    if spec.get("ids_file"):
        corpus = [int(x) for x in open(spec["ids_file"]).read().split()]
    # Fixed random ids (a trained spec: consecutive windows of its held-out corpus); try further
    # seeds / windows until the greedy path is far from argmax ties.
    for attempt in range(20):
        ids_seed = spec["seed"] * 100 + attempt
        if corpus is not None:
            ids = corpus[attempt * T:(attempt + 1) * T]  # ids_seed = the window index
            require(len(ids) == T, f"{name}: {spec['ids_file']} holds fewer than {(attempt + 1) * T} ids")
        else:
            g = torch.Generator().manual_seed(ids_seed)
            ids = [int(x) for x in torch.randint(0, V, (T,), generator=g)]
        cont, cont_rows = greedy_recompute(model, ids, gen)
        margin = top2_margin(cont_rows)
        if margin >= MIN_MARGIN and len(set(cont)) >= MIN_DISTINCT:
            break
        log(f"{name}: ids seed {ids_seed}: greedy margin {margin:.4g} (want >= {MIN_MARGIN}), "
            f"{len(set(cont))} distinct tokens (want >= {MIN_DISTINCT}); retrying")
    else:
        raise SystemExit(f"make_golden: {name}: no id sequence with greedy margin >= {MIN_MARGIN} "
                         f"and >= {MIN_DISTINCT} distinct continuation tokens")

    logits = full_logits(model, ids)  # [T, V]
    chunk_calls = dict(CALLS)
    require(chunk_calls.get("torch_chunk_gated_delta_rule", 0) == cfg.layer_types.count(LIN),
            f"{name}: full forward did not use the chunked rule once per linear layer: {chunk_calls}")

    cached, cached_rows, cached_calls = greedy_cached(model, ids, gen)
    n_lin = cfg.layer_types.count(LIN)
    for fn in ("torch_recurrent_gated_delta_rule", "causal_conv1d_update"):
        require(cached_calls.get(fn, 0) == n_lin * (gen - 1),
                f"{name}: cached decode called {fn} {cached_calls.get(fn, 0)} times, want {n_lin * (gen - 1)}")
    generated = greedy_generate(model, ids, gen)
    if not (cached == cont == generated):
        raise SystemExit(f"make_golden: {name}: greedy paths disagree:\n recompute {cont}\n cached {cached}\n"
                         f" generate {generated}")
    cache_diff = float((cached_rows - cont_rows).abs().max())
    prefix_diff = float((cont_rows[0] - logits[-1]).abs().max())

    mtp_logits, mtp_inner = mtp_reference(model, mtp, ids)
    hidden = hf_hidden(model, ids)

    # Independent float64 implementation of qwen35.md (recurrent delta rule, explicit attention).
    w64 = f64_weights(model, mtp)
    c64 = model.config.to_dict()
    lg64, hid64 = ref_f64.forward(w64, c64, ids)
    f64_main = float((logits.double() - lg64).abs().max())
    f64_hidden = max(float((a.double() - b).abs().max()) for a, b in zip(hidden, hid64))
    cl64, _ = ref_f64.forward(w64, c64, ids + cont[:-1])
    cl64 = cl64[T - 1:]
    f64_cont = float((cont_rows.double() - cl64).abs().max())
    mt64, _ = ref_f64.mtp(w64, c64, ids, hid64[-1])
    f64_mtp = float((mtp_logits.double() - mt64).abs().max())
    f64_greedy = [int(x) for x in cl64.argmax(-1)] == cont
    for what, v in (("logits", f64_main), ("continuation logits", f64_cont), ("mtp logits", f64_mtp)):
        if not v <= F64_TOL:
            raise SystemExit(f"make_golden: {name}: HF float32 {what} differ from the float64 formula by {v}")
    if not f64_greedy:
        raise SystemExit(f"make_golden: {name}: float64 formula gives a different greedy continuation")

    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    if spec.get("trained"):  # the case points at the committed model directory
        hf_dir = os.path.relpath(spec["trained"], os.path.join("testdata", "golden", name))
        hf_abs = spec["trained"]
        names = sorted(safetensors.safe_open(os.path.join(hf_abs, "model.safetensors"), "pt").keys())
    else:
        hf_dir, hf_abs = ".", d
        names = save_hf(d, model, mtp)

    # Reload the saved HF dir and recompute: the files alone must reproduce the logits.
    re = Qwen3_5ForCausalLM.from_pretrained(hf_abs, attn_implementation="eager", dtype=torch.float32).eval()
    reload_diff = float((full_logits(re, ids) - logits).abs().max())
    if reload_diff > 1e-5:
        raise SystemExit(f"make_golden: {name}: reloaded HF dir differs by {reload_diff}")
    del re

    keep = spec["keep_rows"]
    lg_first = 0 if keep is None else T - keep
    mt_first = 0 if keep is None else (T - 1) - keep
    blocks = dict(
        logits=write_block(d, "logits.f32", logits[lg_first:], lg_first),
        continuation_logits=write_block(d, "continuation_logits.f32", cont_rows, T - 1),
        mtp_logits=write_block(d, "mtp_logits.f32", mtp_logits[mt_first:], mt_first),
    )
    hpos = [0, 1, 63, 64, 65, T - 2]  # chunk boundary of HF's chunked delta rule at 64; T-2 = last MTP row
    hnames = (["embedding"] + [f"layer.{i}" for i in range(cfg.num_hidden_layers)] + ["final_norm"]
              + ["mtp.fc", "mtp.layer", "mtp.norm"])
    hstack = torch.stack([x[hpos] for x in hidden + mtp_inner])  # [names, positions, H]
    blocks["hidden"] = write_hidden(d, "hidden.f32", hstack, hnames, hpos)
    manifest = dict(
        format_version=FORMAT_VERSION,
        name=name,
        description=spec["description"],
        command=COMMAND,
        versions=versions(),
        model_seed=spec["seed"],
        ids_seed=ids_seed,
        hf_dir=hf_dir,
        architecture="Qwen3_5ForCausalLM",
        vocab_size=V,
        num_hidden_layers=cfg.num_hidden_layers,
        layer_types=list(cfg.layer_types),
        tie_word_embeddings=bool(cfg.tie_word_embeddings),
        ids=ids,
        continuation=cont,
        **blocks,
        conventions=dict(
            rows="row r of a logits block is sequence position p = first_position + r and holds the "
                 "next-token logits after seq[0..p]; seq = ids for logits and mtp_logits, "
                 "ids ++ continuation for continuation_logits (argmax of row i = continuation[i])",
            mtp="row r is t = first_position + r (t = 0..T-2): u = mtp.fc(cat[pre_fc_norm_embedding(embed(ids[t+1])), "
                "pre_fc_norm_hidden(h_t)]), h_t = main last hidden after model.norm; one full-attention "
                "decoder layer (mtp.layers.0) with causal attention over the MTP rows 0..t and RoPE "
                "position t; logits = lm_head(mtp.norm(u)) predict ids[t+2]",
            path="float32, eager attention, torch chunked gated delta rule (chunk 64) for full-sequence "
                 "logits; continuation_logits from full recomputation of ids ++ continuation[:i]",
            hidden="hidden.f32 is [len(names), len(positions), hidden_size]: embedding = embed(ids), "
                   "layer.i = residual stream after decoder layer i, final_norm = after model.norm (lm_head "
                   "input); mtp.fc = fc output u, mtp.layer = after the MTP decoder layer, mtp.norm = after "
                   "mtp.norm (lm_head input); positions are p for the main model and t for the MTP rows",
        ),
        checks=dict(
            greedy_min_top2_margin=margin,
            cached_decode_vs_recompute_max_abs=cache_diff,
            continuation_row0_vs_logits_last_max_abs=prefix_diff,
            generate_equals_recompute=True,
            float64_formula_logits_max_abs=f64_main,
            float64_formula_hidden_max_abs=f64_hidden,
            float64_formula_continuation_logits_max_abs=f64_cont,
            float64_formula_mtp_logits_max_abs=f64_mtp,
            float64_formula_greedy_equal=f64_greedy,
            reloaded_hf_dir_max_abs=reload_diff,
        ),
        safetensors_tensors=len(names),
    )
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    log(f"{name}: T={T} V={V} max|logit|={blocks['logits']['max_abs']:.3f} std={blocks['logits']['std']:.3f} "
        f"mtp max|logit|={blocks['mtp_logits']['max_abs']:.3f} margin={margin:.3f} cache diff={cache_diff:.2e} "
        f"f64 logits/cont/mtp={f64_main:.1e}/{f64_cont:.1e}/{f64_mtp:.1e} reload={reload_diff:.1e} sha256(logits)={blocks['logits']['sha256'][:16]}")
    log(f"{name}: continuation {cont}")
    return manifest


def digest_dir(d):
    out = {}
    for root, _, files in os.walk(d):
        for f in sorted(files):
            p = os.path.join(root, f)
            if f == "golden.json":
                m = json.load(open(p))
                m.pop("versions", None)
                out[os.path.relpath(p, d)] = hashlib.sha256(json.dumps(m, sort_keys=True).encode()).hexdigest()
            elif f.endswith(".f32") or f == "model.safetensors" or f == "config.json":
                out[os.path.relpath(p, d)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="testdata/golden", help="output root (default testdata/golden)")
    ap.add_argument("--only", action="append", help="build only this case name (repeatable)")
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temp dir twice and compare with --out; write nothing")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--extra-seed", type=int, action="append", metavar="N",
                    help="instead of CONFIGS, build the random config extra_spec(N) (repeatable); for "
                    "NINFER_GOLDEN_EXTRA=<--out> go test ./internal/goldentest, not for testdata/golden")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    if args.extra_seed:
        if args.only:
            sys.exit("make_golden: --extra-seed and --only exclude each other")
        if os.path.abspath(args.out) == os.path.abspath("testdata/golden"):
            sys.exit("make_golden: --extra-seed cases are not committed cases: give another --out")
        global COMMAND
        COMMAND = (f"python3 scripts/golden/make_golden.py --out {args.out} "
                   + " ".join(f"--extra-seed {n}" for n in args.extra_seed))
        specs = [extra_spec(n) for n in args.extra_seed]
        for s in specs:
            log(f"{s['name']}: {s['description']}")
    else:
        specs = [s for s in CONFIGS if not args.only or s["name"] in args.only]
    if args.only and len(specs) != len(args.only):
        sys.exit(f"make_golden: unknown case in --only {args.only}")

    tmp = tempfile.mkdtemp(prefix="golden.")
    try:
        runs = []
        for r in range(2):  # two independent builds must be bit-identical
            rd = os.path.join(tmp, f"run{r}")
            os.makedirs(rd)
            for s in specs:
                make_case(s, rd)
            runs.append(rd)
        for s in specs:
            a, b = digest_dir(os.path.join(runs[0], s["name"])), digest_dir(os.path.join(runs[1], s["name"]))
            if a != b:
                sys.exit(f"make_golden: {s['name']}: two runs differ: {sorted(k for k in a if a[k] != b.get(k))}")
        log("determinism: two runs bit-identical")
        if args.check:
            bad = []
            for s in specs:
                a = digest_dir(os.path.join(runs[0], s["name"]))
                b = digest_dir(os.path.join(args.out, s["name"]))
                bad += [f"{s['name']}/{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            if bad:
                sys.exit(f"make_golden: --check: differs from {args.out}: {bad}")
            log(f"check: {args.out} matches a fresh run")
            return
        os.makedirs(args.out, exist_ok=True)
        for s in specs:
            dst = os.path.join(args.out, s["name"])
            staged = dst + ".tmp"
            shutil.rmtree(staged, ignore_errors=True)
            shutil.copytree(os.path.join(runs[0], s["name"]), staged)
            shutil.rmtree(dst, ignore_errors=True)
            os.rename(staged, dst)
            log(f"wrote {dst}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
