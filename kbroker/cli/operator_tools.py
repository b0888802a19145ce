"""The small operator tools of issue 14 (Kafka's scripts of the same names), for the ``kbroker-admin`` dispatcher:
``COMMANDS`` {sub-command: main(argv)} (each tool module imported on use) and their ``USAGE`` lines.

    kbroker-admin delete-records ...       == kafka-delete-records.sh      (delete_records.py)
    kbroker-admin leader-election ...      == kafka-leader-election.sh     (leader_election.py)
    kbroker-admin get-offsets ...          == kafka-get-offsets.sh         (get_offsets.py)
    kbroker-admin broker-api-versions ...  == kafka-broker-api-versions.sh (broker_api_versions.py)
"""


def delete_records_main(argv):
    from kbroker.cli.delete_records import main
    return main(argv)


def leader_election_main(argv):
    from kbroker.cli.leader_election import main
    return main(argv)


def get_offsets_main(argv):
    from kbroker.cli.get_offsets import main
    return main(argv)


def broker_api_versions_main(argv):
    from kbroker.cli.broker_api_versions import main
    return main(argv)


COMMANDS = {"delete-records": delete_records_main, "leader-election": leader_election_main,
            "get-offsets": get_offsets_main, "broker-api-versions": broker_api_versions_main}

USAGE = """  delete-records  delete records below an offset per partition (like kafka-delete-records.sh)
  leader-election  elect preferred or unclean leaders (like kafka-leader-election.sh)
  get-offsets  print topic:partition:offset for a time (like kafka-get-offsets.sh)
  broker-api-versions  print every broker's API versions (like kafka-broker-api-versions.sh)
"""
