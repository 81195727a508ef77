# Written next to the copied test_s3fs.py by tests/s3fs_suite/run.py.
import pytest
from s3fs_adapter import wipe


@pytest.fixture(autouse=True)
def objsdk_fresh_server():
    wipe()


def pytest_collection_modifyitems(items):
    import json
    from pathlib import Path

    skips = json.loads((Path(__file__).parent / "skips.json").read_text())
    for item in items:
        reason = skips.get(item.name) or skips.get(item.name.split("[")[0])
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
