"""What `edgekit device test` found: checks per (bundle, device) cell, and the suite's exit code.

A cell's status is `error` when it could not run to the end (its `error` says where
and why, and it claims no figures), `failed` when a gated check failed, else
`passed`. Skipped checks (emulated or unstable latency, no baseline) never fail.
The JSON result is schema `edgekit.device-result/1` (`SuiteResult.to_json`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from edgekit.core.errors import EdgekitError, ParityError

RESULT_SCHEMA = "edgekit.device-result/1"
EXIT_CHECK_FAILED = ParityError.exit_code   # 9: golden, determinism or accuracy check failed
EXIT_REGRESSION = 15                        # a confirmed latency regression on a real (not emulated) device
EXIT_COUNT_REGRESSION = 17                  # more instructions per inference than the baseline (qemu devices; 16 is
                                            # the signature refusal): deterministic, so no re-run and no noise margin
EXIT_LOST = 18                              # nothing failed, but a device's Ray node left during the run (--ray):
                                            # its cells are `lost`, the other devices' results stand
LOST = "lost"                               # the status of a cell whose device's Ray node left (its error has lost=True)
STATUSES = ("passed", "failed", "skipped", "error")


@dataclass(frozen=True)
class CheckResult:
    name: str                    # e.g. "golden cosine [prob]", "latency median"
    status: str                  # one of STATUSES
    message: str                 # one line
    kind: str = "accuracy"       # bundle, device, accuracy, latency, count
    value: float | None = None
    limit: float | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check status {self.status!r} is not one of {STATUSES}")

    def line(self) -> str:
        mark = {"passed": "✓", "failed": "✗", "skipped": "–", "error": "✗"}[self.status]
        return f"  {mark} {self.name}: {self.message}"


def error_record(error: EdgekitError, phase: str) -> dict:
    return {"type": type(error).__name__, "message": error.message, "hint": error.hint, "exit_code": error.exit_code,
            "phase": phase}


@dataclass(frozen=True)
class CellResult:
    bundle: dict                           # path, key, model, target, precision, abi, nb_sha256, opt_version
    device: dict                           # spec, id, kind, facts (None when never reached)
    checks: tuple[CheckResult, ...] = ()
    error: dict | None = None              # error_record(...) when the cell could not finish
    launches: tuple[dict, ...] = ()        # every launch: record excerpt, digests, temperatures
    latency: dict | None = None            # summary, per-launch summaries, verdict, re-run, baseline excerpt
    golden: dict | None = None             # worst figures per output over every launch
    eval: dict | None = None               # task metric on the --eval subset
    output_sha256: str | None = None
    peak_rss_kb: int | None = None
    seconds: float = 0.0
    baseline_updated: bool = False
    instruction_counts: dict | None = None  # qemu devices: the counts, their verdict and the baseline's (edgekit/verify/counts.py)
    detections: dict | None = None         # detection bundles: the golden detections' figures (device/detections.py)
    masks: dict | None = None              # segmentation bundles: the golden class maps' figures (device/masks.py)

    @property
    def name(self) -> str:
        return f"{self.bundle['key']} on {self.device['id']}"

    @property
    def status(self) -> str:
        if self.error is not None:
            return LOST if self.error.get("lost") else "error"
        return "failed" if any(c.status in ("failed", "error") for c in self.checks) else "passed"

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return int(self.error["exit_code"])
        failed = [c for c in self.checks if c.status in ("failed", "error")]
        if any(c.kind not in ("latency", "count") for c in failed):
            return EXIT_CHECK_FAILED
        if any(c.kind == "latency" for c in failed):
            return EXIT_REGRESSION
        return EXIT_COUNT_REGRESSION if failed else 0

    def to_json(self) -> dict:
        record = asdict(self)
        record["checks"] = [asdict(c) for c in self.checks]
        record["launches"] = list(self.launches)
        record.update(status=self.status, complete=self.error is None, exit_code=self.exit_code)
        return record


@dataclass(frozen=True)
class SuiteResult:
    cells: tuple[CellResult, ...]
    created_utc: str
    settings: dict                          # launches, warmup, iterations, threads, policy, eval, runner env
    versions: dict = field(default_factory=dict)   # edgekit, its commit, the runtime per ABI
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        """The first cell error's code (matrix order); else 9 for a failed check; else 15 for a latency regression;
        else 17 for an instruction-count regression; else 18 when a device's Ray node was lost (lost cells are
        not errors: the other devices' results decide first)."""
        codes = [c.exit_code for c in self.cells]
        errors = [c.exit_code for c in self.cells if c.error is not None and c.status != LOST]
        if errors:
            return errors[0]
        for code in (EXIT_CHECK_FAILED, EXIT_REGRESSION, EXIT_COUNT_REGRESSION):
            if code in codes:
                return code
        return EXIT_LOST if any(c.status == LOST for c in self.cells) else 0

    def counts(self) -> dict:
        counts = {s: sum(1 for c in self.cells if c.status == s) for s in ("passed", "failed", "error")}
        lost = sum(1 for c in self.cells if c.status == LOST)      # only a --ray run can lose a device
        return dict(counts, lost=lost) if lost else counts

    def to_json(self) -> dict:
        return {"schema": RESULT_SCHEMA, "created_utc": self.created_utc, "seconds": round(self.seconds, 3),
                "settings": self.settings, "versions": self.versions, "summary": dict(self.counts(),
                                                                                     exit_code=self.exit_code),
                "runs": [c.to_json() for c in self.cells]}
