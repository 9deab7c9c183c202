"""The soak test (tests/soak/soak.py) for TANDEM_SOAK_SECONDS (default 60): a PD cluster
under a mixed workload through the proxy with no unexpected outcome, flat RSS and
nothing held at the end. The 10-minute run is `tests/soak/soak.py` (docs/RELIABILITY.md)."""
import json
import os

from soak.soak import soak


def test_soak(tandem_bin, fixture_dir, tmp_path):
    seconds = float(os.environ.get("TANDEM_SOAK_SECONDS", "60"))
    report = soak(tandem_bin, fixture_dir / "llama.gguf", seconds, tmp_path / "soak")
    (tmp_path / "report.json").write_text(json.dumps(report, indent=2))
    assert report["passed"], json.dumps(report, indent=2)
