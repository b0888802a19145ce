"""docs/configuration.md is generated from the key tables (scripts/gen_configuration_doc.py): stale = failure.

The fix is the one command in the message. Also checked: every broker key and topic config has its row, with its
effect, so the generator cannot silently drop keys.
"""
import importlib.util
from pathlib import Path

from kbroker.config import TOPIC_CONFIGS
from kbroker.config.keys import CONFIG_KEYS

REPO = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_configuration_doc",
                                                  REPO / "scripts" / "gen_configuration_doc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_configuration_md_is_current():
    text = _generator().render()
    current = (REPO / "docs" / "configuration.md").read_text()
    assert current == text, "docs/configuration.md is stale: run .venv/bin/python scripts/gen_configuration_doc.py"


def test_every_key_has_one_row_with_its_effect():
    text = _generator().render()
    broker, topic = text.split("## Topic-level configs")
    for name, key in CONFIG_KEYS.items():
        rows = [l for l in broker.splitlines() if l.startswith("| `%s` |" % name)]
        assert len(rows) == 1, name
        want = "applied" if key.effect == "applied" else key.effect.split(":")[0].replace("-", " ")
        assert rows[0].split(" | ")[-1].startswith(want), rows[0]
    for name in TOPIC_CONFIGS:
        assert sum(1 for l in topic.splitlines() if l.startswith("| `%s` |" % name)) == 1, name
