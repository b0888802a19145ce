"""Write docs/config-effects.md from the ``effect`` column of kbroker's config key tables.

    python scripts/config_effects.py           # rewrite docs/config-effects.md
    python scripts/config_effects.py --check   # exit 1 when the file is stale
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kbroker.config import TOPIC_CONFIGS  # noqa: E402
from kbroker.config.keys import effects_markdown  # noqa: E402

PATH = os.path.join(ROOT, "docs", "config-effects.md")


def main(argv):
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
