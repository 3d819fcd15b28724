"""The code of `dpgym.plugins.generators.dp_hflow`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.generators.dp_hflow`, which holds the spec."""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from dpgym import Budget, Column, ColumnKind, Guarantee, Ledger, levels, missing_rows, Schema
from dpgym.privacy import DPSGD
from dpgym.plugins.nn.flow_linear import LowRankFlowLinear, LUFlowLinear
from dpgym.plugins.nn.made import ConditionalMADE
from dpgym.plugins.nn.optim import AdaBelief
from dpgym.plugins.nn.runtime import resolve_device
from dpgym.plugins.nn.sampling import finite_draws
from dpgym.plugins.nn.spline import params_per_dim, rq_spline

LOG_2PI = math.log(2 * math.pi)


# ---------------------------------------------------------------------------------------------
# Public-schema preprocessing (docs/methods/dp-hflow.md#preprocessing): nothing is fitted on rows
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Dim:
    """One table column as one flow dimension, counted in `unit`s above `offset`. Discrete dimensions
    (categorical codes; integer columns, and continuous ones with a public step, when dequantized)
    live on [0, size) after adding u ∈ [0, 1); continuous ones on [0, max − min]. A logged dimension
    is first mapped v ↦ log1p(v), so its range is [0, size) in log units. A nullable numeric column
    has a second, discrete dimension of size 2 (`flag`): 1 where its value is missing."""

    column: Column
    discrete: bool
    offset: float  # the value mapped to 0
    size: float  # width of the range mapped onto [low, high]
    logged: bool = False
    unit: float = 1.0  # a continuous column's step when dequantized, else 1
    flag: bool = False  # the column's missing flag, not its value

    @property
    def coded(self) -> bool:
        """Integer codes (categories, or a missing flag), dequantized by the variational dequantizer."""
        return self.flag or not self.column.is_numeric

    @property
    def span(self) -> float:
        """Width of the dimension's range before log1p, in its units: a missing value is drawn
        uniformly on [0, span)."""
        return math.expm1(self.size) if self.logged else self.size


class Layout:
    """Columns → flow dimensions: numeric first, then categorical (paper §"data"), then the missing
    flags of nullable numeric columns (a nullable category has a last code for missing), each mapped
    affinely from its public range onto [−B + 0.5, B − 0.5]. Category order is the schema's.
    With `log_heavy_tails`, columns the schema declares heavy-tailed go through log1p first:
    on a linear scale a money column's rare large values squeeze the common small ones into one
    spline bin."""

    def __init__(self, schema: Schema, tail_bound: float, dequantize_integers: bool, log_heavy_tails: bool):
        self.low, self.high = -tail_bound + 0.5, tail_bound - 0.5
        self.schema_order = list(schema.names)
        numeric = [c for c in schema.columns if c.is_numeric]
        categorical = [c for c in schema.columns if not c.is_numeric]
        self.dims: list[Dim] = []
        for c in numeric:
            discrete = dequantize_integers and (c.kind is ColumnKind.INTEGER or c.step is not None)
            unit = c.step if discrete and c.step is not None else 1.0
            width = (c.max - c.min) / unit + (1 if discrete else 0)
            logged = log_heavy_tails and c.heavy_tailed
            self.dims.append(Dim(c, discrete, float(c.min), math.log1p(width) if logged else width, logged, unit))
        self.dims += [Dim(c, True, 0.0, float(levels(c))) for c in categorical]  # missing: the last code
        # Flags last, so that a table without gaps keeps its layout, and each flag follows its value
        # in the autoregressive order: p(value) p(missing | value), the value uniform where missing.
        self.dims += [Dim(c, True, 0.0, 2.0, flag=True) for c in numeric if c.nullable]
        self.categorical = [i for i, d in enumerate(self.dims) if d.coded]
        self.categories = [int(self.dims[i].size) for i in self.categorical]
        self.discrete = [i for i, d in enumerate(self.dims) if d.discrete]
        self.logged = [i for i, d in enumerate(self.dims) if d.logged]
        self.nullable_numbers = [i for i, d in enumerate(self.dims) if d.column.nullable and not d.coded]
        self.fill_span = torch.tensor([self.dims[i].span for i in self.nullable_numbers], dtype=torch.float64)
        sizes = torch.tensor([d.size for d in self.dims], dtype=torch.float64)
        self.scale = (self.high - self.low) / sizes
        self.offset = torch.tensor([d.offset for d in self.dims], dtype=torch.float64)
        self.unit = np.array([d.unit for d in self.dims])
        # log|dy/dx| of the affine maps, summed: with the log1p terms, turns densities on
        # [low, high]^d into schema units
        self.log_jacobian = float(self.scale.log().sum())

    @property
    def features(self) -> int:
        return len(self.dims)

    def raw(self, frame: pd.DataFrame) -> Tensor:
        """(n, d) values before dequantization, less each dimension's offset and in its units: numbers,
        grid indices for a stepped column, or integer codes for categories and missing flags; NaN
        for a missing number (`fill_missing` draws it). The offset comes off in float64, so a column
        whose bounds sit far from zero (a timestamp) keeps its resolution when training casts to
        float32."""
        out = np.empty((len(frame), self.features))
        for i, d in enumerate(self.dims):
            col = d.column
            absent = missing_rows(frame, col)
            if d.flag:
                out[:, i] = absent
            elif col.is_numeric:
                out[:, i] = (frame[col.name].to_numpy(dtype=np.float64, na_value=np.nan) - d.offset) / d.unit
            else:
                codes = pd.Categorical(frame[col.name], categories=list(col.categories)).codes
                if (codes[~absent] < 0).any():
                    raise ValueError(f"column {col.name!r} has values outside the schema")
                out[:, i] = np.where(absent, len(col.categories), codes)
        return torch.from_numpy(out)

    def fill_missing(self, values: Tensor, noise: torch.Generator) -> tuple[Tensor, Tensor]:
        """Missing numbers drawn uniformly over their column's public range, and log q of those
        draws per row: the flow then learns a density of the value beside its flag, with no point
        mass, and the fill is dequantization noise to the likelihood bound."""
        if not self.nullable_numbers:
            return values, torch.zeros(len(values), dtype=values.dtype, device=values.device)
        span = self.fill_span.to(values)
        fill = span * torch.rand(len(values), len(span), generator=noise, device=values.device, dtype=values.dtype)
        absent = values[:, self.nullable_numbers].isnan()
        values = values.clone()
        values[:, self.nullable_numbers] = torch.where(absent, fill, values[:, self.nullable_numbers])
        return values, -(absent * span.log()).sum(dim=1)

    def to_flow(self, values: Tensor) -> tuple[Tensor, Tensor]:
        """Offset values (`raw`, dequantized) → flow inputs y, and log|dy/dx| per row."""
        log_det = torch.full((len(values),), self.log_jacobian, dtype=values.dtype, device=values.device)
        if self.logged:
            values = values.clone()
            values[:, self.logged] = torch.log1p(values[:, self.logged])
            log_det = log_det - values[:, self.logged].sum(dim=1)  # d log1p(v) / dv = exp(−log1p(v))
        return self.low + values * self.scale.to(values), log_det

    def decode(self, y: Tensor) -> pd.DataFrame:
        """Flow space → schema frame: floor discrete dimensions to their grid, clip to the bounds
        or categories."""
        values = ((y.double() - self.low) / self.scale).numpy()
        values[:, self.logged] = np.expm1(values[:, self.logged])
        values[:, self.discrete] = np.floor(values[:, self.discrete])
        values = values * self.unit + self.offset.numpy()
        absent = {d.column.name: values[:, i] >= 1 for i, d in enumerate(self.dims) if d.flag}
        columns = {}
        for i, d in enumerate(self.dims):
            col, v = d.column, values[:, i]
            if d.flag:
                continue
            if not col.is_numeric:
                codes = np.clip(v, 0, levels(col) - 1).astype(np.int64)
                codes[codes == len(col.categories)] = -1  # missing
                columns[col.name] = pd.Categorical.from_codes(codes, dtype=col.dtype)
                continue
            v = np.clip(v, col.min, col.max)
            if col.kind is ColumnKind.INTEGER:
                v = np.round(v)
            if col.name in absent:
                v[absent[col.name]] = np.nan
            columns[col.name] = pd.Series(v if col.nullable else v.astype(col.dtype), dtype=col.dtype)
        return pd.DataFrame(columns)[self.schema_order]


# ---------------------------------------------------------------------------------------------
# Variational dequantizer (paper §"dequantization", Flow++; docs/methods/dp-hflow.md#dequantization)
# ---------------------------------------------------------------------------------------------

def _log_normal(x: Tensor) -> Tensor:
    return -0.5 * (x.square() + LOG_2PI).sum(dim=1)


class VariationalDequantizer(nn.Module):
    """u ~ q(u | x_c) ∈ (0, 1)^{d_c}: ε ~ N(0, I), logistic-mixture-CDF couplings in logit space
    conditioned on r = NN_φ(onehot(x_c)), then u = σ(v). Each coupling sets v_b ← logit F_LM(v_b)
    with (π, μ, s) = NN_ψ([v_a, r]); two couplings with swapped halves make every dimension learned
    (`faithful`: one coupling, u_a = σ(ε_a), u_b = F_LM(ε_b), as in the paper's equations)."""

    def __init__(self, categories: list[int], components: int, hidden: int, feature_dim: int, faithful: bool):
        super().__init__()
        if len(categories) < 2:
            raise ValueError("variational dequantization needs at least 2 categorical columns")
        self.categories, self.components = categories, components
        self.phi = nn.Sequential(nn.Linear(sum(categories), hidden), nn.ReLU(), nn.Linear(hidden, feature_dim))
        d_c = len(categories)
        split = d_c // 2  # r = ⌊d_c / 2⌋
        first, second = list(range(split)), list(range(split, d_c))
        self.partitions = [(first, second)] if faithful else [(first, second), (second, first)]
        self.psi = nn.ModuleList()
        for cond, trans in self.partitions:
            net = nn.Sequential(nn.Linear(len(cond) + feature_dim, hidden), nn.ReLU(),
                                nn.Linear(hidden, 3 * components * len(trans)))
            nn.init.zeros_(net[-1].weight)
            nn.init.zeros_(net[-1].bias)
            self.psi.append(net)

    def forward(self, codes: Tensor, eps: Tensor) -> tuple[Tensor, Tensor]:
        """codes (n, d_c) integer-valued, eps (n, d_c) → u (n, d_c), log q(u | x) (n,)."""
        onehot = torch.cat([F.one_hot(codes[:, j].long(), k).to(eps) for j, k in enumerate(self.categories)], dim=1)
        features = self.phi(onehot)
        v, log_det = eps, torch.zeros(len(eps), dtype=eps.dtype, device=eps.device)
        for (cond, trans), net in zip(self.partitions, self.psi):
            raw = net(torch.cat([v[:, cond], features], dim=1)).view(len(v), len(trans), 3, self.components)
            log_pi = torch.log_softmax(raw[:, :, 0], dim=-1)
            mu, log_s = raw[:, :, 1], raw[:, :, 2].clamp(min=-7.0)
            t = (v[:, trans, None] - mu) * torch.exp(-log_s)
            log_cdf = torch.logsumexp(log_pi + F.logsigmoid(t), dim=-1)
            log_sf = torch.logsumexp(log_pi + F.logsigmoid(-t), dim=-1)
            log_pdf = torch.logsumexp(log_pi - log_s + F.logsigmoid(t) + F.logsigmoid(-t), dim=-1)
            v = v.clone()
            v[:, trans] = log_cdf - log_sf  # logit F_LM
            log_det = log_det + (log_pdf - log_cdf - log_sf).sum(dim=1)
        log_det = log_det + (F.logsigmoid(v) + F.logsigmoid(-v)).sum(dim=1)
        return torch.sigmoid(v), _log_normal(eps) - log_det


# ---------------------------------------------------------------------------------------------
# The flow (docs/methods/dp-hflow.md#flow)
# ---------------------------------------------------------------------------------------------

class HFlow(nn.Module):
    """K blocks of [autoregressive RQ spline → linear flow] (or linear first), reverse permutations
    between blocks, standard normal base; one MADE shared by all blocks."""

    def __init__(self, features: int, blocks: int, bins: int, tail_bound: float, hidden: list[int],
                 embedding_dim: int, linear: str, rank: int, spline_first: bool):
        super().__init__()
        self.features, self.blocks, self.tail_bound, self.spline_first = features, blocks, tail_bound, spline_first
        self.made = ConditionalMADE(features, hidden, params_per_dim(bins), blocks, embedding_dim)
        if linear == "low_rank":
            self.linears = nn.ModuleList(LowRankFlowLinear(features, rank) for _ in range(blocks))
        elif linear == "lu":
            self.linears = nn.ModuleList(LUFlowLinear(features) for _ in range(blocks))
        else:
            raise ValueError(f"linear must be 'low_rank' or 'lu', got {linear!r}")

    def _spline(self, x: Tensor, block: int) -> tuple[Tensor, Tensor]:
        y, log_det = rq_spline(x, self.made(x, block), self.tail_bound)
        return y, log_det.sum(dim=1)

    def _linear(self, x: Tensor, block: int) -> tuple[Tensor, Tensor]:
        return self.linears[block].split(self.linears[block](x))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """x → (z, Σ log|det ∂z/∂x|) per row."""
        total = torch.zeros(len(x), dtype=x.dtype, device=x.device)
        for j in range(self.blocks):
            steps = (self._spline, self._linear) if self.spline_first else (self._linear, self._spline)
            for step in steps:
                x, log_det = step(x, j)
                total = total + log_det
            if j < self.blocks - 1:
                x = x.flip(1)
        return x, total

    def log_prob(self, x: Tensor) -> Tensor:
        z, log_det = self(x)
        return _log_normal(z) + log_det

    @torch.no_grad()
    def inverse(self, z: Tensor) -> Tensor:
        """z → x: Woodbury (or triangular) solve, then the spline inverted one dimension at a time
        (d MADE passes per block)."""
        x = z
        for j in reversed(range(self.blocks)):
            if j < self.blocks - 1:
                x = x.flip(1)
            steps = (self._inverse_linear, self._inverse_spline)
            for step in (steps if self.spline_first else steps[::-1]):
                x = step(x, j)
        return x

    def _inverse_linear(self, z: Tensor, block: int) -> Tensor:
        return self.linears[block].inverse(z)

    def _inverse_spline(self, y: Tensor, block: int) -> Tensor:
        x = torch.zeros_like(y)
        for i in range(self.features):
            params = self.made.feature_outputs(x, block, i)
            x[:, i] = rq_spline(y[:, i], params, self.tail_bound, inverse=True)[0]
        return x


# ---------------------------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------------------------

class DPHFlow:
    """Hyper-parameters are stored and checked here; `fit` learns, `sample` post-processes."""

    def __init__(self, *, blocks: int, bins: int, tail_bound: float, hidden: list[int], embedding_dim: int,
                 linear: str, rank: int, block_order: str, dequantization: str, faithful_dequantizer: bool,
                 mixture_components: int, dequantizer_hidden: int, dequantizer_features: int,
                 dequantize_integers: bool, log_heavy_tails: bool, clipping: str, clip_norm: float, batch_size: int, epochs: float,
                 max_steps: int,
                 lr: float, betas: list[float], accountant: str, engine: str, device: str, threads: int):
        self.blocks, self.bins, self.tail_bound = blocks, bins, tail_bound
        self.hidden, self.embedding_dim, self.linear, self.rank = list(hidden), embedding_dim, linear, rank
        self.block_order, self.dequantization, self.faithful_dequantizer = block_order, dequantization, faithful_dequantizer
        self.mixture_components, self.dequantizer_hidden = mixture_components, dequantizer_hidden
        self.dequantizer_features, self.dequantize_integers = dequantizer_features, dequantize_integers
        self.log_heavy_tails = log_heavy_tails
        self.clipping, self.clip_norm, self.batch_size, self.epochs = clipping, clip_norm, batch_size, epochs
        self.max_steps = max_steps
        self.lr, self.betas, self.accountant, self.engine, self.device = lr, list(betas), accountant, engine, device
        self.threads = threads
        if blocks < 1 or bins < 2 or tail_bound <= 0.5 or rank < 1 or embedding_dim < 1 or not self.hidden:
            raise ValueError("need blocks ≥ 1, bins ≥ 2, tail_bound > 0.5, rank ≥ 1, embedding_dim ≥ 1, hidden layers")
        if linear not in ("low_rank", "lu"):
            raise ValueError(f"linear must be 'low_rank' or 'lu', got {linear!r}")
        if block_order not in ("spline_first", "linear_first"):
            raise ValueError(f"block_order must be 'spline_first' or 'linear_first', got {block_order!r}")
        if dequantization not in ("auto", "uniform", "variational"):
            raise ValueError(f"dequantization must be 'auto', 'uniform' or 'variational', got {dequantization!r}")
        if clip_norm <= 0 or batch_size < 1 or epochs <= 0 or max_steps < 0 or lr <= 0 or len(self.betas) != 2:
            raise ValueError("need clip_norm > 0, batch_size ≥ 1, epochs > 0, max_steps ≥ 0 (0: no cap), lr > 0 and two betas")
        if device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
        if threads < 0:
            raise ValueError(f"threads must be ≥ 0 (0: torch's default), got {threads}")

    # -- fitting ---------------------------------------------------------------------------------

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        with _torch_threads(self.threads):
            return self._fit(train, schema, budget, seed)

    def _fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        self.device_ = resolve_device(self.device)
        self.layout_ = Layout(schema, self.tail_bound, self.dequantize_integers, self.log_heavy_tails)
        mode = self.dequantization
        if mode == "auto":  # uniform when private (the paper's Fig. 5, small ε), variational otherwise
            mode = "uniform" if budget.is_private else "variational"
        if mode == "variational" and len(self.layout_.categorical) < 2:
            mode = "uniform"  # the coupling needs d_c ≥ 2
        self.dequantization_ = mode
        streams = np.random.SeedSequence(seed).generate_state(3).tolist()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(streams[0])
            self.flow_ = HFlow(self.layout_.features, self.blocks, self.bins, self.tail_bound, self.hidden,
                               self.embedding_dim, self.linear, self.rank, self.block_order == "spline_first")
            self.dequantizer_ = (VariationalDequantizer(self.layout_.categories, self.mixture_components,
                                                        self.dequantizer_hidden, self.dequantizer_features,
                                                        self.faithful_dequantizer) if mode == "variational" else None)
        self.flow_.to(self.device_)
        if self.dequantizer_ is not None:
            self.dequantizer_.to(self.device_)
        data = self.layout_.raw(train).to(self.device_, torch.float32)
        noise = torch.Generator(device=self.device_).manual_seed(streams[1])
        # Same seed → same rows on CPU: every random draw comes from a generator seeded here, and the
        # CPU kernels used are deterministic (tested). `torch.use_deterministic_algorithms` is not
        # set: it is global state, and enabling it imports torch._dynamo (seconds per process).
        if budget.is_private:
            ledger = self._fit_private(data, budget, streams[2], noise)
        else:
            ledger = self._fit_non_private(data, streams[2], noise)
        diverged = [f"{net}.{name}" for net, module in self._networks().items()
                    for name, p in module.named_parameters() if not torch.isfinite(p).all()]
        if diverged:  # fail the fit here, not after minutes of sampling NaN
            raise RuntimeError(f"dp_hflow: training diverged, parameters {diverged} are not finite")
        self.flow_.eval()
        return ledger

    def _networks(self) -> dict[str, nn.Module]:
        nets: dict[str, nn.Module] = {"made": self.flow_.made, "linear": self.flow_.linears}
        if self.dequantizer_ is not None:
            nets["dequantizer"] = self.dequantizer_
        return nets

    def _parameters(self) -> list[nn.Parameter]:
        return [p for net in self._networks().values() for p in net.parameters()]

    def _steps(self, n_rows: int, private: bool) -> int:
        """`epochs` over the rows; private training stops at `max_steps`, as it is noise that drifts."""
        steps = max(1, round(self.epochs * n_rows / self.batch_size))
        return min(steps, self.max_steps) if private and self.max_steps else steps

    def _fit_private(self, data: Tensor, budget: Budget, seed: int, noise: torch.Generator) -> Ledger:
        optimizer = AdaBelief(self._parameters(), lr=self.lr, betas=tuple(self.betas))
        dp = DPSGD(budget, accountant=self.accountant, seed=seed)
        phase = dp.add_phase("dp_hflow", self._networks(), optimizer, n_rows=len(data), steps=self._steps(len(data), private=True),
                             batch_size=min(self.batch_size, len(data)), clip_norm=self.clip_norm,
                             clipping=self.clipping, engine=self.engine)
        for idx in phase.batches():
            phase.step(self._loss(data[idx.to(data.device)], noise))
        return dp.ledger()

    def _fit_non_private(self, data: Tensor, seed: int, noise: torch.Generator) -> Ledger:
        optimizer = AdaBelief(self._parameters(), lr=self.lr, betas=tuple(self.betas))
        order = torch.Generator().manual_seed(seed)
        steps, done = self._steps(len(data), private=False), 0
        while done < steps:
            for idx in torch.randperm(len(data), generator=order).split(self.batch_size):
                optimizer.zero_grad(set_to_none=True)
                self._loss(data[idx.to(data.device)], noise).mean().backward()
                optimizer.step()
                done += 1
                if done == steps:
                    break
        return Ledger.non_private(Guarantee.FORMAL, f"DP-HFlow trained without noise or clipping ({steps} AdaBelief steps)")

    def _dequantize(self, raw: Tensor, noise: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
        """Continuous y on [low, high]^d, log|dy/dx| and log q(u | x) per row (0 for uniform noise on
        [0, 1); −log of the range for each missing number drawn)."""
        values = raw.clone()
        log_q = torch.zeros(len(raw), dtype=raw.dtype, device=raw.device)
        uniform = [i for i in self.layout_.discrete if self.dequantizer_ is None or i not in self.layout_.categorical]
        if uniform:
            values[:, uniform] += torch.rand(len(raw), len(uniform), generator=noise, device=raw.device, dtype=raw.dtype)
        if self.dequantizer_ is not None:
            cats = self.layout_.categorical
            eps = torch.randn(len(raw), len(cats), generator=noise, device=raw.device, dtype=raw.dtype)
            u, log_q = self.dequantizer_(raw[:, cats], eps)
            values[:, cats] = values[:, cats] + u
        values, log_q_fill = self.layout_.fill_missing(values, noise)
        return *self.layout_.to_flow(values), log_q + log_q_fill

    def _loss(self, raw: Tensor, noise: torch.Generator) -> Tensor:
        """Per-row negative dequantized ELBO: −log p_flow(y) + log q(u | x) (Flow++). The
        preprocessing's log-det is left out: it has no parameters."""
        y, _, log_q = self._dequantize(raw, noise)
        return log_q - self.flow_.log_prob(y)

    # -- after fitting ---------------------------------------------------------------------------

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        with _torch_threads(self.threads):
            return self._sample(n, seed)

    def _sample(self, n: int, seed: int) -> pd.DataFrame:
        """Invert the flow on Gaussian draws, redrawing non-finite rows (`finite_draws`; seen on Census,
        where a NaN row failed a cell after a 70-minute fit)."""
        gen = torch.Generator(device=self.device_).manual_seed(seed)

        def draw(m: int) -> Tensor:
            z = torch.randn(m, self.layout_.features, generator=gen, device=self.device_)
            return torch.cat([self.flow_.inverse(part).cpu() for part in z.split(8192)])

        return self.layout_.decode(finite_draws(draw, n, self.layout_.features, "dp_hflow"))

    @property
    def density_columns(self) -> list[str]:
        """The columns `log_prob` is a density over (a nullable one where its value is present); in the
        dequantized ones it is a probability mass."""
        return [d.column.name for d in self.layout_.dims if not d.discrete]

    @torch.no_grad()
    def log_prob(self, frame: pd.DataFrame, samples: int = 4, seed: int = 0) -> np.ndarray:
        """Held-out log-likelihood per row in schema units: log density for continuous columns, log
        probability mass for discrete ones and for missing values, estimated by the importance-weighted
        dequantization bound log mean_k p(x + u_k) / q(u_k | x) over `samples` draws (a lower bound in
        expectation)."""
        raw = self.layout_.raw(frame).to(self.device_, torch.float32)
        gen = torch.Generator(device=self.device_).manual_seed(seed)
        draws = []
        for _ in range(samples):
            y, log_det, log_q = self._dequantize(raw, gen)
            draws.append(self.flow_.log_prob(y).double() + log_det.double() - log_q.double())
        bound = torch.logsumexp(torch.stack(draws), dim=0) - math.log(samples)
        return bound.cpu().numpy()


@contextmanager
def _torch_threads(threads: int):
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
