"""Results as files: a CSV of every run, a Markdown report, PNG plots (matplotlib).

* ``runs.csv``: one row per timed run (:data:`CSV_FIELDS`; ``group`` is the table title).
* ``results.md``: the machine, the command, then one table per group: median/min/max
  MiB/s, client CPU seconds per GiB, and both as ratios to the group's baseline.
* ``throughput-<benchmark>-<size>.png``: median MiB/s per client, one bar per profile.
* ``scaling-<profile>-<size>.png``: connections vs MiB/s of the sweep, one line per
  operation, the defaults as a dashed line of the same colour.
"""

from __future__ import annotations

import csv
import importlib
import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from objsdk.bench.runner import GroupResult, MiB

__all__ = [
    "CSV_FIELDS",
    "csv_rows",
    "markdown",
    "markdown_table",
    "plot",
    "size_label",
    "sweep_summary",
    "write_csv",
]

CSV_FIELDS = (
    "benchmark",
    "profile",
    "group",
    "size_bytes",
    "client",
    "variant",
    "connections",
    "run",
    "seconds",
    "bytes",
    "mib_per_s",
    "cpu_seconds",
    "cpu_s_per_gib",
)


def size_label(nbytes: int) -> str:
    """``256 MiB``, ``1 GiB``, ``512 KiB``: sizes as the tables print them."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    if nbytes >= MiB:
        return f"{nbytes / MiB:.1f} MiB"
    return f"{nbytes} B"


def csv_rows(groups: Iterable[GroupResult]) -> list[dict[str, str]]:
    rows = []
    for g in groups:
        for r in g.results:
            for i, s in enumerate(r.samples, 1):
                rows.append(
                    {
                        "benchmark": g.group.benchmark,
                        "profile": g.group.profile,
                        "group": g.group.title,
                        "size_bytes": str(g.group.size),
                        "client": r.case.client,
                        "variant": r.case.variant,
                        "connections": ""
                        if r.case.connections is None
                        else str(r.case.connections),
                        "run": str(i),
                        "seconds": f"{s.seconds:.9g}",
                        "bytes": str(s.nbytes),
                        "mib_per_s": f"{s.mib_per_s:.6g}",
                        "cpu_seconds": f"{s.cpu_seconds:.9g}",
                        "cpu_s_per_gib": f"{s.cpu_per_gib:.4f}",
                    }
                )
    return rows


def write_csv(path: Path, groups: Iterable[GroupResult]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(csv_rows(groups))


def _num(x: float) -> str:
    if x >= 1e6:
        return f"{x:.3g}"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _ratio(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}x"


def markdown_table(g: GroupResult) -> str:
    """One group as a Markdown table, its baseline marked, then its notes."""
    out = io.StringIO()
    out.write(f"### {g.group.title}\n\n")
    out.write(
        "| client | variant | MiB/s median | min | max | CPU s/GiB "
        "| vs baseline | CPU vs baseline |\n"
    )
    out.write("|---|---|---:|---:|---:|---:|---:|---:|\n")
    for r in g.results:
        st = r.stats
        base = " (baseline)" if r.case.label == g.baseline_label else ""
        out.write(
            f"| {r.case.client} | {r.case.variant}{base} | {_num(st.median_mib_s)} "
            f"| {_num(st.min_mib_s)} | {_num(st.max_mib_s)} | {st.cpu_s_per_gib:.3f} "
            f"| {_ratio(r.ratio)} | {_ratio(r.cpu_ratio)} |\n"
        )
    runs = {r.stats.runs for r in g.results}
    if runs:
        out.write(f"\nRuns per case: {', '.join(map(str, sorted(runs)))}.\n")
    for note in g.all_notes:
        out.write(f"\n- {note}")
    if g.all_notes:
        out.write("\n")
    return out.getvalue()


def sweep_summary(groups: Sequence[GroupResult]) -> str:
    """One row per sweep table: the best fixed setting, the defaults, and their ratios to
    it and to one stream (the table's baseline). Empty without sweep tables."""
    rows = []
    for g in groups:
        if g.group.benchmark != "sweep":
            continue
        fixed = [r for r in g.results if r.case.connections is not None]
        defaults = next((r for r in g.results if r.case.variant == "defaults"), None)
        single = g.baseline
        if not fixed or defaults is None or single is None:
            continue
        best = max(fixed, key=lambda r: r.stats.median_mib_s)
        d = defaults.stats.median_mib_s
        rows.append(
            f"| {g.group.title} | {best.case.variant} | {_num(best.stats.median_mib_s)} "
            f"| {_num(d)} | {d / best.stats.median_mib_s:.2f}x "
            f"| {d / single.stats.median_mib_s:.2f}x |\n"
        )
    if not rows:
        return ""
    return (
        "| sweep | best fixed | its MiB/s | defaults MiB/s | defaults vs best "
        "| defaults vs one stream |\n|---|---|---:|---:|---:|---:|\n" + "".join(rows)
    )


def markdown(
    machine: Mapping[str, str],
    command: str,
    groups: Sequence[GroupResult],
    notes: Sequence[str] = (),
    plots: Sequence[str] = (),
) -> str:
    """The whole report: machine, command, one table per group, notes, plots."""
    out = io.StringIO()
    out.write("# objsdk perf suite results\n\n")
    out.write(f"Command: `{command}`\n\n")
    out.write("| machine | |\n|---|---|\n")
    for k, v in machine.items():
        out.write(f"| {k} | {v} |\n")
    out.write(
        "\nMiB/s: median, min and max over the timed runs (1 MiB = 2^20 bytes). CPU s/GiB: "
        "median client CPU (user+system, this process and its children) per GiB moved. "
        "Ratios: to the group's baseline, measured in the same interleaved runs.\n"
    )
    current = None
    for g in groups:
        heading = f"{g.group.benchmark} ({g.group.profile})"
        if heading != current:
            out.write(f"\n## {heading}\n\n")
            current = heading
        out.write(markdown_table(g))
        out.write("\n")
    summary = sweep_summary(groups)
    if summary:
        out.write("## Sweep summary\n\n")
        out.write("Medians; one stream is `readahead=0` for reads and `parallel=1` otherwise.\n\n")
        out.write(summary + "\n")
    if notes:
        out.write("## Notes\n\n")
        out.writelines(f"- {n}\n" for n in notes)
        out.write("\n")
    if plots:
        out.write("## Plots\n\n")
        out.writelines(f"![{p}]({p})\n\n" for p in plots)
    return out.getvalue()


def _pyplot() -> Any:
    matplotlib = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


THROUGHPUT_BENCHMARKS = ("read", "download", "upload")


def plot(directory: Path, groups: Sequence[GroupResult]) -> list[str]:
    """Write the PNG plots; returns their file names. Needs matplotlib."""
    plt = _pyplot()
    written: list[str] = []
    sizes = sorted({g.group.size for g in groups})
    for bench in THROUGHPUT_BENCHMARKS:
        for size in sizes:
            chosen = [g for g in groups if g.group.benchmark == bench and g.group.size == size]
            if chosen:
                name = f"throughput-{bench}-{size // MiB}MiB.png"
                _throughput(plt, directory / name, bench, size, chosen)
                written.append(name)
    for profile in dict.fromkeys(g.group.profile for g in groups):
        for size in sizes:
            chosen = [
                g
                for g in groups
                if g.group.benchmark == "sweep"
                and g.group.profile == profile
                and g.group.size == size
            ]
            if chosen:
                name = f"scaling-{profile}-{size // MiB}MiB.png"
                _scaling(plt, directory / name, profile, size, chosen)
                written.append(name)
    return written


def _throughput(plt: Any, path: Path, bench: str, size: int, groups: list[GroupResult]) -> None:
    """One panel per profile (each on its own scale), one bar per client/variant."""
    labels: list[str] = list(dict.fromkeys(r.case.label for g in groups for r in g.results))
    fig, axes = plt.subplots(
        len(groups),
        1,
        figsize=(max(6.0, 0.6 * len(labels) + 2), 1.0 + 2.2 * len(groups)),
        sharex=True,
        squeeze=False,
    )
    for ax, g in zip([row[0] for row in axes], groups, strict=True):
        by_label = {r.case.label: r.stats.median_mib_s for r in g.results}
        xs = [i for i, lab in enumerate(labels) if lab in by_label]
        bars = ax.bar(xs, [by_label[labels[i]] for i in xs], 0.7)
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
        ax.set_ylabel("MiB/s")
        ax.set_title(g.group.profile, fontsize=9, loc="left")
        ax.margins(y=0.2)
    last = axes[-1][0]
    last.set_xticks(range(len(labels)))
    last.set_xticklabels(labels, rotation=35, ha="right", fontsize=8)
    fig.suptitle(f"{bench}, {size_label(size)}: median throughput per client")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _scaling(plt: Any, path: Path, profile: str, size: int, groups: list[GroupResult]) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for g in groups:
        points = sorted(
            (r.case.connections, r.stats.median_mib_s)
            for r in g.results
            if r.case.connections is not None and "=0" not in r.case.variant
        )
        if not points:
            continue
        (line,) = ax.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            marker="o",
            label=g.group.title.split(",")[0],
        )
        for r in g.results:
            if r.case.variant == "defaults":
                ax.axhline(
                    r.stats.median_mib_s, linestyle="--", color=line.get_color(), linewidth=1
                )
    ax.set_xscale("log", base=2)
    ticks = sorted({r.case.connections for g in groups for r in g.results if r.case.connections})
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel("connections (parallel= / readahead=)")
    ax.set_ylabel("MiB/s (median)")
    ax.set_title(f"scaling on {profile}, {size_label(size)} (dashed: defaults)")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
