"""`edgekit matrix`: the command (registered in cli.py) and its progress display."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from edgekit.core.errors import ConfigError


class _Display:
    """A line per cell event; on a terminal also a bar over the cells (done / running / cached / failed)."""

    def __init__(self, total: int, quiet: bool, tty: bool) -> None:
        self.total, self.quiet, self.tty = total, quiet, tty
        self.counts = {"built": 0, "cached": 0, "failed": 0}
        self.running: set[str] = set()

    def __call__(self, event: str, cell, row) -> None:
        if event == "running":
            self.running.add(cell.id)
        else:
            self.running.discard(cell.id)
        if event in self.counts:
            self.counts[event] += 1
        if self.quiet and event != "failed":
            return
        finished = sum(self.counts.values())
        detail = ""
        if row is not None and event == "failed":
            detail = f": {row.get('error', '')}"
        elif row is not None and row.get("seconds") is not None:
            detail = f" ({row['seconds']:.1f} s{', attempt ' + str(row['attempts']) if row.get('attempts', 1) > 1 else ''})"
        line = f"[{finished}/{self.total}] {event} {cell.id}{detail}"
        if self.tty:
            sys.stderr.write("\r\033[K" + line + "\n" + self._bar())
            sys.stderr.flush()
        else:
            typer.echo(line, err=True)

    def _bar(self) -> str:
        done = sum(self.counts.values())
        width = 30
        filled = int(width * done / max(1, self.total))
        c = self.counts
        return (f"[{'#' * filled}{'-' * (width - filled)}] {done}/{self.total}  built {c['built']}  cached {c['cached']}  "
                f"failed {c['failed']}  running {len(self.running)}")

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def matrix_command(
    matrix_file: Path = typer.Argument(..., help="The matrix TOML: targets, precisions, [[model]] and [[setting]] tables "
                                       "(docs/matrix.md)."),
    out: Path = typer.Option(Path("build/matrix"), "--out", "-o", help="Output folder: bundles/, cells/, matrix.json, "
                             "matrix.md."),
    executor: Optional[str] = typer.Option(None, "--executor", "-e", metavar="serial|pool|ray",
                                           help="Where cells run: serial (one after another here), pool (local worker "
                                           "processes, default), ray (a Ray cluster: see --ray)."),
    ray: Optional[str] = typer.Option(None, "--ray", metavar="auto|ADDRESS", help="Ray cluster: auto = a local one "
                                      "started here; HOST:PORT = a running `ray start --head` (its nodes need edgekit "
                                      "and the same output path). Implies --executor ray."),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", help="Cells at once (pool, local Ray). Default: "
                                          "cores, fewer when memory is short (--memory-per-cell)."),
    memory_per_cell: int = typer.Option(2048, "--memory-per-cell", help="MiB one build holds (sizes the pool; Ray's "
                                        "memory resource)."),
    retries: int = typer.Option(2, "--retries", help="Times a cell whose build was killed (signal, lost worker or "
                                "node) runs again. A cell that fails for a reason of its own is not retried."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="A calibration/tier-C cache the cells' builds "
                                             "share (build --cache-dir). Default: none (build --no-cache), so every "
                                             "cell's reports are the same whatever ran before; unchanged cells are "
                                             "cache hits of the matrix anyway."),
    force: bool = typer.Option(False, "--force", help="Build every cell again, even when its key is unchanged."),
    quiet: bool = typer.Option(False, "--quiet", help="Only failures and the result."),
) -> None:
    """Build models × targets × precisions × settings, each cell an `edgekit build` of its own; unchanged cells are
    cache hits. Writes one table (matrix.json, matrix.md) and one folder of bundles."""
    from edgekit.core import executors
    from edgekit.matrix import cells as matrix_mod

    kind = executor or ("ray" if ray else "pool")
    if ray and kind != "ray":
        raise ConfigError(f"--ray goes with --executor ray, not {kind}", "drop --ray or --executor")
    spec = matrix_mod.load(matrix_file)
    display = _Display(len(spec.cells), quiet, sys.stderr.isatty())
    with executors.make(kind, ray_address=ray, workers=workers, memory_mb=memory_per_cell) as runner:
        if not quiet:
            typer.echo(f"matrix: {len(spec.cells)} cells on {runner.name} ({runner.workers} at once) -> {out}", err=True)
        try:
            result = matrix_mod.run(spec, out, runner, cache_dir=cache_dir.absolute() if cache_dir else None,
                                    memory_mb=memory_per_cell, retries=retries, force=force, progress=display)
        except KeyboardInterrupt:
            display.close()
            typer.echo("interrupted: finished cells and their bundles are kept; nothing half-written", err=True)
            raise typer.Exit(130)
        display.close()
    typer.echo(result.table_md.read_text(encoding="utf-8"), nl=False)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(result.counts().items()))
    typer.echo(f"{len(result.rows)} cells ({counts}) in {result.seconds:.1f} s; table: {result.table_json}")
    if result.failed:
        raise typer.Exit(1)
