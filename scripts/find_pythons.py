"""The CPython interpreters scripts/test.sh builds and tests a wheel with: one per Python
version the package declares, found on this machine.

    python scripts/find_pythons.py [--require-all] [--pyproject FILE]

The declared versions are pyproject.toml's ``Programming Language :: Python :: 3.X``
classifiers; they must agree with ``requires-python`` (the lowest one is its lower bound, none
is outside it, none is missing in between), else exit 2 naming the difference.

For each version, the candidates, in order: ``$PYENV_ROOT/versions/3.X.N/bin/python3.X``
(``~/.pyenv`` by default; the highest N first), every ``python3.X`` on PATH, then
``/usr/local/bin`` and ``/usr/bin``. A candidate counts only when running it proves it is
CPython 3.X with a GIL (not a free-threaded build), its headers (``Python.h``) and ``venv`` with
``ensurepip``: a pyenv shim for a version that is installed but not selected fails to run and
is skipped.

Prints one line per declared version, lowest first: ``3.X found /path/to/python`` or
``3.X missing`` (then also a line on stderr saying where it looked). Exit status: 0; 1 with
``--require-all`` when a declared version has no interpreter (CI: every declared version gets
its wheel); 2 on a bad pyproject.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASSIFIER = re.compile(r"^Programming Language :: Python :: 3\.(\d+)$")
PROBE = r"""
import os, platform, sys, sysconfig
import ensurepip, venv
ok = (platform.python_implementation() == "CPython"
      and not sysconfig.get_config_var("Py_GIL_DISABLED")
      and os.path.exists(os.path.join(sysconfig.get_config_var("INCLUDEPY") or "", "Python.h")))
print("%d.%d %s" % (sys.version_info[0], sys.version_info[1], "ok" if ok else "unfit"))
"""


def load_project(path):
    """pyproject.toml's [project] table (dict). tomllib (3.11+) or tomli."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11: scripts/test.sh installs tomli in its tools venv
        import tomli as tomllib
    with open(path, "rb") as fh:
        return tomllib.load(fh)["project"]


def lower_bound(requires_python):
    """The minor version of ``>=3.X`` in ``requires-python`` (int); ValueError without one."""
    found = re.findall(r">=\s*3\.(\d+)", requires_python)
    if len(found) != 1:
        raise ValueError("requires-python %r: expected one '>=3.X' lower bound" % requires_python)
    return int(found[0])


def declared_versions(project):
    """The declared minor versions (sorted list of int) from the classifiers, checked against
    requires-python; ValueError naming the disagreement."""
    minors = sorted(int(m.group(1)) for m in map(CLASSIFIER.match, project.get("classifiers", [])) if m)
    low = lower_bound(project.get("requires-python", ""))
    if not minors:
        raise ValueError("no 'Programming Language :: Python :: 3.X' classifier")
    expected = list(range(low, minors[-1] + 1))
    if minors != expected:
        raise ValueError("classifiers name Python %s; requires-python %r and the highest classifier "
                         "make it %s" % (_names(minors), project["requires-python"], _names(expected)))
    return minors


def _names(minors):
    return ", ".join("3.%d" % m for m in minors)


def candidates(minor):
    """Paths that may be CPython 3.<minor>, best first (list of str, no duplicates)."""
    name = "python3.%d" % minor
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = []
    dirs = [d for d in glob.glob(os.path.join(pyenv, "versions", "3.%d.*" % minor))
            if re.fullmatch(r"3\.%d\.\d+" % minor, os.path.basename(d))]
    dirs.sort(key=lambda d: int(os.path.basename(d).rsplit(".", 1)[1]), reverse=True)
    found += [os.path.join(d, "bin", name) for d in dirs]
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if directory:
            found.append(os.path.join(directory, name))
    found += ["/usr/local/bin/" + name, "/usr/bin/" + name]
    unique = []
    for path in found:
        if os.path.isfile(path) and os.access(path, os.X_OK) and path not in unique:
            unique.append(path)
    return unique


def fits(path, minor, timeout=30):
    """True when ``path`` runs as a usable CPython 3.<minor> (see the module's docstring)."""
    try:
        out = subprocess.run([path, "-c", PROBE], capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.split() == ["3.%d" % minor, "ok"]


def find(minor):
    """The first fitting interpreter for 3.<minor> (str), or None."""
    for path in candidates(minor):
        if fits(path, minor):
            return path
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--require-all", action="store_true",
                        help="exit 1 when a declared version has no interpreter here")
    parser.add_argument("--pyproject", default=os.path.join(ROOT, "pyproject.toml"))
    args = parser.parse_args(argv)
    try:
        minors = declared_versions(load_project(args.pyproject))
    except (ValueError, KeyError) as exc:
        print("find_pythons: %s: %s" % (args.pyproject, exc), file=sys.stderr)
        return 2
    missing = []
    for minor in minors:
        path = find(minor)
        if path is None:
            missing.append(minor)
            print("3.%d missing" % minor)
            print("find_pythons: no usable CPython 3.%d here (looked for python3.%d in the pyenv versions "
                  "directory, on PATH, in /usr/local/bin and /usr/bin)" % (minor, minor), file=sys.stderr)
        else:
            print("3.%d found %s" % (minor, path))
        sys.stdout.flush()
    return 1 if missing and args.require_all else 0


if __name__ == "__main__":
    sys.exit(main())
