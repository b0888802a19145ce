"""What a LogRecord carries: only the fields an installed layout prints (the logging HOWTO's "Optimization").

Python's logging fills every record with the caller's file, line and function (a walk up the stack), the thread's
id and name and the process's id and name, whatever the layouts print. Kafka's layouts (``[%d] %p %m (%c)%n``)
print none of them. Skipping them took a state-change line from 9.8-11.8 to 7.7-8.4 us on this machine
(bench/micro_session18.py; docs/performance.md, issue 15 session 18), and a failover at 30,000 partitions writes
~20,000 such lines in the controller's process. A layout that prints one of them (%t, %F, %L, %M) keeps it.
"""
import logging

SRCFILE = logging._srcfile          # logging's own value: the caller lookup on
_CALLER = ("%(filename)", "%(lineno)", "%(funcName)", "%(pathname)", "%(module)")


def record_only_what_is_printed(handlers):
    """Set logging's process-wide record switches from the format strings of ``handlers`` (kbroker/cli/
    logging_config.install calls it with every handler it installed)."""
    formats = " ".join(getattr(h.formatter, "_fmt", None) or "%(message)s" for h in handlers)
    logging._srcfile = SRCFILE if any(f in formats for f in _CALLER) else None
    logging.logThreads = "%(thread" in formats
    logging.logProcesses = "%(process)" in formats
    logging.logMultiprocessing = "%(processName)" in formats
