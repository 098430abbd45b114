"""``tpcore reproduce hierarchy``: the transformer experiments of "How transformers learn
structured data: insights from hierarchical filtering", compared with exact BP.

Parts: ``root`` (root classification for every k_train in 0..l: Figs. 1c, 3, 4), ``root-long``
(one k_train for 4x the steps, optionally on more training trees), ``mlm`` (k_train = 0 MLM:
Figs. 1d, 5, 6), ``mlm-k`` (MLM for every k_train, each probed at its last layer: Figs. 6 and
14 right), ``probe`` (ancestor probes of the MLM encoder's frozen layers: Figs. 7, 14
left), ``finetune`` (root classification from the MLM encoder, frozen / unfrozen, vs
scratch: Fig. 1f), and the sweeps and probes of :mod:`tpcore.experiments.hierarchy_parts`:
``root-sizes`` (every k_train at several training-set sizes P: Fig. 3 as a trend over P),
``layers`` (k_train = 0 with 1..4 attention blocks: Fig. 8), ``grammars`` (every k_train on the
grammars of seeds 1, 15, 31: Fig. 9) and ``probe-k`` (last-layer probes of the root models:
Fig. 14 right). The runs are :func:`tpcore.experiments.against_bp.train_against_bp`, the
probes and fine-tuning :mod:`tpcore.experiments.encoder_probes`.

Runs can be trained in chunks: ``k_train`` picks the root and ``mlm-k`` runs (and the k_train
of the sweeps and of ``probe-k``), and ``hours`` stops a call at the first training step after that
much wall-clock time, the run in training keeping its paused state to be resumed by the same
call repeated (:func:`run`).

Figures (:mod:`tpcore.experiments.hierarchy_figures`, drawn when matplotlib is installed):
``hierarchy_<budget>_accuracy.png``, each run's accuracy on unfiltered (k = 0) test data over
training beside BP_k_train's and the optimal BP_0's (the paper's Fig. 3),
``hierarchy_<budget>_kl.png``, KL(BP_k || model) on its own test data for every k over training
(Fig. 1c), ``hierarchy_<budget>_k_test.png``, accuracy on each filtered test set over training
of the runs trained on unfiltered data (Figs. 4 and 5),
``hierarchy_<budget>_attention.png`` and ``hierarchy_<budget>_mlm_attention.png``,
every layer's average attention map of the root classifiers (Fig. 13) and of the MLM models
(Fig. 6) for each k_train, and those of the sweeps and probes
(:func:`tpcore.experiments.hierarchy_parts.figures`).

:func:`run` keeps the bookkeeping every part shares (chunks, pauses, what is kept); the sweeps'
plans, rows, tables and figures live in :mod:`tpcore.experiments.hierarchy_parts`.

Host-side orchestration (NumPy directly for bookkeeping).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tpcore.analysis.plots import draw_or_note
from tpcore.errors import TpcoreError
from tpcore.experiments import hierarchy_parts
from tpcore.experiments.against_bp import TreeRun, closest_bp, train_against_bp
from tpcore.experiments.budget import Budget, preset
from tpcore.experiments.encoder_probes import finetune_root, probe_ancestors
from tpcore.experiments.hierarchy_figures import figures
from tpcore.experiments.hierarchy_parts import (
    GRAMMAR_SEEDS,
    LAYERS,
    PROBES_K,
    SWEEPS,
    add_row,
    default_sizes,
    dropout_tag,
    finished_row,
    summary,
    sweep_plan,
)
from tpcore.experiments.options import Option, Reproduction
from tpcore.experiments.tree_grammar import PAPER, paper_grammar
from tpcore.io import read_text, write_json, write_text
from tpcore.models import load
from tpcore.rundir import check_config, check_out_dir

BUDGETS = {
    "tiny": Budget("tiny", dict(l=2, P=2**10, d_model=16, d_mlp=32, batch=32, lr=3e-3, steps=60,
                                checkpoints=3, n_eval=300)),
    "small": Budget("small", dict(l=3, P=2**16, d_model=64, d_mlp=256, batch=64, lr=1e-3,
                                  steps=8000, checkpoints=10, n_eval=4000, schedule="cosine")),
    "paper": Budget("paper", dict(l=4, P=2**17, d_model=128, d_mlp=2048, batch=32, lr=1e-4,
                                  steps=41_000, checkpoints=12, n_eval=10_000)),
}
"""Scales, as :class:`~tpcore.experiments.against_bp.TreeRun` fields: ``paper`` is the paper's
classification setting (10 epochs of 2**17 at batch 32); ``small`` fits a shared 2-core CPU in
minutes per run."""
PARTS = ("root", "root-long", "mlm", "mlm-k", "probe", "finetune", *SWEEPS, "probe-k")
FINETUNE_SIZES = (2**8, 2**10, 2**12)
"""Training-set sizes of the fine-tuning comparison."""
PROBE_SAMPLES, PROBE_EPOCHS = 2**13, 10
"""The ancestor probes' default training: 10 epochs of 2**13 sequences (the paper's: 100 epochs
of 2**14, ``--probe-samples 16384 --probe-epochs 100``)."""


def budget(name: str) -> Budget:
    """The preset ``name`` of :data:`BUDGETS`."""
    return preset(name, BUDGETS)


CLI = Reproduction(
    "transformers (root classification for every k_train, MLM) compared with exact BP during "
    "training", "results/hierarchy", "small",
    "scale: small: l=3, d=64, FFN 256; paper: l=4, d=128, FFN 2048; tiny: a pipeline check",
    (Option("--parts", "comma-separated: root, root-long (k_train=--long-k, 4x steps), mlm, "
            "mlm-k (MLM for every k_train, with last-layer probes), probe, finetune, root-sizes "
            "(every k_train at each of --sizes), layers (k_train=0 with each of --n-layers "
            "blocks at each of --sizes), grammars (root-sizes on each of --grammar-seeds), "
            "probe-k (last-layer probes of the root models) (default root,mlm; probe and "
            "finetune use the encoder saved by mlm, probe-k the models saved by root)", "names",
            default=("root", "mlm")),
     Option("--mlm-steps", "MLM steps (default 2x the root steps)", "count"),
     Option("--long-k", "k_train of the root-long run (0)", "index", default=0),
     Option("--long-samples", "training trees of the root-long run (default: the budget's P)",
            "count"),
     Option("--k-train", "the k_train of the runs of --parts root, mlm-k, root-sizes and "
            "grammars and the models of probe-k (default: all, 0..l)", "index", nargs="+",
            metavar="K"),
     Option("--sizes", "training-set sizes of root-sizes, layers and grammars (default: the "
            "budget's P/16, P/4 and P)", "count", nargs="+", metavar="P"),
     Option("--n-layers", "attention blocks of the layers runs (default 1 2 3 4)", "count",
            nargs="+", metavar="N"),
     Option("--grammar-seeds", "grammars of the grammars runs, drawn as the paper's code does "
            "(default 1 15 31)", "index", nargs="+", metavar="S"),
     Option("--probe-samples", f"training sequences of each ancestor probe (default "
            f"{PROBE_SAMPLES}; the paper's 16384)", "count", metavar="N"),
     Option("--probe-epochs", f"epochs of each ancestor probe (default {PROBE_EPOCHS}; the "
            "paper's 100)", "count", metavar="E"),
     Option("--dropout", "dropout of every run this call trains, on each sub-layer's output "
            "(default 0; the paper's code: 0.1); a run with dropout is saved and recorded "
            "beside the one without", "probability", default=0.0, metavar="P"),
     Option("--hours", "stop at the first training step after H hours in this call, "
            "keeping the run's state; the same command again resumes it", "scale",
            metavar="H")))
"""``tpcore reproduce hierarchy``'s face (:mod:`tpcore.experiments.options`)."""


def run(budget: Budget, out: Path, seed: int, parts: tuple[str, ...] = ("root", "mlm"),
        mlm_steps: int | None = None, long_k: int = 0, long_samples: int | None = None,
        k_train: tuple[int, ...] | None = None, hours: float | None = None,
        sizes: tuple[int, ...] | None = None, n_layers: tuple[int, ...] | None = None,
        grammar_seeds: tuple[int, ...] | None = None, probe_samples: int | None = None,
        probe_epochs: int | None = None, dropout: float = 0.0,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """The ``parts`` (see the module docstring) at the scale of ``budget``: ``mlm_steps``
    replaces the MLM run's steps (2x the root runs'), ``long_k`` is the k_train of the
    ``root-long`` run and ``long_samples`` its training trees (the budget's P when None),
    ``k_train`` the k_train of ``root``, ``mlm-k`` (whose runs train the MLM steps),
    ``root-sizes``, ``grammars`` and ``probe-k`` (all of 0..l when None), ``sizes`` the
    training-set sizes of the sweeps (each at least the budget's batch;
    :func:`~tpcore.experiments.hierarchy_parts.default_sizes` when None), ``n_layers`` the
    blocks of the ``layers`` runs and ``grammar_seeds`` the grammars of the ``grammars`` runs
    (:data:`~tpcore.experiments.hierarchy_parts.LAYERS`,
    :data:`~tpcore.experiments.hierarchy_parts.GRAMMAR_SEEDS` when None), ``probe_samples``
    and ``probe_epochs`` the training of every ancestor probe (:data:`PROBE_SAMPLES`,
    :data:`PROBE_EPOCHS` when None; the samples at most the budget's P), recorded with the
    probes as ``probe``. Each model is saved
    under ``runs/hierarchy``, the MLM encoder for ``probe`` and ``finetune``, the root models
    for ``probe-k`` (``mlm-k`` probes the models it trains; its k_train = 0 run is ``mlm``'s).
    Results merge into ``hierarchy_<budget>.json.gz`` (gzip-compressed JSON, written after every
    finished run, so finished results survive) and ``hierarchy_<budget>.md``: a run replaces the
    one of the same settings (and grammar), probes and fine-tuning record the model they read.

    ``hours``: stop at the first training step after ``hours`` of wall-clock time in this call:
    the run in training keeps its paused state beside its model
    (:func:`~tpcore.experiments.against_bp.train_against_bp`), no further part starts, and the
    returned result says so under ``"paused"`` (the results file only ever gains finished runs).
    With ``hours``, what the results file already holds for the requested settings (a run whose
    model is saved, a sweep's run, the probes or fine-tuning of this model) is kept, not redone,
    so the same call repeated goes on where the last one stopped; a sweep's run that another
    part already finished with the same settings (the ``root`` run at the budget's P, say) is
    taken from there. A paused run is resumed by any later call that trains it.

    Nothing is reused unless its recorded configuration is the requested one: a
    ``hierarchy_<budget>.json.gz`` made with other budget settings, a saved MLM encoder or root
    model of other settings (another ``mlm_steps``, say), or a paused run of other settings, is
    refused before it is trained.
    """
    began = time.monotonic()
    bad = sorted(set(parts) - set(PARTS))
    if bad:
        raise TpcoreError(f"parts {','.join(parts)!r}: unknown {bad}; expected a "
                          f"comma-separated subset of {','.join(PARTS)}")
    cfg = dict(budget.sizes)
    l = cfg["l"]
    outside = [k for k in k_train or () if not 0 <= k <= l]
    if outside:
        raise TpcoreError(f"--k-train {outside[0]}: expected k_train values in 0..{l} (the l of "
                          f"budget {budget.name})")
    if hours is not None and not hours >= 0:
        raise TpcoreError(f"--hours {hours}: expected a number of hours >= 0")
    sweep_sizes = sorted(set(sizes or default_sizes(cfg["P"])))
    few = [P for P in sweep_sizes if P < cfg["batch"]]
    if few:
        raise TpcoreError(f"--sizes {few[0]}: expected training-set sizes >= {cfg['batch']} (the "
                          f"batch of budget {budget.name})")
    ks = sorted(set(range(l + 1) if k_train is None else k_train))
    g = paper_grammar()
    other = sorted(set(grammar_seeds or GRAMMAR_SEEDS)) if "grammars" in parts else []
    grammars = {PAPER["grammar_seed"]: g} | {s: paper_grammar(s) for s in other}

    tag = dropout_tag(dropout)  # in the names of saved models, so runs with dropout get their own

    def mlm_k_run(k: int) -> TreeRun:
        return TreeRun(task="mlm", k_train=k, seed=seed, dropout=dropout,
                       **dict(cfg, steps=mlm_steps or 2 * cfg["steps"]))

    mlm_run = mlm_k_run(0)
    encoder = Path("runs/hierarchy") / f"{budget.name}_mlm{tag}_seed{seed}"

    def mlm_model(k: int) -> Path:
        return encoder if k == 0 else encoder.parent / f"{budget.name}_mlm_k{k}{tag}_seed{seed}"

    def root_run(k: int) -> TreeRun:
        return TreeRun(task="root", k_train=k, seed=seed, dropout=dropout, **cfg)

    def root_model(k: int) -> Path:
        return encoder.parent / f"{budget.name}_root_k{k}{tag}_seed{seed}"

    if "mlm" not in parts and ("probe" in parts or "finetune" in parts):
        _need_model(encoder, mlm_run, "MLM encoder", "--parts mlm")
    if "root" not in parts and "probe-k" in parts:
        for k in ks:
            _need_model(root_model(k), root_run(k), "root model", f"--parts root --k-train {k}")
    out = check_out_dir(out)
    path = out / f"hierarchy_{budget.name}.json.gz"
    result = json.loads(read_text(path, "results")) if path.is_file() else \
        dict(budget=budget.name, config=cfg, runs=[], commands=[])
    check_config(result["config"], cfg, str(path), "give other settings their own --out")
    command = (f"tpcore reproduce hierarchy --budget {budget.name} --parts {','.join(parts)} "
               f"--seed {seed}"
               + (f" --mlm-steps {mlm_steps}" if mlm_steps else "")
               + (f" --long-k {long_k}" if long_k else "")
               + (f" --long-samples {long_samples}" if long_samples else "")
               + (f" --dropout {dropout:g}" if dropout else "")
               + "".join(f" --{flag} {' '.join(map(str, values))}" for flag, values in (
                   ("k-train", k_train), ("sizes", sizes), ("n-layers", n_layers),
                   ("grammar-seeds", grammar_seeds)) if values)
               + "".join(f" --{flag} {value}" for flag, value in (
                   ("probe-samples", probe_samples), ("probe-epochs", probe_epochs)) if value)
               + (f" --hours {hours:g}" if hours is not None else ""))
    if command not in result["commands"]:
        result["commands"].append(command)
    if {"root", "root-long", "mlm", "mlm-k", *SWEEPS} & set(parts):
        check_out_dir(encoder.parent)

    stored_here: set[str] = set()  # the keys this call has stored

    def store(key: str | None = None, value: Any = None, run: dict | None = None) -> None:
        if path.is_file():  # what other calls on this --out stored since this one read it
            _take_others(result, json.loads(read_text(path, "results")), stored_here)
        if run is not None:
            result["runs"] = [r for r in result["runs"] if r["run"] != run["run"]] + [run]
        if key is not None:
            result[key] = value
            stored_here.add(key)
        write_json(path, result)
        write_text(out / f"hierarchy_{budget.name}.md", markdown(result))

    paused: list[str] = []
    trained = False

    def time_left() -> float | None:
        """Hours left of ``hours``; None: no limit."""
        return None if hours is None else max(0.0, hours - (time.monotonic() - began) / 3600)

    def go_on(what: str) -> bool:
        """Whether to start ``what``: nothing paused, and time left or nothing trained yet."""
        if not paused and trained and time_left() == 0:
            paused.append(f"paused after {hours:g} h, before starting {what}")
        return not paused

    def train(tree_run: TreeRun, save_to: Path, key: str = "runs",
              grammar_seed: int = PAPER["grammar_seed"], what: str | None = None) -> None:
        """Train ``tree_run`` on the grammar of ``grammar_seed`` into ``save_to`` unless paused
        before it or (with ``hours``) already finished, and record it under ``key``: ``runs``
        the whole record, a sweep's key its row."""
        nonlocal trained
        settings = tree_run.__dict__
        what = what or f"the {tree_run.task} run k_train={tree_run.k_train}"
        if hours is not None and key == "runs":
            if _saved_run(save_to) == settings and any(r["run"] == settings
                                                       for r in result["runs"]):
                return
        elif hours is not None:
            row = finished_row(result, settings, grammar_seed)
            if row is not None:
                if row not in result.get(key, []):
                    add_row(result, key, row)
                    store()
                return
        if not go_on(what):
            return
        log(f"training {what}")
        rec = train_against_bp(tree_run, grammars[grammar_seed], log=log, save_to=save_to,
                               hours=time_left())
        trained = True
        if "paused" in rec:
            p = rec["paused"]
            paused.append(f"paused {what} at step {p['step']} of {p['steps']} (its state is in "
                          f"{p['state']})")
        elif key == "runs":
            store(run=rec)
        else:
            add_row(result, key, summary(rec, grammar_seed))
            store()

    if "root" in parts:
        for k in ks:
            train(root_run(k), root_model(k))
    if "root-long" in parts:
        P = long_samples or cfg["P"]
        train(TreeRun(task="root", k_train=long_k, seed=seed, dropout=dropout,
                      **dict(cfg, steps=4 * cfg["steps"], P=P)),
              encoder.parent / f"{budget.name}_root-long_k{long_k}_P{P}{tag}_seed{seed}")
    if "mlm" in parts:
        train(mlm_run, encoder)
    for k in ks if "mlm-k" in parts else ():
        if k or "mlm" not in parts:  # mlm trained k_train = 0 just now
            train(mlm_k_run(k), mlm_model(k))

    probe = dict(n_train=min(probe_samples or PROBE_SAMPLES, cfg["P"]),
                 epochs=probe_epochs or PROBE_EPOCHS)
    probe_sizes = dict(probe, n_test=min(2000, cfg["n_eval"]), seed=seed)

    def kept(key: str, rows: int = 0, **same: Any) -> bool:
        """With ``hours``: whether the results hold ``key`` of this encoder (>= ``rows`` rows)
        and the settings ``same``."""
        rec = result.get(key, {})
        return (hours is not None and rec.get("encoder") == mlm_run.__dict__
                and len(rec.get("rows", ())) >= rows
                and all(rec.get(k) == v for k, v in same.items()))

    if "probe" in parts and not kept("probes", probe=probe) and go_on("the probes"):
        model = load(encoder)
        store("probes", dict(
            encoder=mlm_run.__dict__, probe=probe,
            all_positions=probe_ancestors(model, mlm_run, g, **probe_sizes),
            ends_only=probe_ancestors(model, mlm_run, g, positions="ends", **probe_sizes)))
        log(f"probes: {result['probes']}")
    if ("finetune" in parts and not kept("finetune", 3 * len(FINETUNE_SIZES))
            and go_on("the fine-tuning")):
        rows = []
        for P in FINETUNE_SIZES:
            for mode in ("scratch", "frozen", "unfrozen"):
                acc = finetune_root(mlm_run, g, None if mode == "scratch" else encoder, mode, P,
                                    steps=cfg["steps"] // 8, seed=seed)
                rows.append(dict(P=P, mode=mode, acc=acc))
                log(f"finetune P={P} {mode}: {acc:.4f}")
                store("finetune", dict(steps=cfg["steps"] // 8, encoder=mlm_run.__dict__,
                                       rows=rows))
    probed = ([("root", root_run(k), root_model(k), "root") for k in ks if "probe-k" in parts]
              + [("MLM", mlm_k_run(k), mlm_model(k), "mlm-k") for k in ks if "mlm-k" in parts])
    for what, model_run, model_path, part in probed:
        if hours is not None and any(r["model"] == model_run.__dict__ and r["probe"] == probe
                                     for r in result.get(PROBES_K, ())):
            continue
        name = f"the {what} model k_train={model_run.k_train}"
        if not go_on(f"the probes of {name}"):
            break
        _need_model(model_path, model_run, f"{what} model",
                    f"--parts {part} --k-train {model_run.k_train}")
        acc = probe_ancestors(load(model_path), model_run, g, layers=[l], **probe_sizes)[0]
        add_row(result, PROBES_K, dict(model=model_run.__dict__, probe=probe, acc=acc))
        store()
        log(f"probes of {name}, last layer: {acc}")
    for part in (p for p in SWEEPS if p in parts):
        for plan in sweep_plan(part, budget.name, cfg, seed, sweep_sizes, ks,
                               sorted(set(n_layers or LAYERS)), other, dropout):
            train(plan.run, encoder.parent / plan.name, SWEEPS[part], plan.grammar_seed,
                  f"the {part} run {plan.name}")
    draw_or_note(lambda: figures(result, out))
    if paused:
        return {**result, "paused": f"{paused[0]}; the same command again resumes it"}
    return result


def _saved_run(path: Path) -> dict[str, Any] | None:
    """The settings of the model saved at ``path`` (its ``.npz`` and the ``.json`` beside it);
    None when there is none."""
    meta = path.with_suffix(".json")
    if not (meta.is_file() and path.with_suffix(".npz").is_file()):
        return None
    return json.loads(read_text(meta, "model description")).get("run")


def _need_model(path: Path, run: TreeRun, what: str, how: str) -> None:
    """Refuse, in one line, a saved model at ``path`` (``what``) that is missing or was saved
    with settings other than ``run``'s; ``how``: the options that train it."""
    meta = path.with_suffix(".json")
    if not meta.is_file():
        raise TpcoreError(f"no {what} at {path}.npz; run {how} first")
    check_config(json.loads(read_text(meta, "model description")).get("run"), run.__dict__,
                 f"the {what} {path}.npz", f"run {how} with these settings first")


def _take_others(result: dict[str, Any], stored: dict[str, Any], own: set[str]) -> None:
    """Merge into ``result`` what ``stored`` (the results file as another call wrote it, two
    calls training different runs side by side) holds: runs and sweep rows of other settings
    and commands are added; every other key is taken from ``stored`` unless it is one of
    ``own``, the keys this call has stored itself (so a call's stale copy of another part's
    results never overwrites what that part stored since)."""
    runs = [r["run"] for r in result["runs"]]
    result["runs"] += [r for r in stored["runs"] if r["run"] not in runs]
    result["commands"] += [c for c in stored["commands"] if c not in result["commands"]]
    for key, value in stored.items():
        if key in (*SWEEPS.values(), PROBES_K) and key in result:
            same = ("model",) if key == PROBES_K else ("run", "grammar_seed")
            held = [tuple(r[k] for k in same) for r in result[key]]
            result[key] += [r for r in value if tuple(r[k] for k in same) not in held]
        elif key not in ("runs", "commands", *own):
            result[key] = value


def markdown(out: dict[str, Any]) -> str:
    """Tables: final accuracies against the BP table, checkpoint curves, attention scores."""
    parts = [f"Transformers vs exact BP, budget `{out['budget']}`: {out['config']}.\n"
             "Commands: " + "; ".join(f"`{c}`" for c in out["commands"]) + "\n"]
    for r in out["runs"]:
        run, hist = r["run"], r["history"]
        l, kt, task = run["l"], run["k_train"], run["task"]
        last = hist[-1]
        bp_acc = r["bp_acc"]
        parts.append(f"\n### {task}, k_train = {kt} ({r['n_parameters']} parameters, "
                     f"{run['steps']} steps, {run['P']} training trees, "
                     + (f"dropout {run['dropout']:g}, " if run["dropout"] else "") +
                     f"{r['train_seconds']:.0f} s training, "
                     f"{1000 * r['seconds_per_step']:.1f} ms/step)\n\n")
        parts.append("| k_test | model acc | BP_k_train acc | BP_k_test acc (optimal) | "
                     "KL(BP_k_train‖model) |\n|---|---|---|---|---|\n")
        for k in range(l + 1):
            m = last[str(k)]
            bp = bp_acc[str(k)]
            parts.append(f"| {k} | {m['acc']:.4f} | {bp[0]:.4f} | {bp[1]:.4f} | "
                         f"{m[f'bp{kt}']['kl']:.4f} |\n")
        parts.append("\nCheckpoints (in-sample k_test = k_train; `uniform` = random inputs): "
                     "KL(BP_k ‖ model) for k = 0..l, closest BP_k, agreement and Spearman with "
                     "BP_k_train.\n\n| step | epoch | acc | " +
                     " | ".join(f"KL BP_{k}" for k in range(l + 1)) +
                     " | closest | agree | Spearman | uniform: KL BP_k_train | uniform: agree |"
                     "\n|" + "---|" * (l + 9) + "\n")
        for h in hist:
            m, u = h[str(kt)], h["uniform"]
            parts.append(f"| {h['step']} | {h['epoch']:.2f} | {m['acc']:.4f} | " +
                         " | ".join(f"{m[f'bp{k}']['kl']:.3f}" for k in range(l + 1)) +
                         f" | BP_{closest_bp(m)} | {m[f'bp{kt}']['agree']:.3f} | "
                         f"{m[f'bp{kt}']['spearman']:.3f} | {u[f'bp{kt}']['kl']:.3f} | "
                         f"{u[f'bp{kt}']['agree']:.3f} |\n")
        parts.append("\nAccuracy on every k_test over training:\n\n| step | " +
                     " | ".join(f"k_test={k}" for k in range(l + 1)) + " |\n|" +
                     "---|" * (l + 2) + "\n")
        for h in hist:
            parts.append(f"| {h['step']} | " + " | ".join(f"{h[str(k)]['acc']:.4f}"
                                                          for k in range(l + 1)) + " |\n")
        bm = r["attention"]["block_mass"]
        parts.append("\nAttention block mass per layer (mass inside the aligned block of 2^h "
                     "leaves; uniform = 2^h/N):\n\n| layer | " +
                     " | ".join(f"h={h}" for h in range(1, l)) + " |\n|" + "---|" * l + "\n")
        for i, row in enumerate(bm):
            parts.append(f"| {i + 1} | " + " | ".join(f"{x:.3f}" for x in row) + " |\n")
    l = out["config"]["l"]
    for key, title in (("all_positions", "trained on all positions"),
                       ("ends_only", "trained on the first and last position only")):
        if "probes" not in out:
            break
        trained = hierarchy_parts.probe_text(out["probes"]["probe"])
        parts.append(f"\n### Ancestor probes of the frozen MLM encoder ({title}; tested on all "
                     f"positions; probes trained {trained})\n\n"
                     "Rows: stream after n blocks (0 = embeddings). Columns: "
                     "tree level of the ancestor (0 = root, l-1 = parent).\n\n| layer | " +
                     " | ".join(f"level {m}" for m in range(l)) + " |\n|" + "---|" * (l + 1)
                     + "\n")
        for i, row in enumerate(out["probes"][key]):
            parts.append(f"| {i} | " + " | ".join(f"{x:.3f}" for x in row) + " |\n")
    if "finetune" in out:
        ft = out["finetune"]
        parts.append(f"\n### Root classification from the MLM encoder vs scratch ({ft['steps']}"
                     " steps each; k = 0 test accuracy)\n\n| P | scratch | frozen | unfrozen |"
                     "\n|---|---|---|---|\n")
        acc = {(r["P"], r["mode"]): r["acc"] for r in ft["rows"]}
        for P in sorted({r["P"] for r in ft["rows"]}):
            parts.append(f"| {P} | " + " | ".join(f"{acc[P, m]:.4f}" if (P, m) in acc else "-"
                                                  for m in ("scratch", "frozen", "unfrozen"))
                         + " |\n")
    return "".join(parts) + hierarchy_parts.markdown(out)


def report(result: dict[str, Any], out: Path) -> str:
    """What ``tpcore reproduce hierarchy`` prints: where the results are, or that the call
    paused and how to go on."""
    return result.get("paused") or f"wrote {out}/hierarchy_{result['budget']}.json.gz and .md"
