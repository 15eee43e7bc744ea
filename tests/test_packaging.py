"""What ships besides the code: the license. The package declares Apache-2.0; its full text is
``LICENSE`` in the repository, in the sdist (MANIFEST.in) and in every wheel's
``.dist-info/licenses/`` (pyproject's ``license-files``), which is where the installed
distribution's metadata finds it. (``scripts/test.sh`` checks the sdist and the wheels
themselves; here the installed distribution: the wheel in that run, the editable install in a
checkout.)"""
import os
import re

import pytest

try:
    from importlib.metadata import distributions
except ImportError:  # pragma: no cover - Python < 3.8
    pytest.skip("importlib.metadata is Python 3.8+", allow_module_level=True)

pytestmark = pytest.mark.timeout(30)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _is_apache_2(text):
    return ("Apache License" in text and "Version 2.0, January 2004" in text
            and "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
            and "END OF TERMS AND CONDITIONS" in text)


@pytest.fixture(scope="module")
def dist():
    """amqstomp's installed distribution: the one a wheel made (a ``.dist-info`` with a
    ``WHEEL`` file; an editable install's too), not a checkout's ``amqstomp.egg-info``,
    which the build leaves in the tree (first on ``sys.path`` when run from there)."""
    for found in distributions(name="amqstomp"):
        if found.read_text("WHEEL") is not None:
            return found
    pytest.skip("amqstomp is not installed from a wheel (pip install -e . or a wheel)")


def test_the_installed_distribution_carries_the_license_text(dist):
    assert "LICENSE" in (dist.metadata.get_all("License-File") or []), dist.metadata.get_all("License-File")
    text = dist.read_text("licenses/LICENSE")
    assert text is not None, "no .dist-info/licenses/LICENSE in %s" % dist
    assert _is_apache_2(text)
    declared = dist.metadata.get("License-Expression") or dist.metadata.get("License")
    assert declared == "Apache-2.0", declared


def test_the_repository_license_is_the_shipped_one(dist):
    path = os.path.join(ROOT, "LICENSE")
    assert os.path.exists(path), "no LICENSE in %s" % ROOT
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    assert _is_apache_2(text)
    assert text == dist.read_text("licenses/LICENSE")
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as fh:
        pyproject = fh.read()
    assert re.search(r'^license-files = \[[^\]]*"LICENSE"', pyproject, re.M)
    manifest = os.path.join(ROOT, "MANIFEST.in")
    if os.path.exists(manifest):  # a checkout (scripts/test.sh's installed runs copy no MANIFEST.in)
        with open(manifest, encoding="utf-8") as fh:
            assert re.search(r"^include .*\bLICENSE\b", fh.read(), re.M)
