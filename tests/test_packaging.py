"""What ships besides the code: the license, and a wheel per declared Python.

The package declares Apache-2.0; its full text is ``LICENSE`` in the repository, in the sdist
(MANIFEST.in) and in every wheel's ``.dist-info/licenses/`` (pyproject's ``license-files``),
which is where the installed distribution's metadata finds it. (``scripts/test.sh`` checks the
sdist and the wheels themselves; here the installed distribution: the wheel in that run, the
editable install in a checkout.)

The Python versions it declares (``requires-python`` and one ``Programming Language :: Python
:: 3.X`` classifier each) must agree, and the ``dist/`` that ``scripts/test.sh`` fills must
hold a manylinux wheel for each of them, besides the pure wheel and the sdist."""
import os
import re
import sys
import warnings

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


# --------------------------------------------------------------------------- declared Pythons
# The Python versions amqstomp declares are its "Programming Language :: Python :: 3.X"
# classifiers; requires-python gives the lowest. scripts/test.sh builds a manylinux wheel for
# each (it finds the interpreters with scripts/find_pythons.py) and leaves them in dist/; this
# checks, independently of that script, that the two declarations agree and that dist/ holds
# exactly one compiled wheel per declared version.

DIST_ENV = "AMQSTOMP_DIST"  # set by scripts/test.sh: the dist/ it filled
NO_INTERPRETER_ENV = "AMQSTOMP_NO_INTERPRETER"  # set by scripts/test.sh: declared versions it found no CPython for
REQUIRE_ALL_ENV = "AMQSTOMP_REQUIRE_ALL_PYTHONS"  # set by .ci/run: every declared version has its wheel


def _project():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        return tomllib.load(fh)["project"]


def _declared(project):
    """(minor versions the classifiers name, sorted; requires-python's SpecifierSet)."""
    from packaging.specifiers import SpecifierSet  # pytest's own dependency

    minors = sorted(int(c.rsplit(".", 1)[1]) for c in project["classifiers"]
                    if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    return minors, SpecifierSet(project["requires-python"])


def _names(minors):
    return ", ".join("3.%d" % m for m in minors)


def test_the_classifiers_name_each_python_that_requires_python_admits():
    minors, spec = _declared(_project())
    assert minors, "no 'Programming Language :: Python :: 3.X' classifier: the declared versions are unknown"
    admitted = [m for m in range(0, minors[-1] + 1) if spec.contains("3.%d.0" % m)]
    assert minors == admitted, ("classifiers name Python %s; requires-python %s admits %s up to the highest classifier"
                                % (_names(minors), spec, _names(admitted)))
    assert not spec.contains("3.%d.0" % (minors[0] - 1)), "requires-python %s admits a Python below 3.%d" % (spec, minors[0])
    here = sys.version_info[:2]
    if here[0] == 3 and here[1] <= minors[-1]:
        assert here[1] in minors, "the tests run on Python %d.%d, which is not declared" % here


def _wheels(directory, version):
    names = os.listdir(directory)
    compiled = {}
    for name in names:
        m = re.fullmatch(r"amqstomp-%s-cp3(\d+)-cp3\1-(.+)\.whl" % re.escape(version), name)
        if m:
            compiled.setdefault(int(m.group(1)), []).append((name, m.group(2)))
    return names, compiled


def test_dist_holds_a_manylinux_wheel_for_each_declared_python():
    directory = os.environ.get(DIST_ENV)
    if not directory:
        pytest.skip("%s is not set: scripts/test.sh sets it to the dist/ it filled" % DIST_ENV)
    minors, _ = _declared(_project())
    version = _project()["version"]
    names, compiled = _wheels(directory, version)
    unbuilt = sorted(int(v.split(".")[1]) for v in os.environ.get(NO_INTERPRETER_ENV, "").split())
    if os.environ.get(REQUIRE_ALL_ENV, "") not in ("", "0"):
        assert not unbuilt, "%s=1, yet no interpreter for %s" % (REQUIRE_ALL_ENV, _names(unbuilt))
    missing = [m for m in minors if m not in compiled and m not in unbuilt]
    assert not missing, "dist/ (%s) has no wheel for Python %s; it holds %s" % (directory, _names(missing), sorted(names))
    undeclared = sorted(set(compiled) - set(minors))
    assert not undeclared, "dist/ holds wheels for undeclared Pythons %s" % _names(undeclared)
    for minor, found in sorted(compiled.items()):
        assert len(found) == 1, "more than one wheel for 3.%d: %s" % (minor, found)
        plat = found[0][1]
        assert re.fullmatch(r"(many|musl)linux\w+(\.(many|musl)linux\w+)*", plat), \
            "the 3.%d wheel is not repaired (auditwheel): %s" % (minor, found[0][0])
    assert "amqstomp-%s-py3-none-any.whl" % version in names, "no pure wheel in %s" % sorted(names)
    assert "amqstomp-%s.tar.gz" % version in names, "no sdist in %s" % sorted(names)
    if unbuilt:
        warnings.warn("no wheel for Python %s: scripts/test.sh found no interpreter for it (CI requires one)"
                      % _names(unbuilt))
