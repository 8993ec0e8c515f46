"""The thin CLI: parse options, resolve one config, call one library function.

Heavy imports (paddle, paddleslim, paddlelite) happen inside commands, so
`edgekit --help` stays instant. Known errors print one line plus a fix and exit
non-zero; EDGEKIT_DEBUG=1 shows the traceback.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Annotated, List, Optional

import typer
from typer.core import TyperGroup

from edgekit.core.errors import EdgekitError
from edgekit.core.tables import CPU_PROFILES, IMPORT_MAX_ABS, IMPORT_MIN_COSINE, PRECISIONS, TARGETS, Precision, Target


class _Edgekit(TyperGroup):
    """Maps edgekit's errors to one line plus a fix and the error's exit code, once for every command."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except EdgekitError as error:
            if os.environ.get("EDGEKIT_DEBUG") == "1":
                raise
            _fail(error)


app = typer.Typer(cls=_Edgekit, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None,
                  help="Build verified Paddle-Lite .nb bundles for ARM phones and boards from Paddle models.")

TARGET_HELP = "Device target: " + "; ".join(f"{t.value} = {i.note}" for t, i in TARGETS.items()) + "."
QUANT_HELP = "Precision: " + "; ".join(f"{p.value} = {i.tradeoff}" for p, i in PRECISIONS.items()) + "."
CPU_HELP = ("CPU profile for tier C (which INT8 kernels Paddle-Lite picks): "
            + "; ".join(f"{name} = {p.note}" for name, p in CPU_PROFILES.items()) + ". Default default; EDGEKIT_CPU.")

# Options shared by several commands: defined once, so their names and help stay the same everywhere.
ModelOpt = Annotated[Optional[str], typer.Option(
    "--model", "-m", help="Model: a .pdmodel file, a folder holding an exported inference model, a Paddle 3 PIR program "
    "(inference.json, or a PaddleOCR/PaddleX model folder holding one; translated to a legacy program and checked against "
    "Paddle 3's own inference), an .onnx file (converted with X2Paddle, checked against ONNX Runtime), or "
    "package.module:factory returning a paddle.nn.Layer (see --paddle). "
    "Default: [model] of --config, else ./edgekit.toml, else the bundled digits example.")]
ConfigOpt = Annotated[Optional[Path], typer.Option(
    "--config", "-c", help="edgekit.toml with [model], [data], [preprocess], [build], [quantize], [parity], [prune], "
    "[task], [emulation]; flags override it.")]
WeightsOpt = Annotated[Optional[Path], typer.Option("--weights", help="A .pdparams state dict for a factory model.")]
ParamsOpt = Annotated[Optional[Path], typer.Option(
    "--params", help="The .pdiparams of an exported model, when not beside it.")]
InputsOpt = Annotated[List[str], typer.Option(
    "--input", "-i", help="Input spec name:shape[:dtype], e.g. image:-1x3x224x224:float32 (-1 = dynamic). Required for "
    "factory models; for exported models fixes dynamic dims; for .onnx models use the ONNX input names (the sizes are "
    "written into the model).")]
EvalOpt = Annotated[Optional[Path], typer.Option(
    "--eval", help="Evaluation data: an image folder (class sub-folders named as in --labels give labels) or .npz with "
    "optional 'labels'; a truth file beside it (<name>.truth.json / truth.json) gives OCR ground truth. build: default "
    "the calibration data (optimistic for int8: it was calibrated on it).")]
LabelsOpt = Annotated[Optional[Path], typer.Option("--labels", help="Class names, one per line (order = class index).")]
NameOpt = Annotated[Optional[str], typer.Option("--name", help="Model name used for the output folder.")]
OutOpt = Annotated[Optional[Path], typer.Option(
    "--out", "-o", help="Output root: build writes OUT/<name>/<target>-<quant>/, prune OUT/<name>/pruned/. Default ./build.")]
PruneOpt = Annotated[Optional[str], typer.Option(
    "--prune", help="Prune conv filters (PaddleSlim): a ratio of every prunable conv (0.3), a target with per-layer "
    "ratios chosen (flops:50%, params:40%), or per-layer ratios (features.0=0.5,features.4=0.3). build: default none.")]
FinetuneOpt = Annotated[Optional[str], typer.Option(
    "--finetune", help="Fine-tune hook for a pruned factory model: package.module:function, called as "
    "function(model, epochs).")]
EpochsOpt = Annotated[Optional[int], typer.Option("--epochs", help="Fine-tuning epochs passed to the hook. Default 3.")]
VerboseOpt = Annotated[int, typer.Option("--verbose", "-v", count=True, help="More log output (-vv for Paddle's own).")]
LiteArmOpt = Annotated[Optional[Path], typer.Option(
    "--lite-arm", help="Paddle-Lite's ARM Linux runtime for tier C: the folder holding inference_lite_lib.armlinux.armv8 "
    "(and .armv7hf), as in the official release archives, of the opt's version. Default EDGEKIT_LITE_ARM, "
    "[emulation] runtime.")]
CpuOpt = Annotated[Optional[str], typer.Option("--cpu", help=CPU_HELP)]
EngineOpt = Annotated[Optional[str], typer.Option(
    "--engine", metavar="twin|arm", help="What runs the model: twin = the bundle's FP32 x86 twin (host/model_x86.nb) on "
    "the paddlelite wheel; arm = the bundle's own model.nb on Paddle-Lite's ARM runtime under qemu (needs --lite-arm or "
    "EDGEKIT_LITE_ARM, the cross compiler and qemu-user, as parity --emulate). Default: arm for an INT8 or weight-only "
    "bundle when a runtime is configured, else twin.")]


def _exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so the build's cleanup (staging folder) runs."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)


def _setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.WARNING if quiet else logging.INFO if verbose == 1 else logging.DEBUG if verbose > 1 else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if verbose == 0:
        # third-party import-time warnings (setuptools/distutils, paddle deprecations) drown the report
        warnings.simplefilter("ignore")
    # paddle/glog chatter goes to stderr from C++; keep it down unless asked
    os.environ.setdefault("GLOG_minloglevel", "2" if verbose < 2 else "0")


def _fail(error: EdgekitError) -> None:
    for line in getattr(error, "report_lines", []):
        typer.echo(line)
    for line in error.lines():
        typer.echo(line, err=True)
    raise typer.Exit(error.exit_code)


def _resolve(config: Optional[Path], inputs: List[str], **flags):
    """One config from the flags the user gave (None = not given), over edgekit.toml and the environment."""
    from edgekit.build.config import resolve
    from edgekit.contracts.settings import InputSpec

    flags["inputs"] = tuple(InputSpec.parse(i) for i in inputs) or None
    return resolve(config, flags)


def _start_toolchain() -> None:
    import paddle  # noqa: F401  (paddle installs its own SIGTERM handler on import: ours must come after)

    _exit_on_sigterm()


@app.command()
def build(
    model: ModelOpt = None,
    config: ConfigOpt = None,
    target: Optional[Target] = typer.Option(None, "--target", "-t", help=TARGET_HELP + " Default arm64."),
    quant: Optional[Precision] = typer.Option(None, "--quant", "-q", help=QUANT_HELP + " Default fp32."),
    weights: WeightsOpt = None,
    params: ParamsOpt = None,
    paddle_major: Optional[int] = typer.Option(None, "--paddle", help="The Paddle major version a factory model's code "
                                               "is written for: 2 (exported here with Paddle 2.6) or 3 (exported by "
                                               "Paddle 3 as PIR, then translated). Default 2; [model] paddle."),
    inputs: InputsOpt = [],
    calib: Optional[Path] = typer.Option(None, "--calib", help="Calibration data for int8: an image folder (uses [preprocess]) or .npz/.npy."),
    eval_data: EvalOpt = None,
    labels: LabelsOpt = None,
    images: Optional[Path] = typer.Option(None, "--images", help="Sample images (a folder) for the bundle's golden image "
                                          "cases, which apps use to check their preprocessing and results. Default: the "
                                          "evaluation images when --eval is an image folder; [data] images."),
    algo: Optional[str] = typer.Option(None, "--algo", help="Calibration algorithm for int8: avg, abs_max, hist, mse, KL, emd. Default avg."),
    search_algos: Optional[str] = typer.Option(None, "--search-algos", help="Calibration algorithms to try for int8, comma-separated "
                                               "(e.g. avg,hist,mse,KL); the best that meets the budget wins. Default: only --algo."),
    max_drop: Optional[float] = typer.Option(None, "--max-drop", help="Accuracy budget of a reduced precision (tiers B and C, and the int8 search): "
                                             "points of the task metric (top-1, OCR exact match, ...) with ground truth, else 1 - output "
                                             "cosine. The most sensitive layers stay in float until it holds; if it cannot, the "
                                             "build fails (exit 9) showing the best found. Default: the [parity] int8 gate."),
    max_changed: Optional[float] = typer.Option(None, "--max-changed", help="Checked on the int8 search's choice, beside --max-drop: at most "
                                                "this % of the evaluation samples may get another text or class than "
                                                "FP32's, right or wrong (boxes and masks: points of mAP/hmean/mIoU "
                                                "against FP32's results); a miss fails the build (exit 9). With "
                                                "rank_by = task, layers are ranked by the results they change. Needs "
                                                "ground truth. Default: not checked ([quantize] max_changed)."),
    no_fallback: bool = typer.Option(False, "--no-fallback", help="Never keep layers in float: whole-model int8 or fail."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Cache of calibrations and tier-C results. Default "
                                             "$XDG_CACHE_HOME/edgekit/calibration (~/.cache/...); EDGEKIT_CACHE_DIR."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Calibrate and emulate everything again and keep nothing."),
    task: Optional[str] = typer.Option(None, "--task", help="Task metric: classification, ocr_det, ocr_rec, ocr_cls, detection, segmentation. Default: "
                                       "the evaluation data's truth file (<name>.truth.json / truth.json), else top-1 with labels."),
    lite_arm: LiteArmOpt = None,
    cpu: CpuOpt = None,
    no_emulation: bool = typer.Option(False, "--no-emulation", help="Skip tier C (the ARM .nb under emulation); the report says so."),
    no_fold: bool = typer.Option(False, "--no-fold", help="Keep conv bias/BN/affine chains and decomposed hard_swish/"
                                 "hard_sigmoid as the model has them ([build] fold = false)."),
    name: NameOpt = None,
    out: OutOpt = None,
    prune: PruneOpt = None,
    finetune: FinetuneOpt = None,
    epochs: EpochsOpt = None,
    verbose: VerboseOpt = 0,
    quiet: bool = typer.Option(False, "--quiet", help="Only the result and errors."),
) -> None:
    """Export, (prune,) quantise, convert to .nb, verify parity on the host (tiers A, B, C), and write the bundle."""
    _setup_logging(verbose, quiet)
    cfg = _resolve(config, inputs, model=model, target=target.value if target else None,
                   precision=quant.value if quant else None, weights=weights, params_file=params, paddle=paddle_major, calibration=calib,
                   evaluation=eval_data, labels=labels, images=images, algo=algo, name=name, out_dir=out, search_algos=search_algos,
                   max_drop=max_drop, max_changed=max_changed, fallback=False if no_fallback else None, cache_dir="off" if no_cache else cache_dir,
                   prune=prune, finetune=finetune, epochs=epochs, task_kind=task, emulation_runtime=lite_arm,
                   emulation_cpu=cpu, emulation_enabled=False if no_emulation else None, fold=False if no_fold else None)
    _start_toolchain()
    from edgekit.build.pipeline import build as run_build

    if not quiet:
        typer.echo(f"building {cfg.model.name} for {cfg.target.value} {cfg.precision.value} -> {cfg.bundle_dir}", err=True)
    result = run_build(cfg, _progress(quiet))
    for line in (result.prune.lines() if result.prune is not None else []) + result.quant_search + result.report.lines():
        typer.echo(line)
    m = result.bundle.manifest.model
    typer.echo(f"model.nb: {(m.bytes or 0) / 1024:.1f} KiB (graph {(m.program_bytes or 0) / 1024:.1f} KiB, weights "
               f"{(m.params_bytes or 0) / 1024:.1f} KiB), opt {m.opt_version}")
    typer.echo(f"bundle: {result.bundle.path}")


def _emulation_settings(lite_arm: Optional[Path], cpu: Optional[str]):
    """[emulation] from flags and the environment alone (no edgekit.toml: a bundle carries its own model)."""
    from edgekit.contracts.settings import EmulationConfig
    from edgekit.core.errors import ConfigError

    from edgekit.contracts.env import lite_arm_root

    runtime = lite_arm_root(lite_arm)
    cpu = cpu or os.environ.get("EDGEKIT_CPU") or "default"
    if cpu not in CPU_PROFILES:
        raise ConfigError(f"CPU profile {cpu!r} is unknown", f"use one of {', '.join(CPU_PROFILES)}")
    return EmulationConfig(runtime=runtime, cpu=cpu)


def _progress(quiet: bool):
    started: dict[str, float] = {}

    def progress(stage: str, state: str) -> None:
        if quiet:
            return
        if state == "start":
            started[stage] = time.monotonic()
            typer.echo(f"[{stage}] ...", err=True)
        else:
            typer.echo(f"[{stage}] done in {time.monotonic() - started[stage]:.1f} s", err=True)
    return progress


@app.command("prune")
def prune_command(
    model: ModelOpt = None,
    config: ConfigOpt = None,
    spec: PruneOpt = None,
    finetune: FinetuneOpt = None,
    epochs: EpochsOpt = None,
    criterion: Optional[str] = typer.Option(None, "--criterion", help="l1_norm (default) or fpgm."),
    weights: WeightsOpt = None,
    params: ParamsOpt = None,
    inputs: InputsOpt = [],
    eval_data: EvalOpt = None,
    labels: LabelsOpt = None,
    name: NameOpt = None,
    out: OutOpt = None,
    verbose: VerboseOpt = 0,
) -> None:
    """Prune conv filters and write a pruned model folder (model + prune.json report) that `build --model` takes.

    A factory is pruned in dynamic graph and fine-tuned through --finetune; an exported model is pruned as a program
    with per-layer ratios from a sensitivity analysis on a sample of --eval, scored in the task's metric.
    """
    from edgekit.core.errors import ConfigError

    _setup_logging(verbose, False)
    cfg = _resolve(config, inputs, model=model, weights=weights, params_file=params, evaluation=eval_data, labels=labels,
                   name=name, out_dir=out, prune=spec, finetune=finetune, epochs=epochs, criterion=criterion)
    if cfg.prune is None:
        raise ConfigError("nothing to prune: no --prune and no [prune] table", "pass --prune 0.3, --prune flops:50% or per-layer ratios")
    _start_toolchain()
    from .prune.run import prune_to_folder

    folder, pruned = prune_to_folder(cfg, cfg.prune)
    for line in pruned.report.lines():
        typer.echo(line)
    typer.echo(f"pruned model: {folder}")
    typer.echo(f"next: edgekit build --model {folder} (plus --input/--calib/--eval as for the original model)")


@app.command()
def inspect(
    path: Path = typer.Argument(..., help="A .nb file or a bundle folder."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
    profile: bool = typer.Option(False, "--profile", help="Profile one inference of an arm64 bundle's model.nb (golden "
                                 "input 0) under qemu: instructions per op kind and per kernel function, INT8 vs float, "
                                 "the conversions INT8 adds, and per op of the .nb's program (docs/costs.md). Runs "
                                 "Lite's unstripped build: "
                                 "EDGEKIT_LITE_ARM_SYMBOLS, else symbols/ inside the runtime folder."),
    lite_arm: LiteArmOpt = None,
    cpu: CpuOpt = None,
    timeout: float = typer.Option(3600.0, "--timeout", help="Seconds the profiled run may take (--profile)."),
) -> None:
    """Show a .nb's size, opt version and ops, or a bundle's manifest summary and checksum status; with --profile,
    where one inference's instructions go."""
    from edgekit.consumers.inspection import describe

    if profile:
        from edgekit.core.errors import ConfigError
        from edgekit.consumers.costs import profile_bundle
        from edgekit.verify.profile import table

        if not path.is_dir():
            raise ConfigError(f"--profile needs a bundle folder (its golden input is what runs), not {path}",
                              "pass a folder written by edgekit build")
        found = profile_bundle(path, _emulation_settings(lite_arm, cpu), timeout=timeout)
        if as_json:
            typer.echo(json.dumps(found, indent=2))
        else:
            for line in table(found):
                typer.echo(line)
        return
    info = describe(path)
    if as_json:
        typer.echo(json.dumps(info, indent=2, sort_keys=True))
    else:
        for line in info["text"]:
            typer.echo(line)
    if info.get("problems"):
        raise typer.Exit(10)


@app.command()
def bench(
    bundles: List[Path] = typer.Argument(..., help="Bundle folders; the first is the baseline the others are compared "
                                         "with."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the table."),
    profile: bool = typer.Option(False, "--profile", help="Profile each arm64 bundle under qemu instead (golden input "
                                 "0, on the --cpu path, or on every INT8 kernel path: default and a55): instructions "
                                 "per op kind side by side, then each bundle's top kernel functions and its largest ops of "
                                 "the program (docs/costs.md)."),
    lite_arm: LiteArmOpt = None,
    cpu: CpuOpt = None,
    timeout: float = typer.Option(3600.0, "--timeout", help="Seconds each profiled run may take (--profile)."),
) -> None:
    """Compare bundles' instruction counts per inference, per kernel path, as tier C recorded them (INT8 vs FP32,
    pruned vs not, armv7 vs arm64). Counts are deterministic, unlike emulated time (docs/costs.md)."""
    from edgekit.consumers.costs import bench_bundles, table

    if profile:
        from edgekit.consumers.costs import bench_profiles
        from edgekit.verify.profile import compare_table

        settings = _emulation_settings(lite_arm, cpu)
        result = bench_profiles(bundles, settings, [cpu] if cpu else None, timeout=timeout)
        lines = compare_table(result)
        if as_json:
            typer.echo(json.dumps(result, indent=2))
        else:
            for line in lines:
                typer.echo(line)
        return
    result = bench_bundles(bundles)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        for line in table(result):
            typer.echo(line)


@app.command()
def parity(
    bundle: Path = typer.Argument(..., help="A bundle folder written by `edgekit build`."),
    emulate: bool = typer.Option(False, "--emulate", help="Run model.nb itself on Paddle-Lite's ARM runtime under qemu "
                                 "(tier C) instead of the x86 twin, gated by the golden tolerances a device must meet."),
    lite_arm: LiteArmOpt = None,
    cpu: CpuOpt = None,
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds the emulated run may take."),
) -> None:
    """Replay a bundle's golden vectors: on its x86 twin .nb with the build's tier-A gates, or (--emulate) on
    model.nb under emulation. Exit 9 when a gate fails, 10 when the bundle does not verify."""
    from edgekit.consumers.inspection import replay_golden, replay_golden_emulated

    if emulate:
        lines, ok = replay_golden_emulated(bundle, _emulation_settings(lite_arm, cpu), timeout)
    else:
        lines, ok = replay_golden(bundle)
    for line in lines:
        typer.echo(line)
    if not ok:
        raise typer.Exit(9)


def _engines(engine: Optional[str], lite_arm: Optional[Path], cpu: Optional[str], timeout: float):
    from edgekit.consumers.predict import Engines, parse_engine

    return Engines(parse_engine(engine), _emulation_settings(lite_arm, cpu), timeout)


def _say_engine(lines: List[str], must: bool) -> None:
    """Which engine ran, for a person: on stderr (stdout stays one JSON document) on a terminal, and always when it
    `must` (the engine is to be named and the JSON printed has no place for it)."""
    if must or sys.stderr.isatty():
        for line in lines:
            typer.echo(line, err=True)


@app.command()
def run(
    bundle: Path = typer.Argument(..., help="A bundle folder written by `edgekit build`."),
    image: Path = typer.Argument(..., help="An image file (PNG/JPEG)."),
    engine: EngineOpt = None,
    lite_arm: LiteArmOpt = None,
    cpu: CpuOpt = None,
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds the emulated run may take (--engine arm)."),
    as_json: bool = typer.Option(False, "--json", help="Pretty-print the JSON result, with its engine always named."),
) -> None:
    """Run a bundle on one image with its own preprocess.json and task.json (as the apps do) and print the result as
    JSON (class and label; OCR and detection boxes in image pixels, text, direction, classes and scores; a
    segmentation mask summary).

    The engine (--engine) is named in the result's "engine" object whenever the bundle is not FP32 (and always with
    --json; a detector's list of boxes becomes {"boxes": [...], "engine": {...}} there), and in one line on stderr
    on a terminal or when the JSON cannot hold it."""
    from edgekit.consumers.predict import BundleModel, read_image

    model = BundleModel.load(bundle, engines=_engines(engine, lite_arm, cpu, timeout))
    result = model.predict(read_image(image))
    # an FP32 bundle's one-line result stays what it always was (the apps' tests compare it with their own)
    named = as_json or model.engine.bundle_precision != "fp32"
    if named and isinstance(result, dict):
        result = dict(result, engine=model.engine.describe())
    elif as_json:
        result = {"boxes": result, "engine": model.engine.describe()}
    embedded = isinstance(result, dict) and "engine" in result
    _say_engine([model.engine.line()], must=named and not embedded)
    typer.echo(json.dumps(result, ensure_ascii=False, indent=2 if as_json else None))


@app.command()
def ocr(
    image: Path = typer.Argument(..., help="A page image (PNG/JPEG)."),
    det: Path = typer.Option(..., "--det", help="The text-detection bundle (task ocr_det)."),
    rec: Path = typer.Option(..., "--rec", help="The text-recognition bundle (task ocr_rec)."),
    cls: Optional[Path] = typer.Option(None, "--cls", help="The direction-classifier bundle (task ocr_cls): crops it "
                                       "reads as upside down are turned before recognition."),
    engine: EngineOpt = None,
    lite_arm: LiteArmOpt = None,
    cpu: CpuOpt = None,
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds each emulated run may take (--engine arm)."),
    as_json: bool = typer.Option(False, "--json", help="Pretty-print, as one JSON object: {\"lines\": [...], "
                                 "\"engines\": {\"det\": {...}, \"rec\": {...}, \"cls\": {...}}}."),
) -> None:
    """PP-OCR as a system on the host, as the apps run it: detect -> crop -> (classify, rotate) -> recognise, with
    the bundles' own preprocessing; --engine applies to every bundle (the ARM engine batches all crops of a model
    into one emulator launch).

    Prints one JSON array on one line: an object per text line (box, quad, det_score, angle and angle_score with
    --cls, text, confidence), in reading order; which engine ran each bundle goes to stderr, one line per bundle
    (with --json: into the object instead)."""
    from edgekit.consumers.predict import BundleModel, ocr_system, read_image

    engines = _engines(engine, lite_arm, cpu, timeout)
    models = {role: BundleModel.load(path, engines=engines) for role, path in (("det", det), ("rec", rec), ("cls", cls))
              if path is not None}
    lines = ocr_system(read_image(image), models["det"], models["rec"], models.get("cls"))
    _say_engine([m.engine.line(role) for role, m in models.items()], must=not as_json)
    if as_json:
        typer.echo(json.dumps({"lines": lines, "engines": {role: m.engine.describe() for role, m in models.items()}},
                              ensure_ascii=False, indent=2))
    else:
        typer.echo(json.dumps(lines, ensure_ascii=False))


@app.command()
def package(
    bundles: Optional[List[Path]] = typer.Argument(None, help="Bundle folders written by `edgekit build` (e.g. det, cls "
                                                   "and rec)."),
    platform: Optional[str] = typer.Option(None, "--platform", "-p", help="android, ios or linux (the camera demo)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="The asset folder to write (replaced as a whole). "
                                       "Default: the demo app's own asset folder in this checkout "
                                       "(android_demo/app/src/main/assets/edgekit, ios_demo/EdgekitDemo/Resources/edgekit, "
                                       "camera_demo/assets)."),
    sign: Optional[Path] = typer.Option(None, "--sign", help="Ed25519 private key (PEM) to sign assets.json with "
                                        "(writes assets.json.sig; docs/security.md)."),
    verify: Optional[Path] = typer.Option(None, "--verify", help="Check an asset set instead of writing one: every "
                                          "checksum, and with --pubkey its signature. Exit 10 / 16 when it fails."),
    pubkey: Optional[Path] = typer.Option(None, "--pubkey", help="With --verify: the Ed25519 public key (PEM) the set "
                                          "must be signed by; unsigned or signed by another key exits 16."),
) -> None:
    """Verify bundles and write the app-ready asset set (models, specs, labels, golden data, assets.json with
    every file's sha256 and the runtime version the app must link) that the apps' loader checks at start-up."""
    from edgekit.core.errors import ConfigError
    from edgekit.consumers.package import PLATFORMS, Platform, default_destination, verify_set
    from edgekit.consumers.package import package as write_assets

    if verify is not None:
        if bundles or sign is not None:
            raise ConfigError("--verify checks an existing asset set", "drop the bundle arguments and --sign")
        for line in verify_set(verify.expanduser().absolute(), pubkey):
            typer.echo(line)
        return
    if pubkey is not None:
        raise ConfigError("--pubkey goes with --verify", "pass --verify ASSET_DIR --pubkey KEY")
    if not bundles or platform is None:
        raise ConfigError("package needs bundle folders and --platform", "e.g. edgekit package det rec --platform android")
    try:
        chosen = Platform(platform)
    except ValueError:
        raise ConfigError(f"platform {platform!r} is unknown", f"use one of {', '.join(p.value for p in Platform)}") from None
    root = Path(__file__).resolve().parents[1]
    if out is None and not (root / PLATFORMS[chosen].assets).parent.parent.is_dir():
        raise ConfigError(f"no {chosen.value} demo app next to this edgekit installation", "pass --out FOLDER")
    destination = out.expanduser().absolute() if out else default_destination(chosen, root)
    index = write_assets(bundles, chosen, destination, sign=sign.expanduser().absolute() if sign else None)
    for model in index["models"]:
        typer.echo(f"{model['name']}: {model['task']} {model['target']} {model['precision']}")
    typer.echo(f"assets: {destination} ({len(index['files'])} files, runtime {index['runtime_required']['opt_version']})")
    if sign:
        typer.echo(f"signed: {destination / 'assets.json.sig'} (Ed25519 over assets.json)")


import_app = typer.Typer(cls=_Edgekit, no_args_is_help=True, help="Convert models from other frameworks into Paddle inference models.")
app.add_typer(import_app, name="import")
from .device.cli import device_app; app.add_typer(device_app, name="device")  # noqa: E402,E702
from edgekit.matrix.cli import matrix_command; app.command("matrix")(matrix_command)  # noqa: E402,E702


@import_app.command("onnx")
def import_onnx_command(
    model: Path = typer.Argument(..., help="The .onnx file (PyTorch users: export with torch.onnx.export first)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for model.pdmodel, model.pdiparams and import.json (must not exist)."),
    inputs: List[str] = typer.Option([], "--input", "-i", help="ONNX input name:shape, e.g. x:1x3x48x320; fixes dynamic dims "
                                     "X2Paddle cannot carry (-1 keeps a dim dynamic)."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds X2Paddle may take."),
    max_abs: float = typer.Option(IMPORT_MAX_ABS, "--max-abs", help="Largest difference from ONNX Runtime allowed per output, relative "
                                  "to the output's largest |value| (absolute for outputs below 1e-3, which carry no "
                                  "signal on random inputs) ([parity] import_max_abs in a build)."),
    min_cosine: float = typer.Option(IMPORT_MIN_COSINE, "--min-cosine", help="Smallest cosine to ONNX Runtime allowed per output "
                                     "([parity] import_min_cosine)."),
) -> None:
    """X2Paddle conversion, checked against ONNX Runtime (disagreement is an error).

    Before X2Paddle, ops it lacks (HardSwish, LayerNormalization, Gelu, ...) are rewritten and opsets above 15 are
    converted down, each rewrite checked in ONNX Runtime; names X2Paddle cannot use are sanitised.
    """
    from edgekit.core import atomic
    from edgekit.contracts.settings import InputSpec
    from edgekit.core.errors import ConfigError
    from .export.onnx_import import import_onnx
    from edgekit.model.parity import Tolerance

    out = out.expanduser().absolute()
    if out.exists():
        raise ConfigError(f"{out} already exists", "pass a new folder to --out")
    shapes = {spec.name: spec.shape for spec in (InputSpec.parse(i) for i in inputs)}
    with atomic.staging_dir(out.parent, ".edgekit-import-") as staging:
        static, report = import_onnx(model.expanduser().absolute(), staging, shapes, timeout=timeout,
                                     limits=Tolerance(max_abs, min_cosine))
        (staging / "import.json").write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
        atomic.publish_dir(staging, out)
    from .export.onnx_import import check_lines

    for line in check_lines(report["check"]):
        typer.echo(line)
    legal = report["legalise"]
    if legal["by_op"] or legal["opset"]["converted_to"] != legal["opset"]["source"]:
        rewrites = ", ".join(f"{r['op']} x{r['nodes']}" for r in legal["by_op"]) or "no op rewritten"
        typer.echo(f"legalised for X2Paddle: {rewrites}; opset {legal['opset']['source']} -> {legal['opset']['converted_to']}; "
                   f"ONNX Runtime max abs {legal['check']['rewritten_max_abs']:.3g} on the rewritten outputs")
    typer.echo(f"feeds: {', '.join(f'{k} -> {v}' for k, v in report['feeds'].items())}; "
               f"{len(report.get('renamed', {}))} name(s) sanitised")
    typer.echo(f"paddle model: {out / static.model_file.name} (+ {static.params_file.name}, import.json)")


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
