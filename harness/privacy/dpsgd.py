"""DP-SGD for any torch module: Poisson sampling, per-example clipping (any `ClippingStrategy`),
Gaussian noise calibrated before training to the cell's budget, and a ledger of what ran.

    dp = DPSGD(Budget(1.0, 1e-5), accountant="prv", seed=0)
    phase = dp.add_phase("model", model, optimizer, n_rows=len(X), batch_size=256, steps=2000)
    for idx in phase.batches():
        phase.step(per_example_loss(model, X[idx]))   # a (batch,) tensor, one loss per row
    ledger = dp.ledger()

Several phases (an autoencoder then a GAN discriminator; or several networks in one phase, e.g. a
dequantizer and a flow) share one budget: their noise multipliers are calibrated jointly on the
accountant's composed curve before any training (`calibrate`), never by splitting ε.

Two gradient engines compute the clipped per-example sum:
- "fast": forward hooks tap each layer's output; its per-example gradients are formed from the
  cached input and the output gradient inside the backward pass (`FAST_RULES`, else the layer's
  Opacus grad sampler) and clipped there, so linear-type layers never materialise per-example
  gradients and per-layer strategies store nothing per example
  (docs/methods/dp-hflow.md#per-example-gradients). Parameters are
  detached inside the tapped forward, so autograd does not also compute the unclipped gradient.
- "opacus": Opacus's `GradSampleModule` materialises per-example gradients with hooks; the
  comparison path, and a second implementation the fast one is tested against.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

import numpy as np
import torch
from opacus.grad_sample import GradSampleModule
from opacus.utils.uniform_sampler import UniformWithReplacementSampler
from torch import Tensor, nn

from dpgym.privacy import canaries
from dpgym.privacy.accountants import Accountant, Phase, PRVAccountant, calibrate, make_accountant
from dpgym.privacy.budget import Budget, Guarantee
from dpgym.privacy.clipping import (
    ClippingStrategy,
    MaterializedGrad,
    has_rule,
    layer_rule,
    make_clipping,
    split_clip_norm,
    trainable_layers,
)
from dpgym.privacy.events import GaussianEvent, SubsampledGaussianEvent
from dpgym.privacy.ledger import Ledger, LedgerEntry, PrivacyViolation

Networks = nn.Module | Sequence[nn.Module] | Mapping[str, nn.Module]


class _Tap(torch.autograd.Function):
    """Identity on a layer's output whose backward hands the output gradient to a callback.
    `anchor` (a scalar requiring grad) keeps the tap in the graph when nothing upstream needs grad."""

    @staticmethod
    def forward(ctx, output: Tensor, anchor: Tensor, callback) -> Tensor:
        ctx.callback = callback
        return output.view_as(output)

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        ctx.callback(grad_output)
        return grad_output, None, None


def _check_rows(module: nn.Module, leading: int, rows: int | None) -> None:
    """Per-example gradients take the leading dimension of a layer's input as the row. A layer fed
    rows reshaped (one slice per column) or a shared input (one row broadcast to all) would be
    clipped per slice, so one row could move the sum by many clip norms."""
    if rows is not None and leading != rows:
        raise PrivacyViolation(
            f"{type(module).__name__} got an input with leading dimension {leading} in a step of {rows} rows; "
            "per-example clipping needs each layer's input to hold one entry per row, rows first")


@dataclass
class _HookEngine:
    """Per-example clipping inside the backward pass (see module docstring)."""

    networks: list[nn.Module]
    layers: list[tuple[nn.Module, float]]
    strategy: ClippingStrategy
    generator: torch.Generator | None
    _handles: list = field(default_factory=list)
    _saved: dict = field(default_factory=dict)
    _calls: dict = field(default_factory=dict)
    _pending: dict = field(default_factory=dict)
    _arrived: dict = field(default_factory=dict)
    _deferred: list = field(default_factory=list)
    _summed: dict = field(default_factory=dict)
    _leading: dict = field(default_factory=dict)  # layer → leading sizes of its inputs this step

    def __post_init__(self) -> None:
        unsupported = [type(m).__name__ for m, _ in self.layers if not has_rule(m)]
        if unsupported:
            raise NotImplementedError(f"no per-example gradient rule for {sorted(set(unsupported))}")
        self._threshold = {m: c for m, c in self.layers}
        self._anchor = torch.zeros((), requires_grad=True)

    def attach(self) -> None:
        for module, _ in self.layers:
            self._handles.append(module.register_forward_pre_hook(self._detach_params))
            self._handles.append(module.register_forward_hook(self._tap_output, always_call=True))

    def detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _detach_params(self, module: nn.Module, args) -> None:
        if not torch.is_grad_enabled():
            return
        self._saved[module] = {n: p for n, p in module.named_parameters(recurse=False) if p.requires_grad}
        for n, p in self._saved[module].items():
            module._parameters[n] = p.detach()

    def _tap_output(self, module: nn.Module, args, output):
        saved = self._saved.pop(module, None)
        if saved is None:
            return None
        module._parameters.update(saved)
        if not isinstance(output, Tensor):
            raise NotImplementedError(f"{type(module).__name__} returns {type(output).__name__}; taps need one tensor")
        self._calls[module] = self._calls.get(module, 0) + 1
        activations = args[0].detach()
        self._leading.setdefault(module, set()).add(activations.shape[0] if activations.dim() else 0)
        return _Tap.apply(output, self._anchor, lambda g: self._on_backprop(module, activations, g.detach()))

    def _on_backprop(self, module: nn.Module, activations: Tensor, backprops: Tensor) -> None:
        grad = layer_rule(module)(module, activations, backprops)
        # A layer used k times per forward (a shared MADE) has per-example gradient = sum over uses;
        # clip only once all k output gradients have arrived.
        self._pending[module] = grad if module not in self._pending else self._pending[module] + grad
        self._arrived[module] = self._arrived.get(module, 0) + 1
        if self._arrived[module] == self._calls[module]:
            self._release(module)

    def _release(self, module: nn.Module) -> None:
        grad = self._pending.pop(module)
        if self.strategy.layerwise:
            self._accumulate(self.strategy.clip([grad], [self._threshold[module]], self.generator))
        else:
            self._deferred.append((grad, self._threshold[module]))

    def _accumulate(self, clipped: dict[nn.Parameter, Tensor]) -> None:
        for p, g in clipped.items():
            self._summed[p] = self._summed[p] + g if p in self._summed else g

    def collect(self, rows: int | None = None) -> dict[nn.Parameter, Tensor]:
        """The clipped per-example gradients summed; with `rows`, every layer's input must have held
        that many entries (the step's rows), else the clipping was per slice, not per row."""
        leading, self._leading = self._leading, {}
        for module, sizes in leading.items():
            for size in sizes:
                _check_rows(module, size, rows)
        for module in list(self._pending):  # outputs that never reached the loss contribute zero
            self._release(module)
        if self._deferred:
            grads, thresholds = zip(*self._deferred)
            self._accumulate(self.strategy.clip(list(grads), list(thresholds), self.generator))
        summed, self._summed = self._summed, {}
        self._calls, self._arrived, self._deferred = {}, {}, []
        leaked = [p for m, _ in self.layers for p in m.parameters(recurse=False) if p.requires_grad and p.grad is not None]
        if leaked:
            raise PrivacyViolation(
                f"{len(leaked)} parameter(s) got a gradient outside their layer's forward pass (e.g. a "
                "log-det term computed from the parameters): it would skip per-example clipping")
        return summed


@dataclass
class _OpacusEngine:
    """Per-example gradients materialised by Opacus's `GradSampleModule`, then clipped."""

    networks: list[nn.Module]
    layers: list[tuple[nn.Module, float]]
    strategy: ClippingStrategy
    generator: torch.Generator | None
    _wrapped: list = field(default_factory=list)

    def attach(self) -> None:
        # strict=False: the buffers it refuses (MADE masks, LU permutations) are fixed, not data.
        self._wrapped = [GradSampleModule(n, batch_first=True, loss_reduction="sum", strict=False)
                         for n in self.networks]

    def detach(self) -> None:
        for gsm in self._wrapped:
            gsm.cleanup()
        self._wrapped = []

    def collect(self, rows: int | None = None) -> dict[nn.Parameter, Tensor]:
        grads, thresholds = [], []
        for module, threshold in self.layers:
            params = [p for p in module.parameters(recurse=False) if p.requires_grad]
            if all(getattr(p, "grad_sample", None) is not None for p in params):
                for p in params:
                    _check_rows(module, p.grad_sample.shape[0], rows)
                grads.append(MaterializedGrad({p: p.grad_sample for p in params}))
                thresholds.append(threshold)
            for p in params:
                p.grad_sample, p.grad = None, None
        return self.strategy.clip(grads, thresholds, self.generator) if grads else {}


ENGINES = {"fast": _HookEngine, "opacus": _OpacusEngine}


def _named(networks: Networks) -> dict[str, nn.Module]:
    if isinstance(networks, nn.Module):
        return {"model": networks}
    if isinstance(networks, Mapping):
        return dict(networks)
    return {f"net{i}": n for i, n in enumerate(networks)}


class PrivatePhase:
    """One run of DP-SGD on some networks at one sample rate: Poisson batches, clipped noisy steps."""

    def __init__(self, owner: DPSGD, name: str, networks: Networks, optimizers, *, n_rows: int,
                 steps: int, sample_rate: float | None, batch_size: float | None, clip_norm: float,
                 clipping: str | ClippingStrategy, engine: str, noise_weight: float,
                 network_shares: Sequence[float] | None, seeds: Sequence[int]):
        if (sample_rate is None) == (batch_size is None):
            raise ValueError("give exactly one of sample_rate and batch_size (the expected batch size)")
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {sorted(ENGINES)}, got {engine!r}")
        self.owner, self.name, self.n_rows, self.planned_steps = owner, name, n_rows, steps
        self.sample_rate = float(sample_rate if sample_rate is not None else batch_size / n_rows)
        if not 0 < self.sample_rate <= 1:
            raise ValueError(f"sample rate must lie in (0, 1], got {self.sample_rate}")
        self.networks = _named(networks)
        mixing = [type(m).__name__ for n in self.networks.values() for m in n.modules()
                  if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        if mixing:  # batch statistics mix examples: no per-example gradient, and running stats leak
            raise NotImplementedError(f"{sorted(set(mixing))} mix examples within a batch; use LayerNorm/GroupNorm")
        self.optimizers = list(optimizers) if isinstance(optimizers, Sequence) else [optimizers]
        self.clip_norm, self.noise_weight, self.engine_name = float(clip_norm), float(noise_weight), engine
        self.strategy = make_clipping(clipping)
        self.layers = split_clip_norm(list(self.networks.values()), self.clip_norm, network_shares)
        self.params = [p for m, _ in self.layers for p in m.parameters(recurse=False) if p.requires_grad]
        self._refuse_unclipped_parameters()
        self.sampling = torch.Generator().manual_seed(seeds[0])
        self._noise_seed = seeds[1]
        self._noise: dict[torch.device, torch.Generator] = {}
        clip_generator = torch.Generator().manual_seed(seeds[2])
        self.engine = ENGINES[engine](list(self.networks.values()), self.layers, self.strategy, clip_generator)
        audited = canaries.active()
        self._canaries = None if audited is None else audited.for_phase(self.layers)
        self.noise_multiplier: float | None = None
        self.steps_taken = 0
        self._attached = False
        self._batch_rows = 0

    def _refuse_unclipped_parameters(self) -> None:
        """Each trainable parameter must belong to exactly one layer of the phase. Tied across two
        layers, it would get two clipped contributions (sensitivity 2C where the noise is for C); in
        an optimiser but in no layer, it would step on its raw gradient, neither clipped nor noised."""
        names = self._parameter_names()
        tied = sorted({names.get(p, "?") for p in self.params if sum(q is p for q in self.params) > 1})
        if tied:
            raise ValueError(f"phase {self.name!r}: parameters {tied} are shared by more than one layer; each would "
                             "be clipped once per layer, so a row's gradient could exceed the clip norm")
        inside = set(map(id, self.params))
        outside = [p for o in self.optimizers for group in o.param_groups for p in group["params"]
                   if p.requires_grad and id(p) not in inside]
        if outside:
            raise ValueError(f"phase {self.name!r}: its optimisers update {len(outside)} parameter(s) "
                             f"{[tuple(p.shape) for p in outside][:5]} outside the phase's networks, which would "
                             "train on unclipped, noiseless gradients; pass their networks to the phase")

    @property
    def expected_batch_size(self) -> float:
        return self.sample_rate * self.n_rows

    def batches(self) -> Iterator[Tensor]:
        """Index tensors of Poisson-sampled batches (each row independently with probability q) for
        the remaining steps; the phase's hooks are attached while this iterates. Under an audit's
        gradient canaries (`dpgym.privacy.canaries`) the included canaries are sampled as rows too."""
        self.owner.calibrate()
        extra = 0 if self._canaries is None else self._canaries.extra_rows
        self.engine.attach()
        self._attached = True
        try:
            for indices in self._index_batches(self.n_rows + extra, self.planned_steps - self.steps_taken):
                if self._canaries is not None:
                    indices = self._canaries.take(indices, self.n_rows)
                self._batch_rows = len(indices)
                yield indices
        finally:
            self.engine.detach()
            self._attached = False

    def _index_batches(self, rows: int, steps: int) -> Iterator[Tensor]:
        sampler = UniformWithReplacementSampler(num_samples=rows, sample_rate=self.sample_rate,
                                                generator=self.sampling, steps=steps)
        for indices in sampler:
            yield torch.as_tensor(indices, dtype=torch.long)

    def step(self, per_example_loss: Tensor, public_rows: int = 0) -> None:
        """Backpropagate the per-example losses of the sampled rows, clip, add noise, step optimisers.

        `public_rows`: the loss may end with this many entries for rows that depend on no private row
        (a GAN's generated rows, from earlier noisy releases), each clipped like a real row. Their
        number must not depend on the batch (e.g. the expected batch size), so that adding or
        removing a training row still changes the clipped sum by at most C."""
        if not self._attached:
            raise RuntimeError("call step() inside `for idx in phase.batches()`")
        if self.steps_taken >= self.planned_steps:
            raise PrivacyViolation(f"phase {self.name!r} was calibrated for {self.planned_steps} steps")
        rows = self._batch_rows + public_rows
        if per_example_loss.dim() != 1 or len(per_example_loss) != rows:
            raise ValueError(f"expected one loss per sampled row ({self._batch_rows}) and public row ({public_rows}), "
                             f"shape ({rows},), got {tuple(per_example_loss.shape)}")
        if per_example_loss.requires_grad and per_example_loss.numel() > 0:  # else the gradient is 0
            per_example_loss.sum().backward()
        summed = self.engine.collect(rows)
        if self._canaries is not None:
            self._canaries.insert(summed)
        std = self.noise_multiplier * self.clip_norm
        noisy = {}
        for p in self.params:
            grad = torch.randn(p.shape, generator=self._noise_generator(p.device), device=p.device, dtype=p.dtype)
            grad.mul_(std)
            if p in summed:
                grad.add_(summed[p])
            noisy[p] = grad
        if self._canaries is not None and std > 0:
            self._canaries.observe(noisy, std)
        for p, grad in noisy.items():
            p.grad = grad.div_(self.expected_batch_size)  # Opacus's normalisation for Poisson batches
        for optimizer in self.optimizers:
            optimizer.step()
        for p in self.params:
            p.grad = None
        self.steps_taken += 1
        self._refuse_non_finite_parameters()

    def _refuse_non_finite_parameters(self) -> None:
        """Stop a diverged model, naming the step and the parameters (docs/methods/dp-nf.md#divergence).

        The check reads only the parameters, which are released noisy values. A check of the
        gradient sum before the noise would not be private: one row with an overflowing gradient
        would stop the fit, so whether it stopped would reveal that row (clipping instead zeroes
        such an example's gradient, `LayerGrad.finite_rows`)."""
        finite = [torch.isfinite(p).all() for p in self.params]
        if not finite or torch.stack(finite).all():  # one device sync per step, not one per parameter
            return
        bad = [p for p, ok in zip(self.params, finite) if not ok]
        names = self._parameter_names()
        raise FloatingPointError(
            f"phase {self.name!r}, step {self.steps_taken} of {self.planned_steps}: the parameters "
            f"{sorted(names.get(p, '?') for p in bad)} are no longer finite; the model has diverged")

    def _parameter_names(self) -> dict[nn.Parameter, str]:
        """"network.parameter" for each parameter of the phase's networks, for error messages."""
        return {p: f"{net}.{name}" for net, network in self.networks.items() for name, p in network.named_parameters()}

    def _noise_generator(self, device: torch.device) -> torch.Generator:
        if device not in self._noise:
            self._noise[device] = torch.Generator(device=device).manual_seed(self._noise_seed)
        return self._noise[device]

    def planned(self) -> Phase:
        return Phase(self.sample_rate, self.noise_weight, self.planned_steps)

    def accounted(self) -> Phase:
        return Phase(self.sample_rate, self.noise_multiplier, self.steps_taken)

    def event(self) -> SubsampledGaussianEvent:
        """The steps taken so far, as the privacy event the ledger records."""
        return SubsampledGaussianEvent(sample_rate=self.sample_rate, noise_multiplier=self.noise_multiplier,
                                       steps=self.steps_taken, clip_norm=self.clip_norm)

    def ledger_details(self) -> dict[str, Any]:
        """What describes the phase beside its event: how it clipped, sampled and ran."""
        names = {id(m): f"{net}.{name}" if name else net
                 for net, network in self.networks.items() for name, m in trainable_layers(network)}
        details: dict[str, Any] = {
            "clipping": self.strategy.describe(), "sampling": "poisson", "n_rows": self.n_rows,
            "planned_steps": self.planned_steps, "engine": self.engine_name,
        }
        if self.strategy.layerwise:
            details["clip_norms"] = {names[id(m)]: c for m, c in self.layers}
        return details


class DPSGD:
    """DP-SGD phases under one budget, one accountant and one seed."""

    def __init__(self, budget: Budget, accountant: str | Accountant = "prv", seed: int = 0,
                 tolerance: float | None = None):
        self.budget = budget
        if accountant == "prv" and budget.is_private:
            accountant = PRVAccountant.for_target(budget.epsilon)
        self.accountant = make_accountant(accountant)
        self.tolerance = tolerance
        self.seed = seed
        self.phases: list[PrivatePhase] = []
        self.releases: list[LedgerEntry] = []
        self._calibrated = False

    def add_release(self, entry: LedgerEntry) -> None:
        """A Gaussian release on the same rows (noised class counts, say), of noise fixed by the
        caller: recorded in the ledger and composed jointly with the phases, which are calibrated to
        what the budget leaves. Joint composition spends the budget; splitting ε between the release
        and the phases, then adding, leaves part of it unspent."""
        if self._calibrated:
            raise RuntimeError("noise is calibrated for the planned phases; add every release before training")
        if not isinstance(entry.event, GaussianEvent):
            raise ValueError(f"DPSGD composes Gaussian releases only, got {entry.type!r}")
        self.releases.append(entry)

    def _released(self) -> list[Phase]:
        """The releases as the accountants take them: a Gaussian of noise multiplier σ/Δ₂ is the
        subsampled Gaussian at sampling rate 1, one step."""
        return [e.event.rdp_phase() for e in self.releases]

    def add_phase(self, name: str, networks: Networks, optimizers, *, n_rows: int, steps: int,
                  sample_rate: float | None = None, batch_size: float | None = None, clip_norm: float = 1.0,
                  clipping: str | ClippingStrategy = "per_layer", engine: str | None = None,
                  noise_weight: float = 1.0, network_shares: Sequence[float] | None = None) -> PrivatePhase:
        """Plan a phase. `noise_weight`s fix the ratio of noise multipliers between phases; engine
        defaults to "fast" ("opacus" for a comparison or for layers only Opacus's functorch handles)."""
        if self._calibrated:
            raise RuntimeError("noise is calibrated for the planned phases; add every phase before training")
        seeds = np.random.SeedSequence([self.seed, len(self.phases)]).generate_state(3).tolist()
        phase = PrivatePhase(self, name, networks, optimizers, n_rows=n_rows, steps=steps, sample_rate=sample_rate,
                             batch_size=batch_size, clip_norm=clip_norm, clipping=clipping, engine=engine or "fast",
                             noise_weight=noise_weight, network_shares=network_shares, seeds=seeds)
        self.phases.append(phase)
        return phase

    def calibrate(self) -> None:
        """Set every phase's noise multiplier so the planned phases, composed, spend at most the budget."""
        if self._calibrated:
            return
        if not self.phases:
            raise RuntimeError("no phases planned")
        if self.budget.is_private:
            sigmas = [p.noise_multiplier for p in calibrate(self.accountant, self.budget.epsilon, self.budget.delta,
                                                             [ph.planned() for ph in self.phases], self.tolerance,
                                                             fixed=self._released())]
        else:
            sigmas = [0.0] * len(self.phases)
        for phase, sigma in zip(self.phases, sigmas, strict=True):
            phase.noise_multiplier = sigma
        self._calibrated = True

    def epsilon(self) -> float:
        """ε spent so far (steps actually taken), all phases and releases composed."""
        self.calibrate()
        return self.accountant.epsilon([*self._released(), *(p.accounted() for p in self.phases)], self.budget.delta)

    def ledger(self) -> Ledger:
        """The releases' entries, one `subsampled_gaussian` entry per phase (its own ε at the budget's
        δ), and the composed claim (`Ledger.claim`, composition = the accountant's name)."""
        self.calibrate()
        delta = self.budget.delta
        ledger = Ledger(Guarantee.FORMAL if self.accountant.certified else Guarantee.NOMINAL, list(self.releases))
        for phase in self.phases:
            ledger.record(phase.event(), epsilon=self.accountant.epsilon([phase.accounted()], delta), delta=delta,
                          accountant=f"{self.accountant.describe()}; torch {version('torch')}",
                          description=f"DP-SGD phase {phase.name!r}", details=phase.ledger_details())
        ledger.claim(self.epsilon(), delta, composition=self.accountant.name)
        ledger.check_within(self.budget)
        return ledger


