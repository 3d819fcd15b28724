"""Per-example gradient norms of DP-auto-GAN's autoencoder phase, joint (encoder ∥ decoder) against
decoder-only, over a non-private run on public tuning data.

Why: the paper's C1 = 0.012 (App. E.1) clips the decoder's per-example gradient; dp_autogan clips the
joint (encoder ∥ decoder) gradient to the same C1 (`encoder_mode="joint_dp"`). The two readings act
alike when the clip binds for nearly every example under both (every clipped gradient then has norm
C1, and Adam, invariant to the gradient's scale, sees the same direction) and the decoder carries
most of the joint norm (the joint clip then leaves the decoder nearly the share the decoder-only
clip gives it). This script measures both on `randhie`, which no benchmark suite scores, so that
the reading is not chosen on scored rows.

What it does: trains the autoencoder as an ε = ∞ dp_autogan fit does (the preset's networks,
Adam, Poisson batches through `PlainPhase`, the same seeding) and, at a few step counts, takes
the per-example gradient of the reconstruction loss for every training row with `torch.func`
(vmap over `grad` of a functional call). It prints, per seed and checkpoint, the quartiles of the
joint and decoder-only norms, the median ratio decoder / joint, and the share of rows whose norm
exceeds C1 under each reading.

Reading it (fixed before the first run): the joint reading stands if, at every checkpoint and
seed, both readings' median norms exceed C1 by at least 3× and the median decoder / joint ratio is
at least 0.8; otherwise C1's reading is to be revisited.

    .venv/bin/python scripts/autogan_clip_norms.py [--dataset randhie] [--preset adult] [--seeds 0 1]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from dpgym.plugins.generators.dp_autogan.model import PRESETS, build_autoencoder, reconstruction_loss, train_autoencoder
from dpgym.plugins.nn.mixed import MixedEncoding
from dpgym.plugins.nn.phases import PlainPhase
from dpgym.registry import Registry

CHECKPOINTS = (0, 100, 1_000, 5_000, 10_000)
CHUNK = 1024  # rows per vmap call: bounds the memory of the materialised per-example gradients


def per_example_norms(encoder, decoder, x: torch.Tensor, reduction: str) -> tuple[np.ndarray, np.ndarray]:
    """(joint, decoder-only) norm of each row's gradient of its reconstruction loss."""
    params = {**{("encoder", k): v.detach() for k, v in encoder.named_parameters()},
              **{("decoder", k): v.detach() for k, v in decoder.named_parameters()}}

    def loss(p, row):
        batch = row.unsqueeze(0)
        latent = functional_call(encoder, {k: v for (net, k), v in p.items() if net == "encoder"}, (batch,))
        logits = functional_call(decoder, {k: v for (net, k), v in p.items() if net == "decoder"}, (latent,))
        return reconstruction_loss(logits, batch, reduction).squeeze(0)

    squares = {"encoder": [], "decoder": []}
    for part in x.split(CHUNK):
        grads = vmap(grad(loss), in_dims=(None, 0))(params, part)
        for net in squares:
            squares[net].append(sum(g.flatten(1).square().sum(1) for (n, _), g in grads.items() if n == net))
    encoder_sq, decoder_sq = (torch.cat(squares[net]).numpy() for net in ("encoder", "decoder"))
    return np.sqrt(encoder_sq + decoder_sq), np.sqrt(decoder_sq)


def measure(x: torch.Tensor, preset_name: str, seed: int) -> Iterator[dict]:
    """Train the autoencoder as dp_autogan's ε = ∞ fit does, reading the norms at each checkpoint."""
    preset = PRESETS[preset_name]
    torch.manual_seed(seed)  # as `DPAutoGAN._fit`: the networks are the first draws after seeding
    encoder, decoder = build_autoencoder(preset, x.shape[1], preset.latent_dim)
    optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=preset.ae_lr,
                                 betas=(0.9, 0.999), weight_decay=preset.ae_weight_decay)
    phase = PlainPhase([optimizer], n_rows=len(x), batch_size=min(preset.ae_batch_size, len(x)), steps=0, seed=seed)
    for checkpoint in (c for c in CHECKPOINTS if c <= preset.ae_steps):
        phase.planned_steps = checkpoint  # resume the same Poisson stream up to the next checkpoint
        train_autoencoder(phase, encoder, decoder, x, preset.loss_reduction)
        joint, decoder_only = per_example_norms(encoder, decoder, x, preset.loss_reduction)
        yield {"step": checkpoint, "joint": np.percentile(joint, [25, 50, 75]),
               "decoder": np.percentile(decoder_only, [25, 50, 75]), "ratio": float(np.median(decoder_only / joint)),
               "smallest": (joint.min(), decoder_only.min()),
               "clipped": ((joint > preset.ae_clip_norm).mean(), (decoder_only > preset.ae_clip_norm).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="randhie")
    parser.add_argument("--preset", default="adult", choices=sorted(PRESETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = parser.parse_args()
    torch.set_num_threads(1)
    dataset = Registry.discover().dataset(args.dataset)
    x = torch.as_tensor(MixedEncoding(dataset.schema()).encode(dataset.load().train))
    c1 = PRESETS[args.preset].ae_clip_norm
    print(f"{args.dataset}: {len(x)} training rows, encoding width {x.shape[1]}; preset {args.preset}, C1 = {c1}")
    print("| seed | step | joint norm q25 / median / q75 | decoder-only q25 / median / q75 | "
          "median decoder / joint | smallest norm, joint / decoder-only | rows clipped, joint / decoder-only | "
          "CPU s since step 0 |")
    print("|---|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        start = time.process_time()
        for row in measure(x, args.preset, seed):
            quartiles = {k: " / ".join(f"{v:.3f}" for v in row[k]) for k in ("joint", "decoder")}
            print(f"| {seed} | {row['step']:,} | {quartiles['joint']} | {quartiles['decoder']} | {row['ratio']:.3f} | "
                  f"{row['smallest'][0]:.3f} / {row['smallest'][1]:.3f} | "
                  f"{row['clipped'][0]:.4f} / {row['clipped'][1]:.4f} | {time.process_time() - start:.0f} |")


if __name__ == "__main__":
    main()
