"""The environment a test hands a subprocess that must not see the run's AWS settings."""

from __future__ import annotations

import os


def without_aws() -> dict[str, str]:
    """This process's environment less its ``AWS_*`` variables, but for
    ``AWS_EC2_METADATA_DISABLED`` (set for the whole run by conftest.py): a process that
    finds no keys never asks the instance metadata service, so nothing leaves this machine."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") or k == "AWS_EC2_METADATA_DISABLED"
    }
