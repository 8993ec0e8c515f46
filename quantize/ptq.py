"""Stage `quantize`: PaddleSlim post-training quantisation, called from exactly one place.

`quant_post_static` takes ~28 keyword arguments, asserts on its input and writes
a hidden file relative to the working directory, so it runs here with explicit
arguments, inside a temporary working directory, behind typed errors.

It is called as `quant_post_static` does it (Paddle's `PostTrainingQuantization`, then
`quantize()` and `save_quantized_model()`), with one change: activations of rank 0 or 1 are
never sampled. PaddleSlim 2.6's samplers read every activation as `[batch, ...]` (`avg` does
`var_tensor.reshape(var_tensor.shape[0], -1)`: IndexError on a 0-d tensor, such as a width read
from a shape), and a scalar or a vector of sizes has no activation range worth an INT8 scale.
They are handed to Paddle's own "zero-size tensor, unable to calibrate" path, so the ops that
write them get no output scale, and a quantisable op reading or writing one stays float.

Calibration and the float list are independent: Paddle samples every quantisable op's inputs and
outputs in the FP32 program whatever `skip_tensor_list` says (the list only marks ops that
`_update_program` then leaves alone), so one calibration's thresholds serve every float list.
`quantize_int8` writes them beside the model (`scales.json`), and `requantize_int8` builds the model
for another float list from them with Paddle's own insertion and freeze passes, without data: the
same program and weights, byte for byte, as calibrating again with that list (tests/e2e/test_quant_replay.py).

Paddle makes every activation it samples persistable, so one batch holds all of them at once: ~1 GiB a sample for
PP-OCRv5 det at 960x960. `plan_batches` estimates that from the program and feeds the largest batch up to the one
asked for that fits the memory rule (edgekit/core/memory.py), in more batches over the same samples.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from edgekit.model.artifacts import CalibrationBatches, QuantizedModel, StaticModel
from edgekit.contracts.settings import QuantConfig
from edgekit.model.data import Samples, width_groups
from edgekit.core import memory
from edgekit.core.errors import DataError, QuantizeError
from edgekit.core.quiet import quiet_toolchain
from edgekit.export import program as prog

log = logging.getLogger(__name__)

QUANTIZABLE_OPS = ("conv2d", "depthwise_conv2d", "conv2d_transpose", "mul", "matmul", "matmul_v2")
MIN_CALIBRATION_SAMPLES = 8
MIN_SAMPLED_RANK = 2          # activations of lower rank stay float (module docstring)
SCALES_FILE = "scales.json"
SCALES_FORMAT = "edgekit-ptq-scales/1"
# the samplers' copies of one activation while they read it, in units of the largest: hist held 87 MB a sample more
# than avg on PP-OCRv5 det at 960x960 (np.abs, then float64 bin indices), three times its largest activation (28 MB);
# avg and mse held no more than the activations and one copy (on a small net, measured)
SAMPLER_COPIES = {"hist": 4, "KL": 4}
REPLAYABLE_ALGOS = ("avg", "abs_max", "hist", "mse", "KL", "emd")   # their thresholds are all the program takes


def low_rank_activations(program, names) -> set[str]:
    """The activations among `names` whose declared rank is below MIN_SAMPLED_RANK (0-d scalars, 1-d vectors)."""
    found = set()
    for name in names:
        var = program.global_block()._find_var_recursive(name)
        if var is None:
            for block in program.blocks:
                var = block._find_var_recursive(name)
                if var is not None:
                    break
        if var is not None and len(var.shape) < MIN_SAMPLED_RANK:
            found.add(name)
    return found


def sampled_activations(program, quantizable: list[str]) -> set[str]:
    """The activations PaddleSlim samples, and so keeps in memory for the whole calibration (its
    `_collect_target_varnames`): the inputs and outputs of the quantised op types and the outputs of every op it
    observes for an output scale, less the low-rank ones edgekit keeps from it."""
    from paddle.static.quantization import utils
    from paddle.static.quantization.quant_config import BaseQuantizer

    config = BaseQuantizer(quantizable_op_type=quantizable, quant_bits=8)
    quantised = set(config.weight_quant_operation_types) | set(config.activation_quant_operation_types)
    observed = set(config.observer_operation_types)
    persistable = {var.name for var in program.list_vars() if var.persistable}
    names: set[str] = set()
    for block in program.blocks:
        for op in block.ops:
            if op.type in quantised:
                names |= set(utils._get_op_input_var_names(op)) | set(utils._get_op_output_var_names(op))
            elif op.type in observed:
                names |= set(utils._get_op_output_var_names(op))
    names -= persistable
    return names - low_rank_activations(program, names)


def _ptq_class():
    """Paddle's PostTrainingQuantization (what quant_post_static runs), with low-rank activations kept from the samplers."""
    from paddle.static.quantization import PostTrainingQuantization

    class LowRankFloat(PostTrainingQuantization):
        low_rank: tuple[str, ...] = ()
        float_ops: tuple[str, ...] = ()
        batch_sizes: tuple[int, ...] = ()     # the loader's batches in order when their sizes differ (width groups)
        _batches_sampled = 0

        def _sample_avg(self):
            """Paddle's `avg` keeps, per batch, the batch's mean of per-sample maxima, and averages those: batches of
            different sizes (text lines in width groups) would weigh a line of a small batch more than one of a full
            batch. Each batch's value is kept once per sample, so the threshold is the mean over samples, as it is
            in batches of equal size, however the lines are grouped."""
            before = {name: len(values) for name, values in self._quantized_var_avg.items()}
            super()._sample_avg()
            at = self._batches_sampled
            self._batches_sampled += 1
            count = self.batch_sizes[at] if at < len(self.batch_sizes) else 1
            for name, values in self._quantized_var_avg.items():
                if count > 1 and len(values) > before.get(name, 0):
                    values.extend([values[-1]] * (count - 1))

        def _collect_target_varnames(self):
            super()._collect_target_varnames()
            low = low_rank_activations(self._program, self._quantized_act_var_name)
            self._quantized_act_var_name -= low
            self._zero_size_var_names |= low           # Paddle: "unable to calibrate, so skip quant it"
            kept = []
            for block in self._program.blocks:
                for op in block.ops:
                    touched = set(op.input_arg_names) | set(op.output_arg_names)
                    if op.type in QUANTIZABLE_OPS and touched & low:
                        op._set_attr("op_namescope", "skip_quant")     # what skip_tensor_list does: stays float
                        kept.append(op.type)
            self.low_rank, self.float_ops = tuple(sorted(low)), tuple(kept)

        def thresholds(self) -> dict:
            """What sampling decided, as JSON: every later step reads only these (module docstring)."""
            return {"format": SCALES_FORMAT, "algo": self._algo,
                    "threshold": _plain(self._quantized_threshold),
                    "var_threshold": _plain(self._quantized_var_threshold),
                    "zero_size": sorted(self._zero_size_var_names)}

        def replay(self, scales: dict) -> None:
            """`quantize()` without the data passes: the steps after sampling, on thresholds sampled before."""
            self._load_model_data()
            self._collect_target_varnames()            # marks this float list's ops skip_quant, as quantize() does
            self._quantized_threshold = dict(scales["threshold"])
            self._quantized_var_threshold = dict(scales["var_threshold"])
            self._zero_size_var_names = set(scales["zero_size"])
            self._update_program()
            self._save_output_threshold()
            if any(t in self.quant_config.activation_quant_operation_types for t in self._dynamic_quantize_op_type):
                self._collect_dynamic_quantize_op_threshold(self._dynamic_quantize_op_type)
            from paddle.static.quantization import utils

            utils.move_persistable_var_to_global_block(self._program)

    return LowRankFloat


def _plain(thresholds: dict) -> dict:
    """numpy scalars and lists as JSON numbers (float() of a float32 or float64 is exact; json keeps every digit)."""
    plain = {}
    for name, value in thresholds.items():
        array = np.asarray(value, dtype=np.float64)
        plain[name] = float(array) if array.ndim == 0 else [float(v) for v in array.ravel()]
    return plain


@contextlib.contextmanager
def _inside(folder: str):
    previous = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


def line_batches(groups: list[tuple[np.ndarray, dict]], batch_size: int) -> list[list[int]]:
    """Sample indices in batches of at most `batch_size` within each width group (`width_groups`)."""
    return [[int(i) for i in members[start:start + batch_size]]
            for members, _ in groups for start in range(0, len(members), batch_size)]


def _loader(paddle, model: StaticModel, samples: Samples, batch_size: int):
    """The DataLoader PaddleSlim insists on (static mode, feed vars named after the model's feeds), and the batch
    sizes of the batches it must be told about when text lines come in batches of one width group each, cut to the
    group's width (`width_groups`, as they are scored); None: PaddleSlim's batches of `batch_size` in order."""
    names = [f.name for f in model.feeds]
    groups = width_groups(samples)
    at = {int(index): (inputs, row) for members, inputs in groups for row, index in enumerate(members)}

    class _Calibration(paddle.io.Dataset):
        def __len__(self) -> int:
            return len(samples)

        def __getitem__(self, index: int):
            inputs, row = at[index]
            return tuple(inputs[n][row] for n in names)

    with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        feed_vars = [paddle.static.data(name=f.name, shape=[-1, *f.shape[1:]], dtype=f.dtype) for f in model.feeds]
    if len(groups) > 1:
        batches = line_batches(groups, batch_size)
        return paddle.io.DataLoader(_Calibration(), feed_list=feed_vars, places=paddle.CPUPlace(),
                                    batch_sampler=batches, return_list=False, num_workers=0), [len(b) for b in batches]
    return paddle.io.DataLoader(_Calibration(), feed_list=feed_vars, places=paddle.CPUPlace(), batch_size=batch_size,
                                shuffle=False, drop_last=True, return_list=False, num_workers=0), None


def calibration_batches(available: int, cfg: QuantConfig, fixed_batch: int | None = None, sample_bytes: int = 0,
                        memory_bytes: int | None = None) -> CalibrationBatches:
    """How `available` calibration samples are fed: `batch_size x batch_nums` is a sample budget.

    A program with a fixed batch (e.g. 1, from an ONNX export) only accepts that batch size;
    it still calibrates on as many samples as the budget allows, in more batches. Otherwise the batch
    is the largest up to `cfg.batch_size` whose `sample_bytes` each fit the memory rule (edgekit/core/memory.py)
    and that divides the samples the asked batch would use: the same samples, in more batches.
    """
    asked = fixed_batch or cfg.batch_size
    usable = min(available, cfg.batch_size * cfg.batch_nums)
    usable -= usable % asked
    if usable < max(MIN_CALIBRATION_SAMPLES, asked):
        raise DataError(f"calibration has {available} samples; INT8 needs at least {max(MIN_CALIBRATION_SAMPLES, asked)}",
                        "add calibration samples (a few hundred representative inputs is typical)")
    batch = asked if fixed_batch else memory.fitting_batch(asked, sample_bytes, memory_bytes, divides=usable)
    return CalibrationBatches(batch, usable // batch, asked, sample_bytes, memory_bytes)


def calibration_sample_bytes(model: StaticModel, samples: Samples, quantizable: list[str] | None = None,
                             algos: tuple[str, ...] = ("avg",)) -> int:
    """Estimated memory one calibration sample holds: every activation PaddleSlim samples (kept to the end of each
    batch), the peak of the others, and the copies of the largest that the samplers of `algos` make (the most of
    them; export/footprint.py)."""
    from edgekit.export.footprint import footprint

    program = prog.parse_program(model.model_file)
    shapes = {f.name: samples.inputs[f.name].shape[1:] for f in model.feeds if f.name in samples.inputs}
    found = footprint(program, shapes, sampled_activations(program, quantizable or quantizable_ops()))
    return found.total + max(SAMPLER_COPIES.get(algo, 1) for algo in algos) * found.largest_held


def plan_batches(model: StaticModel, samples: Samples, cfg: QuantConfig, quantizable: list[str] | None = None,
                 memory_bytes: int | None = None, algos: tuple[str, ...] = ()) -> CalibrationBatches:
    """`calibration_batches` for `model` on `samples`, with its memory estimate for `algos` (default: cfg.algo) and
    the host's MemTotal (or `memory_bytes`): the batch changes thresholds and cache keys, so it must not move with
    what other jobs hold (edgekit/core/memory.py). A batch larger than what is free now is said, not lowered."""
    if model.fixed_batch is not None or cfg.batch_size <= 1:
        return calibration_batches(len(samples), cfg, model.fixed_batch)
    per_sample = calibration_sample_bytes(model, samples, quantizable, algos or (cfg.algo,))
    batches = calibration_batches(len(samples), cfg, None, per_sample,
                                  memory.calibration_bytes() if memory_bytes is None else memory_bytes)
    free = memory.available_bytes()
    if memory_bytes is None and free and batches.batch_size * per_sample > free * memory.MEMORY_FRACTION:
        log.warning("calibration batches of %d hold ~%s; %s is free now (other jobs): it may run short of memory "
                    "(a smaller [quantize] batch_size needs less, and gives other thresholds)", batches.batch_size,
                    memory.describe_bytes(batches.batch_size * per_sample), memory.describe_bytes(free))
    return batches


def quantizable_ops(float_ops: tuple[str, ...] = ()) -> list[str]:
    """PaddleSlim's `quantizable_op_type`: QUANTIZABLE_OPS less the op types a candidate keeps in float."""
    unknown = sorted(set(float_ops) - set(QUANTIZABLE_OPS))
    if unknown:
        raise QuantizeError(f"op type(s) {', '.join(unknown)} cannot be kept float: they are not quantised anyway",
                            f"name op types among {', '.join(QUANTIZABLE_OPS)}")
    return [op for op in QUANTIZABLE_OPS if op not in float_ops]


def quantize_int8(model: StaticModel, samples: Samples, cfg: QuantConfig, out_dir: Path,
                  skip_tensors: tuple[str, ...] = (), float_ops: tuple[str, ...] = (),
                  batches: CalibrationBatches | None = None) -> QuantizedModel:
    """PTQ of `model`; ops whose weight tensors are named in `skip_tensors`, and every op of the types in
    `float_ops`, stay in float. The thresholds sampled go to `out_dir/scales.json`, for `requantize_int8`.
    `batches`: how to feed the samples (`plan_batches`, which runs when it is not given)."""
    quantizable = quantizable_ops(float_ops)
    batches = batches or plan_batches(model, samples, cfg, quantizable)
    if batches.lowered:
        log.warning("%s", batches.reason())
    calib = samples.spread(batches.samples)   # every class, not the first folders only
    start = time.monotonic()
    ptq = _run(model, calib, cfg, out_dir, skip_tensors, batches.batch_size, batches.batch_nums, None, quantizable)
    scales = dict(ptq.thresholds(), calibration_samples=len(calib), calibration_sha256=calib.digest(),
                  low_rank=list(ptq.low_rank), calibration_batches=batches.to_json())
    (out_dir / SCALES_FILE).write_text(json.dumps(scales, sort_keys=True) + "\n", encoding="utf-8")
    seconds = time.monotonic() - start
    log.info("quantised with %s on %d samples in %.1f s", cfg.algo, len(calib), seconds)
    return _quantized(model, cfg, out_dir, len(calib), seconds, calib.digest(), ptq.low_rank, batches)


def requantize_int8(model: StaticModel, scales_file: Path, cfg: QuantConfig, out_dir: Path,
                    skip_tensors: tuple[str, ...] = ()) -> QuantizedModel:
    """The INT8 model `quantize_int8` would make of `model` with `skip_tensors` in float, from the thresholds
    a calibration of the same model, data and settings wrote (`scales.json`): no data pass (module docstring)."""
    try:
        scales = json.loads(Path(scales_file).read_text(encoding="utf-8"))
        usable = scales.get("format") == SCALES_FORMAT and scales.get("algo") == cfg.algo
    except (OSError, ValueError, AttributeError) as exc:
        raise QuantizeError(f"cannot read the calibration thresholds {scales_file}: {exc}",
                            "calibrate again (remove the cache entry, or pass --no-cache)") from exc
    if not usable or cfg.algo not in REPLAYABLE_ALGOS:
        raise QuantizeError(f"{scales_file} holds no {cfg.algo} thresholds of format {SCALES_FORMAT}",
                            "calibrate again (remove the cache entry, or pass --no-cache)")
    start = time.monotonic()
    empty = Samples({f.name: np.zeros((0, *[max(d, 1) for d in f.shape[1:]]), dtype=f.dtype) for f in model.feeds})
    ptq = _run(model, empty, cfg, out_dir, skip_tensors, 1, 1, scales, quantizable_ops())
    seconds = time.monotonic() - start
    log.info("quantised with %s from %s's thresholds in %.1f s", cfg.algo, Path(scales_file).parent.name, seconds)
    batches = CalibrationBatches.from_json(scales["calibration_batches"]) if "calibration_batches" in scales else None
    return _quantized(model, cfg, out_dir, int(scales["calibration_samples"]), seconds,
                      scales.get("calibration_sha256", ""), ptq.low_rank, batches)


def _run(model: StaticModel, calib: Samples, cfg: QuantConfig, out_dir: Path, skip_tensors: tuple[str, ...],
         batch_size: int, batch_nums: int, replay: dict | None, quantizable: list[str]):
    """PaddleSlim's PTQ in a scratch working directory; `replay`: thresholds to apply instead of sampling;
    `quantizable`: PaddleSlim's `quantizable_op_type`."""
    import paddle

    paddle.enable_static()
    with tempfile.TemporaryDirectory(prefix="edgekit-ptq-") as scratch, _inside(scratch), quiet_toolchain():
        exe = paddle.static.Executor(paddle.CPUPlace())
        scope = paddle.static.Scope()
        try:
            with paddle.static.scope_guard(scope), paddle.utils.unique_name.guard():
                loader, grouped = _loader(paddle, model, calib, batch_size)
                if grouped is not None:     # every line, in more (smaller) batches than batch_nums
                    batch_nums = len(grouped)
                ptq = _ptq_class()(
                    executor=exe,
                    model_dir=str(model.model_file.parent),
                    data_loader=loader,
                    model_filename=model.model_file.name,
                    params_filename=model.params_file.name if model.params_file else None,
                    batch_size=batch_size,
                    batch_nums=batch_nums,
                    scope=scope,
                    algo=cfg.algo,
                    round_type="round",                     # quant_post_static's defaults, stated
                    hist_percent=0.9999,
                    bias_correction=False,
                    activation_quantize_type="range_abs_max",
                    quantizable_op_type=quantizable,
                    is_full_quantize=False,
                    weight_bits=8,
                    activation_bits=8,
                    weight_quantize_type="channel_wise_abs_max",
                    onnx_format=cfg.onnx_format,
                    # True would fold batch norms, but only conv2d->batch_norm pairs; Paddle 2.6 exports
                    # conv2d->elementwise_add->batch_norm, so it changes nothing here (measured)
                    optimize_model=False,
                    skip_tensor_list=list(skip_tensors) or None,
                )
                if grouped is not None and len(set(grouped)) > 1:
                    ptq.batch_sizes = tuple(grouped)
                if replay is None:
                    ptq.quantize()
                else:
                    ptq.replay(replay)
                ptq.save_quantized_model(str(out_dir), model_filename="model.pdmodel", params_filename="model.pdiparams")
        except Exception as exc:   # PaddleSlim raises all kinds (IndexError in a sampler, asserts): one typed error
            where = _where(exc)
            raise QuantizeError(f"PaddleSlim post-training quantisation ({cfg.algo}) failed: {type(exc).__name__}"
                                f"{': ' + str(exc).splitlines()[0][:200] if str(exc).strip() else ''}{where}",
                                "try --quant fp32 to check the rest of the pipeline, or another calibration algorithm (--algo)") from exc
    if ptq.low_rank:
        log.info("left float: %d activation(s) of rank < %d are not calibrated (%s)%s", len(ptq.low_rank),
                 MIN_SAMPLED_RANK, ", ".join(ptq.low_rank[:6]) + (" ..." if len(ptq.low_rank) > 6 else ""),
                 f"; {len(ptq.float_ops)} quantisable op(s) reading or writing them stay float" if ptq.float_ops else "")
    return ptq


def _quantized(model: StaticModel, cfg: QuantConfig, out_dir: Path, samples: int, seconds: float, digest: str,
               low_rank: tuple[str, ...], batches: CalibrationBatches | None) -> QuantizedModel:
    model_file = out_dir / "model.pdmodel"
    if not model_file.is_file():
        raise QuantizeError("PaddleSlim wrote no quantised model", "run with EDGEKIT_DEBUG=1 and report the log")
    program = prog.parse_program(model_file)
    quantized = StaticModel(model_file, out_dir / "model.pdiparams", model.feeds, model.fetches, "paddleslim-ptq",
                            prog.op_types(program), model.sources)
    return QuantizedModel(quantized, cfg.algo, samples, seconds, digest, tuple(low_rank), batches)


def _where(exc: BaseException) -> str:
    """' (in file.py:123 function)' for the innermost frame of a toolchain error: which sampler or pass failed."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    return f" (in {Path(frames[-1].filename).name}:{frames[-1].lineno} {frames[-1].name})" if frames else ""


def count_quantized_ops(model: StaticModel) -> dict[str, int]:
    program = prog.parse_program(model.model_file)
    counts: dict[str, int] = {}
    for op in program.global_block().ops:
        if op.type.startswith(("fake_", "quantize_linear", "dequantize_linear")):
            counts[op.type] = counts.get(op.type, 0) + 1
    return counts


__all__ = ["quantize_int8", "requantize_int8", "quantizable_ops", "calibration_batches", "plan_batches",
           "CalibrationBatches", "sampled_activations", "count_quantized_ops",
           "SCALES_FILE"]
