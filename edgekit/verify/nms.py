"""Keep an NMS op in the graph, or cut it off for the bundle's NMS: decided by measurement (lite/nms.py's module
docstring gives the rule), on the probe samples: paddle_lite_opt for the target and x86, tier A (the x86 twin's
rows against Paddle's) and tier C (the ARM .nb under qemu through the runner's --rows mode); a cut graph checked
against the op's rows. `as_check` gives the verdict the pass manager's shape; `emulate` is tier C of a kept graph.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Mapping

import numpy as np

from edgekit.core.errors import ConversionError, EdgekitError, EmulationUnavailable
from edgekit.lite.nms import (CUT_MIN_MATCH, CUT_SCORE, SAME_MAP, NmsOp, check_cut, cut, cut_task, find_nms, kept_task,
                              per_image, rows_agree, rows_and_counts, split_rows)
from edgekit.model.artifacts import StaticModel
from edgekit.model.parity import OutputCheck, SameCheck
from edgekit.model.passes import TOLERANCES

log = logging.getLogger(__name__)

PROBE_SAMPLES = 4               # the keep probe (opt, x86 twin, ARM under qemu)
CUT_SAMPLES = 16                # the cut check (Paddle only: graph NMS vs the bundle's NMS)


def probe_keep(model: StaticModel, op: NmsOp, inputs: Mapping[str, np.ndarray], places: str, work: Path,
               timeout: float, emulator_of) -> dict:
    """Steps 1-3 of the module docstring on the probe samples: {"kept": bool, "reason": ..., "measured": {...}}.

    `emulator_of()` returns a tier-C Emulator or raises EdgekitError saying why there is none."""
    from edgekit import lite
    from edgekit.export import StaticRunner
    from edgekit.verify.tiers import twin_process

    count = min(PROBE_SAMPLES, len(next(iter(inputs.values()))))
    measured: dict = {"samples": count}
    if len(model.fetches) != 2:
        return {"kept": False, "reason": f"the program fetches {len(model.fetches)} outputs, not the NMS rows and "
                                         "counts", "measured": measured}
    reference = StaticRunner(model)
    ref_rows = per_image(reference.run, inputs, count)
    work.mkdir(parents=True, exist_ok=True)
    nbs = {}
    for where in dict.fromkeys((places, "x86")):
        try:   # with the rewrites every conversion gets (lite/safe.py)
            nbs[where] = lite.convert_safe(model, where, work / f"nms-{where}.nb", work / f"rewrite-{where}",
                                           dict(inputs), timeout=timeout, target=where, precision="fp32").nb_file
            measured[f"opt_{where}"] = "converted"
        except ConversionError as exc:
            measured[f"opt_{where}"] = exc.message
            return {"kept": False, "reason": f"paddle_lite_opt cannot convert {op.type} for {where}: {exc.message}",
                    "measured": measured}
    try:
        with twin_process(nbs["x86"], model.feed_names, "nms keep probe") as twin:   # a crash: not kept
            measured["tier_a"] = rows_agree(ref_rows, per_image(twin.run_one, inputs, count))
    except EdgekitError as exc:
        measured["tier_a"] = {"agree": False, "reason": exc.message}
    if not measured["tier_a"]["agree"]:
        return {"kept": False, "reason": f"tier A (x86 twin) disagrees with Paddle: {measured['tier_a']['reason']}",
                "measured": measured}
    if places != "arm":
        return {"kept": True, "reason": "opt converts it and the x86 .nb gives Paddle's rows", "measured": measured}
    try:
        emulator = emulator_of()
        from edgekit.lite import native

        feeds = {k: v[:count] for k, v in inputs.items()}
        done = native.run_runner(emulator.build, emulator.runtime, nbs[places], feeds, expect=model.feeds,
                                 timeout=timeout + 60 * count, rows=True)   # rows of every image + counts (--rows)
        rows, counts = rows_and_counts(done.outputs)
        measured["tier_c"] = rows_agree(ref_rows, split_rows(rows, counts))
    except EmulationUnavailable as exc:
        measured["tier_c"] = {"agree": False, "unavailable": True, "reason": exc.message}
        return {"kept": False, "reason": f"tier C cannot check {op.type} on ARM: {exc.message}", "measured": measured}
    except EdgekitError as exc:
        measured["tier_c"] = {"agree": False, "reason": exc.message}
        return {"kept": False, "reason": f"tier C cannot check {op.type} on ARM: {exc.message}", "measured": measured}
    if not measured["tier_c"]["agree"]:
        return {"kept": False, "reason": f"tier C (ARM .nb) disagrees with Paddle: {measured['tier_c']['reason']}",
                "measured": measured}
    return {"kept": True, "reason": "opt converts it, tiers A and C give Paddle's rows", "measured": measured}


def decide(model: StaticModel, evaluation, places: str, work: Path, timeout: float,
           emulator_of, choice: str = "auto") -> tuple[StaticModel, object, dict | None]:
    """(program to build, task, the manifest's `model.nms` entry or None without an NMS op), decided by measurement.

    `choice` ([model] nms): "auto" keeps the op when `probe_keep` says so; "keep" keeps it also when tier C cannot
    run (no ARM runtime), never when opt or tier A fail; "cut" cuts without probing."""
    ops = find_nms(model)
    if not ops:
        return model, evaluation.task, None
    if len(ops) > 1:
        raise ConversionError(f"the program holds {len(ops)} NMS ops ({', '.join(o.type for o in ops)})",
                              "export a model with one NMS op, or without NMS")
    op = ops[0]
    if choice not in ("auto", "keep", "cut"):
        raise ConversionError(f"[model] nms = {choice!r} is unknown", "use \"auto\", \"keep\" or \"cut\"")
    task = evaluation.task
    if task is not None and task.kind.value != "detection":
        raise ConversionError(f"the program holds {op.type}, but the task is {task.kind.value}",
                              "use [task] kind = \"detection\" (or detection truth) for a detector")
    if task is None:
        raise ConversionError(f"the program holds {op.type}, and the evaluation data has no detection truth",
                              "give a truth file beside the evaluation images: the cut graph is judged and task.json "
                              "written from it")
    inputs = dict(evaluation.samples.head(PROBE_SAMPLES).inputs)
    entry = op.to_json()
    if choice == "cut":
        verdict = {"kept": False, "reason": "cut on request ([model] nms = \"cut\")", "measured": {}}
    else:
        verdict = probe_keep(model, op, inputs, places, work / "probe", timeout, emulator_of)
    if choice == "keep" and not verdict["kept"]:
        m = verdict["measured"]
        if m.get("tier_a", {}).get("agree") and m.get("tier_c", {}).get("unavailable"):   # only tier C did not run
            verdict = dict(verdict, kept=True, reason=f"kept on request ([model] nms = \"keep\"): {verdict['reason']}")
        else:
            raise ConversionError(f"[model] nms = \"keep\", but {verdict['reason']}",
                                  "use nms = \"auto\" or \"cut\": the bundle's NMS then replaces the op")
    entry.update(kept=verdict["kept"], reason=verdict["reason"], measured=verdict["measured"], choice=choice)
    if verdict["kept"]:
        log.info("%s kept in the graph: %s", op.type, verdict["reason"])
        task = kept_task(op, task)
        entry["outputs"] = list(model.fetches)
        entry["task"] = task.options()
        return model, task, entry
    log.info("%s cut off for the bundle's NMS: %s", op.type, verdict["reason"])
    task = cut_task(op, task)
    cut_model = cut(model, op, work / "cut")
    check_on = evaluation.head(CUT_SAMPLES)
    entry["cut"] = check_cut(model, cut_model, task, dict(check_on.samples.inputs), check_on.truth)
    entry["outputs"] = list(cut_model.fetches)
    entry["task"] = task.options()
    if not entry["cut"]["passed"]:
        c = entry["cut"]
        scored = (f"; mAP@0.5 {c['map50']['bundle_nms']:.2f} vs the op's {c['map50']['graph_nms']:.2f}, limit "
                  f"{SAME_MAP:g} points" if "map50" in c else "; no truth to compare mAP")
        raise ConversionError(f"the bundle's NMS finds {c['match_percent']:.2f} % of the boxes {op.type} finds "
                              f"(limit {CUT_MIN_MATCH:g} %: {c['matched']} of {c['graph_rows']} rows, {c['bundle_only']} "
                              f"extra{scored})", f"{op.type} does what task.json's NMS (greedy or matrix) cannot "
                              f"(attributes {entry['attrs']}): export the model without NMS")
    if math.isfinite(entry["cut"]["max_score_diff"]):
        entry["cut"]["max_score_diff"] = float(f"{entry['cut']['max_score_diff']:.3g}")
    return cut_model, task, entry


def scored_as_rows(model: StaticModel, evaluation):
    """`evaluation` with the task a graph holding an NMS op has before the keep-or-cut decision: its rows as they are
    (head `nms`, the op's threshold and cap), whatever head the data's truth names (e.g. `anchor_free`, which the
    decision's cut gives). Unchanged without an NMS op, a detection task or one already reading rows."""
    from edgekit.model.evalset import EvalSet

    task = evaluation.task
    ops = find_nms(model)
    if len(ops) != 1 or task is None or task.kind.value != "detection" or task.options().get("head") == "nms":
        return evaluation
    return EvalSet(evaluation.samples, kept_task(ops[0], task), evaluation.truth)


def as_check(entry: dict | None) -> SameCheck | None:
    """`decide`'s verdict in the shape every transform's check has (the pass manager's): kept, the x86 twin's rows
    against Paddle's (tier A of the probe); cut, the bundle's NMS on the cut graph against the op's rows (the share
    of rows found as the cosine figure, the worst score difference as max abs). None without an NMS op."""
    if entry is None:
        return None
    if entry["kept"]:
        rows = entry["measured"].get("tier_a", {})
        worst = float(rows.get("max_abs", math.nan))
        return SameCheck("the NMS op kept: the x86 twin's rows vs Paddle's", int(entry["measured"].get("samples", 0)),
                         (OutputCheck("rows", worst, 1.0 if rows.get("agree") else 0.0, TOLERANCES["nms"].max_abs,
                                      bool(rows.get("agree", entry["choice"] == "keep"))),))
    cut = entry.get("cut")
    if cut is None:
        return None
    return SameCheck("the NMS op cut: the bundle's NMS vs the op's rows", int(cut["samples"]),
                     (OutputCheck("rows", float(cut["max_score_diff"]), float(cut["match_percent"]) / 100.0, CUT_SCORE,
                                  bool(cut["passed"])),))


def emulate(emulator, nb_file: Path, inputs: Mapping[str, np.ndarray], expect, jobs: int) -> tuple[list, list]:
    """Tier C of a kept graph: the ARM `.nb` under qemu through the runner's --rows mode, the samples split over
    `jobs` emulator processes; each output concatenated over them (rows, then counts: the format stays
    self-describing)."""
    return emulator.run(nb_file, inputs, expect, jobs, rows=True)
