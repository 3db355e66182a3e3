"""The module reports the one version of the workspace, and the installed distribution agrees."""

from importlib.metadata import version as distribution_version

import gotry_tenant_state as gts


def test_the_loaded_build_and_the_distribution_carry_one_version() -> None:
    assert gts.version() == gts.__version__ == distribution_version("gotry-tenant-state")
    assert [int(part) for part in gts.version().split(".")] >= [0, 1, 0]
