"""The perf suite's pure parts: statistics, interleaving, output formats, profiles, flags."""

from __future__ import annotations

import csv
import io
import itertools
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from objsdk.bench.cli import QUICK, parse_args, redacted
from objsdk.bench.machine import describe
from objsdk.bench.output import (
    CSV_FIELDS,
    csv_rows,
    markdown,
    markdown_table,
    size_label,
    sweep_summary,
)
from objsdk.bench.profiles import PROFILES, Toxic, proxied_endpoint
from objsdk.bench.runner import (
    Case,
    CaseResult,
    Group,
    GroupResult,
    MiB,
    Sample,
    balanced_orders,
    measure,
    run_group,
    summarize,
)

GiB = 1 << 30


def test_summarize_gives_median_min_max_throughput_and_median_cpu_per_gib() -> None:
    samples = [Sample(1.0, 0.5, GiB), Sample(2.0, 0.2, GiB), Sample(4.0, 0.1, GiB)]
    st = summarize(samples)
    assert st.runs == 3
    assert st.median_mib_s == pytest.approx(512)
    assert st.min_mib_s == pytest.approx(256)
    assert st.max_mib_s == pytest.approx(1024)
    assert st.cpu_s_per_gib == pytest.approx(0.2)


def test_summarize_refuses_no_samples() -> None:
    with pytest.raises(ValueError, match="at least one"):
        summarize([])


def _follows(orders: list[list[int]]) -> Counter[tuple[int, int]]:
    return Counter(pair for order in orders for pair in itertools.pairwise(order))


def test_balanced_orders_put_every_case_in_every_place_once_per_n_runs() -> None:
    for n in (2, 3, 6, 7):
        orders = balanced_orders(n, n)
        assert all(sorted(order) == list(range(n)) for order in orders)
        assert all(sorted(column) == list(range(n)) for column in zip(*orders, strict=True))


def test_balanced_orders_let_every_case_follow_every_other_equally_often() -> None:
    # A case's time can carry the wake of the one before it (threads still exiting,
    # the server closing connections): no case may always follow the same one.
    for n in (2, 4, 6):
        assert set(_follows(balanced_orders(n, n)).values()) == {1}
        assert len(_follows(balanced_orders(n, n))) == n * (n - 1)
    for n in (3, 5, 7):  # an odd count needs the mirrored orders too
        assert set(_follows(balanced_orders(n, 2 * n)).values()) == {2}


def test_balanced_orders_repeat_for_more_runs_and_are_empty_for_no_cases() -> None:
    assert balanced_orders(4, 9)[8] == balanced_orders(4, 9)[0]
    assert balanced_orders(0, 3) == []
    assert balanced_orders(1, 2) == [[0], [0]]


def _recording_group(calls: list[str], nbytes: int = 100) -> Group:
    def case(name: str) -> Case:
        def run() -> int:
            calls.append(name)
            return nbytes

        return Case("c", name, run, nbytes)

    return Group("b", "p", "title", [case("A"), case("B"), case("C")], "c: A")


def test_run_group_warms_up_each_case_once_then_interleaves_the_runs() -> None:
    calls: list[str] = []
    run_group(_recording_group(calls), 3, log=lambda m: None)
    assert calls == ["A", "B", "C", "A", "B", "C", "B", "C", "A", "C", "A", "B"]


def test_run_group_without_warmup_only_times() -> None:
    calls: list[str] = []
    result = run_group(_recording_group(calls), 2, warmup=False, log=lambda m: None)
    assert calls == ["A", "B", "C", "B", "C", "A"]
    assert all(len(r.samples) == 2 for r in result.results)


def test_run_group_gives_ratios_to_the_baseline() -> None:
    def sleeper(seconds: float) -> Any:
        def run() -> int:
            import time

            time.sleep(seconds)
            return MiB

        return run

    group = Group(
        "b",
        "p",
        "t",
        [Case("x", "slow", sleeper(0.02), MiB), Case("x", "fast", sleeper(0.01), MiB)],
        "x: slow",
    )
    result = run_group(group, 3, warmup=False, log=lambda m: None)
    ratios = {r.case.variant: r.ratio for r in result.results}
    assert ratios["slow"] == pytest.approx(1.0)
    assert ratios["fast"] is not None
    assert 1.3 < ratios["fast"] < 2.5
    assert result.baseline is not None
    assert result.baseline.case.variant == "slow"


def test_run_group_drops_a_failing_case_with_a_note() -> None:
    def broken() -> int:
        raise RuntimeError("no such peer")

    group = Group(
        "b", "p", "t", [Case("x", "ok", lambda: 5, 5), Case("y", "bad", broken, 5)], "x: ok"
    )
    result = run_group(group, 2, log=lambda m: None)
    assert [r.case.variant for r in result.results] == ["ok"]
    assert any("y: bad: failed" in n and "no such peer" in n for n in result.notes)


def test_run_group_drops_a_case_that_moves_the_wrong_number_of_bytes() -> None:
    group = Group("b", "p", "t", [Case("x", "short", lambda: 4, 5)], "x: short")
    result = run_group(group, 2, log=lambda m: None)
    assert result.results == []
    assert any("moved 4 bytes, expected 5" in n for n in result.notes)


def test_measure_counts_the_cpu_of_child_processes() -> None:
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"

    def run() -> int:
        subprocess.run([sys.executable, "-c", burn], check=True)
        return 1

    assert measure(run).cpu_seconds >= 0.25


def _result() -> GroupResult:
    group = Group(
        "read",
        "wan",
        "Sequential read of 1 MiB, wan",
        [Case("requests", "raw", lambda: MiB, MiB), Case("objsdk", "read", lambda: MiB, MiB, 4)],
        "requests: raw",
        size=MiB,
        notes=["a note"],
    )
    return run_group(group, 3, log=lambda m: None)


def test_csv_has_one_row_per_timed_run_with_every_field() -> None:
    rows = csv_rows([_result()])
    assert len(rows) == 6
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS)
    writer.writeheader()
    writer.writerows(rows)
    parsed = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert tuple(parsed[0]) == CSV_FIELDS
    assert {r["client"] for r in parsed} == {"requests", "objsdk"}
    assert {r["connections"] for r in parsed} == {"", "4"}
    for r in parsed:
        assert int(r["bytes"]) == MiB
        assert float(r["seconds"]) > 0
        assert float(r["mib_per_s"]) > 0
        assert r["benchmark"] == "read"
        assert r["profile"] == "wan"


def test_markdown_table_marks_the_baseline_and_lists_ratios_and_notes() -> None:
    text = markdown_table(_result())
    lines = text.splitlines()
    assert lines[0] == "### Sequential read of 1 MiB, wan"
    header = [c.strip() for c in lines[2].strip("|").split("|")]
    assert header == [
        "client",
        "variant",
        "MiB/s median",
        "min",
        "max",
        "CPU s/GiB",
        "vs baseline",
        "CPU vs baseline",
    ]
    rows = [line for line in lines if line.startswith("| requests") or line.startswith("| objsdk")]
    assert len(rows) == 2
    assert "raw (baseline)" in rows[0]
    assert "| 1.00x |" in rows[0]
    assert all(len(r.strip("|").split("|")) == 8 for r in rows)
    assert "- a note" in text


def test_markdown_report_starts_with_the_machine_and_command() -> None:
    text = markdown({"cores": "2", "minio": "X"}, "python -m objsdk.bench --quick", [_result()])
    assert "`python -m objsdk.bench --quick`" in text
    assert "| cores | 2 |" in text
    assert "| minio | X |" in text
    assert "## read (wan)" in text


@pytest.mark.parametrize(
    ("nbytes", "label"),
    [(MiB, "1 MiB"), (256 * MiB, "256 MiB"), (GiB, "1 GiB"), (512 << 10, "512 KiB"), (10, "10 B")],
)
def test_size_label(nbytes: int, label: str) -> None:
    assert size_label(nbytes) == label


def test_loopback_is_not_proxied() -> None:
    assert not PROFILES["loopback"].proxied
    assert PROFILES["loopback"].toxics == ()


def _toxics(name: str) -> set[tuple[str, str, str, tuple[tuple[str, int], ...]]]:
    return {
        (t.name, t.type, t.stream, tuple(sorted(t.attributes.items())))
        for t in PROFILES[name].toxics
    }


def test_lan_is_100_mb_s_per_connection_each_way_and_1_ms() -> None:
    assert _toxics("lan") == {
        ("latency_downstream", "latency", "downstream", (("jitter", 0), ("latency", 1))),
        ("bandwidth_downstream", "bandwidth", "downstream", (("rate", 100_000),)),
        ("bandwidth_upstream", "bandwidth", "upstream", (("rate", 100_000),)),
    }


def test_wan_is_25_mb_s_per_connection_each_way_and_20_ms() -> None:
    assert _toxics("wan") == {
        ("latency_downstream", "latency", "downstream", (("jitter", 0), ("latency", 20))),
        ("bandwidth_downstream", "bandwidth", "downstream", (("rate", 25_000),)),
        ("bandwidth_upstream", "bandwidth", "upstream", (("rate", 25_000),)),
    }


def test_flaky_wan_is_wan_plus_a_cut_every_32_mib_in_each_direction() -> None:
    assert _toxics("flaky-wan") == _toxics("wan") | {
        ("cut_downstream", "limit_data", "downstream", (("bytes", 32 * MiB),)),
        ("cut_upstream", "limit_data", "upstream", (("bytes", 32 * MiB),)),
    }


class FakeProxy:
    endpoint = "http://127.0.0.1:1234"

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def add_toxic(self, type: str, *, stream: str, name: str, **attributes: int) -> str:
        self.log.append(("add", name, type, stream, attributes))
        return name

    def delete(self) -> None:
        self.log.append(("delete",))


class FakeToxiproxy:
    def __init__(self) -> None:
        self.log: list[Any] = []

    def create_proxy(self, name: str, upstream: str) -> FakeProxy:
        self.log.append(("create", upstream))
        return FakeProxy(self.log)


def test_proxied_endpoint_installs_the_profile_toxics_and_deletes_the_proxy() -> None:
    fake = FakeToxiproxy()
    with proxied_endpoint("http://127.0.0.1:9000", PROFILES["wan"], fake) as ep:  # type: ignore[arg-type]
        assert ep == FakeProxy.endpoint
        assert fake.log[-1] != ("delete",)
    assert fake.log[0] == ("create", "127.0.0.1:9000")
    assert [e[1] for e in fake.log[1:-1]] == [t.name for t in PROFILES["wan"].toxics]
    assert fake.log[-1] == ("delete",)


def test_proxied_endpoint_is_the_server_itself_on_loopback() -> None:
    with proxied_endpoint("http://127.0.0.1:9000", PROFILES["loopback"], None) as ep:
        assert ep == "http://127.0.0.1:9000"


def test_proxied_endpoint_adds_extra_toxics_even_on_loopback() -> None:
    fake = FakeToxiproxy()
    extra = [Toxic("resume_cut", "limit_data", "downstream", {"bytes": 5})]
    with proxied_endpoint("http://h:1", PROFILES["loopback"], fake, extra):  # type: ignore[arg-type]
        pass
    assert fake.log[1] == ("add", "resume_cut", "limit_data", "downstream", {"bytes": 5})


def test_proxied_profiles_refuse_https_endpoints() -> None:
    with (
        pytest.raises(ValueError, match="http:// endpoint"),
        proxied_endpoint("https://s3.example.com", PROFILES["wan"], FakeToxiproxy()),  # type: ignore[arg-type]
    ):
        pass


def test_quick_mode_is_small() -> None:
    _, options = parse_args(["--quick"])
    assert options.profiles == QUICK["profiles"]
    assert options.sizes == [32 * MiB]
    assert options.runs == 3
    assert options.sweep == [1, 4]
    assert options.tar_totals == [32 * MiB]
    assert options.cuts == [8 * MiB]


def test_full_mode_defaults_follow_the_issue() -> None:
    _, options = parse_args([])
    assert options.profiles == ["loopback", "lan", "wan", "flaky-wan"]
    assert options.runs == 5
    assert options.sweep == [1, 2, 4, 8, 16]
    assert options.tar_totals == [256 * MiB, 1024 * MiB]
    assert options.tar_members == [MiB, 10 * MiB, 100 * MiB]
    assert options.cuts == [16 * MiB, 64 * MiB, 256 * MiB]


def test_explicit_flags_override_quick_mode() -> None:
    _, options = parse_args(["--quick", "--sizes", "4", "--runs", "5", "--profiles", "wan"])
    assert options.sizes == [4 * MiB]
    assert options.runs == 5
    assert options.profiles == ["wan"]
    assert options.cuts == [MiB]


@pytest.mark.parametrize(
    "argv",
    [["--benchmarks", "reed"], ["--profiles", "moon"], ["--sizes", "-1"], ["--runs", "0"]],
)
def test_bad_flags_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert argv[0] in capsys.readouterr().err or "--runs" in argv


def test_the_recorded_command_hides_credentials() -> None:
    cmd = redacted(["--secret-key", "s3cr3t", "--access-key=AKIA", "--quick"])
    assert "s3cr3t" not in cmd
    assert "AKIA" not in cmd
    assert cmd.endswith("--secret-key '***' '--access-key=***' --quick")


def _imported_after(statement: str) -> Iterator[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return iter(out.stdout.split())


def test_import_objsdk_does_not_import_the_bench_package() -> None:
    modules = set(_imported_after("import objsdk"))
    assert not any(m == "objsdk.bench" or m.startswith("objsdk.bench.") for m in modules)


def test_importing_the_suite_imports_no_optional_package() -> None:
    modules = set(_imported_after("import objsdk.bench.cli"))
    optional = {"matplotlib", "boto3", "minio", "s3fs", "smart_open", "obstore", "numpy"}
    assert not modules & optional


def test_ratios_fall_back_to_the_first_measured_case_when_the_baseline_fails() -> None:
    def broken() -> int:
        raise RuntimeError("cut")

    group = Group(
        "b", "p", "t", [Case("x", "base", broken, 5), Case("y", "other", lambda: 5, 5)], "x: base"
    )
    result = run_group(group, 2, log=lambda m: None)
    assert result.baseline is not None
    assert result.baseline.case.label == "y: other"
    assert result.results[0].ratio == pytest.approx(1.0)
    assert any("ratios are to 'y: other'" in n for n in result.notes)


def test_failure_notes_hide_presigned_signatures() -> None:
    url = "http://127.0.0.1:9/b/k?X-Amz-Credential=AKIA&X-Amz-Signature=abc123"

    def broken() -> int:
        raise RuntimeError(f"failed on {url}")

    result = run_group(Group("b", "p", "t", [Case("x", "v", broken, 1)], "x: v"), 1, log=print)
    assert "abc123" not in result.notes[0]
    assert "AKIA" not in result.notes[0]
    assert "http://127.0.0.1:9/b/k?..." in result.notes[0]


def test_sweep_summary_compares_the_defaults_with_the_best_fixed_setting() -> None:
    def case(variant: str, seconds: float, n: int | None) -> Case:
        def run() -> int:
            return MiB

        return Case("objsdk", variant, run, MiB, n)

    group = Group(
        "sweep",
        "wan",
        "download(path), 1 MiB, wan",
        [case("parallel=1", 4, 1), case("parallel=4", 1, 4), case("defaults", 2, None)],
        "objsdk: parallel=1",
    )
    rates = {"parallel=1": 25.0, "parallel=4": 100.0, "defaults": 50.0}
    results = [
        CaseResult(c, [], summarize([Sample(1 / rates[c.variant], 0.0, MiB)]), None, None)
        for c in group.cases
    ]
    text = sweep_summary([GroupResult(group, results, [], "objsdk: parallel=1")])
    row = text.splitlines()[2]
    assert row == "| download(path), 1 MiB, wan | parallel=4 | 100 | 50.0 | 0.50x | 2.00x |"


def test_sweep_summary_is_empty_without_a_sweep() -> None:
    assert sweep_summary([_result()]) == ""


def test_machine_description_names_cores_memory_python_and_versions() -> None:
    info = describe(server="s", minio_version="RELEASE.X", toxiproxy_version=None)
    assert info["cores"].isdigit()
    assert info["memory"].endswith("GiB") or info["memory"] == "unknown"
    assert info["python"].split()[1] == sys.version.split()[0]
    assert info["minio"] == "RELEASE.X"
    assert info["toxiproxy"] == "not used"
    assert info["objsdk"]


def test_main_returns_2_for_a_bad_flag_instead_of_exiting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from objsdk.bench import main

    assert main(["--profiles", "moon"]) == 2
    assert "unknown moon" in capsys.readouterr().err


def test_main_lists_the_profiles_with_their_toxics(capsys: pytest.CaptureFixture[str]) -> None:
    from objsdk.bench import main

    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "cut_upstream: limit_data on upstream (bytes=33554432)" in out
