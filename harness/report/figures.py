"""Seaborn figures for the HTML report, each returned as a base64 PNG data URI.

PNG rather than SVG: the marginal grids of a wide dataset hold thousands of bars, which as SVG
would make the report tens of megabytes and slow to open. Every function closes its figure.
"""

from __future__ import annotations

import base64
import io
import math
import warnings
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # no display: the report is built headless, in CI and at the end of a run

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import scikit_posthocs  # noqa: E402
import seaborn as sns  # noqa: E402
from PIL import Image  # noqa: E402

from dpgym.schema import Column, ColumnKind, Schema  # noqa: E402

REAL, SYNTHETIC = sns.color_palette("tab10")[0], sns.color_palette("tab10")[1]  # blue, orange
DISPLAY_BINS = 100  # DP-NF's Figs. 3 and 11 (its code: 100 bins over the range both samples share)
DISPLAY_MASS = 0.99  # numeric panels span the central 99% of each sample: a few outliers do not flatten them
MAX_CATEGORIES = 12  # more (e.g. Adult's 42 countries) are shown as the 11 most frequent real ones + "other"
GRID_COLUMNS = 5
DPI = 80

sns.set_theme(style="whitegrid", context="paper")


def to_data_uri(fig: plt.Figure, tight: bool = False) -> str:
    """Encode and close; `tight` (an extra layout pass) only for small figures with outside legends.
    The PNG is reduced to a 256-colour palette: a report of 12 generators on two 41-column tables
    embeds 48 figure grids, which take about a third of the bytes that way, with no visible change."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight" if tight else None)
    plt.close(fig)
    palette = Image.open(buffer).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    buffer = io.BytesIO()
    palette.save(buffer, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def generator_palette(generators: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    """One colour per generator, the same in every figure of a report. Dark2 has 8 well-separated
    colours and tab20 16 more pairs once its blue and orange (reserved for real/synthetic) are left
    out; only beyond 16 generators do the hues of husl, closer together, take over."""
    count = max(len(generators), 1)
    if count <= 8:
        colours = sns.color_palette("Dark2", count)
    elif count <= 16:
        colours = sns.color_palette("tab20")[4:4 + count]
    else:
        colours = sns.color_palette("husl", count)
    return dict(zip(sorted(generators), colours))


def metric_curves(board: pd.DataFrame, metrics: Sequence[str], directions: dict[str, str],
                  palette: dict[str, tuple[float, float, float]]) -> str | None:
    """Mean metric vs ε per generator with the 95% bootstrap band, one panel per metric value."""
    data = board[np.isfinite(board.epsilon)]
    if data.empty or not metrics:
        return None
    ncols = min(len(metrics), 4)
    nrows = math.ceil(len(metrics) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.6 * nrows), squeeze=False)
    single_epsilon = data.epsilon.nunique() == 1
    for ax, m in zip(axes.flat, metrics):
        undrawn = []  # ±∞ means have no place on the axis: named in the panel instead
        for generator, part in data.groupby("generator"):
            part = part.sort_values("epsilon")
            infinite = np.isinf(part[f"{m}_mean"])
            undrawn += [f"{generator} {'∞' if v > 0 else '−∞'} at ε={e:g}"
                        for e, v in zip(part.epsilon[infinite], part[f"{m}_mean"][infinite])]
            part = part[~infinite]
            colour = palette[generator]
            if part.empty:
                continue
            if single_epsilon:
                err = np.vstack([part[f"{m}_mean"] - part[f"{m}_ci_low"], part[f"{m}_ci_high"] - part[f"{m}_mean"]])
                # When every seed agrees, the bootstrap bounds equal the mean up to rounding (±1e-16).
                err = np.clip(np.nan_to_num(err), 0.0, None)
                ax.errorbar([generator], part[f"{m}_mean"], yerr=err, fmt="o", color=colour, capsize=3)
            else:
                sns.lineplot(x=part.epsilon, y=part[f"{m}_mean"], ax=ax, color=colour, marker="o", label=generator,
                             legend=False)
                ax.fill_between(part.epsilon, part[f"{m}_ci_low"], part[f"{m}_ci_high"], color=colour, alpha=0.2,
                                linewidth=0)
        if undrawn:
            ax.text(0.02, 0.02, "not drawn: " + "; ".join(undrawn), transform=ax.transAxes, fontsize=6,
                    va="bottom", wrap=True)
        arrow = {"higher": "↑", "lower": "↓"}.get(directions.get(m), "")
        ax.set_title(f"{m} {arrow}")
        ax.set_ylabel("")
        if single_epsilon:
            ax.tick_params(axis="x", labelrotation=30, labelsize=7)
            ax.set_xlabel(f"ε = {data.epsilon.iloc[0]:g}")
        else:
            ax.set_xscale("log")
            ticks = sorted(data.epsilon.unique())
            ax.set_xticks(ticks, [f"{e:g}" for e in ticks])
            ax.minorticks_off()
            ax.set_xlabel("ε")
    for ax in axes.flat[len(metrics):]:
        ax.set_visible(False)
    fig.tight_layout()
    if not single_epsilon:
        handles = [plt.Line2D([], [], color=palette[g], marker="o", label=g) for g in sorted(data.generator.unique())]
        fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), bbox_to_anchor=(0.5, 1.0),
                   frameon=False)
    return to_data_uri(fig, tight=True)


def display_edges(col: Column, real: pd.Series, synthetic: pd.Series) -> np.ndarray:
    """Bins to draw a numeric column on: one per value for an integer column of at most
    ``DISPLAY_BINS`` values, else ``DISPLAY_BINS`` equal bins (as DP-NF's Figs. 3 and 11) over the
    range holding the central ``DISPLAY_MASS`` of each sample, within the public bounds; the tails
    are counted in the edge bins. Bins over the whole public range would put concentrated data in a
    few bars (Life Science fills about a tenth of its [-1, 1]), and so would a range stretched by a
    few synthetic outliers. The report shows the real rows' histogram anyway, so zooming to their
    range discloses nothing more."""
    if col.kind is ColumnKind.INTEGER and col.max - col.min < DISPLAY_BINS:
        return np.arange(col.min, col.max + 2) - 0.5
    tail = (1 - DISPLAY_MASS) / 2
    ranges = [np.nanquantile(np.clip(v, col.min, col.max), [tail, 1 - tail])
              for v in (pd.to_numeric(s).to_numpy(dtype=float, na_value=np.nan) for s in (real, synthetic))
              if (~np.isnan(v)).any()]
    low, high = (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else (col.min, col.max)
    return np.linspace(low, high, DISPLAY_BINS + 1) if low < high else np.linspace(col.min, col.max, DISPLAY_BINS + 1)


def _shares(values: pd.Series, col: Column, edges: np.ndarray | None) -> np.ndarray:
    """Share of rows per bin (numeric, clipped into the edge bins) or per category; the last entry
    is the missing values' share."""
    missing = float(values.isna().mean()) if len(values) else 0.0
    present = values.dropna()
    if col.is_numeric:
        clipped = np.clip(pd.to_numeric(present).to_numpy(dtype=float), edges[0], edges[-1])
        counts, _ = np.histogram(clipped, bins=edges)
    else:
        counts = present.astype(str).value_counts().reindex(list(col.categories), fill_value=0).to_numpy()
    return np.append(counts / max(len(values), 1), missing)


def marginal_shares(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """The data of the marginal figure, one row per column and bin: the bin (a category, or the
    interval [low, high) of a numeric column, or "missing") and the real and synthetic shares."""
    parts = []
    for col in schema.columns:
        if col.is_numeric:
            edges = display_edges(col, real[col.name], synthetic[col.name])
            labels, low, high = [f"{a:.6g}" for a in edges[:-1]], list(edges[:-1]), list(edges[1:])
        else:
            edges, labels = None, list(col.categories)
            low = high = [np.nan] * len(labels)
        parts.append(pd.DataFrame({"column": col.name, "bin": [*labels, "missing"], "low": [*low, np.nan],
                                   "high": [*high, np.nan], "real": _shares(real[col.name], col, edges),
                                   "synthetic": _shares(synthetic[col.name], col, edges)}))
    return pd.concat(parts, ignore_index=True)


def _draw_numeric(ax: plt.Axes, shares: pd.DataFrame) -> None:
    binned, missing = shares.iloc[:-1], shares.iloc[-1]
    edges = np.append(binned.low.to_numpy(), binned.high.iloc[-1])
    for side, colour in (("real", REAL), ("synthetic", SYNTHETIC)):
        ax.stairs(binned[side].to_numpy(), edges, fill=True, alpha=0.45, color=colour, label=side)
        ax.stairs(binned[side].to_numpy(), edges, color=colour, linewidth=1)
    if missing.real or missing.synthetic:
        ax.text(0.98, 0.95, f"missing {missing.real:.0%} / {missing.synthetic:.0%}", transform=ax.transAxes,
                ha="right", va="top", fontsize=6)


def _draw_categorical(ax: plt.Axes, shares: pd.DataFrame) -> None:
    missing = shares.iloc[-1]
    shown = shares if missing.real or missing.synthetic else shares.iloc[:-1]
    labels, real_share, synth_share = list(shown.bin), shown.real.to_numpy(), shown.synthetic.to_numpy()
    if len(labels) > MAX_CATEGORIES:
        order = np.argsort(-real_share, kind="stable")
        top, rest = order[:MAX_CATEGORIES - 1], order[MAX_CATEGORIES - 1:]
        labels = [labels[i] for i in top] + [f"other ({len(rest)})"]
        real_share = np.append(real_share[top], real_share[rest].sum())
        synth_share = np.append(synth_share[top], synth_share[rest].sum())
    y = np.arange(len(labels))
    ax.barh(y - 0.2, real_share, height=0.4, color=REAL, label="real")
    ax.barh(y + 0.2, synth_share, height=0.4, color=SYNTHETIC, label="synthetic")
    ax.set_yticks(y, [label[:18] for label in labels], fontsize=6)
    ax.invert_yaxis()


def marginals(shares: pd.DataFrame, schema: Schema) -> str:
    """Every column's real (blue) and synthetic (orange) distribution, drawn from `marginal_shares`."""
    columns = schema.columns
    nrows = math.ceil(len(columns) / GRID_COLUMNS)
    height = 2.0 * nrows + 0.4
    fig, axes = plt.subplots(nrows, GRID_COLUMNS, figsize=(2.7 * GRID_COLUMNS, height), squeeze=False)
    fig.subplots_adjust(left=0.1, right=0.99, bottom=0.3 / height, top=1 - 0.55 / height, wspace=0.75, hspace=0.45)
    by_column = dict(tuple(shares.groupby("column", sort=False)))
    for ax, col in zip(axes.flat, columns):
        (_draw_numeric if col.is_numeric else _draw_categorical)(ax, by_column[col.name])
        ax.set_title(col.name, fontsize=8)
        ax.tick_params(labelsize=6)
        ax.xaxis.set_major_locator(plt.MaxNLocator(4))
    for ax in axes.flat[len(columns):]:
        ax.set_visible(False)
    handles = [plt.Rectangle((0, 0), 1, 1, color=REAL), plt.Rectangle((0, 0), 1, 1, color=SYNTHETIC)]
    fig.legend(handles, ["real (train split)", "synthetic"], loc="upper center", ncol=2, frameon=False)
    return to_data_uri(fig)


def kendall_heatmaps(panels: Sequence[tuple[str, pd.DataFrame]]) -> str:
    """Kendall τ matrices side by side on one colour scale (τ and differences both lie in [-1, 1])."""
    n = len(next(iter(panels))[1])
    size = max(2.8, 0.17 * n + 1.4)
    fig, axes = plt.subplots(1, len(panels), figsize=(size * len(panels) + 0.6, size + 0.3), squeeze=False)
    fig.subplots_adjust(left=0.3 / len(panels) + 0.06, right=0.92, bottom=0.22, top=0.9, wspace=0.45)
    cbar_ax = fig.add_axes((0.94, 0.25, 0.012, 0.6))
    with warnings.catch_warnings():
        # seaborn 0.13 calls Colormap.set_bad, which matplotlib 3.11 marks for deprecation; nothing to act on here.
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        for i, (ax, (title, matrix)) in enumerate(zip(axes.flat, panels)):
            sns.heatmap(matrix, ax=ax, vmin=-1, vmax=1, center=0, cmap="vlag", square=True, cbar=i == 0,
                        cbar_ax=cbar_ax if i == 0 else None, xticklabels=True, yticklabels=i == 0)
            ax.set_title(title, fontsize=9)
            ax.tick_params(labelsize=4 if n > 20 else 6, length=0)
    return to_data_uri(fig)


def critical_difference(mean_ranks: pd.Series, pvalues: pd.DataFrame, alpha: float,
                        palette: dict[str, tuple[float, float, float]]) -> str:
    """The CD diagram: mean ranks on an axis, bars joining generators not significantly different."""
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.35 * len(mean_ranks)))
    scikit_posthocs.critical_difference_diagram(
        mean_ranks, pvalues, alpha=alpha, ax=ax, color_palette={g: palette[g] for g in mean_ranks.index},
        label_fmt_left="{label} ({rank:.2f})", label_fmt_right="({rank:.2f}) {label}")
    ax.set_xlabel("mean rank (1 = best)")
    return to_data_uri(fig, tight=True)


def ranks_by_dataset(ranks: pd.DataFrame) -> str:
    """Generators × datasets, each cell the generator's relative rank there (0 = best, 1 = worst),
    annotated, so a reader sees where each method wins and where it loses; blank where it did not run."""
    fig, ax = plt.subplots(figsize=(1.6 + 0.75 * ranks.shape[1], 0.8 + 0.4 * ranks.shape[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # as in kendall_heatmaps
        sns.heatmap(ranks, ax=ax, vmin=0, vmax=1, cmap="viridis_r", annot=True, fmt=".2f", annot_kws={"size": 7},
                    cbar_kws={"label": "relative rank (0 = best)"}, linewidths=0.5)
    ax.set_xlabel("")
    ax.set_ylabel("")
    ax.tick_params(length=0)
    plt.setp(ax.get_xticklabels(), rotation=35, ha="right")
    return to_data_uri(fig, tight=True)


def learner_auc(rows: pd.DataFrame, draws: dict[str, dict[float, list[float]]], nonprivate: float,
                palette: dict[str, tuple[float, float, float]]) -> str | None:
    """Private learners' test AUC versus ε: left, every learner's median over seeds, with the best
    non-private median dotted and the ε at which the audit found the AUC implausible crossed; then
    one panel per learner that releases draws from a distribution (ExpM+NF): box plots of all its
    draws per ε (the paper's Fig. 2 statistic) with its released models' median marked."""
    data = rows[np.isfinite(rows.epsilon)]
    if data.empty:
        return None
    spread = [g for g in sorted(draws) if any(len(d) > 1 for d in draws[g].values())]
    fig, axes = plt.subplots(1, 1 + len(spread), figsize=(4.6 * (1 + len(spread)), 3.2), squeeze=False, sharey=True)
    ticks = sorted(data.epsilon.unique())
    for learner, part in data.groupby("generator"):
        part = part.sort_values("epsilon")
        axes[0, 0].plot(np.log10(part.epsilon), part.auc_median, marker="o", color=palette[learner], label=learner)
        bad = part[part.audit_verdict == "implausible"]
        axes[0, 0].scatter(np.log10(bad.epsilon), bad.auc_median, marker="x", s=90, color="red", zorder=3)
    axes[0, 0].set_title("median AUC over seeds (× = audit: implausible)")
    axes[0, 0].legend(fontsize=7, frameon=False, loc="lower right")
    for ax, learner in zip(axes[0, 1:], spread):
        eps = sorted(draws[learner])
        ax.boxplot([draws[learner][e] for e in eps], positions=np.log10(eps), widths=0.25, showfliers=True,
                   flierprops={"markersize": 2}, medianprops={"color": palette[learner]})
        part = data[data.generator == learner].sort_values("epsilon")
        ax.plot(np.log10(part.epsilon), part.auc_median, "D", color=palette[learner], markersize=4,
                label="median AUC of the released models")
        ax.set_title(f"{learner}: all evaluation draws")
        ax.legend(fontsize=7, frameon=False, loc="lower right")
    for ax in axes.flat:
        if math.isfinite(nonprivate):
            ax.axhline(nonprivate, color="black", linestyle=":", linewidth=1)
        ax.axhline(0.5, color="grey", linewidth=0.6)
        ax.set_xticks(np.log10(ticks), [f"{e:g}" for e in ticks], rotation=60, fontsize=7)
        ax.set_xlim(np.log10(ticks[0]) - 0.4, np.log10(ticks[-1]) + 0.4)
        ax.set_xlabel("ε")
    axes[0, 0].set_ylabel("test AUC (dotted: best non-private)")
    fig.tight_layout()
    return to_data_uri(fig)


def audit_roc(scores: Sequence[float], labels: Sequence[bool], operating_point: tuple[float, float],
              epsilon: float, delta: float, colour: tuple[float, float, float], title: str,
              mu: float | None = None) -> str:
    """An empirical audit's ROC: the chosen attack's scores (oriented: higher means "target in") on the
    certifying fits, the test it certified as a point (false-positive rate, true-positive rate), and the
    most an (ε, δ)-DP mechanism at the claimed ε allows any test: TPR ≤ e^ε·FPR + δ and
    TPR ≤ 1 − e^−ε·(1 − δ − FPR). A curve above that line is evidence against the claim; the certified
    bound weighs it with its confidence intervals. With `mu`, the μ-GDP curve fitted to the ROC (the
    audit's GDP estimate), TPR = Φ(Φ⁻¹(FPR) + μ), dotted: an estimate, not a limit."""
    from scipy.stats import norm
    from sklearn.metrics import roc_curve

    false_positive, true_positive, _ = roc_curve(np.asarray(labels, dtype=bool), np.asarray(scores, dtype=float))
    rate = np.linspace(0, 1, 201)
    limit = np.clip(np.minimum(np.exp(epsilon) * rate + delta, 1 - np.exp(-epsilon) * (1 - delta - rate)), 0, 1)
    fig, ax = plt.subplots(figsize=(3.2, 3.0))
    ax.plot([0, 1], [0, 1], color="grey", linewidth=0.6)
    ax.plot(rate, limit, color="black", linestyle="--", linewidth=1, label=f"(ε = {epsilon:g}, δ)-DP limit")
    ax.step(false_positive, true_positive, where="post", color=colour, label="attack")
    if mu is not None:
        ax.plot(rate, norm.cdf(norm.ppf(rate) + mu), color=colour, linestyle=":", linewidth=1,
                label=f"fitted μ-GDP, μ̂ = {mu:.2f}")
    ax.plot(*operating_point, "o", color=colour, markeredgecolor="black", label="certified test", clip_on=False,
            zorder=3)
    ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="false-positive rate", ylabel="true-positive rate")
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=6, frameon=False, loc="lower right")
    return to_data_uri(fig, tight=True)
