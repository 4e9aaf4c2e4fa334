"""Independent float64 Qwen3.5 forward written from shared/reference/qwen35.md (sections 3-4).

It shares no code with transformers: the Gated DeltaNet uses the token-by-token recurrent rule
(not HF's chunked prefill), attention is written out with explicit RoPE, and the MTP head follows
section 4. make_golden.py uses it to check that the HF float32 golden logits are the documented
math, so an engine written from qwen35.md can match them.

Weights come as a dict of HF checkpoint names -> tensors (text names `model.*`, `lm_head.weight`
unless tied, MTP names `mtp.*`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

FULL = "full_attention"


def zc_rmsnorm(x, w, eps):
    """Zero-centred RMSNorm: x / rms(x) * (1 + w)."""
    x = x.double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w.double())


def rope_tables(positions, head_dim, partial, theta):
    rd = int(head_dim * partial)
    inv = 1.0 / (theta ** (torch.arange(0, rd, 2, dtype=torch.float64) / rd))
    ang = positions.double()[:, None] * inv[None]
    return rd, torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)


def apply_rope(x, rd, cos, sin):
    """x [T, heads, hd]; NeoX half-split rotation on the first rd dims."""
    r, rest = x[..., :rd], x[..., rd:]
    rot = torch.cat([-r[..., rd // 2:], r[..., : rd // 2]], -1)
    return torch.cat([r * cos[:, None] + rot * sin[:, None], rest], -1)


def attention(w, p, a, positions, cfg):
    """Gated full attention (section 3.2) over a [T, H] input, causal, RoPE at positions."""
    eps = cfg["rms_norm_eps"]
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    T = a.shape[0]
    qg = (a @ w[p + "q_proj.weight"].T).view(T, nh, 2 * hd)  # per head [query | gate]
    q, gate = qg[..., :hd], qg[..., hd:].reshape(T, nh * hd)
    q = zc_rmsnorm(q, w[p + "q_norm.weight"], eps)
    k = zc_rmsnorm((a @ w[p + "k_proj.weight"].T).view(T, nkv, hd), w[p + "k_norm.weight"], eps)
    v = (a @ w[p + "v_proj.weight"].T).view(T, nkv, hd)
    rope = cfg["rope_parameters"]
    rd, cos, sin = rope_tables(positions, hd, rope["partial_rotary_factor"], rope["rope_theta"])
    q, k = apply_rope(q, rd, cos, sin), apply_rope(k, rd, cos, sin)
    rep = nh // nkv  # kv head j serves query heads j*rep .. j*rep+rep-1
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    sc = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd)
    sc = sc.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1)[None], float("-inf"))
    att = torch.einsum("hts,shd->thd", sc.softmax(-1), v).reshape(T, nh * hd)
    return (att * torch.sigmoid(gate)) @ w[p + "o_proj.weight"].T


def gated_deltanet(w, p, a, cfg):
    """Gated DeltaNet (section 3.3) with the recurrent rule, zero initial state."""
    eps = cfg["rms_norm_eps"]
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    T = a.shape[0]
    qkv = a @ w[p + "in_proj_qkv.weight"].T  # [T, conv_dim] = [q | k | v]
    conv = w[p + "conv1d.weight"][:, 0, :]  # [C, K], last tap = current token
    K = conv.shape[1]
    padded = torch.cat([torch.zeros(K - 1, qkv.shape[1], dtype=qkv.dtype), qkv], 0)
    u = sum(conv[:, i] * padded[i: i + T] for i in range(K))
    u = F.silu(u)
    q = u[:, : nk * dk].view(T, nk, dk)
    k = u[:, nk * dk: 2 * nk * dk].view(T, nk, dk)
    v = u[:, 2 * nk * dk:].view(T, nv, dv)
    z = (a @ w[p + "in_proj_z.weight"].T).view(T, nv, dv)
    beta = torch.sigmoid(a @ w[p + "in_proj_b.weight"].T)  # [T, nv]
    g = -torch.exp(w[p + "A_log"]) * F.softplus(a @ w[p + "in_proj_a.weight"].T + w[p + "dt_bias"])
    rep = nv // nk  # v-head j uses q/k head j // rep
    q, k = q.repeat_interleave(rep, dim=1), k.repeat_interleave(rep, dim=1)
    q = q * torch.rsqrt(q.pow(2).sum(-1, keepdim=True) + 1e-6) / math.sqrt(dk)
    k = k * torch.rsqrt(k.pow(2).sum(-1, keepdim=True) + 1e-6)
    S = torch.zeros(nv, dk, dv, dtype=torch.float64)
    out = torch.empty(T, nv, dv, dtype=torch.float64)
    for t in range(T):
        S = S * torch.exp(g[t])[:, None, None]
        delta = beta[t][:, None] * (v[t] - torch.einsum("hkv,hk->hv", S, k[t]))
        S = S + k[t][:, :, None] * delta[:, None, :]
        out[t] = torch.einsum("hkv,hk->hv", S, q[t])
    o = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + eps) * w[p + "norm.weight"]
    o = o * F.silu(z)
    return o.reshape(T, nv * dv) @ w[p + "out_proj.weight"].T


def mlp(w, p, x):
    return (F.silu(x @ w[p + "gate_proj.weight"].T) * (x @ w[p + "up_proj.weight"].T)) @ w[p + "down_proj.weight"].T


def decoder_layer(w, p, x, kind, positions, cfg):
    eps = cfg["rms_norm_eps"]
    a = zc_rmsnorm(x, w[p + "input_layernorm.weight"], eps)
    if kind == FULL:
        x = x + attention(w, p + "self_attn.", a, positions, cfg)
    else:
        x = x + gated_deltanet(w, p + "linear_attn.", a, cfg)
    return x + mlp(w, p + "mlp.", zc_rmsnorm(x, w[p + "post_attention_layernorm.weight"], eps))


def lm_head(w, cfg):
    return w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]


def forward(w, cfg, ids):
    """Main model. Returns (logits [T, V], hidden list [embedding, layer 0.., final_norm])."""
    w = {k: v.double() for k, v in w.items()}
    T = len(ids)
    positions = torch.arange(T)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    hidden = [x]
    for i, kind in enumerate(cfg["layer_types"]):
        x = decoder_layer(w, f"model.layers.{i}.", x, kind, positions, cfg)
        hidden.append(x)
    h = zc_rmsnorm(x, w["model.norm.weight"], cfg["rms_norm_eps"])
    hidden.append(h)
    return h @ lm_head(w, cfg).T, hidden


def mtp(w, cfg, ids, h_final):
    """MTP head (section 4) for t = 0..T-2 given the main final-normed hidden h_final [T, H].
    Returns (logits [T-1, V], [after fc, after layer, after mtp.norm])."""
    w = {k: v.double() for k, v in w.items()}
    eps = cfg["rms_norm_eps"]
    n = len(ids) - 1
    e = w["model.embed_tokens.weight"][torch.tensor(ids[1:])]
    x = torch.cat([zc_rmsnorm(e, w["mtp.pre_fc_norm_embedding.weight"], eps),
                   zc_rmsnorm(h_final[:n].double(), w["mtp.pre_fc_norm_hidden.weight"], eps)], -1)
    u = x @ w["mtp.fc.weight"].T
    y = decoder_layer(w, "mtp.layers.0.", u, FULL, torch.arange(n), cfg)
    hn = zc_rmsnorm(y, w["mtp.norm.weight"], eps)
    return hn @ lm_head(w, cfg).T, [u, y, hn]
