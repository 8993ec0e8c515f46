"""The build's settings: the tree of frozen dataclasses a resolved configuration is (edgekit/build/config.py resolves
defaults < edgekit.toml < environment < flags into it), validated before any stage runs and written verbatim into
the bundle manifest (`BuildConfig.to_json`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.core import limits
from edgekit.core.errors import ConfigError
from edgekit.contracts.prune import PruneConfig
from edgekit.core.tables import IMPORT_MAX_ABS, IMPORT_MIN_COSINE, Precision, Target

try:  # Python 3.11 has tomllib; 3.8-3.10 (the only ones Paddle-Lite supports) use tomli
    import tomllib  # type: ignore[import-not-found]
except ModuleNotFoundError:  # pragma: no cover - depends on the interpreter
    import tomli as tomllib  # type: ignore[no-redef]

DTYPES = ("float32", "int64", "int32")
CALIBRATION_ALGOS = ("avg", "abs_max", "hist", "mse", "KL", "emd")


@dataclass(frozen=True)
class InputSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"

    @classmethod
    def parse(cls, text: str) -> "InputSpec":
        """`name:1x3x224x224[:float32]`, `-1` for a dynamic dimension."""
        parts = text.split(":")
        if len(parts) not in (2, 3) or not parts[0]:
            raise ConfigError(f"input spec {text!r} is not name:shape[:dtype]", "write it like image:-1x3x224x224:float32")
        try:
            shape = tuple(int(d) for d in re.split(r"[x,]", parts[1]))
        except ValueError as exc:
            raise ConfigError(f"input spec {text!r} has a non-integer dimension", "use integers, -1 for dynamic") from exc
        return cls(parts[0], shape, parts[2] if len(parts) == 3 else "float32").validated()

    def validated(self) -> "InputSpec":
        if self.dtype not in DTYPES:
            raise ConfigError(f"input {self.name!r} has dtype {self.dtype!r}", f"use one of {', '.join(DTYPES)}")
        if not self.shape or any(d == 0 or d < -1 for d in self.shape):
            raise ConfigError(f"input {self.name!r} has shape {list(self.shape)}", "dimensions are positive, or -1 for dynamic")
        return self

    def concrete(self, batch: int = 1) -> tuple[int, ...]:
        if any(d == -1 for d in self.shape[1:]):
            raise ConfigError(f"input {self.name!r} has dynamic dimensions {list(self.shape)}",
                              "give fixed sizes except the batch dimension (e.g. --input image:-1x3x224x224)")
        return (batch,) + tuple(self.shape[1:])


NMS_CHOICES = ("auto", "keep", "cut")   # [model] nms


@dataclass(frozen=True)
class ModelConfig:
    name: str = ""
    factory: str | None = None            # "package.module:callable" returning a paddle.nn.Layer
    weights: Path | None = None           # .pdparams for the factory's model
    model_file: Path | None = None        # exported .pdmodel, or a folder holding one
    params_file: Path | None = None
    inputs: tuple[InputSpec, ...] = ()
    paddle: int = 2                       # the Paddle major version a factory's code is written for (2 or 3)
    description: Path | None = None       # the model folder's inference.yml (PaddleX), read for [preprocess]/[task]
    nms: str = "auto"                     # an NMS op in the graph: "auto" (measured, lite/nms.py), "keep" or "cut"


@dataclass(frozen=True)
class DataConfig:
    calibration: Path | None = None
    evaluation: Path | None = None
    labels: Path | None = None
    preprocess: PreprocessSpec | None = None
    images: Path | None = None            # sample images for the bundle's golden image cases (default: image-folder eval data)


# how the INT8 search orders layers: task points first (with truth), or the method's output error only
RANK_BY = ("task", "error")


@dataclass(frozen=True)
class QuantConfig:
    algo: str = "avg"
    batch_size: int = 16
    batch_nums: int = 8                   # calibration uses at most batch_size * batch_nums samples
    onnx_format: bool = False
    search_algos: tuple[str, ...] = ()    # calibration algorithms to try; empty = only `algo`
    max_drop: float | None = None         # top-1 points with labels, else 1 - output cosine; None = the [parity] int8 gate
    fallback: bool = True                 # keep the most sensitive layers in float until the budget holds
    max_float_fraction: float = 0.5
    sensitivity_method: str = "alone"     # rank by "only this layer int8", "all-but" (everything else int8) or "local"
    sensitivity_samples: int = 0          # 0 = all evaluation samples
    rank_by: str = "task"                 # order layers by task points first ("task", with truth) or by error only
    max_changed: float | None = None      # INT8 search: at most this % of samples read unlike FP32; None = unchecked
    analyse_layers: bool = False          # rank every layer for the report even when no fallback is needed
    cost_candidates: int = 3              # INT8 candidates within the budget counted under qemu (tier C); 0 = accuracy only
    cache_dir: Path | None = None         # calibration cache; None = no cache


@dataclass(frozen=True)
class ParityGates:
    twin_max_abs: float | None = None     # x86 twin vs reference, per output; None: the task's (Task.twin_max_abs)
    twin_min_cosine: float = 0.99999
    import_max_abs: float = IMPORT_MAX_ABS      # X2Paddle's model vs ONNX Runtime: max abs / the output's largest |value| (export/import_gate.py)
    import_min_cosine: float = IMPORT_MIN_COSINE
    import_max_metric_drop: float = 0.5   # with truth: task-metric points the imported model may read below ONNX Runtime
    int8_max_top1_drop: float = 1.0       # points of the task's primary metric (top-1, exact match, ...), with truth
    int8_min_cosine: float = 0.99         # when there are no labels
    golden_count: int = 8                 # samples written as golden vectors
    max_samples: int = 512                # evaluation samples used for parity


@dataclass(frozen=True)
class EmulationConfig:
    """Tier C: model.nb on Paddle-Lite's ARM runtime under qemu-user."""

    runtime: Path | None = None           # the folder holding inference_lite_lib.armlinux.* (EDGEKIT_LITE_ARM)
    cpu: str = "default"                  # CPU profile (edgekit.core.tables.CPU_PROFILES): which INT8 kernels Lite picks
    max_samples: int = 512                # evaluation samples run under emulation (spread over the set); 0 = all
    jobs: int = 0                         # emulator processes in parallel; 0 = one per core, as memory allows
    threads: int = 1                      # Paddle-Lite threads in each process
    required: bool = False                # no runtime/cross compiler/qemu is an error, not a note (EDGEKIT_REQUIRE_EMULATION=1)
    enabled: bool = True                  # false: tier C is skipped on purpose (--no-emulation), and the report says so


@dataclass(frozen=True)
class TaskConfig:
    kind: str | None = None                       # None: the evaluation data's truth file decides, else classification
    options: dict = field(default_factory=dict)   # [task] keys besides kind: dictionary, thresh, box_thresh, ...


@dataclass(frozen=True)
class BuildConfig:
    model: ModelConfig
    data: DataConfig = field(default_factory=DataConfig)
    target: Target = Target.arm64
    precision: Precision = Precision.fp32
    quant: QuantConfig = field(default_factory=QuantConfig)
    gates: ParityGates = field(default_factory=ParityGates)
    out_dir: Path = Path("build")
    tool_timeout: float = 600.0
    fold: bool = True                    # [build] fold: fold conv affine chains and decomposed activations (export/fold.py)
    config_file: Path | None = None
    task: TaskConfig = field(default_factory=TaskConfig)
    prune: PruneConfig | None = None     # [prune] / --prune: prune conv filters before quantising
    emulation: EmulationConfig = field(default_factory=EmulationConfig)

    @property
    def bundle_dir(self) -> Path:
        return self.out_dir / self.model.name / f"{self.target.value}-{self.precision.value}"

    def to_json(self) -> dict:
        return _jsonable(self)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (Target, Precision)):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def load_toml(path: Path) -> dict:
    """edgekit.toml or a matrix file: its size within limits.MAX_CONFIG_BYTES before it is parsed."""
    if not Path(path).exists():
        raise ConfigError(f"config file {path} does not exist", "check the --config path")
    text = limits.read_text(path, ConfigError, "check the --config path", "MAX_CONFIG_BYTES")
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise limits.refuse(ConfigError, f"the nesting of {path}", "too deep to parse", "MAX_JSON_DEPTH") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}", "fix the syntax at the position given") from exc
