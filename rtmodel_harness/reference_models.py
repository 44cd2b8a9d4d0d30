"""Torch definitions of the preset models, for counting what eager PyTorch launches per training iteration.

Why these copies: the runtime model's host/device split needs the op count, FLOPs and memory traffic of
the models the presets name, so the definitions must be the ones trained, not look-alikes.
- transformer-base/-big: the paper's `TransformerModule` (WangZesen/Decentralized-Training-Exp,
  transformer/src/model.py), op for op; loss and batch as in its src/decent_train.py.
- gpt2-small: nanoGPT's GPT-2 (the paper's gpt2/gpt/model.py), with GPT-2's 50,257-token vocabulary and
  biases; dropout 0.0 as in the paper's gpt2 config.
- transformer-xl-base: NVIDIA DeepLearningExamples' Transformer-XL base (PyTorch/LanguageModeling/
  Transformer-XL, mem_transformer.py, wt103_base.yaml): not a paper model but the reference for the GPUs'
  large-batch efficiency (runtime_model/presets/efficiency.py), because NVIDIA publishes its eager-PyTorch
  throughput on A100, V100 and T4 and it has the paper model's width (d=512).
- resnet50: torchvision's resnet50 (v1.5, stride in the 3x3 conv), channels_last and label smoothing
  0.1 as in the paper's cnn/decent_train.py and config; 224x224 images.

`build(name, width_div)` divides every width (d_model, ffn, vocabulary, channels) by `width_div` and
keeps depth and head count: op counts do not depend on width, so they are counted on a tiny copy.
It returns (model, make_batch); make_batch(units) returns a closure that runs forward + loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

SENTENCE_TOKENS = 32  # transformer: U tokens = U/32 sentences, source and target each 32 tokens
PAD_ID = 0  # '[PAD]' is the first special token of the paper's tokenizer
UNITS = {
    "transformer-base": "token",
    "transformer-big": "token",
    "gpt2-small": "token",
    "resnet50": "image",
    "transformer-xl-base": "token",
}


# --- transformer-base / -big: the paper's TransformerModule -------------------------------------------
class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, max_len: int = 400):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pe[:, : x.size(1)]


class TransformerModule(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_feedforward, pad_token_idx, dropout=0.3):
        super().__init__()
        self._d_model = d_model
        self._pad_token_idx = pad_token_idx
        self._token_embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_token_idx)
        self._positional_encoding = PositionalEncoding(d_model)
        self._transformer = nn.Transformer(
            d_model=d_model,
            nhead=num_heads,
            num_encoder_layers=num_layers,
            num_decoder_layers=num_layers,
            dim_feedforward=d_feedforward,
            dropout=dropout,
            batch_first=True,
        )
        self._enc_dropout = nn.Dropout(dropout)
        self._dec_dropout = nn.Dropout(dropout)
        self._linear = nn.Linear(d_model, vocab_size, bias=False)
        self._linear.weight = self._token_embedding.weight
        self._token_embedding.weight.data.uniform_(-0.1, 0.1)

    def generate_padding_mask(self, data: torch.Tensor) -> torch.Tensor:
        padding_mask = (data != self._pad_token_idx).float()
        padding_mask = padding_mask.masked_fill(padding_mask == 0, float("-inf"))
        padding_mask = padding_mask.masked_fill(padding_mask == 1, 0.0)
        return padding_mask

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_padding_mask = self.generate_padding_mask(src).detach()
        tgt_padding_mask = self.generate_padding_mask(tgt).detach()
        tgt_mask = self._transformer.generate_square_subsequent_mask(
            tgt.size(1), device=src.device, dtype=torch.float32
        ).detach()
        src = self._token_embedding(src) * math.sqrt(self._d_model)
        tgt = self._token_embedding(tgt) * math.sqrt(self._d_model)
        src = self._positional_encoding(src)
        tgt = self._positional_encoding(tgt)
        src = self._enc_dropout(src)
        tgt = self._dec_dropout(tgt)
        output = self._transformer(
            src,
            tgt,
            tgt_mask=tgt_mask,
            src_key_padding_mask=src_padding_mask,
            tgt_key_padding_mask=tgt_padding_mask,
            memory_key_padding_mask=src_padding_mask,
            tgt_is_causal=True,
        )
        return self._linear(output)


def _transformer(d_model: int, heads: int, ffn: int, width_div: int):
    vocab = 37_120 // width_div  # the paper's shared BPE vocabulary (conf.py Tokenizer.vocab_size)
    model = TransformerModule(vocab, d_model // width_div, heads, 6, ffn // width_div, PAD_ID, dropout=0.1)
    criterion = nn.CrossEntropyLoss(ignore_index=PAD_ID, label_smoothing=0.1)

    def make_batch(units: int) -> Callable[[], torch.Tensor]:
        sentences = max(1, units // SENTENCE_TOKENS)
        src = torch.randint(PAD_ID + 1, vocab, (sentences, SENTENCE_TOKENS))
        tgt = torch.randint(PAD_ID + 1, vocab, (sentences, SENTENCE_TOKENS + 1))

        def step() -> torch.Tensor:  # decent_train.py train_epoch: model(src, tgt[:, :-1]), shifted target
            pred = model(src, tgt[:, :-1])
            return criterion(pred.view(-1, vocab), tgt[:, 1:].reshape(-1))

        return step

    return model, make_batch


# --- gpt2-small: nanoGPT's GPT ----------------------------------------------------------------------
class Block(nn.Module):
    """Pre-LN block: x + attn(ln_1(x)), then x + mlp(ln_2(x)); causal SDPA as nanoGPT's flash path."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.attn_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, context: int, d: int, heads: int, layers: int):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.wte.weight = self.lm_head.weight  # tied, as nanoGPT

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def _gpt2(width_div: int, context: int = 1024):
    vocab = 50_257 // width_div
    model = GPT(vocab, 1024, 768 // width_div, 12, 12)

    def make_batch(units: int) -> Callable[[], torch.Tensor]:
        seq = min(units, context)
        x, y = (torch.randint(0, vocab, (max(1, units // seq), seq)) for _ in range(2))

        def step() -> torch.Tensor:  # nanoGPT's forward(idx, targets)
            logits = model(x)
            return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1), ignore_index=-1)

        return step

    return model, make_batch


# --- resnet50: torchvision's ResNet-50 -----------------------------------------------------------------
class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = 4 * width
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += identity
        return self.relu(out)


def resnet50_module(base: int = 64, classes: int = 1000) -> nn.Module:
    layers: list[nn.Module] = [
        nn.Conv2d(3, base, 7, 2, 3, bias=False),
        nn.BatchNorm2d(base),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = base
    for stage, blocks in enumerate([3, 4, 6, 3]):
        width = base * 2**stage
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, 2 if (i == 0 and stage > 0) else 1))
            cin = 4 * width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def _resnet50(width_div: int):
    model = resnet50_module(64 // width_div).to(memory_format=torch.channels_last)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    side = 224 if width_div == 1 else 64  # spatial size changes no op count; keeps tiny runs fast

    def make_batch(units: int) -> Callable[[], torch.Tensor]:
        images = torch.randn(units, 3, side, side).contiguous(memory_format=torch.channels_last)
        labels = torch.randint(0, 1000, (units,))
        return lambda: criterion(model(images), labels)

    return model, make_batch


# --- transformer-xl-base: NVIDIA DeepLearningExamples' MemTransformerLM, wt103_base.yaml ----------------
TXL_SEGMENT, TXL_MEMORY = 192, 192  # tgt_len, mem_len of the training config
TXL_VOCAB, TXL_CUTOFFS = 267_735, (19_997, 39_997, 199_997)


def zipf_shares(cutoffs: tuple[int, ...], vocab: int) -> list[float]:
    """Share of running-text tokens in each adaptive-softmax cluster under Zipf's law (frequency ~ 1/rank):
    the head and tail clusters' work depends on it, and uniform random ids would put 93 % outside the head."""
    harmonic = lambda n: math.log(n) + 0.5772156649 + 1 / (2 * n)  # noqa: E731
    edges = [0, *cutoffs, vocab]
    total = harmonic(vocab)
    return [
        (harmonic(hi) - (harmonic(lo) if lo else 0.0)) / total
        for lo, hi in zip(edges, edges[1:], strict=False)
    ]


class RelPartialLearnableAttn(nn.Module):
    """mem_transformer.py RelPartialLearnableMultiHeadAttn with pre_lnorm=False, dropatt=0."""

    def __init__(self, d: int, heads: int, d_head: int, dropout: float):
        super().__init__()
        self.heads, self.d_head, self.scale = heads, d_head, 1 / d_head**0.5
        self.qkv_net = nn.Linear(d, 3 * heads * d_head, bias=False)
        self.r_net = nn.Linear(d, heads * d_head, bias=False)
        self.o_net = nn.Linear(heads * d_head, d, bias=False)
        self.drop, self.layer_norm = nn.Dropout(dropout), nn.LayerNorm(d)

    def forward(self, w, r, r_w_bias, r_r_bias, attn_mask, mems):
        qlen, rlen, bsz, n, dh = w.size(0), r.size(0), w.size(1), self.heads, self.d_head
        q, k, v = torch.chunk(self.qkv_net(torch.cat([mems, w], 0)), 3, dim=-1)
        q, klen = q[-qlen:].view(qlen, bsz, n, dh), k.size(0)
        k, v, r_k = k.view(klen, bsz, n, dh), v.view(klen, bsz, n, dh), self.r_net(r).view(rlen, n, dh)
        ac = torch.einsum("ibnd,jbnd->bnij", q + r_w_bias, k)
        bd = torch.einsum("ibnd,jnd->bnij", q + r_r_bias, r_k)
        padded = torch.cat([bd.new_zeros(*bd.shape[:3], 1), bd], dim=3).view(*bd.shape[:2], -1, bd.size(2))
        bd = padded.narrow(2, 1, padded.size(2) - 1).view_as(bd)  # _rel_shift
        score = self.scale * (ac + bd)
        score.masked_fill_(attn_mask[None, None, :, :], -float("inf"))
        vec = torch.einsum("bnij,jbnd->ibnd", F.softmax(score, dim=3), v).contiguous().view(qlen, bsz, n * dh)
        return self.layer_norm(w + self.drop(self.o_net(vec)))


class TxlLayer(nn.Module):
    def __init__(self, d: int, heads: int, d_head: int, d_inner: int, dropout: float):
        super().__init__()
        self.attn = RelPartialLearnableAttn(d, heads, d_head, dropout)
        self.core = nn.Sequential(
            nn.Linear(d, d_inner),
            nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Linear(d_inner, d),
            nn.Dropout(dropout),
        )
        self.layer_norm = nn.LayerNorm(d)

    def forward(self, x, r, r_w_bias, r_r_bias, mask, mems):
        x = self.attn(x, r, r_w_bias, r_r_bias, mask, mems)
        return self.layer_norm(x + self.core(x))


class TransformerXL(nn.Module):
    """MemTransformerLM, attn_type 0, div_val 1, tied adaptive softmax; the loss takes each cluster's
    tokens as one contiguous block (Zipf shares) where the original gathers them by nonzero()."""

    def __init__(self, vocab: int, d: int, heads: int, d_head: int, d_inner: int, layers: int, dropout=0.1):
        super().__init__()
        self.d, self.cutoffs = d, [c * vocab // TXL_VOCAB for c in TXL_CUTOFFS]
        self.word_emb = nn.Embedding(vocab, d)
        self.register_buffer("inv_freq", 1 / (10000 ** (torch.arange(0.0, d, 2.0) / d)))
        self.drop = nn.Dropout(dropout)
        self.r_w_bias, self.r_r_bias = (nn.Parameter(torch.zeros(heads, d_head)) for _ in range(2))
        self.layers = nn.ModuleList(TxlLayer(d, heads, d_head, d_inner, dropout) for _ in range(layers))
        self.out_bias = nn.Parameter(torch.zeros(vocab))
        self.cluster_weight = nn.Parameter(torch.zeros(len(self.cutoffs), d))
        self.cluster_bias = nn.Parameter(torch.zeros(len(self.cutoffs)))
        self.shares = zipf_shares(tuple(self.cutoffs), vocab)

    def forward(self, data, target, mems):
        qlen, mlen = data.size(0), mems[0].size(0)
        x = self.word_emb(data) * self.d**0.5
        mask = torch.triu(x.new_ones(qlen, qlen + mlen), diagonal=1 + mlen).bool()
        pos = torch.arange(qlen + mlen - 1, -1, -1.0, device=x.device, dtype=x.dtype)
        r = self.drop(
            torch.cat([torch.ger(pos, self.inv_freq).sin(), torch.ger(pos, self.inv_freq).cos()], -1)
        )
        x = self.drop(x)
        for layer, mem in zip(self.layers, mems, strict=True):
            x = layer(x, r, self.r_w_bias, self.r_r_bias, mask, mem)
        return self.adaptive_nll(self.drop(x).view(-1, self.d), target.view(-1))

    def adaptive_nll(self, hidden, target):
        weight = self.word_emb.weight  # tie_weight: the softmax shares the embedding
        edges = [0, *self.cutoffs, weight.size(0)]
        head_w = torch.cat([weight[: edges[1]], self.cluster_weight], 0)
        head_b = torch.cat([self.out_bias[: edges[1]], self.cluster_bias], 0)
        head_logprob = F.log_softmax(F.linear(hidden, head_w, head_b), dim=1)
        tokens, start, parts = hidden.size(0), 0, []
        for i, share in enumerate(self.shares):
            count = tokens - start if i == len(self.shares) - 1 else round(share * tokens)
            rows, tgt = slice(start, start + count), target[start : start + count] % (edges[i + 1] - edges[i])
            if i == 0:
                logprob = head_logprob[rows].gather(1, tgt[:, None]).squeeze(1)
            else:
                cluster = slice(edges[i], edges[i + 1])
                tail = F.log_softmax(F.linear(hidden[rows], weight[cluster], self.out_bias[cluster]), dim=1)
                logprob = head_logprob[rows, -i] + tail.gather(1, tgt[:, None]).squeeze(1)
            parts.append(-logprob)
            start += count
        return torch.cat(parts).mean()


def _transformer_xl(width_div: int):
    d, vocab = 512 // width_div, TXL_VOCAB // width_div
    model = TransformerXL(vocab, d, 8, 64 // width_div, 2048 // width_div, 16)

    def make_batch(units: int) -> Callable[[], torch.Tensor]:
        bsz = max(1, units // TXL_SEGMENT)
        data, target = (torch.randint(0, vocab, (TXL_SEGMENT, bsz)) for _ in range(2))
        # memories from the previous segment, detached as _update_mems leaves them
        mems = [torch.randn(TXL_MEMORY, bsz, d) for _ in range(len(model.layers))]
        return lambda: model(data, target, mems)

    return model, make_batch


BUILDERS: dict[str, Callable[[int], tuple[nn.Module, Callable[[int], Callable[[], torch.Tensor]]]]] = {
    "transformer-base": lambda w: _transformer(512, 8, 2048, w),
    "transformer-big": lambda w: _transformer(1024, 16, 4096, w),
    "gpt2-small": _gpt2,
    "transformer-xl-base": _transformer_xl,
    "resnet50": _resnet50,
}


def build(name: str, width_div: int = 1):
    """(model in train mode, make_batch) for a preset model; width_div > 1 gives the tiny copy."""
    if name not in BUILDERS:
        raise KeyError(f"unknown model {name!r}; choose from {', '.join(BUILDERS)}")
    model, make_batch = BUILDERS[name](width_div)
    return model.train(), make_batch
