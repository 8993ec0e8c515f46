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
from typing import List, Optional

import typer

from .errors import EdgekitError
from .tables import PRECISIONS, TARGETS, Precision, Target

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Build verified Paddle-Lite .nb bundles for ARM phones and boards from Paddle models.")

TARGET_HELP = "Device target: " + "; ".join(f"{t.value} = {i.note}" for t, i in TARGETS.items()) + "."
QUANT_HELP = "Precision: " + "; ".join(f"{p.value} = {i.tradeoff}" for p, i in PRECISIONS.items()) + "."
PRUNE_HELP = ("Prune conv filters (PaddleSlim): a ratio of every prunable conv (0.3), a target with per-layer ratios "
              "chosen (flops:50%, params:40%), or per-layer ratios (features.0=0.5,features.4=0.3).")
FINETUNE_HELP = "Fine-tune hook for a pruned factory model: package.module:function, called as function(model, epochs)."


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
    typer.echo(f"error: {error.message}", err=True)
    if error.hint:
        typer.echo(f"  fix: {error.hint}", err=True)
    raise typer.Exit(error.exit_code)


def _guarded(fn):
    """Map edgekit errors to one-line messages; tracebacks only with EDGEKIT_DEBUG=1."""
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except EdgekitError as error:
            if os.environ.get("EDGEKIT_DEBUG") == "1":
                raise
            _fail(error)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn
    return wrapper


@app.command()
def build(
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model: a .pdmodel file, a folder holding an exported "
                                        "inference model, an .onnx file (converted with X2Paddle, checked against ONNX Runtime), "
                                        "or package.module:factory returning a paddle.nn.Layer. "
                                        "Default: [model] of --config, else ./edgekit.toml, else the bundled digits example."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="edgekit.toml with [model], [data], [preprocess], "
                                          "[build], [quantize], [parity], [prune], [task]; flags override it."),
    target: Optional[Target] = typer.Option(None, "--target", "-t", help=TARGET_HELP + " Default arm64."),
    quant: Optional[Precision] = typer.Option(None, "--quant", "-q", help=QUANT_HELP + " Default fp32."),
    weights: Optional[Path] = typer.Option(None, "--weights", help="A .pdparams state dict for a factory model."),
    params: Optional[Path] = typer.Option(None, "--params", help="The .pdiparams of an exported model, when not beside it."),
    inputs: List[str] = typer.Option([], "--input", "-i", help="Input spec name:shape[:dtype], e.g. image:-1x3x224x224:float32 "
                                     "(-1 = dynamic). Required for factory models; for exported models fixes dynamic dims; "
                                     "for .onnx models use the ONNX input names (the sizes are written into the model)."),
    calib: Optional[Path] = typer.Option(None, "--calib", help="Calibration data for int8: an image folder (uses [preprocess]) or .npz/.npy."),
    eval_data: Optional[Path] = typer.Option(None, "--eval", help="Evaluation data for parity: image folder (class sub-folders "
                                             "named as in --labels give labels) or .npz with optional 'labels'. Default: the "
                                             "calibration data (optimistic for int8: it was calibrated on it)."),
    labels: Optional[Path] = typer.Option(None, "--labels", help="Class names, one per line (order = class index)."),
    algo: Optional[str] = typer.Option(None, "--algo", help="Calibration algorithm for int8: avg, abs_max, hist, mse, KL, emd. Default avg."),
    search_algos: Optional[str] = typer.Option(None, "--search-algos", help="Calibration algorithms to try for int8, comma-separated "
                                               "(e.g. avg,hist,mse,KL); the best that meets the budget wins. Default: only --algo."),
    max_drop: Optional[float] = typer.Option(None, "--max-drop", help="INT8 accuracy budget: points of the task metric (top-1, OCR exact match, ...) with ground truth, else 1 - output "
                                             "cosine. The most sensitive layers stay in float until it holds; if it cannot, the "
                                             "build fails (exit 9) showing the best found. Default: the [parity] int8 gate."),
    no_fallback: bool = typer.Option(False, "--no-fallback", help="Never keep layers in float: whole-model int8 or fail."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Calibration cache. Default $XDG_CACHE_HOME/edgekit/calibration "
                                             "(~/.cache/...); EDGEKIT_CACHE_DIR."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Calibrate everything again and keep nothing."),
    task: Optional[str] = typer.Option(None, "--task", help="Task metric: classification, ocr_det, ocr_rec, ocr_cls. Default: "
                                       "the evaluation data's truth file (<name>.truth.json / truth.json), else top-1 with labels."),
    name: Optional[str] = typer.Option(None, "--name", help="Model name used for the bundle folder."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output root; the bundle goes to OUT/<name>/<target>-<quant>/. Default ./build."),
    prune: Optional[str] = typer.Option(None, "--prune", help=PRUNE_HELP + " Default: no pruning."),
    finetune: Optional[str] = typer.Option(None, "--finetune", help=FINETUNE_HELP),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Fine-tuning epochs passed to the hook. Default 3."),
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="More log output (-vv for Paddle's own)."),
    quiet: bool = typer.Option(False, "--quiet", help="Only the result and errors."),
) -> None:
    """Export, (prune,) quantise, convert to .nb, verify parity on the host, and write the bundle."""
    _setup_logging(verbose, quiet)
    search = {"search_algos": search_algos, "max_drop": max_drop, "fallback": False if no_fallback else None,
              "cache_dir": "off" if no_cache else cache_dir, "prune": prune, "finetune": finetune, "epochs": epochs,
              "task_kind": task}
    _guarded(_build)(model, config, target, quant, weights, params, inputs, calib, eval_data, labels, algo, name, out, quiet,
                     search)


def _build(model, config, target, quant, weights, params, inputs, calib, eval_data, labels, algo, name, out, quiet,
           search) -> None:
    from .config import InputSpec, resolve

    flags = {
        "model": model, "target": target.value if target else None, "precision": quant.value if quant else None,
        "weights": weights, "params_file": params, "inputs": tuple(InputSpec.parse(i) for i in inputs) or None,
        "calibration": calib, "evaluation": eval_data, "labels": labels, "algo": algo, "name": name, "out_dir": out,
        **search,
    }
    cfg = resolve(config, flags)
    import paddle  # noqa: F401  (paddle installs its own SIGTERM handler on import: ours must come after)

    from .pipeline import build as run_build

    _exit_on_sigterm()

    started = {}

    def progress(stage: str, state: str) -> None:
        if quiet:
            return
        if state == "start":
            started[stage] = time.monotonic()
            typer.echo(f"[{stage}] ...", err=True)
        else:
            typer.echo(f"[{stage}] done in {time.monotonic() - started[stage]:.1f} s", err=True)

    if not quiet:
        typer.echo(f"building {cfg.model.name} for {cfg.target.value} {cfg.precision.value} -> {cfg.bundle_dir}", err=True)
    result = run_build(cfg, progress)
    if result.prune is not None:
        for line in result.prune.lines():
            typer.echo(line)
    for line in result.quant_search:
        typer.echo(line)
    for line in result.report.lines():
        typer.echo(line)
    m = result.bundle.manifest["model"]
    typer.echo(f"model.nb: {m['bytes'] / 1024:.1f} KiB (graph {m['program_bytes'] / 1024:.1f} KiB, weights "
               f"{m['params_bytes'] / 1024:.1f} KiB), opt {m['opt_version']}")
    typer.echo(f"bundle: {result.bundle.path}")


@app.command("prune")
def prune_command(
    model: Optional[str] = typer.Option(None, "--model", "-m", help="A factory (package.module:factory, pruned in dynamic "
                                        "graph and fine-tuned) or an exported model (pruned as a program; no fine-tuning)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="edgekit.toml; its [prune] table holds the same settings."),
    spec: Optional[str] = typer.Option(None, "--prune", help=PRUNE_HELP),
    finetune: Optional[str] = typer.Option(None, "--finetune", help=FINETUNE_HELP),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Fine-tuning epochs passed to the hook. Default 3."),
    criterion: Optional[str] = typer.Option(None, "--criterion", help="l1_norm (default) or fpgm."),
    weights: Optional[Path] = typer.Option(None, "--weights", help="A .pdparams state dict for a factory model."),
    params: Optional[Path] = typer.Option(None, "--params", help="The .pdiparams of an exported model, when not beside it."),
    inputs: List[str] = typer.Option([], "--input", "-i", help="Input spec name:shape[:dtype] (as for build)."),
    eval_data: Optional[Path] = typer.Option(None, "--eval", help="Evaluation data: the task metric before/after, and the "
                                             "sensitivity analysis (on a sample of it)."),
    labels: Optional[Path] = typer.Option(None, "--labels", help="Class names, one per line (order = class index)."),
    name: Optional[str] = typer.Option(None, "--name", help="Model name used for the output folder."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output root; the pruned model goes to OUT/<name>/pruned/."),
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="More log output (-vv for Paddle's own)."),
) -> None:
    """Prune conv filters and write a pruned model folder (model + prune.json report) that `build --model` takes."""
    _setup_logging(verbose, False)
    _guarded(_prune)(model, config, spec, finetune, epochs, criterion, weights, params, inputs, eval_data, labels, name, out)


def _prune(model, config, spec, finetune, epochs, criterion, weights, params, inputs, eval_data, labels, name, out) -> None:
    from .config import InputSpec, resolve
    from .errors import ConfigError

    flags = {"model": model, "weights": weights, "params_file": params, "inputs": tuple(InputSpec.parse(i) for i in inputs) or None,
             "evaluation": eval_data, "labels": labels, "name": name, "out_dir": out, "prune": spec, "finetune": finetune,
             "epochs": epochs, "criterion": criterion}
    cfg = resolve(config, flags)
    if cfg.prune is None:
        raise ConfigError("nothing to prune: no --prune and no [prune] table", "pass --prune 0.3, --prune flops:50% or per-layer ratios")
    import paddle  # noqa: F401  (paddle installs its own SIGTERM handler on import: ours must come after)

    from .prune import prune_to_folder

    _exit_on_sigterm()
    folder, pruned = prune_to_folder(cfg, cfg.prune)
    for line in pruned.report.lines():
        typer.echo(line)
    typer.echo(f"pruned model: {folder}")
    typer.echo(f"next: edgekit build --model {folder} (plus --input/--calib/--eval as for the original model)")


@app.command()
def inspect(
    path: Path = typer.Argument(..., help="A .nb file or a bundle folder."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
) -> None:
    """Show a .nb's size, opt version and ops, or a bundle's manifest summary and checksum status."""
    _guarded(_inspect)(path, as_json)


def _inspect(path: Path, as_json: bool) -> None:
    from .inspection import describe

    info = describe(path)
    if as_json:
        typer.echo(json.dumps(info, indent=2, sort_keys=True))
    else:
        for line in info["text"]:
            typer.echo(line)
    if info.get("problems"):
        raise typer.Exit(10)


@app.command()
def parity(
    bundle: Path = typer.Argument(..., help="A bundle folder written by `edgekit build`."),
) -> None:
    """Replay a bundle's golden vectors on its x86 twin .nb and apply the build's tier-A gates to them."""
    _guarded(_parity)(bundle)


def _parity(path: Path) -> None:
    from .inspection import replay_golden

    lines, ok = replay_golden(path)
    for line in lines:
        typer.echo(line)
    if not ok:
        raise typer.Exit(9)


@app.command()
def run(
    bundle: Path = typer.Argument(..., help="A bundle folder written by `edgekit build`."),
    image: Path = typer.Argument(..., help="An image file (PNG/JPEG)."),
    as_json: bool = typer.Option(False, "--json", help="Pretty-print the JSON result."),
) -> None:
    """Run a bundle's x86 twin on one image with the bundle's own pre/post-processing; print the result."""
    _guarded(_run)(bundle, image, as_json)


def _run(bundle_path: Path, image: Path, as_json: bool) -> None:
    import cv2

    from . import bundle as bundle_mod
    from .data import PreprocessSpec
    from .errors import BundleError, DataError
    from .lite.runtime import LiteRunner
    from .tasks import TaskKind, make_task
    from .tasks.ocr import line_tensor, normalize

    loaded = bundle_mod.load(bundle_path)
    problems = bundle_mod.verify(loaded)
    if problems:
        raise BundleError(f"bundle {bundle_path} does not verify: {problems[0]}", "rebuild it with `edgekit build`")
    manifest = loaded.manifest
    task_file = bundle_path / "task.json"
    if not task_file.is_file():
        raise BundleError(f"{bundle_path} has no task.json: it was built without labels or ground truth",
                          "rebuild with labelled evaluation data (or a truth file) so the bundle knows its task")
    spec = json.loads(task_file.read_text(encoding="utf-8"))
    task = make_task(spec["kind"], spec["options"])
    picture = cv2.imread(str(image), cv2.IMREAD_COLOR)
    if picture is None:
        raise DataError(f"cannot decode image {image}", "give a PNG/JPEG file")
    feed = manifest["model"]["inputs"][0]
    height, width = feed["shape"][2:]
    if height < 1 or width < 1:
        raise BundleError(f"the bundle's input {feed['name']!r} has dynamic size {feed['shape']}",
                          "edgekit run needs fixed height and width: rebuild with --input giving them")
    if task.kind in (TaskKind.ocr_rec, TaskKind.ocr_cls):
        x = line_tensor(picture, height, width)
    elif task.kind is TaskKind.ocr_det:          # boxes come back in model pixels
        x = normalize(cv2.resize(picture, (width, height)))
    else:
        raw = json.loads((bundle_path / "preprocess.json").read_text(encoding="utf-8"))["preprocess"]
        if raw is None:
            raise BundleError(f"{bundle_path} has no preprocessing spec (it was built from tensor data)",
                              "rebuild with an image folder and a [preprocess] table to run it on images")
        x = PreprocessSpec.from_mapping({k: v for k, v in raw.items() if k != "order"}).apply(picture)
    outputs = LiteRunner(bundle_path / manifest["host_twin"]["file"], [feed["name"]]).run_one({feed["name"]: x[None]})
    result = task.postprocess(outputs)[0]
    typer.echo(json.dumps(result, ensure_ascii=False, indent=2 if as_json else None))


import_app = typer.Typer(no_args_is_help=True, help="Convert models from other frameworks into Paddle inference models.")
app.add_typer(import_app, name="import")


@import_app.command("onnx")
def import_onnx_command(
    model: Path = typer.Argument(..., help="The .onnx file (PyTorch users: export with torch.onnx.export first)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for model.pdmodel, model.pdiparams and import.json (must not exist)."),
    inputs: List[str] = typer.Option([], "--input", "-i", help="ONNX input name:shape, e.g. x:1x3x48x320; fixes dynamic dims "
                                     "X2Paddle cannot carry (-1 keeps a dim dynamic)."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds X2Paddle may take."),
) -> None:
    """X2Paddle conversion with unsafe names sanitised, checked against ONNX Runtime (disagreement is an error)."""
    _guarded(_import_onnx)(model, out, inputs, timeout)


def _import_onnx(model: Path, out: Path, inputs: List[str], timeout: float) -> None:
    import shutil
    import tempfile

    from .config import InputSpec
    from .errors import ConfigError
    from .export.onnx_import import import_onnx

    out = out.expanduser().absolute()
    if out.exists():
        raise ConfigError(f"{out} already exists", "pass a new folder to --out")
    shapes = {spec.name: spec.shape for spec in (InputSpec.parse(i) for i in inputs)}
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".edgekit-import-", dir=out.parent))
    try:
        static, report = import_onnx(model.expanduser().absolute(), staging, shapes, timeout=timeout)
        (staging / "import.json").write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
        staging.replace(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    from .export.onnx_import import check_lines

    for line in check_lines(report["check"]):
        typer.echo(line)
    typer.echo(f"feeds: {', '.join(f'{k} -> {v}' for k, v in report['feeds'].items())}; "
               f"{len(report.get('renamed', {}))} name(s) sanitised")
    typer.echo(f"paddle model: {out / static.model_file.name} (+ {static.params_file.name}, import.json)")


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
