"""docs/architecture.md's "One message, walked" names each function a message passes
(written by ``scripts/walk.py --write docs/architecture.md`` from a real run): every one of
them still exists, so a rename or a move makes this fail until the walk is written again."""
import importlib
import os
import re

import pytest

pytestmark = pytest.mark.timeout(30)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "architecture.md")
START, END = "<!-- walk:start", "<!-- walk:end -->"
#: a table row: | thread | `module path` | `qualified name` |
ROW = re.compile(r"^\s*\| [^|]+ \| `([^`]+)` \| `([^`]+)` \|\s*$")


def walked(text):
    """(module path, qualified name) of each row between the walk markers."""
    if START not in text or END not in text:
        return []
    block = text.split(START, 1)[1].split(END, 1)[0]
    return [m.groups() for m in map(ROW.match, block.splitlines()) if m]


def missing(rows):
    """The rows whose function is not there: its module does not import, or the qualified
    name (up to its first ``<locals>``/``<lambda>`` part) does not resolve."""
    out = []
    for path, qualname in rows:
        module_name = "amqstomp." + path[:-len(".py")].replace("/", ".")
        try:
            obj = importlib.import_module(module_name)
            for part in qualname.split("."):
                if part.startswith("<"):
                    break
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            out.append("%s %s (%s)" % (path, qualname, exc))
    return out


@pytest.mark.skipif(not os.path.exists(PAGE), reason="docs/ is not shipped with an installed package")
def test_every_function_the_walk_names_exists():
    with open(PAGE, encoding="utf-8") as f:
        rows = walked(f.read())
    assert len(rows) > 50  # the six walks are there (it would pass vacuously otherwise)
    assert {p for p, _ in rows} >= {"_core/state.py", "_engine/subscription.py", "jms/consumer.py", "_io/driver.py",
                                    "aio/_link.py", "aio/subscription.py"}
    assert missing(rows) == []


def test_the_check_finds_a_renamed_function():
    text = "\n".join([START + " -->", "    | reader | `_core/state.py` | `ProtocolState.receive_data` |",
                      "    | reader | `_core/state.py` | `ProtocolState.no_such_function` |",
                      "    | caller | `jms/link.py` | `Link._send_sync.<locals>.<lambda>` |",
                      "    | caller | `no_such_module.py` | `f` |", END])
    rows = walked(text)
    assert len(rows) == 4
    assert [m.split()[1] for m in missing(rows)] == ["ProtocolState.no_such_function", "f"]
