"""The Connect runtime's errors. Those the REST API answers carry ``status`` (the HTTP status Kafka's Connect
REST API answers for them) and render as Kafka's error body ``{"error_code": status, "message": str(e)}``."""


class ConnectError(Exception):
    """Any runtime failure (Kafka's ConnectException); 500 when it reaches the REST API."""
    status = 500


class DataError(ConnectError):
    """A value that does not fit its schema, or bytes a converter cannot read (Kafka's DataException)."""


class RetriableError(ConnectError):
    """A task may try again (Kafka's RetriableException): the worker retries instead of failing the task."""


class ConfigError(ConnectError):
    """An invalid configuration (Kafka's ConfigException); 400 at the REST API."""
    status = 400

    def __init__(self, name, value=None, message=None):
        self.name = name
        self.value = value
        if message is None:
            text = name
        else:
            text = "Invalid value %s for configuration %s: %s" % (value, name, message)
        super().__init__(text)


class BadRequestError(ConnectError):
    """400: a malformed request (Kafka's BadRequestException)."""
    status = 400


class NotFoundError(ConnectError):
    """404: an unknown connector or task (Kafka's NotFoundException)."""
    status = 404


class AlreadyExistsError(ConnectError):
    """409: a connector of that name exists (Kafka's AlreadyExistsException)."""
    status = 409


class RebalanceNeededError(ConnectError):
    """409: the worker is rebalancing or its config is stale (Kafka's RebalanceNeededException)."""
    status = 409


class NotLeaderError(ConnectError):
    """This worker is not the group's leader: the REST API forwards the request to ``leader_url`` (Kafka's
    NotLeaderException); 409 when there is no leader to forward to."""
    status = 409

    def __init__(self, message, leader_url=None):
        super().__init__(message)
        self.leader_url = leader_url


class ServiceUnavailableError(ConnectError):
    """503: the herder is starting or stopping."""
    status = 503
