"""Build configuration: defaults < edgekit.toml < environment < flags, resolved once into the frozen settings
(edgekit/contracts/settings.py) and validated before any stage runs. A model folder's own description (PaddleX's
inference.yml) gives [preprocess] and [task] defaults."""

from __future__ import annotations

import math
import os
import re
from dataclasses import fields
from pathlib import Path
from typing import Any, Mapping

from edgekit.contracts.env import LITE_ARM_ENV
from edgekit.contracts.files import NAME_TEXT, check_name
from edgekit.contracts.settings import (CALIBRATION_ALGOS, NMS_CHOICES, RANK_BY, BuildConfig, DataConfig, EmulationConfig,
                                        InputSpec, ModelConfig, ParityGates, QuantConfig, TaskConfig, load_toml)
from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.core.errors import ConfigError, DataError, EdgekitError
from edgekit.contracts.prune import KNOWN_KEYS as PRUNE_KEYS
from edgekit.contracts.prune import merge_prune, prune_config
from edgekit.core.tables import PRECISIONS, Precision, Target

BUNDLED_EXAMPLE = Path(__file__).parents[1] / "examples" / "digits" / "edgekit.toml"


def _section(raw: Mapping, key: str, known: set[str], where: Path) -> dict:
    table = raw.get(key, {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"[{key}] in {where} is not a table", f"write it as a [{key}] section")
    unknown = set(table) - known
    if unknown:
        raise ConfigError(f"unknown key(s) in [{key}] of {where}: {', '.join(sorted(unknown))}",
                          f"known keys: {', '.join(sorted(known))}")
    return dict(table)


def _path(base: Path, value: Any) -> Path | None:
    if value in (None, ""):
        return None
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else (base / path)


def _toml_layer(path: Path) -> dict:
    """Flatten edgekit.toml into the same keys the flags use; paths resolved against the file."""
    raw = load_toml(path)
    unknown = set(raw) - set(SECTIONS)
    if unknown:
        raise ConfigError(f"unknown section(s) in {path}: {', '.join(sorted(unknown))}",
                          f"sections are {', '.join(SECTIONS)}")
    base = path.parent.resolve()
    out: dict[str, Any] = {}
    model = _section(raw, "model", {"name", "factory", "weights", "model_file", "params_file", "inputs", "paddle", "nms"},
                     path)
    for key in ("weights", "model_file", "params_file"):
        if key in model:
            out[key] = _path(base, model.pop(key))
    if "inputs" in model:
        try:
            out["inputs"] = tuple(InputSpec(str(i["name"]), tuple(int(d) for d in i["shape"]), str(i.get("dtype", "float32"))).validated()
                                  for i in model.pop("inputs"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"[model].inputs in {path} is malformed", 'write inputs = [{name = "x", shape = [-1, 3, 224, 224]}]') from exc
    out.update(model)
    data = _section(raw, "data", {"calibration", "evaluation", "labels", "images"}, path)
    out.update({k: _path(base, v) for k, v in data.items()})
    if "preprocess" in raw:
        out["preprocess"] = _preprocess(raw["preprocess"], path)
        out["preprocess_table"] = dict(raw["preprocess"])   # laid over a model folder's inference.yml, key by key
    out.update(_section(raw, "build", {"target", "precision", "out_dir", "tool_timeout", "fold"}, path))
    if "out_dir" in out:
        out["out_dir"] = _path(base, out["out_dir"])
    out.update(_section(raw, "quantize", {f.name for f in fields(QuantConfig)}, path))
    if out.get("cache_dir") not in (None, "", "off"):
        out["cache_dir"] = _path(base, out["cache_dir"])
    out.update(_section(raw, "parity", {f.name for f in fields(ParityGates)}, path))
    if "task" in raw:
        table = raw["task"]
        if not isinstance(table, Mapping):
            raise ConfigError(f"[task] in {path} is not a table", "write it as a [task] section")
        options = {k: v for k, v in table.items() if k != "kind"}
        if isinstance(options.get("dictionary"), str):   # paths are relative to the toml, like every other path
            options["dictionary"] = str(_path(base, options["dictionary"]))
        out["task_kind"], out["task_options"] = table.get("kind"), options
    if "prune" in raw:
        table = _section(raw, "prune", PRUNE_KEYS, path)
        if table.get("cache_dir"):
            table["cache_dir"] = _path(base, table["cache_dir"])
        out["prune_table"] = table
    emulation = _section(raw, "emulation", {f.name for f in fields(EmulationConfig)}, path)
    if emulation.get("runtime"):
        emulation["runtime"] = _path(base, emulation["runtime"])
    out.update({f"emulation_{k}": v for k, v in emulation.items()})
    return out


def _preprocess(table: Any, where: Path) -> PreprocessSpec:
    """[preprocess] problems are config problems (exit 2), whatever layer notices them."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"[preprocess] in {where} is not a table", "write it as a [preprocess] section")
    try:
        return PreprocessSpec.from_mapping(table)
    except DataError as exc:
        raise ConfigError(f"[preprocess] in {where}: {exc.message}", exc.hint) from exc
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"[preprocess] in {where} has a malformed value ({exc})",
                          "resize/crop are [height, width]; mean/std are lists of numbers") from exc


SECTIONS = ("model", "data", "preprocess", "build", "quantize", "parity", "prune", "task", "emulation")
ENV_KEYS = {"EDGEKIT_TARGET": "target", "EDGEKIT_QUANT": "precision", "EDGEKIT_OUT": "out_dir",
            "EDGEKIT_TOOL_TIMEOUT": "tool_timeout", "EDGEKIT_CACHE_DIR": "cache_dir",
            LITE_ARM_ENV: "emulation_runtime", "EDGEKIT_REQUIRE_EMULATION": "emulation_required",
            "EDGEKIT_CPU": "emulation_cpu"}
SENSITIVITY_METHODS = ("alone", "all-but", "local")


def default_cache_dir(environ: Mapping[str, str]) -> Path:
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().absolute() / "edgekit" / "calibration"


def _search_fields(m: Mapping[str, Any]) -> dict:
    """[quantize] keys _typed does not coerce: a list, an optional number, a path."""
    out: dict[str, Any] = {}
    if "search_algos" in m:
        algos = m["search_algos"]
        if isinstance(algos, str):
            algos = [a.strip() for a in algos.split(",") if a.strip()]
        if not isinstance(algos, (list, tuple)) or not all(isinstance(a, str) for a in algos):
            raise ConfigError(f"search_algos = {algos!r} is not a list of algorithm names", 'write search_algos = ["avg", "hist"]')
        unknown = [a for a in algos if a not in CALIBRATION_ALGOS]
        if unknown:
            raise ConfigError(f"calibration algorithm(s) {', '.join(unknown)} unknown", f"use {', '.join(CALIBRATION_ALGOS)}")
        out["search_algos"] = tuple(algos)
    if m.get("max_drop") is not None:
        value = m["max_drop"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"max_drop {value!r} is not a number",
                              "give top-1 points (e.g. 1.0) with labelled evaluation data, else a cosine drop (e.g. 0.01)")
        out["max_drop"] = float(value)
    if m.get("max_changed") is not None:
        value = m["max_changed"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 100.0:
            raise ConfigError(f"[quantize] max_changed = {value!r} is not a percentage of samples",
                              "give the % of evaluation samples INT8 may read unlike FP32, in [0, 100], e.g. 1.0")
        out["max_changed"] = float(value)
    if "cache_dir" in m:
        value = m["cache_dir"]
        out["cache_dir"] = None if value in (None, "", "off") else Path(str(value)).expanduser().absolute()
    return out


def _env_layer(environ: Mapping[str, str]) -> dict:
    found: dict[str, Any] = {key: environ[var] for var, key in ENV_KEYS.items() if environ.get(var)}
    if "emulation_runtime" in found:
        found["emulation_runtime"] = Path(found["emulation_runtime"]).expanduser().absolute()
    if "emulation_required" in found:
        found["emulation_required"] = found["emulation_required"].strip().lower() in ("1", "true", "yes")
    return found


def _enum(kind, value, what: str):
    """`what` names every place the value can come from, so the message points at the right one."""
    try:
        return kind(value.value if isinstance(value, kind) else str(value))
    except ValueError as exc:
        raise ConfigError(f"{what.split(' ')[0]} {value!r} is not supported (from {what.split(' ', 1)[1][1:-1]})",
                          f"use one of {', '.join(k.value for k in kind)}") from exc


def resolve(config_file: Path | None, flags: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> BuildConfig:
    """Merge the layers and validate. `flags` holds only options the user gave (None = not given)."""
    environ = os.environ if environ is None else environ
    merged: dict[str, Any] = {"cache_dir": default_cache_dir(environ)}
    if config_file is None and not flags.get("model") and not flags.get("factory"):
        config_file = BUNDLED_EXAMPLE if not Path("edgekit.toml").is_file() else Path("edgekit.toml")
    if config_file is not None:
        merged.update(_toml_layer(Path(config_file)))
    merged.update(_env_layer(environ))
    # flag paths are relative to where the user stands; make them absolute once, here
    given = {k: (v.expanduser().absolute() if isinstance(v, Path) else v)
             for k, v in flags.items() if v is not None and v != ()}
    model_arg = given.pop("model", None)
    if model_arg is not None:
        for key in ("factory", "model_file", "params_file", "weights"):
            merged.pop(key, None)
        if re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", str(model_arg)):
            merged["factory"] = str(model_arg)
        else:
            merged["model_file"] = Path(str(model_arg)).expanduser().absolute()
    merged.update(given)
    return _build(_with_model_description(merged), Path(config_file) if config_file else None)


def _with_model_description(m: dict) -> dict:
    """A model folder's own description (PaddleX/PaddleOCR `inference.yml`, beside a .json or an .onnx too) gives
    [preprocess] and [task] defaults; edgekit.toml's tables and the flags override them key by key."""
    model_file = m.get("model_file")
    if m.get("factory") or model_file is None:
        return m
    from edgekit.export.paddlex import check_against_program, find_model_yml, merge_tables, read_model_yml

    yml = find_model_yml(Path(model_file))
    if yml is None:
        return m
    given = {section for section, present in (("preprocess", "preprocess" in m),
                                              ("task", m.get("task_kind") is not None or bool(m.get("task_options"))))
             if present}
    try:
        desc = read_model_yml(yml)
    except EdgekitError:
        if not given:
            raise
        desc = read_model_yml(yml, overridden=given)     # edgekit.toml replaces the part that cannot be read
    if m.get("inputs"):
        desc = check_against_program(desc, tuple(m["inputs"]))
    task_given = {"kind": m.get("task_kind"), **(m.get("task_options") or {})} if "task" in given else None
    preprocess, task = merge_tables(desc, m.get("preprocess_table"), task_given)
    out = dict(m, model_description=desc)
    if preprocess:
        out["preprocess"] = _preprocess(preprocess, yml)
    if task:
        out["task_kind"], out["task_options"] = task.get("kind"), {k: v for k, v in task.items() if k != "kind"}
    return out


def _build(m: dict, config_file: Path | None) -> BuildConfig:
    if not m.get("factory") and not m.get("model_file"):
        raise ConfigError("no model given", "pass --model (a .pdmodel, a model folder, or package.module:factory) or --config edgekit.toml")
    if m.get("factory") and not m.get("inputs"):
        raise ConfigError("a dynamic-graph model needs its input specs",
                          "pass --input name:-1x3x224x224[:float32] (one per input) or [model].inputs in edgekit.toml")
    for key in ("name", "factory"):
        if m.get(key) is not None and not isinstance(m[key], str):
            raise ConfigError(f"[model] {key} = {m[key]!r} is not a string", f"write {key} in quotes")
    if m.get("factory") and not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", m["factory"]):
        raise ConfigError(f"factory {m['factory']!r} is not package.module:callable", "e.g. mypkg.models:create")
    name = m.get("name") or _default_name(m)
    check_name(name, "model name", hint=f"pass --name (or [model] name) of {NAME_TEXT}")
    paddle_major = m.get("paddle", 2)
    if paddle_major not in (2, 3) or isinstance(paddle_major, bool):
        raise ConfigError(f"[model] paddle = {paddle_major!r} (--paddle) is not 2 or 3",
                          "give the Paddle major version the factory's code is written for: 2 or 3")
    if paddle_major == 3 and not m.get("factory"):
        raise ConfigError("--paddle 3 / [model] paddle applies to factory models only",
                          "leave it out: an exported model's format says which Paddle wrote it")
    nms_choice = m.get("nms", "auto")
    if nms_choice not in NMS_CHOICES:
        raise ConfigError(f"[model] nms = {nms_choice!r} is unknown",
                          "use \"auto\" (keep the graph's NMS op when measured safe), \"keep\" or \"cut\"")
    model = ModelConfig(name=name, factory=m.get("factory"), weights=m.get("weights"),
                        model_file=m.get("model_file"), params_file=m.get("params_file"),
                        inputs=tuple(m.get("inputs") or ()), paddle=int(paddle_major),
                        description=m["model_description"].source if m.get("model_description") else None,
                        nms=nms_choice)
    data = DataConfig(m.get("calibration"), m.get("evaluation"), m.get("labels"), m.get("preprocess"), m.get("images"))
    precision = _enum(Precision, m.get("precision", "fp32"), "precision (--quant / EDGEKIT_QUANT / [build] precision)")
    target = _enum(Target, m.get("target", "arm64"), "target (--target / EDGEKIT_TARGET / [build] target)")
    if target is Target.x86 and PRECISIONS[precision].arm_only:
        raise ConfigError(f"{precision.value} .nb files run only on ARM in Paddle-Lite 2.13rc0 (quantised x86 .nb files "
                          "load but give chance-level results)",
                          f"build --target arm64/armv7 for {precision.value}; the x86 twin is built automatically for checks")
    if PRECISIONS[precision].needs_calibration and data.calibration is None:
        raise ConfigError(f"--quant {precision.value} needs calibration data",
                          "pass --calib (an image folder or .npz) or [data].calibration in edgekit.toml")
    search_keys = {"search_algos", "max_drop", "max_changed", "cache_dir"}
    quant = QuantConfig(**{**{f.name: _typed(f, m[f.name], "quantize") for f in fields(QuantConfig)
                              if f.name in m and f.name not in search_keys},
                           **_search_fields(m)})
    if not 0.0 <= quant.max_float_fraction <= 1.0:
        raise ConfigError(f"max_float_fraction {quant.max_float_fraction} is outside [0, 1]", "give a share such as 0.5")
    if quant.sensitivity_method not in SENSITIVITY_METHODS:
        raise ConfigError(f"sensitivity_method {quant.sensitivity_method!r} is unknown", f"use {' or '.join(SENSITIVITY_METHODS)}")
    if quant.sensitivity_samples < 0:
        raise ConfigError("sensitivity_samples is negative", "give a sample count, or 0 for all evaluation samples")
    if quant.rank_by not in RANK_BY:
        raise ConfigError(f"[quantize] rank_by = {quant.rank_by!r} is unknown",
                          f"use {' or '.join(repr(r) for r in RANK_BY)} (task points first, or output error only)")
    if quant.cost_candidates < 0:
        raise ConfigError(f"[quantize] cost_candidates = {quant.cost_candidates} is negative",
                          "give how many INT8 candidates within the budget to count (e.g. 3), or 0 to not count cost")
    if quant.algo not in CALIBRATION_ALGOS:
        raise ConfigError(f"calibration algorithm {quant.algo!r} is unknown", f"use one of {', '.join(CALIBRATION_ALGOS)}")
    if quant.batch_size < 1 or quant.batch_nums < 1:
        raise ConfigError("calibration batch_size and batch_nums must be >= 1", "fix batch_size/batch_nums in [quantize]")
    gates = ParityGates(**{f.name: _typed(f, m[f.name], "parity") for f in fields(ParityGates) if f.name in m})
    if gates.golden_count < 1 or gates.max_samples < 1:
        raise ConfigError("[parity] golden_count and max_samples must be >= 1", "fix them in edgekit.toml")
    if not (math.isfinite(gates.import_max_abs) and gates.import_max_abs > 0) or not -1 <= gates.import_min_cosine <= 1:
        raise ConfigError(f"[parity] import_max_abs {gates.import_max_abs} / import_min_cosine {gates.import_min_cosine} "
                          "are out of range", "give a positive max abs (e.g. 1e-4) and a cosine in [-1, 1] (e.g. 0.9999)")
    try:
        timeout = float(m.get("tool_timeout", 600.0))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"tool timeout {m.get('tool_timeout')!r} is not a number", "give seconds, e.g. 600") from exc
    if not math.isfinite(timeout) or timeout <= 0:
        raise ConfigError(f"tool timeout {timeout} is not a positive number of seconds", "give seconds, e.g. 600")
    out_dir = Path(m.get("out_dir") or "build").expanduser().absolute()
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"output root {out_dir} exists and is not a folder", "pass --out with a folder path")
    task = TaskConfig(m.get("task_kind"), dict(m.get("task_options") or {}))
    if task.kind is not None:
        from edgekit.tasks import make_task

        make_task(task.kind, task.options)            # a bad kind or option fails here, before any stage
    prune = _prune(m, out_dir)
    if prune is not None and is_paddle3_source(model):
        raise ConfigError("pruning a Paddle 3 model is not supported yet: every tier is checked against Paddle 3's "
                          "inference of the unpruned source", "prune the model in Paddle 3 (e.g. with PaddleSlim 3) "
                          "and build the pruned export, or build without --prune")
    return BuildConfig(model=model, data=data, target=target, precision=precision, quant=quant, gates=gates,
                       out_dir=out_dir, tool_timeout=timeout, fold=_flag(m.get("fold", True), "[build] fold"),
                       config_file=config_file.absolute() if config_file else None, prune=prune, task=task,
                       emulation=_emulation(m))


def is_paddle3_source(model: ModelConfig) -> bool:
    """A factory written for Paddle 3, or a PIR program (.json, or a folder holding one and no .pdmodel)."""
    if model.factory is not None:
        return model.paddle == 3
    from edgekit.export.pir import is_pir_program

    return model.model_file is not None and is_pir_program(model.model_file)


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{what} is {value!r}, not true or false", f"write {what.split()[-1]} = true or false")
    return value


def _emulation(m: dict) -> EmulationConfig:
    from edgekit.core.tables import CPU_PROFILES

    raw = {f.name: _typed(f, m[f"emulation_{f.name}"], "emulation") for f in fields(EmulationConfig)
           if f.name not in ("runtime", "cpu") and f"emulation_{f.name}" in m}
    emulation = EmulationConfig(runtime=m.get("emulation_runtime"), cpu=str(m.get("emulation_cpu", "default")), **raw)
    if emulation.cpu not in CPU_PROFILES:
        raise ConfigError(f"CPU profile {emulation.cpu!r} is unknown (--cpu / EDGEKIT_CPU / [emulation] cpu)",
                          f"use one of {', '.join(CPU_PROFILES)}")
    if emulation.max_samples < 0 or emulation.jobs < 0 or emulation.threads < 1:
        raise ConfigError("[emulation] max_samples and jobs must be >= 0 and threads >= 1", "fix them in edgekit.toml")
    return emulation


def _prune(m: dict, out_dir: Path):
    """[prune] overridden by --prune/--finetune/--epochs/--criterion; sensitivity is cached under the output root."""
    raw = merge_prune(m.get("prune_table"), m.get("prune"), finetune=m.get("finetune"), epochs=m.get("epochs"),
                      criterion=m.get("criterion"))
    if raw is None:
        return None
    if raw.get("finetune") and not m.get("factory"):
        raise ConfigError("--finetune needs a factory model: an exported model has no training code to fine-tune",
                          "prune the package.module:factory model instead, or leave out --finetune")
    raw.setdefault("cache_dir", out_dir / ".cache" / "prune")
    return prune_config(raw)


def _typed(f, value: Any, section: str) -> Any:
    """Coerce a [quantize]/[parity] value to its field's type, or say which key is wrong."""
    kind = {"int": int, "float": float, "bool": bool, "str": str}.get(str(f.type).removesuffix(" | None"))
    if kind is None:
        return value
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"[{section}] {f.name} = {value!r} is not true/false", f"write {f.name} = true or false")
    if isinstance(value, bool) or (kind is not str and isinstance(value, str)):
        raise ConfigError(f"[{section}] {f.name} = {value!r} is not a number", f"write {f.name} as a number without quotes")
    try:
        return kind(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"[{section}] {f.name} = {value!r} is not a {kind.__name__}", f"fix {f.name}") from exc


def _default_name(m: dict) -> str:
    if m.get("factory"):
        return m["factory"].split(":")[1].lower()
    path = Path(m["model_file"])
    return (path.name if path.is_dir() else path.parent.name if path.stem in ("model", "inference", "__model__") else path.stem) or "model"

