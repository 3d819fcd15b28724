"""The code of `dpgym.plugins.generators.dp_nf`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.generators.dp_nf`, which holds the spec."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from dpgym import Budget, Guarantee, Ledger, LedgerEntry, Schema
from dpgym.privacy import (
    DPSGD, RDP_CONVERSIONS, Accountant, GDPAccountant, Phase, PRVAccountant as _PRV, RDPAccountant, make_accountant,
)
from dpgym.plugins.generators.dp_mog import model as dp_mog
from dpgym.plugins.nn.flows import LOG_2PI, MAF
from dpgym.plugins.nn.runtime import single_thread
from dpgym.plugins.nn.sampling import finite_draws
from dpgym.plugins.nn.space import DensitySpace, project_to_unit_ball

PRIORS = ("normal", "dp_mog")
EVAL_BATCH = 4096


class WithFixedReleases(Accountant):
    """An accountant that composes fixed, already-calibrated releases (the DP-MoG prior's Gaussian
    mechanisms, as q = 1 phases) with whatever phases it is asked about, on its own curve."""

    def __init__(self, base: Accountant, fixed: Sequence[Phase]):
        self.base, self.fixed, self.name, self.certified = base, list(fixed), base.name, base.certified

    def epsilon(self, phases: Sequence[Phase], delta: float) -> float:
        return self.base.epsilon([*self.fixed, *phases], delta)

    def describe(self) -> str:
        return f"{self.base.describe()}, composed with {sum(p.steps for p in self.fixed)} fixed Gaussian releases"


class GaussianMixturePrior(torch.nn.Module):
    """A frozen mixture density over the flow's output: no trainable parameters."""

    def __init__(self, mixture: dp_mog.Mixture):
        super().__init__()
        chol = np.linalg.cholesky(mixture.covariances)
        self.register_buffer("log_weights", torch.tensor(np.log(np.maximum(mixture.weights, 1e-300)), dtype=torch.float32))
        self.register_buffer("means", torch.tensor(mixture.means, dtype=torch.float32))
        self.register_buffer("chol", torch.tensor(chol, dtype=torch.float32))
        self.register_buffer("half_log_det", torch.tensor(np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(1), dtype=torch.float32))

    def log_prob(self, u: torch.Tensor) -> torch.Tensor:
        diff = (u[:, None, :] - self.means[None]).unsqueeze(-1)  # (n, K, D, 1)
        white = torch.linalg.solve_triangular(self.chol[None].expand(len(u), -1, -1, -1), diff, upper=False)
        quad = white.squeeze(-1).square().sum(-1)
        dim = u.shape[1]
        return torch.logsumexp(self.log_weights - self.half_log_det - 0.5 * (quad + dim * LOG_2PI), dim=1)

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        component = torch.multinomial(self.log_weights.exp(), n, replacement=True, generator=generator)
        z = torch.randn(n, self.means.shape[1], generator=generator)
        return self.means[component] + (self.chol[component] @ z.unsqueeze(-1)).squeeze(-1)


class DPNF:
    def __init__(self, blocks: int, hidden: int, actnorm: bool, alpha_bound: float, batch_size: int,
                 noise_multiplier: float, max_steps: int, clip_norm: float, lr: float, accountant: str,
                 scaling: str | float, prior: str, prior_components: int, prior_iterations: int,
                 prior_epsilon_share: float, engine: str, device: str):
        if accountant not in ("prv", "rdp"):
            raise ValueError(f"accountant must be 'prv' or 'rdp' (rigorous); GDP-CLT is recorded beside the claim, got {accountant!r}")
        if prior not in PRIORS:
            raise ValueError(f"prior must be one of {PRIORS}, got {prior!r}")
        if not (blocks >= 1 and hidden >= 1 and batch_size >= 1 and max_steps >= 1):
            raise ValueError("blocks, hidden, batch_size and max_steps must be ≥ 1")
        if not (noise_multiplier > 0 and clip_norm > 0 and lr > 0):
            raise ValueError("noise_multiplier, clip_norm and lr must be positive")
        if prior == "dp_mog" and not 0 < prior_epsilon_share < 1:
            raise ValueError(f"prior_epsilon_share must lie in (0, 1), got {prior_epsilon_share}")
        if device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
        if not alpha_bound >= 0:
            raise ValueError(f"alpha_bound must be ≥ 0 (0: α unbounded), got {alpha_bound!r}")
        # 0 in a suite file (TOML has no None) is the flows' None: no clamp
        self.blocks, self.hidden, self.actnorm, self.alpha_bound = blocks, hidden, actnorm, alpha_bound or None
        self.batch_size, self.noise_multiplier, self.max_steps = batch_size, noise_multiplier, max_steps
        self.clip_norm, self.lr, self.accountant, self.scaling = clip_norm, lr, accountant, scaling
        self.prior, self.prior_components, self.prior_iterations = prior, prior_components, prior_iterations
        self.prior_epsilon_share, self.engine, self.device = prior_epsilon_share, engine, device

    # --- fit -----------------------------------------------------------------------------------
    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        self.device_ = torch.device("cuda" if self.device == "auto" and torch.cuda.is_available() else
                                    ("cpu" if self.device == "auto" else self.device))
        seeds = np.random.SeedSequence(seed).generate_state(3).tolist()
        self.space_ = DensitySpace(schema, self.scaling)
        u = self.space_.encode(train)
        prior_entries, fixed = self._fit_prior(u, budget, np.random.default_rng(seeds[0]))
        accountant = make_accountant(_PRV.for_target(budget.epsilon) if self.accountant == "prv" and budget.is_private
                                     else self.accountant)
        joint = WithFixedReleases(accountant, fixed) if fixed else accountant
        sample_rate = min(1.0, self.batch_size / len(u))  # tables smaller than a batch: every row, every step
        steps = self._steps(accountant, sample_rate, budget, fixed)
        with single_thread(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seeds[1])
            self.flow_ = MAF(u.shape[1], self.blocks, self.hidden, self.actnorm, self.alpha_bound).to(self.device_)
            x = torch.tensor(u, dtype=torch.float32, device=self.device_)
            optimizer = torch.optim.Adam(self.flow_.parameters(), lr=self.lr, betas=(0.9, 0.999))
            dp = DPSGD(budget, accountant=joint, seed=seeds[2])
            phase = dp.add_phase("flow", self.flow_, optimizer, n_rows=len(x), sample_rate=sample_rate, steps=steps,
                                 clip_norm=self.clip_norm, clipping="flat", engine=self.engine)
            # a diverging step raises FloatingPointError in the engine (abort, no silent retry:
            # docs/methods/dp-nf.md#divergence)
            for idx in phase.batches():
                phase.step(-self._log_prob_working(x[idx.to(self.device_)]))
            sgd_ledger = dp.ledger()
        self.steps_, self.sgd_noise_multiplier_ = phase.steps_taken, phase.noise_multiplier
        return self._ledger(budget, sgd_ledger, prior_entries, phase, fixed)

    def _fit_prior(self, u: np.ndarray, budget: Budget, rng: np.random.Generator) -> tuple[list[LedgerEntry], list[Phase]]:
        self.prior_mixture_ = None
        if self.prior == "normal":
            return [], []
        mog = dp_mog.DPMoG(self.prior_components, self.prior_iterations, "rdp", "ball", 1e-3, 1.0)
        releases = dp_mog.RELEASES_PER_ITERATION * self.prior_iterations
        z = (dp_mog.calibrate_noise(self.prior_epsilon_share * budget.epsilon, budget.delta, releases, "rdp")
             if budget.is_private else 0.0)
        # DP-EM needs ‖u‖ ≤ 1: fit on u / R (R the half-diagonal of the public box of u), map back.
        radius = float(np.linalg.norm(np.maximum(np.abs(self.space_.encoded_bounds()), 1e-12).max(axis=0)))
        mixture = dp_mog.fit_dp_em(project_to_unit_ball(u / radius), self.prior_components, self.prior_iterations,
                                   z, rng, dp_mog.NIWPrior(), 1e-3)
        self.prior_mixture_ = dp_mog.Mixture(mixture.weights, mixture.means * radius, mixture.covariances * radius**2)
        if not budget.is_private:
            return [], []
        entries = mog._ledger(budget, z, releases).entries
        entries = [replace(e, description="GMM prior: " + e.description) for e in entries]
        return entries, [Phase(1.0, z, releases)]

    def _steps(self, accountant: Accountant, sample_rate: float, budget: Budget, fixed: Sequence[Phase] = ()) -> int:
        """T_max(ε) at the target σ* within 1 %, capped at max_steps (docs/methods/dp-nf.md#stopping);
        max_steps when non-private. RDP (cheap, never below the PRV ε) gives a start that is within budget."""
        if not budget.is_private:
            return self.max_steps

        def fits(acc: Accountant, t: int) -> bool:
            return acc.epsilon([*fixed, Phase(sample_rate, self.noise_multiplier, t)], budget.delta) <= budget.epsilon

        if fits(accountant, self.max_steps):
            return self.max_steps
        rdp = RDPAccountant()  # T steps have T times one step's RDP curve: one curve, many cheap conversions
        one_step, base = rdp.curve([Phase(sample_rate, self.noise_multiplier, 1)]), rdp.curve(fixed)
        convert = RDP_CONVERSIONS[rdp.conversion]
        lo, hi = 0, self.max_steps  # within budget at lo (or lo = 0), over it at hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if convert(rdp.orders, base + mid * one_step, budget.delta)[0] <= budget.epsilon else (lo, mid)
        hi = self.max_steps
        while hi - lo > max(1, lo // 100):
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(accountant, mid) else (lo, mid)
        return max(lo, 1)  # at 0 even one step overspends at σ*: the engine raises σ for that step

    def _ledger(self, budget: Budget, sgd: Ledger, prior_entries: list[LedgerEntry], phase, fixed: list[Phase]) -> Ledger:
        if not budget.is_private:
            return Ledger.non_private(Guarantee.FORMAL, f"flow trained {phase.steps_taken} clipped steps without noise (ε = ∞)")
        (entry,) = sgd.entries
        accounted = phase.accounted()
        gdp = GDPAccountant(poisson=True).epsilon([*fixed, accounted], budget.delta)
        classic = RDPAccountant(conversion="classic").epsilon([*fixed, accounted], budget.delta)
        details: dict[str, Any] = {
            **entry.details, "target_noise_multiplier": self.noise_multiplier, "max_steps": self.max_steps,
            "epsilon_gdp_clt_poisson": gdp, "epsilon_gdp_clt_note":
                "the paper's accountant (Bu et al. 2020 CLT, Poisson form for our sampling): an approximation, not a bound; not the claim",
            "epsilon_ma_classic": classic,
        }
        ledger = Ledger(Guarantee.FORMAL, [*prior_entries, replace(entry, details=details)])
        ledger.claim(sgd.epsilon, sgd.delta, composition=sgd.composition)  # joint: prior releases are in the curve
        ledger.check_within(budget)
        return ledger

    # --- density and sampling -------------------------------------------------------------------
    def _log_prob_working(self, x: torch.Tensor) -> torch.Tensor:
        if self.prior_mixture_ is None:
            return self.flow_.log_prob(x)
        u, log_det = self.flow_(x)
        return self._prior_module().log_prob(u) + log_det

    def _prior_module(self) -> GaussianMixturePrior:
        if getattr(self, "_prior_cache", None) is None:
            self._prior_cache = GaussianMixturePrior(self.prior_mixture_).to(self.device_)
        return self._prior_cache

    @torch.no_grad()
    def log_prob(self, frame: pd.DataFrame) -> np.ndarray:
        """log-density of the numeric columns of `frame` in the data's own scale (nats per row)."""
        x = torch.tensor(self.space_.encode(frame), dtype=torch.float32, device=self.device_)
        with single_thread():
            out = torch.cat([self._log_prob_working(b) for b in x.split(EVAL_BATCH)])
        return out.double().cpu().numpy() + self.space_.log_jacobian

    @torch.no_grad()
    def sample(self, n: int, seed: int) -> pd.DataFrame:
        generator = torch.Generator().manual_seed(seed)
        prior = None if self.prior_mixture_ is None else self._prior_module().cpu()

        def draw(m: int) -> torch.Tensor:
            z = torch.randn(m, self.space_.dim, generator=generator) if prior is None else prior.sample(m, generator)
            return torch.cat([self.flow_.inverse(b.to(self.device_)).cpu() for b in z.split(EVAL_BATCH)])

        with single_thread():
            u = finite_draws(draw, n, self.space_.dim, "dp_nf")
        self._prior_cache = None
        return self.space_.decode(u.double().numpy(), np.random.default_rng(seed))
