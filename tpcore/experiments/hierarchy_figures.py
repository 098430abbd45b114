"""The figures of ``tpcore reproduce hierarchy`` (:mod:`tpcore.experiments.hierarchy`): each
run's accuracy and KL divergences from BP over training, and the runs' attention maps; those of
the sweeps and probes come from :func:`tpcore.experiments.hierarchy_parts.figures`.

Host-side plotting (NumPy directly).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tpcore.analysis.plots import Level, Line, Panel, panels_figure, pyplot, save_png
from tpcore.experiments import hierarchy_parts


def _run_label(run: dict[str, Any]) -> str:
    return (f"transformer, {run['steps']} steps on {run['P']} trees"
            + (f", dropout {run['dropout']:g}" if run["dropout"] else ""))


def figures(result: dict[str, Any], out: Path) -> list[Path]:
    """Draw the figures of the runs (:func:`run_figures`) and those of the sweeps and probes
    (:func:`tpcore.experiments.hierarchy_parts.figures`) that ``result`` holds into ``out``."""
    return run_figures(result, out) + hierarchy_parts.figures(result, out)


def run_figures(result: dict[str, Any], out: Path) -> list[Path]:
    """Draw ``hierarchy_<budget>_accuracy.png``, ``hierarchy_<budget>_kl.png``,
    ``hierarchy_<budget>_k_test.png`` (:func:`_k_test_panel`, for the runs trained on k = 0:
    the paper's Figs. 4 and 5), ``hierarchy_<budget>_attention.png`` (the root classifiers,
    the paper's Fig. 13) and ``hierarchy_<budget>_mlm_attention.png`` (the MLM models, Fig. 6)
    from ``result``: one panel (a row of panels, one per layer, for the attention) per task and
    k_train, runs of other lengths overlaid in the accuracy figure; in the KL figure the run
    whose first checkpoint comes earliest (the early alignment with BP_l shows), the longer of
    two such; in the k_test figure the longest run; in the attention figures the run on the
    fewest trees among those of the longest training that every k_train of the task has
    (:func:`_comparable`). None without runs, and no k_test or attention figure without the
    runs it draws."""
    if not result["runs"]:
        return []
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in result["runs"]:
        groups.setdefault((r["run"]["task"], r["run"]["k_train"]), []).append(r)
    ordered = sorted(groups.items(), key=lambda x: (x[0][0] != "root", x[0][1]))
    accuracy, kl = [], []
    for (task, kt), runs in ordered:
        what = "root" if task == "root" else "masked leaf"
        title = f"{what}, trained on k = {kt}"
        lines = [Line(_run_label(r["run"]), [h["step"] for h in r["history"]],
                      [h["0"]["acc"] for h in r["history"]], color=f"C{i}")
                 for i, r in enumerate(runs)]
        bp = runs[0]["bp_acc"]["0"]
        levels = [Level(f"BP_{kt} (the training data's model)", bp[0])]
        if kt:
            levels.append(Level("BP_0 (exact, optimal)", bp[1], ":", "grey"))
        accuracy.append(Panel(title, lines, levels))
        early = min(runs, key=lambda r: (r["history"][0]["step"], -r["run"]["steps"]))
        hist = early["history"]
        kl.append(Panel(f"{title} ({early['run']['steps']} steps)", [
            Line(f"KL(BP_{k} || model)" + (" (training data's BP)" if k == kt else ""),
                 [h["step"] for h in hist], [h[str(kt)][f"bp{k}"]["kl"] for h in hist],
                 style="-" if k == kt else "--", color=f"C{k}")
            for k in range(early["run"]["l"] + 1)]))
    name = f"hierarchy_{result['budget']}"
    l = result["config"]["l"]
    unfiltered = [_k_test_panel(max(runs, key=lambda r: (r["run"]["steps"], -r["run"]["P"])))
                  for (_, kt), runs in ordered if kt == 0]
    k_test = [panels_figure(
        unfiltered, out / f"{name}_k_test.png",
        f"Trained on unfiltered data (l = {l}): accuracy on each filtered test set over "
        "training, BP_0's on the same sets dashed", "training step (log scale)",
        "accuracy on k_test data", logx=True, ylim=(0, 1.02), legend="figure")
    ] if unfiltered else []
    attention = []
    for task, what, suffix in (("root", "Root classifiers", ""), ("mlm", "MLM models", "mlm_")):
        runs = _comparable([runs for (t, _), runs in ordered if t == task])
        if runs:
            attention.append(attention_figure(
                runs, out / f"{name}_{suffix}attention.png",
                f"{what} (l = {l}) trained on k_train: attention per layer, "
                "averaged over the training k's test data"))
    return [panels_figure(accuracy, out / f"{name}_accuracy.png",
                          f"Transformers against exact BP (l = {l}): accuracy on unfiltered "
                          "(k = 0) test data", "training step (log scale)",
                          "accuracy on k = 0 test data", logx=True, ylim=(0, 1.02),
                          legend="lower right"),
            panels_figure(kl, out / f"{name}_kl.png",
                          f"Transformers against exact BP (l = {l}): distance of the predicted "
                          "distribution from BP_k on the training k's test data",
                          "training step (log scale)", "KL divergence (nats, log scale)",
                          logx=True, logy=True),
            *k_test, *attention]


def _k_test_panel(run: dict[str, Any]) -> Panel:
    """The accuracy of ``run`` on the test data filtered at each k_test over training, a line
    per k_test, and BP_k_train's accuracy on the same data dashed in its colour: where the
    model should end (the paper's Figs. 4 and 5 for k_train = 0)."""
    hist, kt = run["history"], run["run"]["k_train"]
    task = "root" if run["run"]["task"] == "root" else "masked leaf"
    ks = range(run["run"]["l"] + 1)
    return Panel(f"{task}, trained on k = {kt} ({run['run']['steps']} steps)",
                 [Line(f"k_test = {k}", [h["step"] for h in hist],
                       [h[str(k)]["acc"] for h in hist], color=f"C{k}") for k in ks],
                 [Level(f"BP_{kt} on k_test = {k}", run["bp_acc"][str(k)][0], "--", f"C{k}")
                  for k in ks])


def _comparable(groups: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One run of each group (the runs of one k_train), trained alike: of the longest training
    (steps) that every group has, the run on the fewest trees (without dropout before one with);
    each group's shortest run on the fewest trees when the groups share no number of steps."""
    steps = [{r["run"]["steps"] for r in g} for g in groups]
    longest = max(set.intersection(*steps), default=None) if steps else None
    return [min(g, key=lambda r: (r["run"]["steps"] != longest, r["run"]["steps"], r["run"]["P"],
                                  r["run"]["dropout"]))
            for g in groups]


def attention_figure(runs: list[dict[str, Any]], path: Path, title: str) -> Path:
    """Write the stored attention maps of ``runs`` (``attention.maps``: per layer, ``(N, N)``
    averaged over inputs, query rows and key columns) to the PNG ``path`` as a grid, a row per
    run and a column per layer (the runs share their number of layers), on one colour scale
    from 0 to the largest weight."""
    maps = [[np.asarray(m, dtype=float) for m in r["attention"]["maps"]] for r in runs]
    top = max(float(m.max()) for row in maps for m in row)
    cols = len(maps[0])
    plt = pyplot()
    fig, axes = plt.subplots(len(runs), cols, figsize=(1.5 * cols + 0.9, 1.5 * len(runs) + 0.4),
                             squeeze=False, layout="constrained")
    for r, (run, row) in enumerate(zip(runs, maps)):
        what = "root" if run["run"]["task"] == "root" else "MLM"
        for c, (ax, m) in enumerate(zip(axes[r], row)):
            im = ax.imshow(m, cmap="viridis", vmin=0.0, vmax=top)
            ticks = list(range(0, len(m), max(1, len(m) // 8)))
            left, bottom = c == 0, r == len(runs) - 1
            ax.set_xticks(ticks, [str(t) for t in ticks] if bottom else [], fontsize=6)
            ax.set_yticks(ticks, [str(t) for t in ticks] if left else [], fontsize=6)
            ax.set_title(f"{what}, k_train = {run['run']['k_train']}, layer {c + 1}", fontsize=7)
            if left:
                ax.set_ylabel("query position", fontsize=7)
            if bottom:
                ax.set_xlabel("key position", fontsize=7)
    fig.colorbar(im, ax=axes, label="attention weight", shrink=0.5)
    fig.suptitle(title, fontsize=8)
    return save_png(fig, path)
