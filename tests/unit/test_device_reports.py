"""JUnit structure, exit codes and the Markdown/PNG report, on a hand-made suite result."""

import json
import xml.etree.ElementTree as ET

from edgekit.device import reports
from edgekit.device.results import EXIT_CHECK_FAILED, EXIT_REGRESSION, CellResult, CheckResult, SuiteResult
from edgekit.core.errors import BundleError, DeviceError

BUNDLE = {"path": "/b/digits/arm64-int8", "key": "digits/arm64-int8", "model": "digits", "target": "arm64",
          "precision": "int8", "opt_version": "v2.13-rc", "nb_sha256": "ab" * 32}


def device(name, emulated=None):
    facts = {"kind": "ssh", "reported_abi": "aarch64", "abis": ["aarch64"], "model": "Pi 4", "soc": None, "os": "Debian",
             "kernel": None, "cores": 4, "governor": "performance", "temperature_c": 48.0, "emulated": emulated}
    return {"spec": f"ssh:{name}", "id": name, "kind": "ssh", "facts": facts}


def latency(samples, verdict):
    return {"summary": {"median": 10.0, "p90": 11.0, "p99": 12.0, "trimmed_mean": 10.1, "cv": 0.05},
            "samples_ms": samples, "launch_medians_ms": [10.0] * len(samples), "load_ms_median": 30.0,
            "rerun": {"samples_ms": samples, "median_ms": 13.0, "cv": 0.05} if verdict["kind"] == "regression" else None,
            "verdict": verdict, "baseline": {"samples_ms": samples, "latency_ms": {"median": 9.0}}}


GOLDEN = CheckResult("golden cosine [prob]", "passed", "0.9999 (≥ 0.99)")
OK = {"kind": "ok", "reason": "within", "median_ms": 10.0, "baseline_ms": 9.8, "threshold_ms": 1.0}
SLOW = {"kind": "regression", "reason": "slower", "median_ms": 13.0, "baseline_ms": 9.0, "threshold_ms": 0.9,
        "confirmed": True}
CELLS = (
    CellResult(BUNDLE, device("emulated", "runner under qemu-aarch64"),
               (GOLDEN, CheckResult("latency median", "skipped", "emulated: latency recorded, never gated", "latency")),
               latency=latency([[10.0, 10.2, 9.9]] * 2, OK), seconds=2.0, peak_rss_kb=51200),
    CellResult(BUNDLE, device("slow"), (GOLDEN, CheckResult("latency median", "failed", "regression: slower", "latency")),
               latency=latency([[13.0, 13.1, 12.9]] * 2, SLOW)),
    CellResult(BUNDLE, device("wrong"), (CheckResult("golden cosine [prob]", "failed", "0.5 (≥ 0.99)"),)),
    CellResult(BUNDLE, device("gone"), (CheckResult("device", "error", "ssh:gone is unreachable: refused", "device"),),
               error={"type": "DeviceError", "message": "ssh:gone is unreachable: refused", "hint": "check sshd",
                      "exit_code": DeviceError.exit_code, "phase": "device"}),
)


def suite(cells):
    return SuiteResult(tuple(cells), "2026-01-01T00:00:00+00:00", {"launches": 2, "warmup": 1, "iterations": 3,
                                                                    "threads": 1}, {"runtimes": {"aarch64": "v2.13-rc"}})


def test_exit_codes_rank_errors_then_accuracy_then_latency():
    assert [c.exit_code for c in CELLS] == [0, EXIT_REGRESSION, EXIT_CHECK_FAILED, 14]
    assert [c.status for c in CELLS] == ["passed", "failed", "failed", "error"]
    assert suite(CELLS).exit_code == 14
    assert suite(CELLS[:3]).exit_code == EXIT_CHECK_FAILED == 9
    assert suite(CELLS[:2]).exit_code == EXIT_REGRESSION == 15
    assert suite(CELLS[:1]).exit_code == 0
    corrupt = CellResult(BUNDLE, device("x"), (CheckResult("bundle integrity", "failed", "checksum mismatch", "bundle"),),
                         error={"type": "BundleError", "message": "m", "hint": "h", "exit_code": BundleError.exit_code,
                                "phase": "integrity"})
    assert suite([CELLS[3], corrupt]).exit_code == 14 and suite([corrupt, CELLS[3]]).exit_code == 10


def test_junit_has_one_testcase_per_check_and_says_why():
    root = ET.fromstring(reports.junit_xml(suite(CELLS)))
    assert root.tag == "testsuites"
    assert {k: root.get(k) for k in ("tests", "failures", "errors", "skipped")} == \
        {"tests": "6", "failures": "2", "errors": "1", "skipped": "1"}
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [f"digits/arm64-int8 on {n}" for n in ("emulated", "slow", "wrong", "gone")]
    emulated, slow, wrong, gone = suites
    assert [c.get("name") for c in emulated.findall("testcase")] == ["golden cosine [prob]", "latency median"]
    assert emulated.find("testcase").get("classname") == "edgekit.device.emulated.digits.arm64-int8"
    skipped = emulated.find("testcase[@name='latency median']/skipped")
    assert "never gated" in skipped.get("message")
    assert slow.find("testcase[@name='latency median']/failure").get("message") == "regression: slower"
    assert wrong.find("testcase/failure").get("type") == "accuracy"
    error = gone.find("testcase/error")
    assert error.get("message") == "ssh:gone is unreachable: refused" and error.get("type") == "DeviceError"
    assert "fix: check sshd" in error.text
    props = {p.get("name"): p.get("value") for p in emulated.find("properties")}
    assert props["device.emulated"] == "runner under qemu-aarch64" and props["latency.median_ms"] == "10.0"


def test_report_folder_holds_markdown_png_and_json(tmp_path):
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "stale.txt").write_text("from an older run")
    reports.write_report(suite(CELLS), folder)
    assert sorted(p.name for p in folder.iterdir()) == ["latency.png", "report.md", "result.json"]
    png = (folder / "latency.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    text = (folder / "report.md").read_text()
    assert "| digits/arm64-int8 | slow | failed | 10.000 |" in text
    assert "**error** in device: ssh:gone is unreachable: refused" in text and "![latency" in text
    assert json.loads((folder / "result.json").read_text())["summary"] == {"passed": 1, "failed": 2, "error": 1,
                                                                          "exit_code": 14}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]      # no staging folder left


def test_without_latency_there_is_no_plot(tmp_path):
    reports.write_report(suite(CELLS[2:]), tmp_path / "r")
    assert not (tmp_path / "r" / "latency.png").exists()
    assert "![latency" not in (tmp_path / "r" / "report.md").read_text()
