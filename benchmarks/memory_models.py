"""Two `package.module:factory` models for the memory benchmark, unlike the harness's built-ins.

Why these: the built-ins are an MLP and token transformers; a CNN brings convolutions, BatchNorm buffers
and activations that shrink with depth, a ViT brings patch embedding and attention on image inputs. Both
follow rtmodel_harness.workloads' factory contract: factory(**model_args) -> (model, make_batch,
loss_fn), make_batch(step, batch_per_rank, device) -> (inputs, targets). Their repeated blocks sit in an
nn.ModuleList `blocks`: the units the benchmark wraps with fully_shard.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812


def _generator(step: int) -> torch.Generator:
    return torch.Generator().manual_seed(1000 + step)


class ConvBlock(nn.Module):
    """conv3x3 -> BatchNorm -> ReLU, twice, with a residual when the shape allows; stride 2 downsamples."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return F.relu(h + x if self.residual else h)


class SmallCnn(nn.Module):
    def __init__(self, width: int, classes: int):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1, bias=False)
        chans = [width, width, 2 * width, 2 * width, 4 * width]
        self.blocks = nn.ModuleList(
            ConvBlock(a, b, 2 if b != a else 1) for a, b in zip(chans[:-1], chans[1:], strict=True)
        )
        self.head = nn.Linear(chans[-1], classes)

    def forward(self, x):
        h = self.stem(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h.mean(dim=(2, 3)))


def image_batches(image: int, classes: int):
    """make_batch(step, batch, device) -> (RGB images, class labels), drawn from the step's own seed."""

    def make_batch(step: int, batch: int, device):
        g = _generator(step)
        x = torch.randn(batch, 3, image, image, generator=g)
        y = torch.randint(0, classes, (batch,), generator=g)
        return x.to(device), y.to(device)

    return make_batch


def small_cnn(width: int = 32, classes: int = 10, image: int = 32, seed: int = 0):
    """A 4-block residual CNN on image x image RGB inputs, cross-entropy over `classes`."""
    torch.manual_seed(seed)
    model = SmallCnn(width, classes)

    return model, image_batches(image, classes), F.cross_entropy


class VitBlock(nn.Module):
    """Pre-norm attention (fused qkv, scaled_dot_product_attention) and a GELU MLP, both residual."""

    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp)
        self.fc2 = nn.Linear(mlp, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(att)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class SmallVit(nn.Module):
    def __init__(self, image: int, patch: int, dim: int, depth: int, heads: int, classes: int):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2, dim))
        self.blocks = nn.ModuleList(VitBlock(dim, heads, 4 * dim) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        h = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h).mean(dim=1))


def small_vit(
    image: int = 32,
    patch: int = 4,
    dim: int = 128,
    depth: int = 4,
    heads: int = 4,
    classes: int = 10,
    seed: int = 0,
):
    """A 4-block ViT on image x image RGB inputs cut into patch x patch patches."""
    torch.manual_seed(seed)
    model = SmallVit(image, patch, dim, depth, heads, classes)

    return model, image_batches(image, classes), F.cross_entropy
