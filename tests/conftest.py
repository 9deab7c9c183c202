"""Shared fixtures for the integration tests: the tandem binary and model paths."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tandem_bin():
    path = pathlib.Path(os.environ.get("TANDEM_BIN", ROOT / "build" / "src" / "cli" / "tandem"))
    if not path.exists():
        pytest.fail(f"{path} not built: run ./test.sh (or cmake --build build)")
    return str(path)


@pytest.fixture(scope="session")
def default_model():
    path = pathlib.Path(os.environ.get("TANDEM_MODEL", ROOT / "models" / "default.gguf"))
    if not path.exists():
        pytest.fail(f"default model {path} missing: run scripts/setup.sh")
    return str(path)


@pytest.fixture(scope="session")
def fixture_dir():
    path = pathlib.Path(os.environ.get("TANDEM_FIXTURE_DIR", ROOT / "build" / "fixtures"))
    if not (path / "llama.gguf").exists():
        pytest.fail(f"fixtures missing in {path}: run python3 tools/make_fixtures.py {path}")
    return path


def pytest_configure(config):
    config.addinivalue_line("markers", "load_async: the pool-connector engine under test loads with load_async")
