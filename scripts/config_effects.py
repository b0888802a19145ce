"""Write docs/config-effects.md from the ``effect`` column of kbroker's config key tables -- and docs/configuration.md
(every key, scripts/gen_configuration_doc.py), which the same table changes make stale.

    python scripts/config_effects.py           # rewrite docs/config-effects.md and docs/configuration.md
    python scripts/config_effects.py --check   # exit 1 when either file is stale
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kbroker.config import TOPIC_CONFIGS  # noqa: E402
from kbroker.config.keys import effects_markdown  # noqa: E402

PATH = os.path.join(ROOT, "docs", "config-effects.md")


def _configuration_doc(argv):
    """scripts/gen_configuration_doc.py's main (scripts/ is not a package)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("gen_configuration_doc",
                                                  os.path.join(ROOT, "scripts", "gen_configuration_doc.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main(argv)


def main(argv):
    if _configuration_doc(argv):
        return 1
    text = effects_markdown(TOPIC_CONFIGS.values())
    if "--check" in argv:
        with open(PATH, encoding="utf-8") as f:
            current = f.read()
        if current != text:
            print("%s is stale: run python scripts/config_effects.py" % PATH, file=sys.stderr)
            return 1
        return 0
    with open(PATH, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
