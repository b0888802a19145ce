"""A MirrorMaker message handler for tests/integration/test_mirror_maker.py (loaded by the mirror process with
``--message.handler tests.integration.mirror_handler.PrefixEven --message.handler.args PREFIX``): records whose
key ends in an even number go to PREFIX + the source topic; the others are skipped."""
from kbroker.cli.mirror_maker import ProducerRecord


class PrefixEven:
    def __init__(self, prefix):
        self.prefix = prefix

    def handle(self, record):
        if int(record.key[1:]) % 2:
            return []
        return [ProducerRecord(self.prefix + record.topic, record.key, record.value, record.timestamp)]
