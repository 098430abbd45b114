"""Tables (and a figure) from the side-by-side benches' JSON (``--benchmark-json``).

``python bench/report.py RUN.json [RUN.json ...] --out DIR`` writes ``DIR/speed.md``: one row per
side-by-side bench (tpcore's and the anchor's median milliseconds, their ratio of medians and of
minima, threads, load average), and, when the runs hold ``bench_scaling.py`` rows, the scaling
tables in ``DIR/scaling.md`` and, with matplotlib, ``DIR/scaling.png``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ANCHORS = ("torch", "authors")


def _rows(paths: list[Path]) -> list[dict]:
    rows = []
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        rows += [dict(b["extra_info"], name=b["name"], machine=data.get("machine_info", {}))
                 for b in data["benchmarks"]]
    return rows


def _anchor(row: dict) -> str | None:
    return next((a for a in ANCHORS if f"{a}_ms" in row), None)


def side_by_side(rows: list[dict]) -> str:
    """The summary table of every side-by-side row outside the scaling bench."""
    lines = ["| bench | threads | tpcore ms | anchor | anchor ms | ratio (medians) | "
             "ratio (minima) | load |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a = _anchor(r)
        if a is None or "axis" in r:
            continue
        minima = r.get(f"ratio_{a}_min")
        load = f"{r['load_before']:.1f}-{r['load_after']:.1f}" if "load_before" in r else "-"
        lines.append(f"| `{r['name']}` | {r.get('threads', '-')} | {r['tpcore_ms']:.1f} | {a} | "
                     f"{r[f'{a}_ms']:.1f} | {r[f'ratio_{a}']:.3f} | "
                     f"{'-' if minima is None else f'{minima:.3f}'} | {load} |")
    ran = [f"- `{r['name']}`: {r['steps_ran']}" for r in rows if "steps_ran" in r]
    if ran:
        lines += ["", "How tpcore's steps ran (captured as a CUDA graph, or eagerly):", "", *ran]
    return "\n".join(lines) + "\n"


def scaling(rows: list[dict]) -> str:
    """One table per model and axis: the step time at each point and the ratio."""
    out = []
    scaled = [r for r in rows if "axis" in r]
    for model in dict.fromkeys(r["model"] for r in scaled):
        for axis in dict.fromkeys(r["axis"] for r in scaled if r["model"] == model):
            part = sorted((r for r in scaled if r["model"] == model and r["axis"] == axis),
                          key=lambda r: r["value"])
            anchor = next((a for a in map(_anchor, part) if a), None)
            head = f"| {axis} | tpcore ms |" + (f" {anchor} ms | ratio |" if anchor else "")
            out += [f"### {model}: {axis}", "", head,
                    "|---|---|" + ("---|---|" if anchor else "")]
            for r in part:
                line = f"| {r['value']} | {r['tpcore_ms']:.1f} |"
                if anchor and f"{anchor}_ms" in r:
                    line += f" {r[f'{anchor}_ms']:.1f} | {r[f'ratio_{anchor}']:.3f} |"
                out.append(line)
            out.append("")
    return "\n".join(out)


ANCHOR_NAMES = {"torch": "PyTorch", "authors": "authors' code"}
"""How the figure names each anchor."""
MODEL_NAMES = {"transformer": "standard transformer", "program": "Transformer Program"}
"""How the figure names each model of the scaling bench."""


def figure(rows: list[dict], path: Path) -> bool:
    """Milliseconds per training step (forward, backward, Adam) against batch, length and
    layers (log-log), tpcore beside its anchor run alternately in one process; the title names
    the processor and the threads. False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return False
    scaled = [r for r in rows if "axis" in r]
    models = list(dict.fromkeys(r["model"] for r in scaled))
    axes_names = ["batch", "length", "layers"]
    fig, grid = plt.subplots(len(models), 3, figsize=(12, 3.4 * len(models) + 0.6),
                             squeeze=False, layout="constrained")
    for i, model in enumerate(models):
        for j, axis in enumerate(axes_names):
            ax = grid[i][j]
            part = sorted((r for r in scaled if r["model"] == model and r["axis"] == axis),
                          key=lambda r: r["value"])
            xs = [r["value"] for r in part]
            ax.plot(xs, [r["tpcore_ms"] for r in part], "o-", label="tpcore")
            anchor = next((a for a in map(_anchor, part) if a), None)
            if anchor:
                ax.plot(xs, [r.get(f"{anchor}_ms") for r in part], "s--",
                        label=ANCHOR_NAMES.get(anchor, anchor))
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(xs, [str(x) for x in xs])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.set_xlabel(axis)
            ax.set_ylabel("ms per training step")
            ax.set_title(f"{MODEL_NAMES.get(model, model)}: {axis}", fontsize=9)
            ax.legend(fontsize=8)
    threads = sorted({r.get("threads") for r in scaled} - {None})
    cpu = next((r["machine"].get("cpu", {}).get("brand_raw") for r in scaled
                if r.get("machine")), None) or "this machine"
    fig.suptitle(f"Training-step time (forward, backward, Adam) as one size grows, the others "
                 f"at the bench's defaults\ntpcore beside PyTorch and beside the authors' "
                 f"PyTorch model; {cpu}, {', '.join(map(str, threads)) or '?'} thread"
                 f"{'s' * (threads != [1])}, medians of alternating runs", fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rows = _rows(args.runs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "speed.md").write_text(side_by_side(rows), encoding="utf-8")
    if any("axis" in r for r in rows):
        (args.out / "scaling.md").write_text(scaling(rows), encoding="utf-8")
        figure(rows, args.out / "scaling.png")


if __name__ == "__main__":
    main()
