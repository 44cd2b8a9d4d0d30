"""The preset models (rtmodel_harness.reference_models) as workloads the profiler times and validation trains.

Why: the advisor's presets name these models; profiling and validating the same definitions (the paper's
Transformer, nanoGPT's GPT-2, torchvision's ResNet-50, NVIDIA's Transformer-XL) makes a profile comparable
with the presets. Model arguments: width_div (1 = full width; > 1 divides every width for small test
copies, as reference_models.build does) and seed (initial weights, and with rank and step the batches).

--batch-per-rank counts the model's units (reference_models.UNITS), rounded down to whole samples:
- transformer-base / -big: tokens; sentences of 32 source + 32 target tokens (batch // 32 sentences,
  at least 32 tokens), as the paper's token-based batches (25k tokens per GPU there).
- gpt2-small: tokens; sequences of min(batch, 1024) tokens (batch // 1024 rows of 1024 beyond that).
- transformer-xl-base: tokens; segments of 192 tokens with 192 tokens of memory (batch // 192, at least 192).
- resnet50: images, 224 x 224 (64 x 64 with width_div > 1), channels_last.
Data are random token ids / Gaussian images from a generator seeded by (seed, rank, step).
"""

from __future__ import annotations

import numpy as np
import torch

from rtmodel_harness.model_choice import check_batch


def step_seed(seed: int, rank: int, step: int) -> int:
    """The data generator's seed of one rank and iteration (every built-in model's batches)."""
    return int(np.random.SeedSequence([seed & 0xFFFFFFFF, rank, max(step, 0)]).generate_state(1)[0])


def _generator(seed: int, rank: int, step: int) -> torch.Generator:
    return torch.Generator().manual_seed(step_seed(seed, rank, step))


def build_reference(name: str, args: dict, batch: int, device: torch.device, rank: int):
    """(model, make_batch(step) -> (inputs, targets), loss_fn(outputs, targets)) for a preset model."""
    from rtmodel_harness import reference_models as rm

    check_batch(name, batch)
    torch.manual_seed(args["seed"])
    model, _ = rm.build(name, args["width_div"])
    seed = args["seed"]
    if name in ("transformer-base", "transformer-big"):
        return model, *_transformer_data(model, batch, device, rank, seed)
    if name == "gpt2-small":
        return model, *_gpt2_data(model, batch, device, rank, seed)
    if name == "transformer-xl-base":
        return model, *_txl_data(model, batch, device, rank, seed)
    return model.to(memory_format=torch.channels_last), *_resnet_data(
        args["width_div"], batch, device, rank, seed
    )


def _transformer_data(model, batch: int, device, rank: int, seed: int):
    from rtmodel_harness.reference_models import PAD_ID, SENTENCE_TOKENS

    vocab = model._token_embedding.num_embeddings
    sentences = batch // SENTENCE_TOKENS
    criterion = torch.nn.CrossEntropyLoss(ignore_index=PAD_ID, label_smoothing=0.1)

    def make_batch(step: int):
        g = _generator(seed, rank, step)
        src = torch.randint(PAD_ID + 1, vocab, (sentences, SENTENCE_TOKENS), generator=g).to(device)
        tgt = torch.randint(PAD_ID + 1, vocab, (sentences, SENTENCE_TOKENS + 1), generator=g).to(device)
        return (src, tgt[:, :-1]), tgt[:, 1:]  # decent_train.py: model(src, tgt[:, :-1]), shifted target

    def loss_fn(pred, target):
        return criterion(pred.reshape(-1, vocab), target.reshape(-1))

    return make_batch, loss_fn


def _gpt2_data(model, batch: int, device, rank: int, seed: int, context: int = 1024):
    vocab = model.lm_head.out_features
    seq = min(batch, context)
    rows = batch // seq

    def make_batch(step: int):
        g = _generator(seed, rank, step)
        tokens = torch.randint(0, vocab, (rows, seq + 1), generator=g).to(device)
        return tokens[:, :-1], tokens[:, 1:]

    def loss_fn(logits, targets):  # nanoGPT's forward(idx, targets)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))

    return make_batch, loss_fn


def _txl_data(model, batch: int, device, rank: int, seed: int):
    from rtmodel_harness.reference_models import TXL_MEMORY, TXL_SEGMENT

    vocab, d, bsz = model.word_emb.num_embeddings, model.d, batch // TXL_SEGMENT

    def make_batch(step: int):
        g = _generator(seed, rank, step)
        data, target = (torch.randint(0, vocab, (TXL_SEGMENT, bsz), generator=g).to(device) for _ in range(2))
        # the previous segment's memories, detached as _update_mems leaves them
        mems = [torch.randn(TXL_MEMORY, bsz, d, generator=g).to(device) for _ in range(len(model.layers))]
        return (data, target, mems), None

    return make_batch, lambda loss, _targets: loss  # the model returns the adaptive-softmax loss


def _resnet_data(width_div: int, batch: int, device, rank: int, seed: int):
    side = 224 if width_div == 1 else 64  # as reference_models: spatial size changes no op count
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1)

    def make_batch(step: int):
        g = _generator(seed, rank, step)
        images = (
            torch.randn(batch, 3, side, side, generator=g)
            .to(device)
            .contiguous(memory_format=torch.channels_last)
        )
        return images, torch.randint(0, 1000, (batch,), generator=g).to(device)

    return make_batch, criterion
