"""DescribeCluster (api key 60, KIP-700): the cluster id, the controller and the live brokers.

Versions 0-1, flexible from 0. Version notes: v1 adds ``endpoint_type`` (1 = brokers, 2 = controllers: KRaft's).
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=60, name="DescribeCluster", valid="0-1", flexible="0+",
    request=[
        F("include_cluster_authorized_operations", "bool"),
        F("endpoint_type", "int8", "1+", default=1),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("endpoint_type", "int8", "1+", default=1),
        F("cluster_id", "string"),
        F("controller_id", "int32", default=-1),
        F("brokers", "[]", fields=[
            F("broker_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", nullable="0+", default=None),
        ]),
        F("cluster_authorized_operations", "int32", default=-2147483648),
    ],
)
